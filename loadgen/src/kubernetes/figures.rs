//! What one Kubernetes-mode run measured, as the JSON line (`--json`) and
//! the summary a reader gets: kept apart from the run so the run reads as
//! its phases and the report as its figures.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use gwhub_test_kit::latency::Latencies;

use crate::dns::DnsBench;
use crate::probes::{loadavg, machine};
use crate::replicas::{Counters, Replica};
use crate::report::{latency_json, mib};
use crate::scenario::Args;

/// The `kill -9` and restart: (killed replica, its shards, hub up, agents
/// back, wrong statuses, whole), in seconds since the kill.
pub(super) type Restart = (usize, usize, f64, f64, u64, f64);

/// Fleet DNS's part of a run (`--dns`).
pub(super) struct Dns {
    pub(super) bench: Arc<DnsBench>,
    /// Seconds from the start until every name was published.
    pub(super) published_s: f64,
    /// Applied UPDATEs by the zone's serial.
    pub(super) updates: u64,
    /// The hubs' successful writes.
    pub(super) writes: u64,
}

/// The ingest phase's figures.
pub(super) struct Ingested {
    /// Seconds until every replica showed every snapshot.
    pub(super) ingest_s: f64,
    /// Seconds until the store held every cluster.
    pub(super) persist_s: f64,
    pub(super) store_objects: usize,
    pub(super) store_total: u64,
}

/// What was read at the end of the delta phase, the load still running.
pub(super) struct End {
    pub(super) lags: Latencies,
    /// Each replica's counters.
    pub(super) m1: Vec<Counters>,
    pub(super) api_writes1: BTreeMap<String, u64>,
    pub(super) held_end: Vec<usize>,
    /// The largest hub Gateway's status and object, in bytes.
    pub(super) largest_bytes: (usize, usize),
    /// Each replica's CPU seconds.
    pub(super) hub_cpu: Vec<f64>,
}

/// Everything a run measured, for [`Figures::report`].
pub(super) struct Figures<'a> {
    pub(super) args: &'a Args,
    pub(super) hubs: &'a [Replica],
    pub(super) ingest: Ingested,
    pub(super) end: End,
    pub(super) delta_s: f64,
    pub(super) acked: u64,
    pub(super) offered: u64,
    pub(super) latencies: Latencies,
    pub(super) unobserved: usize,
    pub(super) per_replica_latencies: Vec<Latencies>,
    pub(super) rss_end: Vec<(u64, u64)>,
    pub(super) api_writes0: BTreeMap<String, u64>,
    pub(super) api_cpu_s: f64,
    /// One status apply alone: API server CPU and wall, in ms.
    pub(super) apply_ms: (f64, f64),
    pub(super) restart: Option<Restart>,
    pub(super) warnings: usize,
    pub(super) dns: Option<Dns>,
}

/// Totals over the replicas' counters during the delta phase.
struct Totals {
    report_writes: u64,
    report_bytes: u64,
    status_writes: u64,
    throttled: u64,
    status_waited_ms: f64,
    report_waited_ms: f64,
    /// Where a status write's time goes: the API call vs aggregating and
    /// planning it (mean per accepted write).
    status_api_ms: f64,
    status_prepare_ms: f64,
    /// API server writes per second, by kind.
    api_writes: BTreeMap<String, f64>,
}

