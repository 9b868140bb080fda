//! What a run is: the command line (kept flag for flag and default for
//! default since the bench lived in the CLI crate, so earlier figures in
//! docs/benchmarks.md stay reproducible) and the data every simulated
//! cluster reports (names, Gateway reports, snapshot chunks). Both modes
//! build their load from here. The named scenarios (`--scenario NAME`,
//! [`SCENARIOS`]) are the runs behind docs/benchmarks.md's figures, one
//! command each.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gwhub_proto::v1::{self, agent_message};
use gwhub_test_kit::raw_agent;

/// Prefix of the condition message that carries a latency mark.
pub(crate) const MARK: &str = "bench-mark t=";
/// How long to wait for the last marks and acks after the delta phase.
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// The command line of the `scale` bench.
#[derive(Parser, Debug, Clone)]
#[command(
    about = "gwhub hub scale benchmark (simulated agents over loopback gRPC)",
    args_override_self = true
)]
pub(crate) struct Args {
    /// Simulated agents, one per cluster.
    #[arg(long, default_value_t = 100)]
    pub(crate) clusters: usize,
    /// Gateways per cluster (the same names in every cluster).
    #[arg(long, default_value_t = 100)]
    pub(crate) gateways: usize,
    /// Listeners per Gateway.
    #[arg(long, default_value_t = 4)]
    pub(crate) listeners: usize,
    /// End the delta phase after this many deltas in total (0: only --duration).
    #[arg(long, default_value_t = 0)]
    pub(crate) deltas: u64,
    /// Length of the sustained delta phase.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(crate) duration: Duration,
    /// Unacked deltas per agent.
    #[arg(long, default_value_t = 32)]
    pub(crate) window: u64,
    /// Mark one delta in this many (per agent) for latency.
    #[arg(long, default_value_t = 50)]
    pub(crate) mark_every: u64,
    /// Gateways per snapshot chunk.
    #[arg(long, default_value_t = 25)]
    pub(crate) chunk: usize,
    /// Kubernetes mode: a real management API server (the end-to-end
    /// harness), the manifests installed, one hub Gateway per Gateway name,
    /// `gwhub serve` writing status and ClusterReports there.
    #[arg(long)]
    pub(crate) kube: bool,
    /// Offered load in changes per second over all clusters, each to a
    /// random (cluster, Gateway); 0: every agent as fast as acks allow.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) rate: f64,
    /// `gwhub serve --kube-api-qps` (Kubernetes mode).
    #[arg(long, default_value_t = 100.0)]
    pub(crate) qps: f64,
    /// `gwhub serve --kube-api-burst` (Kubernetes mode).
    #[arg(long, default_value_t = 200)]
    pub(crate) burst: u32,
    /// Kubernetes mode: `kill -9` the hub this far into the delta phase and
    /// start it again (agents reconnect and resend their snapshot).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) restart_at: Option<Duration>,
    /// Kubernetes mode: hub replicas against the same API server, the
    /// agents spread over them round-robin; with more than one, leader
    /// election and `--status-shards` as the shipped Deployment runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub(crate) replicas: u32,
    /// `gwhub serve --status-shards` of every replica (default: 8 with
    /// more than one replica, as the shipped Deployment; else none: one
    /// replica writes every hub Gateway without a Lease).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub(crate) status_shards: Option<u32>,
    /// Kubernetes mode: fleet DNS to a local BIND (`dns.rs`): every hub
    /// Gateway names two listener hostnames under `fleet.test`, the hub
    /// publishes them with `--dns-output rfc2136`, and each offered change
    /// (`--rate`) turns the load balancer of a cluster the answer holds
    /// unready; measures change -> the authoritative answer without it.
    #[arg(long)]
    pub(crate) dns: bool,
    /// Hub binary (default: test-kit's: `GWHUB_BIN`, else `$GWHUB_BIN_DIR/gwhub`,
    /// else the workspace's `gwhub` built in this bench's profile).
    #[arg(long)]
    pub(crate) hub_bin: Option<PathBuf>,
    /// Print only the JSON line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Set by `cargo bench`; without it this is a smoke test.
    #[arg(long, hide = true)]
    pub(crate) bench: bool,
}

impl Args {
    /// The status shards every replica runs with.
    pub(crate) fn shards(&self) -> u32 {
        self.status_shards
            .unwrap_or(if self.replicas > 1 { 8 } else { 0 })
    }
}

pub(crate) fn cluster_name(c: usize) -> String {
    format!("c{c:04}")
}

pub(crate) fn gateway_name(g: usize) -> String {
    format!("gw-{g:04}")
}

pub(crate) fn condition(type_: &str, ok: bool, reason: &str, message: String) -> v1::Condition {
    let status = if ok {
        v1::ConditionStatus::True
    } else {
        v1::ConditionStatus::False
    };
    v1::Condition {
        r#type: type_.to_owned(),
        status: status as i32,
        reason: reason.to_owned(),
        message,
        observed_generation: Some(1),
        last_transition_time: 1_746_100_800,
    }
}

