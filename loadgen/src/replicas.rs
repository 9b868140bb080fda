//! Several hub replicas against one management API server (`--replicas
//! R`): each a `gwhub serve` child with its own ports
//! and Lease identity (`POD_NAME=gwhub-bench-<i>`), with leader election
//! and `--status-shards N` when R > 1 (as the shipped Deployment runs), the
//! agents spread round-robin. Which replica holds which status shard (and
//! the leader Lease) is read from the Leases, so a hub Gateway's latency
//! is counted for the replica that writes it and `--restart-at` kills the
//! replica holding the most shards (or the leader). Each replica's
//! counters, CPU and RSS are kept across its restart.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gwhub_hub_rules::shards::shard_of;
use k8s_openapi::api::coordination::v1::Lease;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::error::BenchError;
use crate::hub_process::{HubProcess, start_hub_env};
use crate::probes::{cpu_seconds, rss};

/// Replica `i`'s `POD_NAME`: its Lease identity is this plus `_<pid>`.
pub(crate) const POD_PREFIX: &str = "gwhub-bench-";
/// The leader Lease (`gwhub serve`'s default name).
const LEADER_LEASE: &str = "gwhub-hub";
/// Shard `i`'s Lease is `gwhub-shard-<i>` (the hub's `shards::LEASE_PREFIX`).
const SHARD_LEASE_PREFIX: &str = "gwhub-shard-";

/// Counters by name, as `gwhub_test_kit::procs::scrape` returns them.
pub(crate) type Counters = BTreeMap<String, u64>;

/// One hub replica: its process, ports and what the run measured of it.
pub(crate) struct Replica {
    pub(crate) hub: HubProcess,
    pub(crate) metrics_port: u16,
    name: String,
    flags: Vec<String>,
    pub(crate) rss_idle: u64,
    pub(crate) rss_ingest: u64,
    /// Counters and CPU seconds at the start of the delta phase.
    m0: Counters,
    cpu0: f64,
    /// Counters and CPU seconds (since the delta phase began) of its
    /// killed process, once restarted.
    before_kill: Option<(Counters, f64)>,
}

impl Replica {
    /// Starts replica `i` with `flags` (its own ports among them).
    pub(crate) fn start(
        bin: &Path,
        i: usize,
        flags: Vec<String>,
        metrics_port: u16,
    ) -> Result<Self, BenchError> {
        let name = format!("{POD_PREFIX}{i}");
        let hub = spawn(bin, &name, &flags)?;
        Ok(Replica {
            hub,
            metrics_port,
            name,
            flags,
            rss_idle: 0,
            rss_ingest: 0,
            m0: Counters::new(),
            cpu0: 0.0,
            before_kill: None,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.hub.child.id()
    }

    /// Notes the counters and CPU at the start of the delta phase.
    pub(crate) async fn begin(&mut self) {
        self.m0 = gwhub_test_kit::procs::scrape(self.metrics_port).await;
        self.cpu0 = cpu_seconds(self.pid());
    }

    /// `kill -9`, then the same process started again on the same ports.
    pub(crate) async fn kill_and_restart(&mut self, bin: &Path) -> Result<(), BenchError> {
        let counters = gwhub_test_kit::procs::scrape(self.metrics_port).await;
        let cpu = cpu_seconds(self.pid()) - self.cpu0;
        self.before_kill = Some((counters, cpu));
        let _ = self.hub.child.kill();
        let _ = self.hub.child.wait();
        self.hub = spawn(bin, &self.name, &self.flags)?;
        Ok(())
    }

    pub(crate) fn restarted(&self) -> bool {
        self.before_kill.is_some()
    }

    /// CPU seconds used since the delta phase began (both processes after
    /// a restart, the new one from its start).
    pub(crate) fn cpu_s(&self) -> f64 {
        match &self.before_kill {
            Some((_, before)) => before + cpu_seconds(self.pid()),
            None => cpu_seconds(self.pid()) - self.cpu0,
        }
    }

    /// Counter `k`'s growth since the delta phase began, `m1` read at its
    /// end (counters start over in a restarted process).
    pub(crate) fn diff(&self, m1: &Counters, k: &str) -> u64 {
        let get = |m: &Counters| *m.get(k).unwrap_or(&0);
        match &self.before_kill {
            Some((before, _)) => get(before).saturating_sub(get(&self.m0)) + get(m1),
            None => get(m1).saturating_sub(get(&self.m0)),
        }
    }

    /// RSS now and its peak.
    pub(crate) fn rss(&self) -> (u64, u64) {
        rss(self.pid())
    }
}

fn spawn(bin: &Path, name: &str, flags: &[String]) -> Result<HubProcess, BenchError> {
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    start_hub_env(bin, &refs, &[("POD_NAME", name)])
}

/// The flags of replica `i` beside the run's `common` ones: its ports,
/// and leader election with `shards` status shards unless it is the only
/// replica writing without shards (`--no-leader-election`, as the bench
/// ran before replicas).
pub(crate) fn replica_flags(
    common: &[String],
    replicas: usize,
    shards: u32,
    ingest_port: u16,
    metrics_port: u16,
) -> Vec<String> {
    let mut flags = common.to_vec();
    flags.extend([
        "--listen".into(),
        format!("127.0.0.1:{ingest_port}"),
        "--metrics-listen".into(),
        format!("127.0.0.1:{metrics_port}"),
    ]);
    if replicas == 1 && shards == 0 {
        flags.push("--no-leader-election".into());
    } else if shards > 0 {
        flags.extend(["--status-shards".into(), shards.to_string()]);
    }
    flags
}

/// Who holds the Leases, as replica indexes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Holders {
    /// Per status shard, its holder.
    pub(crate) shards: Vec<Option<usize>>,
    pub(crate) leader: Option<usize>,
}

impl Holders {
    /// The replica that writes hub Gateway `namespace/name` now (`None`
    /// while its shard or the leader Lease is unheld).
    pub(crate) fn writer(
        &self,
        replicas: usize,
        shards: u32,
        namespace: &str,
        name: &str,
    ) -> Option<usize> {
        if shards > 0 {
            let s = shard_of(namespace, name, shards) as usize;
            self.shards.get(s).copied().flatten()
        } else if replicas == 1 {
            Some(0)
        } else {
            self.leader
        }
    }

