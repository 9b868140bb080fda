//! The agent runtime against a fake hub over real loopback TCP: what arrives
//! on the wire, when, and after faults. The fake hub implements the
//! generated `Ingest` server and records every message; it runs on its own
//! tokio runtime so "killing" it (dropping the runtime) closes every socket
//! like a crashed process would.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_agent::runtime::dir_source::EvaluateError;
use gwhub_agent::runtime::{DirSource, Evaluate, GatewayStore, HubClient, HubConfig};
use gwhub_proto::v1::{
    self, AgentMessage, HubMessage, ResyncReason, agent_message, hub_message,
    ingest_server::{Ingest, IngestServer},
};
use gwhub_spoke_rules::manifest::Object;
use gwhub_test_kit::procs::{Process as Child, free_addr};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

/// What the fake hub received, simplified for assertions.
#[derive(Clone, Debug, PartialEq)]
enum Got {
    Hello {
        cluster: String,
    },
    /// A complete snapshot: its seq and `ns/name` of every Gateway.
    Snapshot {
        seq: u64,
        gateways: Vec<String>,
    },
    /// `+ns/name=<LoadBalancerReady reason>` or `-ns/name`.
    Delta {
        seq: u64,
        changes: Vec<String>,
    },
    Heartbeat,
}

#[derive(Default)]
struct HubState {
    log: Mutex<Vec<Got>>,
    /// Outbound half of the newest stream, to push ResyncRequests and acks.
    current: Mutex<Option<mpsc::Sender<Result<HubMessage, Status>>>>,
    /// When false, the hub never acks (a stuck hub).
    no_acks: AtomicBool,
    /// Each delta's `observed_unix_millis`, in order.
    observed: Mutex<Vec<i64>>,
}

impl HubState {
    fn log(&self) -> Vec<Got> {
        self.log.lock().unwrap().clone()
    }
    fn push(&self, g: Got) {
        self.log.lock().unwrap().push(g);
    }
    async fn send(&self, m: hub_message::Message) {
        let tx = self.current.lock().unwrap().clone().expect("a stream");
        tx.send(Ok(HubMessage { message: Some(m) })).await.unwrap();
    }
}

#[derive(Clone)]
struct FakeIngest(Arc<HubState>);

#[tonic::async_trait]
impl Ingest for FakeIngest {
    type ReportStream = ReceiverStream<Result<HubMessage, Status>>;

    async fn join(
        &self,
        _: Request<gwhub_proto::v1::JoinRequest>,
    ) -> Result<Response<gwhub_proto::v1::JoinResponse>, Status> {
        Err(Status::unimplemented("the fake hub issues no certificates"))
    }

    async fn renew(
        &self,
        _: Request<gwhub_proto::v1::RenewRequest>,
    ) -> Result<Response<gwhub_proto::v1::JoinResponse>, Status> {
        Err(Status::unimplemented("the fake hub issues no certificates"))
    }

