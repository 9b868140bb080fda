//! `gwhub demo`: the real hub and N simulated clusters in one process, over
//! real loopback gRPC, with no Kubernetes. Each cluster is a real agent
//! (`run_dir_agent`) reading its own temporary directory of manifests; a
//! timer rewrites those files (load balancer lost, DNS zone failing, routes
//! attaching) and the demo watches the result through the Dashboard API,
//! like any client would. Nothing is short-circuited, so what the user sees
//! is what a real fleet would show. The hub runs fleet DNS as a dry run
//! from the clusters' reports (zone [`DNS_ZONE`]): each time the records it
//! would publish change, the demo reads them from `ListDnsNames` and
//! prints a `DNS` line.

pub(crate) mod cluster;
mod display;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use gwhub_agent::runtime::dir_source::engine_evaluate;
use gwhub_agent::runtime::{DirSource, HubConfig as AgentConfig, run_dir_agent};
use gwhub_common::{OutputFormat, render_list};
use gwhub_proto::v1;
use gwhub_proto::v1::dashboard_client::DashboardClient;
use tokio::task::JoinSet;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use cluster::SimCluster;
use display::Screen;
use gwhub_hub::serve::{Hub, HubConfig, ServeError};
use gwhub_hub_rules::aggregate::{OWN_CONDITION, Options};

/// How often an agent looks at its directory: well under any interval a
/// user would pick, so a change shows within a fraction of a second.
const POLL: Duration = Duration::from_millis(100);
/// How long `--once` waits for every cluster's report.
const ONCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for the agents to close their streams.
const AGENT_STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// The fleet DNS zone of the demo: its clusters' listener hostnames lie
/// under it.
pub(crate) const DNS_ZONE: &str = "apps.demo.example.com";
/// `--dns-rise` of the demo: short, so a cluster that recovers is seen
/// returning to the records within a change or two.
const DNS_RISE: Duration = Duration::from_secs(2);

