//! `gwhub-agent run`: the long-running agent (spec §6). Without
//! `--from-dir` it watches the cluster's API server ([`gwhub_agent::controller`]);
//! with it, a directory of manifests stands in for the API server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::agent::ScopeArgs;
use gwhub_agent::runtime::dir_source::{DEFAULT_POLL, DirSource, engine_evaluate};
use gwhub_agent::runtime::hub_client::HubConfig;
use gwhub_agent::runtime::join;
use gwhub_agent::runtime::{GatewayStore, StartError};

/// `gwhub-agent run --hub URL (--insecure --cluster NAME | --tls-cert P
/// --tls-key P --ca P) --from-dir DIR`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
The hub connection is authenticated with mTLS (--tls-cert, --tls-key, --ca), \
where the cluster name comes from the client certificate, or explicitly \
unauthenticated with --insecure, where --cluster names it. With neither, the \
agent refuses to start.

Logging: RUST_LOG (e.g. RUST_LOG=debug), default info, to stderr.")]
pub struct RunArgs {
    /// URL of the hub's agent endpoint, e.g. `https://hub.example:7443`.
    #[arg(long, value_name = "URL")]
    pub hub: String,
    /// The cluster this agent reports for (required with --insecure; with
    /// mTLS the client certificate names it, and this must match if given).
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Connect without TLS and without client authentication (development
    /// only: anyone who reaches the hub can report for any cluster).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "ca"])]
    pub insecure: bool,
    /// Client certificate (PEM) for mTLS; the TLS files are read again at
    /// every (re)connect, so a renewed certificate needs no restart.
    #[arg(long, value_name = "PATH", requires_all = ["tls_key", "ca"])]
    pub tls_cert: Option<PathBuf>,
    /// Client private key (PEM) for mTLS.
    #[arg(long, value_name = "PATH", requires_all = ["tls_cert", "ca"])]
    pub tls_key: Option<PathBuf>,
    /// CA bundle (PEM) that signed the hub's certificate.
    #[arg(long, value_name = "PATH", requires_all = ["tls_cert", "tls_key"])]
    pub ca: Option<PathBuf>,
    /// Join the hub with this one-time token (`gwhubctl join create`) when
    /// the cluster has no identity yet (Secret gwhub-agent-identity in
    /// --identity-namespace); a restarted agent uses the stored identity.
    /// Needs --hub-ca-hash and --cluster.
    #[arg(long, value_name = "PATH", requires_all = ["hub_ca_hash", "cluster"],
          conflicts_with_all = ["insecure", "tls_cert", "from_dir"])]
    pub join_token_file: Option<PathBuf>,
    /// The hub CA's pin printed by `gwhubctl join create`: the hub is
    /// trusted only if its chain holds a CA with this public-key hash.
    /// Without --join-token-file the agent joins without a token: the hub
    /// records its request and it waits (retrying) until an operator runs
    /// `kubectl certificate approve`. Needs --cluster.
    #[arg(long, value_name = "sha256:HEX", requires = "cluster",
          conflicts_with_all = ["insecure", "tls_cert", "from_dir"])]
    pub hub_ca_hash: Option<String>,
    /// Where the agent keeps its identity (its own namespace).
    #[arg(
        long,
        value_name = "NS",
        env = "POD_NAMESPACE",
        default_value = "gwhub-system"
    )]
    pub identity_namespace: String,
    /// Read the cluster's objects from this directory's manifests (YAML,
    /// JSON, `kind: List`) instead of an API server, following changes.
    #[arg(long, value_name = "DIR", conflicts_with = "kubeconfig")]
    pub from_dir: Option<PathBuf>,
    /// Kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, then
    /// the in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Write our conditions to the local Gateways' status: `auto` writes a
    /// condition type only while no other field manager writes it (so where
    /// the ingress operator writes them, from OpenShift 4.22, the agent only
    /// streams), `true` always, `false` never (compute and stream only).
    #[arg(long, value_name = "auto|true|false", default_value = "auto")]
    pub write_local_status: gwhub_spoke_rules::ownership::WriteMode,
    /// Evaluation passes per second for all of the cluster's Gateways
    /// together, each at most one status write and one change streamed to
    /// the hub (a pass that changes nothing costs nothing). Gateways over
    /// the budget wait their turn, changes to a waiting one coalesce. 0: no
    /// limit.
    #[arg(long, value_name = "QPS", default_value_t = gwhub_common::fair_pace::DEFAULT_QPS, value_parser = crate::hub::serve::parse_qps, conflicts_with = "from_dir")]
    pub kube_api_qps: f64,
    /// Passes that may go at once before --kube-api-qps applies.
    #[arg(long, value_name = "N", default_value_t = gwhub_common::fair_pace::DEFAULT_BURST, value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "from_dir")]
    pub kube_api_burst: u32,
    /// Serve Prometheus metrics on this address (`GET /metrics`), e.g.
    /// 127.0.0.1:9090, with the probes `GET /healthz` (liveness) and `GET
    /// /readyz` (ready once the cluster's objects are listed and evaluated).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Export traces (a span per reconcile and per report to the hub, which
    /// the hub continues) to this OpenTelemetry collector, OTLP over gRPC,
    /// e.g. http://otel-collector:4317 (off unless given).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Send a heartbeat after this long without other traffic.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = gwhub_model::time::parse_duration)]
    pub heartbeat: Duration,
    /// How often --from-dir looks for changed files.
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = gwhub_model::time::parse_duration)]
    pub poll_interval: Duration,
}