    async fn report(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::ReportStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        *self.0.current.lock().unwrap() = Some(tx.clone());
        let state = self.0.clone();
        tokio::spawn(async move {
            let send = |m| {
                let tx = tx.clone();
                async move { tx.send(Ok(HubMessage { message: Some(m) })).await }
            };
            let mut partial: Vec<String> = Vec::new();
            while let Ok(Some(msg)) = inbound.message().await {
                match msg.message.expect("a message") {
                    agent_message::Message::Hello(h) => {
                        state.push(Got::Hello { cluster: h.cluster });
                        let _ = send(hub_message::Message::Hello(v1::HubHello {
                            hub_version: "fake".into(),
                            heartbeat_interval_millis: 60_000,
                            ..Default::default()
                        }))
                        .await;
                        let _ = send(hub_message::Message::Resync(v1::ResyncRequest {
                            reason: ResyncReason::NewConnection as i32,
                            message: String::new(),
                        }))
                        .await;
                    }
                    agent_message::Message::Snapshot(c) => {
                        partial.extend(
                            c.gateways
                                .iter()
                                .map(|g| format!("{}/{}", g.namespace, g.name)),
                        );
                        if c.r#final {
                            state.push(Got::Snapshot {
                                seq: c.seq,
                                gateways: std::mem::take(&mut partial),
                            });
                            if !state.no_acks.load(Ordering::Relaxed) {
                                let _ =
                                    send(hub_message::Message::Ack(v1::Ack { seq: c.seq })).await;
                            }
                        }
                    }
                    agent_message::Message::Delta(d) => {
                        let changes = d
                            .changes
                            .iter()
                            .map(|c| match c.change.as_ref().unwrap() {
                                v1::change::Change::Upsert(r) => {
                                    let reason = r
                                        .status
                                        .as_ref()
                                        .and_then(|s| {
                                            s.conditions
                                                .iter()
                                                .find(|c| c.r#type == "LoadBalancerReady")
                                        })
                                        .map(|c| c.reason.clone())
                                        .unwrap_or_default();
                                    format!("+{}/{}={reason}", r.namespace, r.name)
                                }
                                v1::change::Change::Delete(r) => {
                                    format!("-{}/{}", r.namespace, r.name)
                                }
                            })
                            .collect();
                        state.push(Got::Delta {
                            seq: d.seq,
                            changes,
                        });
                        state.observed.lock().unwrap().push(d.observed_unix_millis);
                        if !state.no_acks.load(Ordering::Relaxed) {
                            let _ = send(hub_message::Message::Ack(v1::Ack { seq: d.seq })).await;
                        }
                    }
                    agent_message::Message::Heartbeat(_) => state.push(Got::Heartbeat),
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// A fake hub on its own runtime; dropping the runtime is a crash.
struct FakeHub {
    state: Arc<HubState>,
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
}

impl FakeHub {
    fn start(addr: SocketAddr) -> Self {
        Self::start_with(addr, HubState::default())
    }

    fn start_with(addr: SocketAddr, state: HubState) -> Self {
        let state = Arc::new(state);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // The port of a killed hub may take a moment to be free again.
        let deadline = Instant::now() + Duration::from_secs(5);
        let listener = loop {
            match std::net::TcpListener::bind(addr) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("bind {addr}: {e}; retrying");
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("bind {addr}: {e}"),
            }
        };
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = IngestServer::new(FakeIngest(state.clone()));
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        });
        Self {
            state,
            runtime: Some(runtime),
            addr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn kill(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for FakeHub {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The engine stand-in: every Gateway in the files, as written. The runtime
/// does not care how statuses are computed, and this keeps the expected
/// wire content obvious.
fn passthrough() -> Evaluate {
    Arc::new(|objs: &[Object]| {
        objs.iter()
            .filter(|o| o.kind == "Gateway")
            .map(|o| o.parse::<Gateway>().map_err(EvaluateError::from))
            .collect()
    })
}

fn gateway_yaml(name: &str, reason: &str, time: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: openshift-ingress, uid: uid-{name}, generation: 1}}
spec: {{gatewayClassName: openshift-default, listeners: []}}
status:
  conditions:
  - {{type: LoadBalancerReady, status: 'False', reason: {reason}, message: m, lastTransitionTime: '{time}'}}
"
    )
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "gwhub-run-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
    fn write(&self, file: &str, text: &str) {
        // Write then rename, as editors do, so the agent never reads half a file.
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.0.join(file)).unwrap();
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn test_config(url: String) -> HubConfig {
    let mut c = HubConfig::new(url, "cluster-a");
    c.backoff_initial = Duration::from_millis(50);
    c.backoff_max = Duration::from_millis(500);
    c.heartbeat = Duration::from_secs(30);
    c
}

/// Runs a directory agent in the background; stops it on drop.
struct Agent {
    stop: CancellationToken,
    store: Arc<GatewayStore>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Agent {
    fn start(dir: &Path, config: HubConfig) -> Self {
        let source = DirSource::new(dir, passthrough())
            .unwrap()
            .poll_interval(Duration::from_millis(50));
        let store = Arc::new(GatewayStore::default());
        Self::start_store(config, store, Some(source))
    }

    fn start_store(config: HubConfig, store: Arc<GatewayStore>, source: Option<DirSource>) -> Self {
        let stop = CancellationToken::new();
        if let Some(source) = source {
            tokio::spawn(source.run(store.clone(), stop.clone()));
        }
        let client = HubClient::new(config, store.clone());
        let task = tokio::spawn(client.run(stop.clone()));
        Self {
            stop,
            store,
            task: Some(task),
        }
    }

    async fn shutdown(mut self) {
        self.stop.cancel();
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("agent stops promptly on shutdown")
            .unwrap();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Waits (bounded) until `pred` holds for the hub's log; returns the log.
async fn wait_log(hub: &HubState, what: &str, pred: impl Fn(&[Got]) -> bool) -> Vec<Got> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = hub.log();
        if pred(&log) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; hub log: {log:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn snapshots(log: &[Got]) -> Vec<(u64, Vec<String>)> {
    log.iter()
        .filter_map(|g| match g {
            Got::Snapshot { seq, gateways } => Some((*seq, gateways.clone())),
            _ => None,
        })
        .collect()
}

fn deltas(log: &[Got]) -> Vec<(u64, Vec<String>)> {
    log.iter()
        .filter_map(|g| match g {
            Got::Delta { seq, changes } => Some((*seq, changes.clone())),
            _ => None,
        })
        .collect()
}

const T0: &str = "2025-01-01T00:00:00Z";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_then_snapshot_then_one_delta_per_file_change() {
    let dir = TempDir::new("delta");
    dir.write("a.yaml", &gateway_yaml("a", "LoadBalancerPending", T0));
    dir.write("b.yaml", &gateway_yaml("b", "LoadBalancerPending", T0));
    let hub = FakeHub::start(free_addr());
    let agent = Agent::start(dir.path(), test_config(hub.url()));

    let log = wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;
    assert_eq!(
        log[0],
        Got::Hello {
            cluster: "cluster-a".into()
        }
    );
    let (snap_seq, gws) = snapshots(&log)[0].clone();
    assert_eq!(gws, ["openshift-ingress/a", "openshift-ingress/b"]);
    // The NEW_CONNECTION resync is satisfied by the snapshot already sent.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        snapshots(&hub.state.log()).len(),
        1,
        "the NEW_CONNECTION resync drew a second snapshot: {:#?}",
        hub.state.log()
    );

    // One edited file: exactly one delta, for that Gateway.
    dir.write("a.yaml", &gateway_yaml("a", "SyncLoadBalancerFailed", T0));
    // How fast is the benches' business (docs/benchmarks.md), not a test's:
    // a loaded machine must not fail it.
    wait_log(&hub.state, "delta", |l| !deltas(l).is_empty()).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        deltas(&hub.state.log()),
        [(
            snap_seq + 1,
            vec!["+openshift-ingress/a=SyncLoadBalancerFailed".to_owned()]
        )],
        "one edited file sent more than its one delta"
    );

    // A change of timestamps only is not a change.
    dir.write(
        "b.yaml",
        &gateway_yaml("b", "LoadBalancerPending", "2025-06-01T00:00:00Z"),
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        deltas(&hub.state.log()).len(),
        1,
        "a change of timestamps only sent a delta: {:#?}",
        hub.state.log()
    );

    // A file gone: its Gateway is deleted, with the next sequence number.
    std::fs::remove_file(dir.path().join("b.yaml")).unwrap();
    let log = wait_log(&hub.state, "delete", |l| deltas(l).len() == 2).await;
    assert_eq!(
        deltas(&log)[1],
        (snap_seq + 2, vec!["-openshift-ingress/b".to_owned()])
    );
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_file_keeps_last_good_state() {
    let dir = TempDir::new("broken");
    dir.write("a.yaml", &gateway_yaml("a", "LoadBalancerPending", T0));
    let hub = FakeHub::start(free_addr());
    let agent = Agent::start(dir.path(), test_config(hub.url()));
    wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;

    dir.write("a.yaml", "apiVersion: v1\nkind: [unclosed\n");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        deltas(&hub.state.log()).is_empty(),
        "a broken file sent a delta: {:#?}",
        hub.state.log()
    );
    assert_eq!(agent.store.len(), 1, "a broken file changed the store");

    dir.write("a.yaml", &gateway_yaml("a", "LoadBalancerProvisioned", T0));
    let log = wait_log(&hub.state, "delta", |l| !deltas(l).is_empty()).await;
    assert_eq!(
        deltas(&log)[0].1,
        ["+openshift-ingress/a=LoadBalancerProvisioned"]
    );
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_request_yields_a_fresh_snapshot() {
    let dir = TempDir::new("resync");
    dir.write("a.yaml", &gateway_yaml("a", "LoadBalancerPending", T0));
    let hub = FakeHub::start(free_addr());
    let agent = Agent::start(dir.path(), test_config(hub.url()));
    let log = wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;
    let first = snapshots(&log)[0].0;

    hub.state
        .send(hub_message::Message::Resync(v1::ResyncRequest {
            reason: ResyncReason::SequenceGap as i32,
            message: "expected seq 8, got 10".into(),
        }))
        .await;
    let log = wait_log(&hub.state, "second snapshot", |l| snapshots(l).len() == 2).await;
    let (seq, gws) = snapshots(&log)[1].clone();
    assert!(seq > first, "snapshot seq {seq} after {first}");
    assert_eq!(gws, ["openshift-ingress/a"]);

    // Deltas continue from the new snapshot's seq.
    dir.write("a.yaml", &gateway_yaml("a", "LoadBalancerProvisioned", T0));
    let log = wait_log(&hub.state, "delta", |l| !deltas(l).is_empty()).await;
    assert_eq!(deltas(&log)[0].0, seq + 1);
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_hub_restart_and_resends_a_snapshot() {
    let dir = TempDir::new("restart");
    dir.write("a.yaml", &gateway_yaml("a", "LoadBalancerPending", T0));
    let mut hub = FakeHub::start(free_addr());
    let addr = hub.addr;
    let agent = Agent::start(dir.path(), test_config(hub.url()));
    wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;

    hub.kill();
    // A change while the hub is down is carried by the next snapshot.
    dir.write("b.yaml", &gateway_yaml("b", "LoadBalancerPending", T0));
    // Read by the agent's source in its own time (polled every 50 ms).
    gwhub_test_kit::wait::until_named(
        "the agent's source never read b.yaml while the hub was down",
        Duration::from_secs(10),
        || async { agent.store.len() },
        |n| *n == 2,
    )
    .await;

    let hub2 = FakeHub::start(addr);
    let log = wait_log(&hub2.state, "snapshot after restart", |l| {
        !snapshots(l).is_empty()
    })
    .await;
    assert_eq!(
        log[0],
        Got::Hello {
            cluster: "cluster-a".into()
        }
    );
    assert_eq!(
        snapshots(&log)[0].1,
        ["openshift-ingress/a", "openshift-ingress/b"]
    );
    assert!(deltas(&log).is_empty(), "{log:#?}");
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_waits_for_a_hub_that_is_not_up_yet() {
    let dir = TempDir::new("late");
    dir.write("a.yaml", &gateway_yaml("a", "LoadBalancerPending", T0));
    let addr = free_addr();
    let agent = Agent::start(dir.path(), test_config(format!("http://{addr}")));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let hub = FakeHub::start(addr);
    let log = wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;
    assert_eq!(snapshots(&log)[0].1, ["openshift-ingress/a"]);
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_hub_gets_coalesced_changes() {
    let state = HubState::default();
    state.no_acks.store(true, Ordering::Relaxed);
    let hub = FakeHub::start_with(free_addr(), state);
    let mut config = test_config(hub.url());
    config.max_unacked = 1;
    let store = Arc::new(GatewayStore::default());
    store.replace_all([
        parse_gateway(&gateway_yaml("a", "R0", T0)),
        parse_gateway(&gateway_yaml("b", "R0", T0)),
    ]);
    store.mark_ready();
    let agent = Agent::start_store(config, store.clone(), None);
    let log = wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;
    let snap_seq = snapshots(&log)[0].0;

    // The window (1) is taken by the unacked snapshot: a burst of 1000
    // changes to two Gateways waits as two outbox entries.
    for i in 1..=500 {
        store.upsert(parse_gateway(&gateway_yaml("b", &format!("R{i}"), T0)));
        store.upsert(parse_gateway(&gateway_yaml("a", &format!("R{i}"), T0)));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        store.pending(),
        2,
        "1000 changes to two Gateways are not two outbox entries"
    );
    assert!(
        deltas(&hub.state.log()).is_empty(),
        "a delta was sent past the window of an unacked snapshot: {:#?}",
        hub.state.log()
    );

    // The hub catches up: the latest state of each, in first-change order.
    hub.state
        .send(hub_message::Message::Ack(v1::Ack { seq: snap_seq }))
        .await;
    let log = wait_log(&hub.state, "delta", |l| !deltas(l).is_empty()).await;
    assert_eq!(
        deltas(&log),
        [(
            snap_seq + 1,
            vec![
                "+openshift-ingress/b=R500".to_owned(),
                "+openshift-ingress/a=R500".to_owned()
            ]
        )]
    );
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_when_idle() {
    let hub = FakeHub::start(free_addr());
    let mut config = test_config(hub.url());
    config.heartbeat = Duration::from_millis(100);
    let store = Arc::new(GatewayStore::default());
    store.mark_ready();
    let agent = Agent::start_store(config, store, None);
    let log = wait_log(&hub.state, "heartbeats", |l| {
        l.iter().filter(|g| **g == Got::Heartbeat).count() >= 3
    })
    .await;
    // An empty cluster still sends its (empty) snapshot.
    assert_eq!(snapshots(&log)[0].1, Vec::<String>::new());
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_snapshot_before_the_source_is_ready() {
    let hub = FakeHub::start(free_addr());
    let store = Arc::new(GatewayStore::default());
    let agent = Agent::start_store(test_config(hub.url()), store.clone(), None);
    wait_log(&hub.state, "hello", |l| !l.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        snapshots(&hub.state.log()).is_empty(),
        "a snapshot was sent before the source was ready: {:#?}",
        hub.state.log()
    );
    store.replace_all([parse_gateway(&gateway_yaml("a", "R", T0))]);
    store.mark_ready();
    let log = wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;
    assert_eq!(snapshots(&log)[0].1, ["openshift-ingress/a"]);
    agent.shutdown().await;
}

fn parse_gateway(yaml: &str) -> Gateway {
    let objs = gwhub_spoke_rules::manifest::parse_str("t.yaml", yaml).unwrap();
    objs[0].parse().unwrap()
}

// ---- The `gwhub-agent run` binary, with the real condition engine. ----

const AGENT: &str = env!("CARGO_BIN_EXE_gwhub-agent");

fn copy_example(name: &str, to: &TempDir) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../spoke-agent/examples")
        .join(name);
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        if !p.is_file() {
            continue; // e.g. expected/ (golden output)
        }
        to.write(
            p.file_name().unwrap().to_str().unwrap(),
            &std::fs::read_to_string(&p).unwrap(),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_streams_engine_results_and_stops_on_sigterm() {
    let dir = TempDir::new("bin");
    copy_example("aws-healthy", &dir);
    let hub = FakeHub::start(free_addr());
    let mut child = Child(
        std::process::Command::new(AGENT)
            .args([
                "run",
                "--insecure",
                "--cluster",
                "east",
                "--hub",
                &hub.url(),
            ])
            .arg("--from-dir")
            .arg(dir.path())
            .env("RUST_LOG", "info")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let log = wait_log(&hub.state, "snapshot", |l| !snapshots(l).is_empty()).await;
    assert_eq!(
        log[0],
        Got::Hello {
            cluster: "east".into()
        }
    );
    assert_eq!(snapshots(&log)[0].1, ["openshift-ingress/default-gateway"]);

    // The load balancer loses its address: the engine's verdict changes and
    // exactly that Gateway is sent again.
    let service = std::fs::read_to_string(dir.path().join("service.yaml")).unwrap();
    let lost = service.replace(
        "    ingress:\n    - hostname: a1b2c3d4e5f6-1234567890.us-east-1.elb.amazonaws.com\n",
        "    ingress: []\n",
    );
    assert_ne!(service, lost, "example changed; update this test");
    let unix_millis = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let edited_at = unix_millis();
    dir.write("service.yaml", &lost);
    let log = wait_log(&hub.state, "delta", |l| !deltas(l).is_empty()).await;
    assert_eq!(
        deltas(&log)[0].1,
        ["+openshift-ingress/default-gateway=SyncLoadBalancerFailed"]
    );
    // Stamped with when the agent's evaluation changed (the hub measures
    // gwhub_propagation_seconds from it).
    let stamp = hub.state.observed.lock().unwrap()[0];
    assert!(
        (edited_at..=unix_millis()).contains(&stamp),
        "{stamp} not between the edit ({edited_at}) and now"
    );
    // Re-evaluating at a later time changes no verdict: nothing more is sent.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        deltas(&hub.state.log()).len(),
        1,
        "re-evaluating later sent another delta: {:#?}",
        hub.state.log()
    );

    let status = child.terminate();
    assert!(status.success(), "exit status {status:?}");
}

/// The probes on `--metrics-listen`: with an API server that never answers
/// the agent is live (its loop runs) but not ready (nothing listed), though
/// the hub is unreachable too; from a directory it is ready once read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_probes_tell_live_from_ready() {
    use gwhub_test_kit::procs::http_status;
    let dir = TempDir::new("probes");
    // An API server that refuses every connection.
    let dead = free_addr();
    dir.write(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://{dead}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\ncurrent-context: c\n"
        ),
    );
    let spawn = |source: &[&str], port: u16| {
        Child(
            std::process::Command::new(AGENT)
                .args(["run", "--insecure", "--cluster", "east"])
                .args(["--hub", "http://127.0.0.1:1"])
                .args(source)
                .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let port = free_addr().port();
    let kubeconfig = dir.path().join("kubeconfig");
    let _kube = spawn(&["--kubeconfig", kubeconfig.to_str().unwrap()], port);
    gwhub_test_kit::wait::until(
        Duration::from_secs(20),
        || http_status(port, "/healthz"),
        |s| *s == 200,
    )
    .await;
    // Two heartbeats' worth later: still live, still not ready.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        http_status(port, "/healthz").await,
        200,
        "the agent stopped being live"
    );
    assert_eq!(
        http_status(port, "/readyz").await,
        503,
        "the agent said ready with nothing listed"
    );

    copy_example("aws-healthy", &dir);
    std::fs::remove_file(dir.path().join("kubeconfig")).unwrap();
    let port = free_addr().port();
    let _dir_agent = spawn(&["--from-dir", dir.path().to_str().unwrap()], port);
    gwhub_test_kit::wait::until(
        Duration::from_secs(20),
        || http_status(port, "/readyz"),
        |s| *s == 200,
    )
    .await;
    assert_eq!(http_status(port, "/healthz").await, 200);
}

#[test]
fn binary_refuses_to_start_without_tls_or_insecure() {
    let out = std::process::Command::new(AGENT)
        .args([
            "run",
            "--cluster",
            "east",
            "--hub",
            "http://127.0.0.1:1",
            "--from-dir",
            ".",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: refusing to start: no TLS material"),
        "{err}"
    );
}

/// Without --from-dir the agent runs against an API server; with no
/// kubeconfig and no in-cluster service account it says so and exits 1.
#[test]
fn binary_without_a_cluster_config_says_so() {
    let run = |extra: &[&str]| {
        std::process::Command::new(AGENT)
            .args([
                "run",
                "--insecure",
                "--cluster",
                "east",
                "--hub",
                "http://127.0.0.1:1",
            ])
            .args(extra)
            .env("KUBECONFIG", "/nonexistent/gwhub/kubeconfig")
            .env("HOME", "/nonexistent/gwhub")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error: no Kubernetes config"), "{err}");
    let out = run(&["--kubeconfig", "/nonexistent/gwhub/kc"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: --kubeconfig /nonexistent/gwhub/kc"),
        "{err}"
    );
}