    /// Shards held per replica.
    pub(crate) fn held(&self, replicas: usize) -> Vec<usize> {
        let mut held = vec![0; replicas];
        for h in self.shards.iter().flatten() {
            if let Some(n) = held.get_mut(*h) {
                *n += 1;
            }
        }
        held
    }

    /// Whom `--restart-at` kills: the replica holding the most shards,
    /// else the leader, else replica 0.
    pub(crate) fn victim(&self, replicas: usize, shards: u32) -> usize {
        if shards > 0 {
            let held = self.held(replicas);
            (0..replicas)
                .max_by_key(|i| (held[*i], usize::MAX - i))
                .unwrap_or(0)
        } else {
            self.leader.unwrap_or(0)
        }
    }
}

/// The replica index in a Lease holder identity (`gwhub-bench-<i>_<pid>`).
fn replica_of(identity: &str) -> Option<usize> {
    identity
        .strip_prefix(POD_PREFIX)?
        .split('_')
        .next()?
        .parse()
        .ok()
}

/// Reads the leader and shard Leases in `namespace` every 250 ms into
/// `holders` until `finish`.
pub(crate) async fn follow_leases(
    client: kube::Client,
    namespace: String,
    shards: u32,
    holders: Arc<Mutex<Holders>>,
    mut finish: watch::Receiver<bool>,
) {
    let api: kube::Api<Lease> = kube::Api::namespaced(client, &namespace);
    loop {
        if let Ok(list) = api.list(&Default::default()).await {
            let mut next = Holders {
                shards: vec![None; shards as usize],
                leader: None,
            };
            for l in &list.items {
                let holder = l
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref())
                    .and_then(replica_of);
                let name = l.metadata.name.as_deref().unwrap_or("");
                if name == LEADER_LEASE {
                    next.leader = holder;
                } else if let Some(s) = name
                    .strip_prefix(SHARD_LEASE_PREFIX)
                    .and_then(|s| s.parse::<usize>().ok())
                    && let Some(slot) = next.shards.get_mut(s)
                {
                    *slot = holder;
                }
            }
            *holders.lock() = next;
        }
        tokio::select! {
            _ = finish.wait_for(|f| *f) => return,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_indexes_come_from_lease_identities() {
        assert_eq!(replica_of("gwhub-bench-2_4711"), Some(2));
        assert_eq!(replica_of("gwhub-bench-10_1"), Some(10));
        assert_eq!(replica_of("somebody-else_1"), None);
    }

    #[test]
    fn the_victim_holds_the_most_shards_else_leads() {
        let h = Holders {
            shards: vec![Some(0), Some(1), Some(1), Some(2), None],
            leader: Some(2),
        };
        assert_eq!(h.held(3), vec![1, 2, 1]);
        assert_eq!(h.victim(3, 5), 1);
        assert_eq!(h.victim(3, 0), 2);
        let tie = Holders {
            shards: vec![Some(1), Some(0)],
            leader: None,
        };
        assert_eq!(tie.victim(2, 2), 0);
    }

    #[test]
    fn one_replica_without_shards_writes_every_gateway_unelected() {
        let h = Holders::default();
        assert_eq!(h.writer(1, 0, "ns-0", "gw-0000"), Some(0));
        let flags = replica_flags(&[], 1, 0, 1, 2);
        assert!(flags.contains(&"--no-leader-election".to_owned()));
        let flags = replica_flags(&[], 3, 8, 1, 2);
        assert!(!flags.contains(&"--no-leader-election".to_owned()));
        assert!(flags.windows(2).any(|w| w == ["--status-shards", "8"]));
    }
}