/// A validated `run` command line, ready to start.
#[derive(Debug)]
pub struct Plan {
    pub hub: HubConfig,
    pub source: Source,
    pub metrics_listen: Option<SocketAddr>,
}

/// Where the cluster's objects come from.
#[derive(Debug)]
pub enum Source {
    /// `--from-dir DIR`.
    Dir(DirSource),
    /// The API server of `kubeconfig` (or the inferred one).
    Kube {
        kubeconfig: Option<PathBuf>,
        settings: gwhub_agent::controller::Settings,
    },
}

/// Checks the flags; every error says what to do instead.
pub fn plan(args: &RunArgs) -> Result<Plan, StartError> {
    let (cluster, tls) = gwhub_agent::runtime::tls::hub_connection(
        &args.hub,
        args.insecure,
        args.cluster.as_deref(),
        args.tls_cert.as_deref(),
        args.tls_key.as_deref(),
        args.ca.as_deref(),
    )?;
    let source = match &args.from_dir {
        Some(dir) => Source::Dir(
            DirSource::new(dir, engine_evaluate(args.scope.options()))?.poll_interval(
                if args.poll_interval.is_zero() {
                    DEFAULT_POLL
                } else {
                    args.poll_interval
                },
            ),
        ),
        None => {
            let mut settings = gwhub_agent::controller::Settings::new(args.scope.options());
            settings.write_local_status = args.write_local_status;
            settings.api_qps = args.kube_api_qps;
            settings.api_burst = args.kube_api_burst;
            Source::Kube {
                kubeconfig: args.kubeconfig.clone(),
                settings,
            }
        }
    };
    let mut hub = HubConfig::new(args.hub.clone(), cluster);
    if let Some((config, files)) = tls {
        hub.tls = Some(config);
        hub.tls_files = Some(files);
    }
    hub.heartbeat = args.heartbeat.max(Duration::from_millis(10));
    Ok(Plan {
        hub,
        source,
        metrics_listen: args.metrics_listen,
    })
}

/// What joining needs, when the flags ask for a join (`--hub-ca-hash`,
/// which clap lets through only with `--cluster`).
fn join_plan(args: &RunArgs) -> Option<join::JoinPlan> {
    let (pin, cluster) = (args.hub_ca_hash.as_ref()?, args.cluster.as_ref()?);
    Some(join::JoinPlan {
        hub: args.hub.clone(),
        cluster: cluster.clone(),
        token_file: args.join_token_file.clone(),
        pin: pin.clone(),
        namespace: args.identity_namespace.clone(),
        kubeconfig: args.kubeconfig.clone(),
    })
}

