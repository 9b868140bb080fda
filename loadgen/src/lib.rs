#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! gwhub's load generator: simulated agents driving a real `gwhub serve`
//! (the scale benches of docs/benchmarks.md).
//!
//! Starts `gwhub serve` as a child process and drives it over loopback
//! gRPC with simulated agents (one stream and one TCP connection per
//! cluster; Hello, a chunked snapshot, then deltas with sequence numbers
//! under an unacked window). Every cluster reports the same Gateways, so
//! each hub Gateway aggregates `--clusters` reports.
//!
//! In-process mode (`inprocess.rs`) measures snapshot ingest (until a
//! Dashboard watch shows every hub Gateway with every cluster, also all
//! snapshots acked and `ListClusters` counting every Gateway), raw `prost`
//! decode of the same snapshot for comparison, sustained deltas/s,
//! delta -> Dashboard latency (a sampled delta sets a condition False with
//! a send timestamp in its message; the watcher times when the aggregated
//! condition names it) and hub RSS per (cluster, Gateway).
//!
//! `--kube` (`kubernetes.rs`): the hub in Kubernetes mode against a real
//! management API server (etcd + kube-apiserver from test-kit's harness,
//! the manifests installed, the hub running as its ServiceAccount), one
//! hub Gateway per Gateway name. `--rate N` offers N changes per second
//! over all clusters, each to a random (cluster, Gateway), instead of
//! every agent as fast as acks allow. Measures change -> the hub Gateway's
//! status on the API server p50 / p99 / max, ClusterReport writes/s and
//! bytes/s, status writes/s, waits for `--kube-api-qps`, how far the
//! newest persisted report lags the newest change sent at the end of the
//! load, hub and API server CPU, hub RSS, the store's bytes per (cluster,
//! Gateway), and with `--restart-at 20s` a `kill -9` and restart of the
//! hub: time until the agents are back and every hub Gateway has its
//! pre-kill shape, and the statuses written meanwhile that had another
//! shape or showed a cluster stale. `--replicas R` (`replicas.rs`) runs R
//! hubs against the same API server with `--status-shards`, the agents
//! spread over them, and reports each replica's figures beside the
//! totals; `--restart-at` then kills the replica holding the most shards.
//! `--dns` (`dns.rs`) adds fleet DNS to a local BIND: change (a cluster's
//! load balancer unready) -> the authoritative answer without it, DNS
//! updates per second and hub CPU per update.
//!
//! Run: `cargo bench -p gwhub-loadgen --bench scale -- [flags]`, or
//! `-- --scenario NAME` for a figure of docs/benchmarks.md (see
//! `scenario.rs`; flags beside it override the scenario's). Without `--bench` (as
//! `cargo test --all-targets` runs it) it ignores its arguments and runs a
//! tiny smoke configuration that fails if no delta or latency sample
//! came through.

mod agents;
mod dashboard;
mod dns;
mod error;
mod hub_process;
mod inprocess;
mod kubernetes;
mod probes;
mod replicas;
mod report;
mod scenario;

use std::process::ExitCode;

use clap::Parser;

use crate::scenario::Args;

/// The `scale` bench's entry point: parses the command line (or picks the
/// smoke configuration), runs the mode and prints the JSON line.
pub fn main() -> ExitCode {
    let (raw, scenario) = match scenario::expand(std::env::args().collect()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if gwhub_test_kit::smoke::answered_listing(&raw) {
        return ExitCode::SUCCESS;
    }
    let args = if raw.iter().any(|a| a == "--bench") {
        Args::parse_from(raw)
    } else {
        // `cargo test --all-targets` or cargo-nextest: a quick smoke run;
        // test harness flags are not ours to parse.
        Args::parse_from([
            "scale",
            "--clusters",
            "3",
            "--gateways",
            "4",
            "--chunk",
            "3",
            "--duration",
            "300ms",
            "--mark-every",
            "2",
        ])
    };
    let smoke = !args.bench;
    let result = if !args.kube && (args.replicas > 1 || args.status_shards.is_some()) {
        Err(error::BenchError::Usage(
            "--replicas and --status-shards need --kube",
        ))
    } else if args.dns && (!args.kube || args.rate <= 0.0 || args.listeners < 3) {
        Err(error::BenchError::Usage(
            "--dns needs --kube, --rate and at least 3 --listeners",
        ))
    } else if args.kube {
        kubernetes::run(args)
    } else {
        inprocess::run(args)
    };
    match result {
        Ok(mut json) => {
            if let (Some(name), Some(o)) = (scenario, json.as_object_mut()) {
                o.insert("scenario".to_owned(), name.into());
            }
            println!("{json}");
            if smoke {
                if json["deltas"].as_u64().unwrap_or(0) == 0 {
                    eprintln!("error: smoke run: no delta acked");
                    return ExitCode::FAILURE;
                }
                if json["latency_ms"]["samples"].as_u64().unwrap_or(0) == 0 {
                    eprintln!("error: smoke run: no latency sample");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
