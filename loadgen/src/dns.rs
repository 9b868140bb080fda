//! Fleet DNS under load (`--kube --dns`): a local BIND
//! (test-kit's, as the field tests start it) with a TSIG key, the hub
//! publishing two listener hostnames per hub Gateway with
//! `--dns-output rfc2136`, and a poller asking BIND for every name's A
//! set over TCP. Each offered change picks a cluster the answer holds now
//! and turns that cluster's load balancer unready for the hub Gateway
//! (the delta's `LoadBalancerReady` False); the latency is from sending
//! the change until the authoritative answer of each name that held the
//! cluster no longer has its addresses.
//!
//! The poller's cycle (every name once) bounds the resolution; it is
//! printed beside the figures. The hub's default `--dns-max-targets` (32)
//! applies, so each answer holds at most 32 of the clusters.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gwhub_dns_rfc2136::{Client, KeySource, RType};
use gwhub_test_kit::dns_server::{Key, Keys, Kind, Server, ZONE};
use gwhub_test_kit::latency::Latencies;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::scenario::gateway_name;

/// The two cluster listeners (of `scenario::report`) whose hostnames the
/// hub Gateways name: each has two attached routes in every report.
pub(crate) const LISTENERS: [&str; 2] = ["https", "grpc"];

/// Hostname `i` (0 or 1) of hub Gateway `g`.
pub(crate) fn hostname(g: usize, i: usize) -> String {
    format!("{}.{}.{ZONE}", ["a", "b"][i], gateway_name(g))
}

/// The cluster whose report has `ip` (`scenario::report`'s addresses are
/// `10.<c / 256>.<c % 256>.x`).
fn cluster_of(ip: &str) -> Option<usize> {
    let ip: Ipv4Addr = ip.parse().ok()?;
    let [_, hi, lo, _] = ip.octets();
    Some(usize::from(hi) * 256 + usize::from(lo))
}

/// A change whose removal from the answers is awaited.
struct Pending {
    cluster: usize,
    gateway: usize,
    sent: Instant,
    /// The names that held the cluster when it was sent, not yet seen
    /// without it.
    names: Vec<usize>,
}

/// The local BIND and what the poller knows.
pub(crate) struct DnsBench {
    pub(crate) server: Server,
    key_file: std::path::PathBuf,
    gateways: usize,
    /// Per hub Gateway and hostname: the clusters the answer holds.
    published: Mutex<Vec<[BTreeSet<usize>; 2]>>,
    pending: Mutex<Vec<Pending>>,
    /// Poller cycles and their total time, for the resolution.
    cycles: Mutex<(u64, Duration)>,
    latencies: Mutex<Latencies>,
    /// Changes that found no cluster in the answer to mark.
    pub(crate) skipped: std::sync::atomic::AtomicU64,
}

impl DnsBench {
    /// Starts BIND with an update key, the key's file in `dir`.
    pub(crate) fn start(
        dir: &Path,
        gateways: usize,
    ) -> Result<Arc<Self>, crate::error::BenchError> {
        let key = Key::generate("gwhub", "hmac-sha256");
        let server = Server::start(Kind::Bind, &Keys::updating(&[&key]));
        let key_file = dir.join("bench-tsig.key");
        std::fs::write(&key_file, &key.clause).map_err(|source| crate::error::BenchError::Io {
            what: key_file.display().to_string(),
            source,
        })?;
        Ok(Arc::new(DnsBench {
            server,
            key_file,
            gateways,
            published: Mutex::new(vec![Default::default(); gateways]),
            pending: Mutex::new(Vec::new()),
            cycles: Mutex::new((0, Duration::ZERO)),
            latencies: Mutex::new(Latencies::new()),
            skipped: Default::default(),
        }))
    }