/// Runs the command until SIGINT or SIGTERM.
pub fn run(args: &RunArgs) -> Result<(), StartError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(StartError::AsyncRuntime)?;
    // Declared after the runtime, so dropped (flushing spans) before it;
    // set up before a join, so the join logs too.
    let _otlp = runtime.block_on(async {
        gwhub_common::logging::init_with_otlp("info", "gwhub-agent", args.otlp_endpoint.as_deref())
    })?;
    let mut args = args.clone();
    let mut renewal = None;
    if let Some(joining) = join_plan(&args) {
        let files = join::obtain(&joining)?;
        args.tls_cert = Some(files.cert.clone());
        args.tls_key = Some(files.key.clone());
        args.ca = Some(files.ca.clone());
        renewal = Some((joining, files));
    }
    let args = &args;
    let plan = plan(args)?;
    if plan.hub.tls.is_none() {
        tracing::warn!(
            "--insecure: the hub connection is neither encrypted nor authenticated; \
             use mTLS outside development"
        );
    }
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutting down");
            on_signal.cancel();
        });
        // `renewal` lives to the end of this block: its files' directory
        // is removed when the agent stops, not when the renewal loop does.
        if let Some((joining, files)) = &renewal {
            tokio::spawn(join::renew_loop(
                joining.clone(),
                files.clone(),
                shutdown.clone(),
            ));
        }
        let metrics = Arc::new(gwhub_agent::controller::Metrics::default());
        let mut plan = plan;
        if let Some(files) = plan.hub.tls_files.as_mut() {
            // The certificate's expiry, set at each (re)load of the files.
            let expiry = metrics.certificate_expiry.clone();
            expiry.set(files.expiry.get());
            files.expiry = expiry;
        }
        let store = Arc::new(GatewayStore::default());
        if let Some(addr) = plan.metrics_listen {
            let probes = gwhub_agent::runtime::probes(store.clone(), shutdown.clone());
            gwhub_agent::controller::serve_metrics(addr, metrics.clone(), probes, shutdown.clone())
                .await?;
        }
        match plan.source {
            Source::Dir(source) => {
                tracing::info!(
                    cluster = %plan.hub.cluster,
                    hub = %plan.hub.endpoint,
                    dir = %source.dir().display(),
                    "gwhub-agent starting"
                );
                gwhub_agent::runtime::run_dir_agent_with(plan.hub, source, store, shutdown).await;
            }
            Source::Kube {
                kubeconfig,
                settings,
            } => {
                let client = gwhub_agent::controller::client(kubeconfig.as_deref()).await?;
                tracing::info!(
                    cluster = %plan.hub.cluster,
                    hub = %plan.hub.endpoint,
                    namespace = %settings.scope.namespace,
                    write_local_status = %settings.write_local_status,
                    "gwhub-agent starting against the Kubernetes API"
                );
                gwhub_agent::controller::run_kube_agent(
                    plan.hub, client, settings, store, metrics, shutdown,
                )
                .await;
            }
        }
        Ok::<(), StartError>(())
    })
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, String> {
        T::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .map(|t| t.run)
            .map_err(|e| e.to_string())
    }

    fn plan_of(args: &[&str]) -> Result<Plan, String> {
        plan(&parse(args)?).map_err(|e| e.to_string())
    }

    #[test]
    fn refuses_without_tls_or_insecure() {
        let e = plan_of(&[
            "--hub",
            "http://h:1",
            "--cluster",
            "c",
            "--from-dir",
            "/tmp",
        ])
        .unwrap_err();
        assert!(e.starts_with("refusing to start: no TLS material"), "{e}");
        assert!(e.contains("--insecure"), "{e}");
    }

    #[test]
    fn insecure_needs_a_cluster() {
        let e = plan_of(&["--hub", "http://h:1", "--insecure", "--from-dir", "/tmp"]).unwrap_err();
        assert!(e.contains("--cluster NAME is required"), "{e}");
        let e = plan_of(&[
            "--hub",
            "http://h:1",
            "--insecure",
            "--cluster",
            " ",
            "--from-dir",
            "/tmp",
        ])
        .unwrap_err();
        assert!(e.contains("--cluster NAME is required"), "{e}");
    }

    #[test]
    fn kubernetes_mode_without_from_dir() {
        let p = plan_of(&["--hub", "http://h:1", "--insecure", "--cluster", "c"]).unwrap();
        let Source::Kube {
            kubeconfig,
            settings,
        } = p.source
        else {
            panic!("expected the Kubernetes mode");
        };
        assert_eq!(kubeconfig, None);
        assert_eq!(
            settings.write_local_status,
            gwhub_spoke_rules::ownership::WriteMode::Auto
        );
        assert_eq!(settings.api_qps, gwhub_common::fair_pace::DEFAULT_QPS);
        assert_eq!(settings.api_burst, gwhub_common::fair_pace::DEFAULT_BURST);
        let budget = |qps: &str, burst: &str| {
            plan_of(&[
                "--hub",
                "http://h:1",
                "--insecure",
                "--cluster",
                "c",
                &format!("--kube-api-qps={qps}"),
                &format!("--kube-api-burst={burst}"),
            ])
        };
        let Source::Kube { settings, .. } = budget("0", "5").unwrap().source else {
            panic!("expected the Kubernetes mode");
        };
        assert_eq!((settings.api_qps, settings.api_burst), (0.0, 5));
        let e = budget("-1", "5").unwrap_err();
        assert!(e.contains("0 or more"), "{e}");
        let e = budget("5", "0").unwrap_err();
        assert!(e.contains("--kube-api-burst"), "{e}");
        let p = plan_of(&[
            "--hub",
            "http://h:1",
            "--insecure",
            "--cluster",
            "c",
            "--kubeconfig",
            "/k",
            "--write-local-status=false",
            "--metrics-listen",
            "127.0.0.1:9090",
        ])
        .unwrap();
        assert!(matches!(
            p.source,
            Source::Kube { ref kubeconfig, ref settings }
                if kubeconfig.as_deref() == Some(std::path::Path::new("/k")) && settings.write_local_status == gwhub_spoke_rules::ownership::WriteMode::Never
        ));
        assert_eq!(p.metrics_listen, Some("127.0.0.1:9090".parse().unwrap()));
        let e = parse(&[
            "--hub",
            "http://h:1",
            "--from-dir",
            "/tmp",
            "--kubeconfig",
            "/k",
        ])
        .unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }

    #[test]
    fn tls_files_are_read_at_start() {
        let e = plan_of(&[
            "--hub",
            "https://h:1",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--ca",
            "ca.pem",
            "--from-dir",
            "/tmp",
        ])
        .unwrap_err();
        assert!(e.starts_with("--tls-cert c.pem: "), "{e}");
        let e = parse(&["--hub", "http://h:1", "--insecure", "--tls-cert", "c.pem"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }

    #[test]
    fn bad_directory_and_url() {
        let e = plan_of(&[
            "--hub",
            "http://h:1",
            "--insecure",
            "--cluster",
            "c",
            "--from-dir",
            "/nonexistent/gwhub",
        ])
        .unwrap_err();
        assert!(e.starts_with("--from-dir: /nonexistent/gwhub: "), "{e}");
        let e = plan_of(&[
            "--hub",
            "h:1",
            "--insecure",
            "--cluster",
            "c",
            "--from-dir",
            "/tmp",
        ])
        .unwrap_err();
        assert!(e.starts_with("--hub \"h:1\""), "{e}");
    }

    #[test]
    fn a_join_needs_the_pin_and_the_cluster() {
        let p = join_plan(
            &parse(&[
                "--hub",
                "https://h:1",
                "--cluster",
                "east",
                "--hub-ca-hash",
                "sha256:00",
                "--join-token-file",
                "/t",
                "--identity-namespace",
                "ns",
            ])
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (p.hub.as_str(), p.cluster.as_str()),
            ("https://h:1", "east")
        );
        assert_eq!(p.token_file.as_deref(), Some(std::path::Path::new("/t")));
        assert_eq!((p.pin.as_str(), p.namespace.as_str()), ("sha256:00", "ns"));
        let tokenless = parse(&[
            "--hub",
            "https://h:1",
            "--cluster",
            "c",
            "--hub-ca-hash",
            "x",
        ]);
        assert_eq!(join_plan(&tokenless.unwrap()).unwrap().token_file, None);
        let e = parse(&["--hub", "https://h:1", "--hub-ca-hash", "x"]).unwrap_err();
        assert!(e.contains("--cluster"), "{e}");
        let insecure = parse(&["--hub", "http://h:1", "--insecure", "--cluster", "c"]);
        assert!(join_plan(&insecure.unwrap()).is_none());
    }

    #[test]
    fn good_flags() {
        let p = plan_of(&[
            "--hub",
            "http://127.0.0.1:7443",
            "--insecure",
            "--cluster",
            "east",
            "--from-dir",
            "/tmp",
            "--heartbeat",
            "250ms",
        ])
        .unwrap();
        assert_eq!(p.hub.cluster, "east");
        assert_eq!(p.hub.heartbeat, Duration::from_millis(250));
    }
}