/// A realistic report: 3 Gateway conditions, 2 addresses, `listeners`
/// listeners with 2 conditions and one route kind each. `version` varies
/// attachedRoutes so every delta is a real change; a nonzero `mark` turns
/// LoadBalancerReady False with the mark in its message.
pub(crate) fn report(
    c: usize,
    g: usize,
    listeners: usize,
    version: u64,
    mark: u64,
) -> v1::GatewayReport {
    const NAMES: [&str; 4] = ["http", "https", "grpc", "admin"];
    let lb = if mark == 0 {
        condition(
            "LoadBalancerReady",
            true,
            "Ready",
            "The LoadBalancer service is ready".to_owned(),
        )
    } else {
        condition(
            "LoadBalancerReady",
            false,
            "Pending",
            format!("{MARK}{mark}"),
        )
    };
    v1::GatewayReport {
        namespace: format!("ns-{}", g % 10),
        name: gateway_name(g),
        uid: format!("{c:08x}-0000-4000-8000-{g:012x}"),
        generation: 1,
        status: Some(v1::GatewayStatus {
            conditions: vec![
                condition("Accepted", true, "Accepted", "Resource accepted".to_owned()),
                condition(
                    "Programmed",
                    true,
                    "Programmed",
                    "Resource programmed".to_owned(),
                ),
                lb,
            ],
            addresses: (0..2)
                .map(|j| v1::GatewayAddress {
                    r#type: Some("IPAddress".to_owned()),
                    value: format!("10.{}.{}.{}", c / 256, c % 256, (g * 2 + j) % 256),
                })
                .collect(),
            listeners: (0..listeners)
                .map(|l| v1::ListenerStatus {
                    name: NAMES
                        .get(l)
                        .map_or_else(|| format!("l{l}"), |n| (*n).to_owned()),
                    attached_routes: if l == 0 { (version % 7) as i32 } else { 2 },
                    supported_kinds: vec![v1::RouteGroupKind {
                        group: Some("gateway.networking.k8s.io".to_owned()),
                        kind: "HTTPRoute".to_owned(),
                    }],
                    conditions: vec![
                        condition("Accepted", true, "Accepted", String::new()),
                        condition("Programmed", true, "Programmed", String::new()),
                    ],
                    hostname: None,
                })
                .collect(),
            attached_listener_sets: None,
        }),
    }
}

/// The Hello of cluster `c`'s simulated agent.
pub(crate) fn hello(c: usize) -> v1::Hello {
    v1::Hello {
        agent_version: "gwhub-bench".to_owned(),
        ..raw_agent::hello(&cluster_name(c))
    }
}

/// Snapshot `id` at `seq` in chunks of `--chunk` Gateways, Gateway `g`
/// reporting `report_of(g)`.
pub(crate) fn snapshot_chunks(
    args: &Args,
    id: u64,
    seq: u64,
    mut report_of: impl FnMut(usize) -> v1::GatewayReport,
) -> Vec<v1::AgentMessage> {
    let chunk = args.chunk.max(1);
    let chunks = args.gateways.div_ceil(chunk).max(1);
    (0..chunks)
        .map(|i| {
            let gateways = (i * chunk..((i + 1) * chunk).min(args.gateways))
                .map(&mut report_of)
                .collect();
            raw_agent::msg(agent_message::Message::Snapshot(v1::SnapshotChunk {
                snapshot_id: id,
                chunk: i as u32,
                r#final: i + 1 == chunks,
                seq,
                gateways,
            }))
        })
        .collect()
}

/// What cluster `c`'s agent sends first: its Hello, then snapshot 1 at
/// sequence number 0 (every Gateway at version 0, unmarked).
pub(crate) struct FirstSnapshot {
    pub(crate) hello: v1::Hello,
    pub(crate) chunks: Vec<v1::AgentMessage>,
}

impl FirstSnapshot {
    pub(crate) fn of(c: usize, args: &Args) -> Self {
        FirstSnapshot {
            hello: hello(c),
            chunks: snapshot_chunks(args, 1, 0, |g| report(c, g, args.listeners, 0, 0)),
        }
    }

    /// Every message as sent: the Hello, then the chunks.
    pub(crate) fn messages(&self) -> impl Iterator<Item = v1::AgentMessage> + '_ {
        std::iter::once(raw_agent::msg(agent_message::Message::Hello(
            self.hello.clone(),
        )))
        .chain(self.chunks.iter().cloned())
    }
}

/// A named run: each figure in docs/benchmarks.md is one
/// `cargo bench -p gwhub-loadgen --bench scale -- --scenario <name>`.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    /// Where its figures are in docs/benchmarks.md.
    pub(crate) figure: &'static str,
    /// Its flags, as one command line (split on whitespace); flags given
    /// beside `--scenario` override them.
    pub(crate) args: &'static str,
}

impl Scenario {
    const fn new(name: &'static str, figure: &'static str, args: &'static str) -> Self {
        Scenario { name, figure, args }
    }
}