    /// The hub's fleet DNS flags.
    pub(crate) fn hub_flags(&self) -> Vec<String> {
        [
            "--dns-zone",
            ZONE,
            "--dns-output",
            "rfc2136",
            "--dns-server",
            &self.server.addr().to_string(),
            "--dns-tsig-key-name",
            "gwhub",
            "--dns-tsig-secret-file",
            &self.key_file.display().to_string(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    }

    /// The zone's SOA serial: one step per applied UPDATE.
    pub(crate) fn serial(&self) -> u64 {
        self.server
            .dig(ZONE, "SOA")
            .first()
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Whether every name's answer holds some cluster.
    pub(crate) fn all_published(&self) -> bool {
        self.published
            .lock()
            .iter()
            .all(|names| names.iter().all(|s| !s.is_empty()))
    }

    /// A cluster the answer of one of `g`'s names holds now (`pick` says
    /// which), noted as pending from now; `None` when the answers hold
    /// none.
    pub(crate) fn mark(&self, g: usize, pick: u64) -> Option<usize> {
        let names = self.published.lock().get(g).cloned()?;
        let all: Vec<usize> = names[0].union(&names[1]).copied().collect();
        if all.is_empty() {
            self.skipped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        let c = all[(pick % all.len() as u64) as usize];
        let mut pending = self.pending.lock();
        // One outstanding change per (cluster, Gateway): a second before
        // the first is seen would only measure the first.
        if pending.iter().any(|p| p.cluster == c && p.gateway == g) {
            return None;
        }
        pending.push(Pending {
            cluster: c,
            gateway: g,
            sent: Instant::now(),
            names: (0..2).filter(|i| names[*i].contains(&c)).collect(),
        });
        Some(c)
    }

    /// Asks BIND for every name's A set until `finish`, recording each
    /// pending change's latency per name as its cluster leaves.
    pub(crate) async fn poll(self: Arc<Self>, mut finish: watch::Receiver<bool>) {
        let key = match KeySource::file(&self.key_file, Some("gwhub"), None) {
            Ok(k) => k,
            Err(e) => {
                eprintln!("DNS poller: {e}");
                return;
            }
        };
        let client = Client::new(self.server.addr(), key, Duration::from_secs(5));
        while !*finish.borrow() {
            let t0 = Instant::now();
            for g in 0..self.gateways {
                for i in 0..2 {
                    let name = hostname(g, i);
                    let txt = format!("_gwhub-a.{name}");
                    let answer = match client.read(&name, RType::A, &txt).await {
                        Ok(a) => a,
                        Err(e) => {
                            eprintln!("DNS poller: {name}: {e}");
                            continue;
                        }
                    };
                    let now = Instant::now();
                    let held: BTreeSet<usize> = answer
                        .records
                        .iter()
                        .filter_map(|r| cluster_of(r))
                        .collect();
                    self.seen(g, i, held, now);
                }
            }
            {
                let mut c = self.cycles.lock();
                c.0 += 1;
                c.1 += t0.elapsed();
            }
            tokio::select! {
                _ = finish.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }

    /// Name `i` of Gateway `g` answered with `held` at `now`.
    fn seen(&self, g: usize, i: usize, held: BTreeSet<usize>, now: Instant) {
        let mut pending = self.pending.lock();
        let mut lat = self.latencies.lock();
        for p in pending.iter_mut().filter(|p| p.gateway == g) {
            if p.names.contains(&i) && !held.contains(&p.cluster) {
                lat.record(now - p.sent);
                p.names.retain(|n| *n != i);
            }
        }
        pending.retain(|p| !p.names.is_empty());
        if let Some(names) = self.published.lock().get_mut(g) {
            names[i] = held;
        }
    }

    /// The (change, name) pairs still awaited.
    pub(crate) fn results_pending(&self) -> usize {
        self.pending.lock().iter().map(|p| p.names.len()).sum()
    }

    /// The removal latencies, the changes still pending, and the poller's
    /// mean cycle.
    pub(crate) fn results(&self) -> (Latencies, usize, Duration) {
        let lat = std::mem::take(&mut *self.latencies.lock());
        let pending = self.pending.lock().iter().map(|p| p.names.len()).sum();
        let (n, total) = *self.cycles.lock();
        let cycle = if n == 0 {
            Duration::ZERO
        } else {
            total / n as u32
        };
        (lat, pending, cycle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_map_back_to_their_cluster() {
        assert_eq!(cluster_of("10.3.231.4"), Some(999));
        assert_eq!(cluster_of("10.0.7.0"), Some(7));
        assert_eq!(cluster_of("2001:db8::1"), None);
        assert_eq!(hostname(3, 1), "b.gw-0003.fleet.test");
    }
}