/// Why `gwhub demo` stopped, as printed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot create a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    /// A simulated cluster's manifests could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A simulated cluster's template does not parse (a bug of the demo).
    #[error(transparent)]
    Manifest(#[from] gwhub_spoke_rules::manifest::ManifestError),
    #[error("the demo's fleet DNS is off")]
    DnsOff,
    #[error("the demo's fleet DNS: {0}")]
    Dns(#[source] gwhub_dns::DnsConfigError),
    #[error(
        "{0}; is another gwhub running? Pass --listen 127.0.0.1:0 \
         --dashboard-listen 127.0.0.1:0 --web-listen 127.0.0.1:0 to use any free ports"
    )]
    Bind(#[source] ServeError),
    #[error(transparent)]
    Hub(ServeError),
    #[error(transparent)]
    Agent(#[from] gwhub_agent::runtime::dir_source::DirError),
    #[error("cannot reach the Dashboard API at {dashboard}: {source}")]
    Dashboard {
        dashboard: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// A Dashboard call failed (its name, the hub's message).
    #[error("{call}: {}", .status.message())]
    Call {
        call: &'static str,
        status: Box<tonic::Status>,
    },
    #[error("the Dashboard watch ended early")]
    WatchEndedEarly,
    #[error("the Dashboard watch ended")]
    WatchEnded,
    #[error("not every cluster reported within {within:?} (have {have})")]
    Incomplete { within: Duration, have: String },
}

impl DemoError {
    fn call(call: &'static str) -> impl Fn(tonic::Status) -> DemoError {
        move |status| DemoError::Call {
            call,
            status: Box::new(status),
        }
    }
}

/// Fleet DNS of the demo: a dry run (no Kubernetes) under [`DNS_ZONE`].
fn dns_config(stale_after: Duration) -> Result<gwhub_dns::DnsConfig, DemoError> {
    let flags = gwhub_dns::DnsFlags {
        zones: vec![DNS_ZONE.to_owned()],
        ttl: Duration::from_secs(u64::from(gwhub_dns_rules::DEFAULT_TTL_SECONDS)),
        max_targets: gwhub_dns_rules::DEFAULT_MAX_TARGETS,
        rise: DNS_RISE,
        resync: Duration::from_secs(300),
        dry_run: true,
        no_kube: true,
        ..Default::default()
    };
    match flags.check("gwhub-demo", stale_after) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(DemoError::DnsOff),
        Err(e) => Err(DemoError::Dns(e)),
    }
}

/// A validated `gwhub demo` command line.
#[derive(Clone, Debug)]
pub(crate) struct DemoConfig {
    pub clusters: usize,
    pub listen: SocketAddr,
    pub dashboard_listen: SocketAddr,
    /// The web status page; off if `None`.
    pub web_listen: Option<SocketAddr>,
    /// Time between two simulated changes.
    pub interval: Duration,
    /// Stop after this long; `None` runs until the stop signal.
    pub duration: Option<Duration>,
    /// Print the complete aggregate as YAML and stop.
    pub once: bool,
    /// ANSI colours (stdout is a terminal).
    pub color: bool,
}

/// Runs the demo, writing the live view to `out`, until `stop` resolves,
/// `duration` passes or (with `once`) the aggregate is complete. Returns the
/// `--once` YAML (empty otherwise). Everything started is stopped and the
/// temporary directories removed before it returns, error or not.
pub(crate) async fn run(
    config: DemoConfig,
    out: &mut dyn Write,
    stop: impl Future<Output = ()>,
) -> Result<String, DemoError> {
    let root = tempfile::Builder::new()
        .prefix("gwhub-demo-")
        .tempdir()
        .map_err(DemoError::TempDir)?;
    let mut clusters: Vec<SimCluster> = (0..config.clusters)
        .map(|i| SimCluster::new(i, root.path()))
        .collect();
    for c in &clusters {
        c.write()?;
    }

    let stale_after = Duration::from_secs(60);
    let dns = dns_config(stale_after)?;
    let mut hub = Hub::start(HubConfig {
        listen: config.listen,
        dashboard_listen: config.dashboard_listen,
        insecure: true,
        stale_after,
        options: Options::default(),
        max_messages_per_second: gwhub_api::grpc::ingest::DEFAULT_MAX_MESSAGES_PER_SECOND,
        budgets: Default::default(),
        web_listen: config.web_listen,
        web_hosts: Default::default(),
        gateway_history: gwhub_hub_rules::history::DEFAULT_CAPACITY,
    })
    .await
    .map_err(bind_hint)?;
    hub.start_dns_without_kube(dns);

    let shutdown = CancellationToken::new();
    let mut agents = JoinSet::new();
    let mut started = Ok(());
    for c in &clusters {
        match DirSource::new(c.dir(), engine_evaluate(Default::default())) {
            Ok(source) => {
                let agent = AgentConfig::new(format!("http://{}", hub.ingest_addr), &c.name);
                agents.spawn(run_dir_agent(
                    agent,
                    source.poll_interval(POLL),
                    shutdown.clone(),
                ));
            }
            Err(e) => {
                started = Err(DemoError::Agent(e));
                break;
            }
        }
    }

    let result = match started {
        Ok(()) => watch(&config, &hub, &mut clusters, out, stop).await,
        Err(e) => Err(e),
    };

    shutdown.cancel();
    let _ = tokio::time::timeout(AGENT_STOP_TIMEOUT, async {
        while agents.join_next().await.is_some() {}
    })
    .await;
    agents.shutdown().await;
    // Let the hub see the streams close, so its shutdown ends none of them
    // (which it would log as a warning).
    let _ = tokio::time::timeout(AGENT_STOP_TIMEOUT, async {
        while hub.index.clusters().iter().any(|c| c.connected) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if let Err(e) = hub.shutdown().await {
        tracing::warn!("hub shutdown: {e}");
    }
    drop(root);
    result
}

fn bind_hint(e: ServeError) -> DemoError {
    match e {
        ServeError::Bind { .. } => DemoError::Bind(e),
        e => DemoError::Hub(e),
    }
}

/// Which clusters report each `(namespace, name)` once all have reported.
fn expected(clusters: &[SimCluster]) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut want: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
    for c in clusters {
        for gw in c.gateways() {
            want.entry((cluster::NAMESPACE.to_owned(), gw.to_owned()))
                .or_default()
                .insert(c.name.clone());
        }
    }
    want
}

/// Whether every cluster's report of every Gateway is in the aggregate.
fn complete(
    seen: &BTreeMap<(String, String), v1::AggregatedGateway>,
    want: &BTreeMap<(String, String), BTreeSet<String>>,
) -> bool {
    seen.len() == want.len()
        && want.iter().all(|(key, clusters)| {
            seen.get(key).is_some_and(|g| {
                g.clusters.iter().cloned().collect::<BTreeSet<_>>() == *clusters
                    && crate::ctl::condition(g, OWN_CONDITION).is_some()
            })
        })
}

/// Subscribes to the Dashboard and either prints the complete aggregate
/// (`--once`) or the live view while the timer injects changes.
async fn watch(
    config: &DemoConfig,
    hub: &Hub,
    clusters: &mut [SimCluster],
    out: &mut dyn Write,
    stop: impl Future<Output = ()>,
) -> Result<String, DemoError> {
    let dashboard = format!("http://{}", hub.dashboard_addr);
    let mut client = match DashboardClient::connect(dashboard.clone()).await {
        Ok(c) => c,
        Err(source) => return Err(DemoError::Dashboard { dashboard, source }),
    };
    let mut stream = client
        .watch_gateways(v1::WatchGatewaysRequest::default())
        .await
        .map_err(DemoError::call("WatchGateways"))?
        .into_inner();
    let want = expected(clusters);
    let mut seen = BTreeMap::new();
    let mut dns = hub.dns_view.subscribe();

    tokio::pin!(stop);
    if config.once {
        return once(&mut stream, &want, &mut seen, stop.as_mut()).await;
    }

    let mut screen = Screen::new(config.color);
    let names: Vec<_> = clusters.iter().map(|c| c.name.as_str()).collect();
    if write(out, &banner(config, hub, &names)).is_err() {
        return Ok(String::new());
    }
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + config.interval,
        config.interval,
    );
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let deadline = async {
        match config.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut step = 0usize;
    loop {
        // Stop and deadline first: a busy watch never delays the exit.
        let text = tokio::select! {
            biased;
            _ = &mut stop => break,
            _ = &mut deadline => break,
            _ = ticker.tick() => {
                let c = &mut clusters[step % clusters.len()];
                step += 1;
                let what = c.toggle();
                c.write()?;
                screen.event(&what)
            }
            msg = stream.next() => match msg {
                Some(Ok(msg)) => {
                    apply(&mut seen, &msg);
                    screen.update(&msg)
                }
                Some(Err(s)) => return Err(DemoError::call("WatchGateways")(s)),
                None => return Err(DemoError::WatchEnded),
            },
            // The records it would publish changed: read them as any
            // client would.
            r = dns.changed() => {
                if r.is_err() {
                    break;
                }
                let names = client
                    .list_dns_names(v1::ListDnsNamesRequest::default())
                    .await
                    .map_err(DemoError::call("ListDnsNames"))?
                    .into_inner()
                    .names;
                screen.dns(&names)
            }
        };
        // A closed stdout (`| head`) ends the demo like Ctrl-C.
        if write(out, &text).is_err() {
            break;
        }
    }
    Ok(String::new())
}

/// `--once`: waits (up to [`ONCE_TIMEOUT`]) until the Dashboard shows
/// every simulated Gateway aggregated from all its clusters, and renders
/// that aggregate; empty when stopped first.
async fn once(
    stream: &mut tonic::Streaming<v1::WatchGatewaysResponse>,
    want: &BTreeMap<(String, String), BTreeSet<String>>,
    seen: &mut BTreeMap<(String, String), v1::AggregatedGateway>,
    stop: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<String, DemoError> {
    let complete_aggregate = tokio::time::timeout(ONCE_TIMEOUT, async {
        while let Some(msg) = stream.next().await {
            let msg = msg.map_err(DemoError::call("WatchGateways"))?;
            apply(seen, &msg);
            if complete(seen, want) {
                return Ok(());
            }
        }
        Err(DemoError::WatchEndedEarly)
    });
    let done = tokio::select! {
        _ = stop => return Ok(String::new()),
        done = complete_aggregate => done,
    };
    match done {
        Ok(Ok(())) => Ok(render_list(
            seen.values().map(crate::ctl::gateway_json).collect(),
            OutputFormat::Yaml,
        )),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(DemoError::Incomplete {
            within: ONCE_TIMEOUT,
            have: format!(
                "{:?}",
                seen.values()
                    .map(|g| (&g.name, &g.clusters))
                    .collect::<Vec<_>>()
            ),
        }),
    }
}

fn apply(
    seen: &mut BTreeMap<(String, String), v1::AggregatedGateway>,
    msg: &v1::WatchGatewaysResponse,
) {
    for g in &msg.upserted {
        seen.insert((g.namespace.clone(), g.name.clone()), g.clone());
    }
    for d in &msg.deleted {
        seen.remove(&(d.namespace.clone(), d.name.clone()));
    }
}

fn write(out: &mut dyn Write, text: &str) -> std::io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn banner(config: &DemoConfig, hub: &Hub, names: &[&str]) -> String {
    let dash = hub.dashboard_addr;
    let ctl = format!("cargo run --release --bin gwhubctl -- --server http://{dash}");
    let until = match config.duration {
        Some(d) => format!("for {}", humantime::format_duration(d)),
        None => "until Ctrl-C".to_owned(),
    };
    format!(
        "gwhub demo: a hub and {n} simulated clusters ({clusters}) over loopback gRPC, no Kubernetes.\n\
         \x20 agents stream to   http://{ingest}\n\
         \x20 Dashboard API      http://{dash} (gwhub.v1.Dashboard, health, reflection)\n\
         {web}\
         Try in another terminal:\n\
         \x20 {ctl} get gateways -o wide\n\
         \x20 {ctl} describe gateway {ns}/{gw}\n\
         \x20 {ctl} get clusters\n\
         \x20 {ctl} get dns   (fleet DNS under {zone}, a dry run: what the hub would publish)\n\
         \x20 {ctl} dns plan\n\
         \x20 grpcurl -plaintext {dash} gwhub.v1.Dashboard/ListGateways\n\
         Every {every} one cluster changes (* lines); rows show the aggregate as the hub publishes it. Running {until}.\n\n",
        n = names.len(),
        clusters = names.join(", "),
        ingest = hub.ingest_addr,
        web = match hub.web_addr {
            Some(a) =>
                format!("  Web page           http://{a}/ (live status page, for a browser)\n"),
            None => String::new(),
        },
        ns = cluster::NAMESPACE,
        zone = DNS_ZONE,
        gw = cluster::DEFAULT_GATEWAY,
        every = humantime::format_duration(config.interval),
    )
}