impl Figures<'_> {
    /// The JSON line, with the summary printed first unless `--json`.
    pub(super) fn report(&self) -> serde_json::Value {
        let totals = self.totals();
        let mut dns_line = None;
        let dns_json = self.dns.as_ref().map(|d| {
            let (json, line) = self.dns_figures(d);
            if !self.args.json {
                dns_line = Some(line);
            }
            json
        });
        let mut json = self.json(&totals);
        if let (Some(d), Some(o)) = (dns_json, json.as_object_mut()) {
            o.insert("dns".to_owned(), d);
        }
        if !self.args.json {
            self.print(&totals);
            if let Some(l) = dns_line {
                println!("{l}");
            }
        }
        json
    }

    fn hub_cpu_s(&self) -> f64 {
        self.end.hub_cpu.iter().sum()
    }

    fn pairs(&self) -> usize {
        self.args.clusters * self.args.gateways
    }

    fn per_pair_of(&self, h: &Replica) -> f64 {
        h.rss_ingest.saturating_sub(h.rss_idle) as f64 / self.pairs() as f64
    }

    fn totals(&self) -> Totals {
        let diff = |k: &str| -> u64 {
            self.hubs
                .iter()
                .zip(&self.end.m1)
                .map(|(h, m)| h.diff(m, k))
                .sum()
        };
        let status_writes = diff("gwhub_status_writes_total");
        let waited_ms = |k: &str| diff(k) as f64 / 1000.0;
        let per_status_write = |k: &str| waited_ms(k) / status_writes.max(1) as f64;
        let delta_s = self.delta_s;
        Totals {
            report_writes: diff("gwhub_report_writes_total"),
            report_bytes: diff("gwhub_report_write_bytes_total"),
            status_writes,
            throttled: diff("gwhub_api_throttled_waits_total"),
            status_waited_ms: waited_ms("gwhub_api_throttled_status_microseconds_total"),
            report_waited_ms: waited_ms("gwhub_api_throttled_report_microseconds_total"),
            status_api_ms: per_status_write("gwhub_status_api_microseconds_total"),
            status_prepare_ms: per_status_write("gwhub_status_prepare_microseconds_total"),
            api_writes: self
                .end
                .api_writes1
                .iter()
                .map(|(k, n)| {
                    (
                        k.clone(),
                        n.saturating_sub(*self.api_writes0.get(k).unwrap_or(&0)) as f64 / delta_s,
                    )
                })
                .filter(|(_, r)| *r > 0.0)
                .collect(),
        }
    }

    /// Fleet DNS's JSON and summary line.
    fn dns_figures(&self, d: &Dns) -> (serde_json::Value, String) {
        let (delta_s, hub_cpu_s) = (self.delta_s, self.hub_cpu_s());
        let (dns_published_s, dns_updates, dns_writes) = (d.published_s, d.updates, d.writes);
        let (lat, unobserved, cycle) = d.bench.results();
        let skipped = d.bench.skipped.load(Ordering::Relaxed);
        let line = format!(
            "  fleet DNS (BIND)         every name published {dns_published_s:.1} s after start; change -> answer without the cluster p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms ({} samples, {unobserved} unobserved, poll cycle {:.1} ms); {dns_updates} updates (SOA serial), {dns_writes} hub writes ok, {:.1}/s; hub CPU {:.2} ms per write",
            lat.ms(0.5),
            lat.ms(0.99),
            lat.ms(1.0),
            lat.len(),
            cycle.as_secs_f64() * 1000.0,
            dns_writes as f64 / delta_s,
            hub_cpu_s * 1000.0 / dns_writes.max(1) as f64,
        );
        let json = serde_json::json!({
            "removal_latency_ms": latency_json(&lat, unobserved),
            "poll_cycle_ms": cycle.as_secs_f64() * 1000.0,
            "every_name_published_s": dns_published_s,
            "updates_by_serial": dns_updates,
            "hub_writes_ok": dns_writes,
            "writes_per_s": dns_writes as f64 / delta_s,
            "hub_cpu_ms_per_write": hub_cpu_s * 1000.0 / dns_writes.max(1) as f64,
            "changes_without_a_published_cluster": skipped,
        });
        (json, line)
    }

    /// Each replica's figures.
    fn per_replica_json(&self) -> Vec<serde_json::Value> {
        let (args, delta_s) = (self.args, self.delta_s);
        let replicas = self.hubs.len();
        self.hubs
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let d = |k: &str| h.diff(&self.end.m1[i], k);
                serde_json::json!({
                    "replica": i,
                    "clusters": (0..args.clusters).filter(|c| c % replicas == i).count(),
                    "shards_held_at_end": self.end.held_end[i],
                    "restarted": h.restarted(),
                    "hub_gateway_latency_ms": latency_json(&self.per_replica_latencies[i], 0),
                    "status_writes_per_s": d("gwhub_status_writes_total") as f64 / delta_s,
                    "report_writes_per_s": d("gwhub_report_writes_total") as f64 / delta_s,
                    "cpu_cores": self.end.hub_cpu[i] / delta_s,
                    "rss_idle_bytes": h.rss_idle,
                    "rss_after_ingest_bytes": h.rss_ingest,
                    "rss_bytes_per_pair": self.per_pair_of(h),
                    "rss_after_deltas_bytes": self.rss_end[i].0,
                    "rss_peak_bytes": self.rss_end[i].1,
                })
            })
            .collect()
    }

    /// The run's JSON line, without fleet DNS's part.
    fn json(&self, t: &Totals) -> serde_json::Value {
        let (args, delta_s, acked, pairs) = (self.args, self.delta_s, self.acked, self.pairs());
        let (hub_cpu_s, api_cpu_s) = (self.hub_cpu_s(), self.api_cpu_s);
        let changes = self.offered.max(1) as f64;
        let (status_bytes, object_bytes) = self.end.largest_bytes;
        let (apply_cpu_ms, apply_wall_ms) = self.apply_ms;
        let lag = |q: f64| self.end.lags.ms(q);
        let (rss_deltas, rss_peak) = self.rss_end[0];
        let restart_json = self
            .restart
            .map(|(victim, held, started, back, wrong, whole)| {
                serde_json::json!({
                    "hub_restarted_s": started, "agents_back_s": back,
                    "whole_s": whole, "wrong_statuses": wrong,
                    "replica": victim, "shards_held": held,
                })
            });
        let cpu_per_change = serde_json::json!({
            "hubs": hub_cpu_s * 1000.0 / changes, "apiserver": api_cpu_s * 1000.0 / changes,
        });
        serde_json::json!({
            "bench": "hub_scale_kube",
            "machine": machine(),
            "loadavg_end": loadavg(),
            "clusters": args.clusters,
            "gateways": args.gateways,
            "listeners": args.listeners,
            "pairs": pairs,
            "rate": args.rate,
            "offered_changes": self.offered,
            "kube_api_qps": args.qps,
            "kube_api_burst": args.burst,
            "replicas": self.hubs.len(),
            "status_shards": args.shards(),
            "ingest_fleet_s": self.ingest.ingest_s,
            "every_cluster_persisted_s": self.ingest.persist_s,
            "store_objects": self.ingest.store_objects,
            "store_bytes": self.ingest.store_total,
            "store_bytes_per_pair": self.ingest.store_total as f64 / pairs as f64,
            "delta_phase_s": delta_s,
            "deltas": acked,
            "deltas_per_s": acked as f64 / delta_s,
            "hub_gateway_latency_ms": latency_json(&self.latencies, self.unobserved),
            "report_writes_per_s": t.report_writes as f64 / delta_s,
            "report_bytes_per_s": t.report_bytes as f64 / delta_s,
            "status_writes_per_s": t.status_writes as f64 / delta_s,
            "api_writes_per_s": t.api_writes,
            "api_throttled_waits": t.throttled,
            "api_waited_ms": {"status": t.status_waited_ms, "reports": t.report_waited_ms},
            "status_write": {
                "mean_ms": {"api_call": t.status_api_ms, "prepare": t.status_prepare_ms},
                "largest_hub_gateway_bytes": {"status": status_bytes, "object": object_bytes},
                "alone_ms": {"apiserver_cpu": apply_cpu_ms, "wall": apply_wall_ms},
            },
            "persisted_lag_ms": {"p50": lag(0.5), "p99": lag(0.99), "max": lag(1.0), "clusters": self.end.lags.len()},
            "hub_cpu_cores": hub_cpu_s / delta_s,
            "apiserver_cpu_cores": api_cpu_s / delta_s,
            "cpu_ms_per_change": cpu_per_change,
            "rss_idle_bytes": self.hubs[0].rss_idle,
            "rss_after_ingest_bytes": self.hubs[0].rss_ingest,
            "rss_bytes_per_pair": self.per_pair_of(&self.hubs[0]),
            "rss_after_deltas_bytes": rss_deltas,
            "rss_peak_bytes": rss_peak,
            "per_replica": self.per_replica_json(),
            "restart": restart_json,
            "hub_warnings": self.warnings,
        })
    }

    /// The summary for a reader, without fleet DNS's line.
    fn print(&self, t: &Totals) {
        let (args, delta_s, acked, pairs) = (self.args, self.delta_s, self.acked, self.pairs());
        let (replicas, shards) = (self.hubs.len(), args.shards());
        let (ingest_s, persist_s, offered) =
            (self.ingest.ingest_s, self.ingest.persist_s, self.offered);
        let (store_objects, store_total) = (self.ingest.store_objects, self.ingest.store_total);
        let (hub_cpu_s, api_cpu_s) = (self.hub_cpu_s(), self.api_cpu_s);
        let changes = offered.max(1) as f64;
        let latencies = &self.latencies;
        let (p50, p99, max) = (latencies.ms(0.5), latencies.ms(0.99), latencies.ms(1.0));
        let unobserved = self.unobserved;
        let (throttled, status_waited_ms, report_waited_ms) =
            (t.throttled, t.status_waited_ms, t.report_waited_ms);
        let (status_api_ms, status_prepare_ms) = (t.status_api_ms, t.status_prepare_ms);
        let (status_bytes, object_bytes) = self.end.largest_bytes;
        let (apply_cpu_ms, apply_wall_ms) = self.apply_ms;
        let lag = |q: f64| self.end.lags.ms(q);
        println!(
            "gwhub hub scale (Kubernetes mode): {} clusters x {} Gateways x {} listeners = {} pairs, {} hub Gateways, {replicas} replica(s), {shards} status shards; {}; load {}",
            args.clusters,
            args.gateways,
            args.listeners,
            pairs,
            args.gateways,
            machine(),
            loadavg()
        );
        println!(
            "  ingest (ListClusters)    {ingest_s:.2} s; every cluster persisted {persist_s:.2} s"
        );
        println!(
            "  store                    {store_objects} objects, {:.1} MB, {:.0} B per (cluster, Gateway)",
            store_total as f64 / 1e6,
            store_total as f64 / pairs as f64
        );
        println!(
            "  load                     {} ({offered} changes offered), {acked} acked in {delta_s:.1} s",
            if args.rate > 0.0 {
                format!("{} changes/s", args.rate)
            } else {
                "as fast as acks allow".to_owned()
            }
        );
        println!(
            "  change -> hub Gateway    p50 {p50:.0} ms  p99 {p99:.0} ms  max {max:.0} ms  ({} samples, {unobserved} unobserved)",
            latencies.len()
        );
        println!(
            "  API writes               reports {:.1}/s ({:.0} KB/s), status {:.1}/s, throttled waits {throttled} (qps {}, burst {}): status waited {status_waited_ms:.0} ms, reports {report_waited_ms:.0} ms in all",
            t.report_writes as f64 / delta_s,
            t.report_bytes as f64 / delta_s / 1e3,
            t.status_writes as f64 / delta_s,
            args.qps,
            args.burst
        );
        let kinds: Vec<String> = t
            .api_writes
            .iter()
            .map(|(k, r)| format!("{k} {r:.1}"))
            .collect();
        println!("  API server writes/s      {}", kinds.join(", "));
        println!(
            "  per status write (mean)  API call {status_api_ms:.1} ms, aggregate + plan {status_prepare_ms:.1} ms; largest hub Gateway status {:.1} KB (object {:.1} KB)",
            status_bytes as f64 / 1e3,
            object_bytes as f64 / 1e3
        );
        println!(
            "  one status apply alone   API server CPU {apply_cpu_ms:.1} ms, {apply_wall_ms:.1} ms round trip (the largest hub Gateway, hub stopped, one at a time)"
        );
        println!(
            "  persisted lag at the end p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms",
            lag(0.5),
            lag(0.99),
            lag(1.0)
        );
        println!(
            "  CPU                      hubs {:.2} cores, API server {:.2} cores; per change offered: hubs {:.2} ms, API server {:.2} ms",
            hub_cpu_s / delta_s,
            api_cpu_s / delta_s,
            hub_cpu_s * 1000.0 / changes,
            api_cpu_s * 1000.0 / changes
        );
        self.print_replicas();
        if let Some((victim, held, started, back, wrong, whole)) = self.restart {
            println!(
                "  kill -9 + restart        replica {victim} ({held} shards): hub up {started:.2} s, agents back {back:.2} s, whole {whole:.2} s, wrong statuses {wrong}"
            );
        }
    }

    /// One summary line per replica (`*`: restarted).
    fn print_replicas(&self) {
        let delta_s = self.delta_s;
        for (i, h) in self.hubs.iter().enumerate() {
            let l = &self.per_replica_latencies[i];
            println!(
                "  replica {i}{}                shards {}, status {:.1}/s, reports {:.1}/s, p50 {:.0} ms p99 {:.0} ms ({} samples), CPU {:.2} cores, RSS idle {:.1} MiB, after ingest {:.1} MiB ({:.0} B per pair), after deltas {:.1} MiB",
                if h.restarted() { "*" } else { " " },
                self.end.held_end[i],
                h.diff(&self.end.m1[i], "gwhub_status_writes_total") as f64 / delta_s,
                h.diff(&self.end.m1[i], "gwhub_report_writes_total") as f64 / delta_s,
                l.ms(0.5),
                l.ms(0.99),
                l.len(),
                self.end.hub_cpu[i] / delta_s,
                mib(h.rss_idle),
                mib(h.rss_ingest),
                self.per_pair_of(h),
                mib(self.rss_end[i].0),
            );
        }
    }
}