/// Every named run: its name, where its figures are, its flags.
pub(crate) const SCENARIOS: &[Scenario] = &[
    Scenario::new(
        "ingest-200x100",
        "Hub at scale (200 x 100 x 4)",
        "--clusters 200 --gateways 100",
    ),
    Scenario::new(
        "ingest-1k",
        "Hub at scale (1,000 x 100 x 4)",
        "--clusters 1000 --gateways 100",
    ),
    Scenario::new(
        "memory-1k",
        "Hub memory per (cluster, Gateway)",
        "--clusters 1000 --gateways 10",
    ),
    Scenario::new(
        "kube-1k",
        "Kubernetes mode: 1,000 x 10, one replica",
        "--kube --clusters 1000 --gateways 10 --rate 100 --duration 40s --restart-at 20s",
    ),
    Scenario::new(
        "kube-1k-3r",
        "Kubernetes mode: 1,000 x 10, three replicas",
        "--kube --clusters 1000 --gateways 10 --rate 100 --duration 40s --restart-at 20s --replicas 3 --status-shards 8",
    ),
    Scenario::new(
        "kube-100x100",
        "Kubernetes mode: 100 x 100, 1,000/s",
        "--kube --clusters 100 --gateways 100 --rate 1000 --duration 20s",
    ),
    Scenario::new(
        "kube-100x100-acks",
        "Kubernetes mode: 100 x 100, as fast as acks allow",
        "--kube --clusters 100 --gateways 100 --rate 0 --duration 10s",
    ),
    Scenario::new(
        "kube-3.5k",
        "Kubernetes mode: 3,500 x 10",
        "--kube --clusters 3500 --gateways 10 --rate 350 --duration 40s --restart-at 20s",
    ),
    Scenario::new(
        "kube-dns-100",
        "Fleet DNS: 100 x 10 x 2 hostnames against BIND",
        "--kube --dns --clusters 100 --gateways 10 --rate 10 --duration 30s",
    ),
    Scenario::new(
        "kube-dns-1k",
        "Fleet DNS: 1,000 x 10 x 2 hostnames against BIND",
        "--kube --dns --clusters 1000 --gateways 10 --rate 10 --duration 30s",
    ),
    Scenario::new(
        "kube-10k",
        "Ten thousand clusters, one replica",
        "--kube --clusters 10000 --gateways 10 --rate 100 --duration 40s --restart-at 20s",
    ),
    Scenario::new(
        "kube-10k-3r",
        "Ten thousand clusters, three replicas",
        "--kube --clusters 10000 --gateways 10 --rate 100 --duration 40s --restart-at 20s --replicas 3 --status-shards 8",
    ),
];

/// `raw` (a command line) with `--scenario NAME` (or `--scenario=NAME`)
/// replaced by that scenario's flags, put first so every other flag
/// given overrides them; the scenario's name, if any.
pub(crate) fn expand(
    raw: Vec<String>,
) -> Result<(Vec<String>, Option<&'static str>), crate::error::BenchError> {
    let mut rest = Vec::with_capacity(raw.len());
    let mut name: Option<String> = None;
    let mut it = raw.into_iter();
    while let Some(a) = it.next() {
        if a == "--scenario" {
            name = Some(
                it.next()
                    .ok_or(crate::error::BenchError::Usage("--scenario needs a name"))?,
            );
        } else if let Some(n) = a.strip_prefix("--scenario=") {
            name = Some(n.to_owned());
        } else {
            rest.push(a);
        }
    }
    let Some(name) = name else {
        return Ok((rest, None));
    };
    let Some(s) = SCENARIOS.iter().find(|s| s.name == name) else {
        let names: Vec<String> = SCENARIOS
            .iter()
            .map(|s| format!("{} ({})", s.name, s.figure))
            .collect();
        return Err(crate::error::BenchError::NoScenario {
            name,
            known: names.join(", "),
        });
    };
    let mut out: Vec<String> = rest.iter().take(1).cloned().collect();
    out.extend(s.args.split_whitespace().map(str::to_owned));
    out.extend(rest.into_iter().skip(1));
    Ok((out, Some(s.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn every_scenario_parses() {
        for s in SCENARIOS {
            let (raw, name) = expand(argv(&["scale", "--bench", "--scenario", s.name])).unwrap();
            assert_eq!(name, Some(s.name));
            let args = Args::try_parse_from(raw).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert!(args.bench);
        }
    }

    #[test]
    fn flags_beside_a_scenario_override_it() {
        let (raw, _) = expand(argv(&[
            "scale",
            "--duration",
            "5s",
            "--scenario=kube-10k",
            "--replicas",
            "2",
        ]))
        .unwrap();
        let args = Args::try_parse_from(raw).unwrap();
        assert!(args.kube);
        assert_eq!(args.clusters, 10_000);
        assert_eq!(args.duration, Duration::from_secs(5));
        assert_eq!(args.replicas, 2);
        assert_eq!(args.shards(), 8);
    }

    #[test]
    fn an_unknown_scenario_is_named_with_the_known_ones() {
        let err = expand(argv(&["scale", "--scenario", "nope"]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("\"nope\"") && err.contains("kube-1k"), "{err}");
        assert!(expand(argv(&["scale", "--scenario"])).is_err());
        let (raw, name) = expand(argv(&["scale", "--clusters", "3"])).unwrap();
        assert_eq!((raw.len(), name), (3, None));
    }
}
