//! `gwhub serve`: flag checks, logging, and a runtime around
//! [`gwhub_hub::serve::Hub`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use gwhub_hub::serve::{Hub, HubConfig, shutdown_signal};
use gwhub_hub_rules::aggregate::Options;

/// Where `gwhub serve` listens for agents by default (the manifests' port).
pub(crate) const DEFAULT_LISTEN: &str = "0.0.0.0:7443";
/// Where `gwhub serve` serves the Dashboard by default (the manifests' port).
pub(crate) const DEFAULT_DASHBOARD_LISTEN: &str = "0.0.0.0:7444";
/// `gwhubctl --server`'s default: that Dashboard on this host.
pub(crate) const DEFAULT_DASHBOARD_SERVER: &str = "http://127.0.0.1:7444";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address agents connect to (gwhub.v1.Ingest).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Address of the read-only Dashboard API (gwhub.v1.Dashboard).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_DASHBOARD_LISTEN)]
    pub dashboard_listen: SocketAddr,
    /// Keep reports in memory instead of on the management cluster.
    #[arg(long)]
    pub no_kube: bool,
    /// Kubeconfig of the management cluster (default: KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "PATH", conflicts_with = "no_kube")]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the hub's ClusterReports and leader Lease (its own).
    #[arg(
        long,
        value_name = "NS",
        env = "POD_NAMESPACE",
        default_value = "gwhub-system"
    )]
    pub namespace: String,
    /// Manage only the hub Gateways in this namespace (default: all).
    #[arg(long, value_name = "NS", conflicts_with = "no_kube")]
    pub gateway_namespace: Option<String>,
    /// The fleet inventory: the SIG-Multicluster ClusterProfiles
    /// (multicluster.x-k8s.io) in this namespace name the clusters (an agent
    /// outside it is refused; deleting one removes its cluster), and hub
    /// Gateways annotated gwhub.io/expected-clusters expect them.
    #[arg(long, value_name = "NS", conflicts_with = "no_kube")]
    pub inventory_namespace: Option<String>,
    /// What happens to an agent outside the inventory: enforce (refused,
    /// PERMISSION_DENIED) or observe (admitted and flagged).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "enforce",
        requires = "inventory_namespace"
    )]
    pub inventory_mode: gwhub_hub_rules::inventory::Mode,
    /// Write without a leader Lease: for exactly one replica.
    #[arg(long, conflicts_with = "no_kube")]
    pub no_leader_election: bool,
    /// How long the leader's Lease lasts unrenewed: a killed leader's
    /// successor writes status after at most this (renewed every third of
    /// it). Whole seconds, at least 3s; shorter means more API writes.
    #[arg(
        long,
        value_name = "DUR",
        default_value = "15s",
        value_parser = parse_lease_duration,
        conflicts_with_all = ["no_kube", "no_leader_election"]
    )]
    pub lease_duration: Duration,
    /// Spread hub Gateway status writing over the replicas: the hub
    /// Gateways fall into N shards (by a hash of namespace/name), each with
    /// Lease `gwhub-shard-<i>`, and every replica holds a fair share of them.
    /// 0: the leader writes every hub Gateway.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        value_parser = clap::value_parser!(u32).range(0..=1024),
        conflicts_with_all = ["no_kube", "no_leader_election"]
    )]
    pub status_shards: u32,
    /// Writes per second to the management cluster's API server, all of the
    /// hub's writers together (hub Gateway status, ClusterReports); writes
    /// waiting for the budget coalesce to each object's latest state. 0: no
    /// limit.
    #[arg(long, value_name = "QPS", default_value_t = gwhub_k8s::budget::DEFAULT_QPS, value_parser = parse_qps, conflicts_with = "no_kube")]
    pub kube_api_qps: f64,
    /// Writes that may go at once before --kube-api-qps applies.
    #[arg(long, value_name = "N", default_value_t = gwhub_k8s::budget::DEFAULT_BURST, value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "no_kube")]
    pub kube_api_burst: u32,
    /// Accept plaintext agents whose Hello names their cluster (development only).
    #[arg(long)]
    pub insecure: bool,
    /// A cluster with no report or heartbeat for this long is stale (e.g. 60s, 2m).
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = gwhub_model::time::parse_duration)]
    pub stale_after: Duration,
    /// Messages per second one agent stream may send (bursts of one second's
    /// worth); a faster stream is ended with RESOURCE_EXHAUSTED. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = gwhub_api::grpc::ingest::DEFAULT_MAX_MESSAGES_PER_SECOND)]
    pub max_messages_per_second: u32,
    /// Server certificate (PEM) for mTLS; the TLS files are re-read when
    /// they change (checked every 2 s), no restart needed. Without
    /// --tls-cert, --tls-key and --insecure, in Kubernetes mode the hub
    /// serves with Secret gwhub-serving and trusts agents signed by Secret
    /// gwhub-ca (both in --namespace), making them when absent.
    #[arg(long, value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,
    /// Server private key (PEM) for mTLS.
    #[arg(long, value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) that signs agents' client certificates (with the Secrets:
    /// trusted besides gwhub-ca).
    #[arg(long, value_name = "PATH")]
    pub client_ca: Option<PathBuf>,
    /// A DNS name or IP address of the serving certificate the hub makes
    /// in Secret gwhub-serving (repeatable; default: the Service's names
    /// gwhub.<namespace>.svc, gwhub.<namespace>.svc.cluster.local, gwhub).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["no_kube", "insecure", "tls_cert"])]
    pub hub_san: Vec<String>,
    /// Lifetime of the serving certificate the hub makes; the leader renews
    /// it at 2/3 of it.
    #[arg(long, value_name = "DUR", default_value = "90d", value_parser = parse_cert_lifetime,
          conflicts_with_all = ["no_kube", "insecure", "tls_cert"])]
    pub serving_cert_lifetime: Duration,
    /// Lifetime of the agent certificates the hub signs when a cluster
    /// joins (agents renew at 2/3 of it).
    #[arg(long, value_name = "DUR", default_value = "30d", value_parser = parse_cert_lifetime,
          conflicts_with_all = ["no_kube", "insecure", "tls_cert"])]
    pub agent_cert_lifetime: Duration,
    /// Require Dashboard clients to present a certificate signed by this CA (PEM).
    #[arg(long, value_name = "PATH", conflicts_with = "insecure")]
    pub dashboard_client_ca: Option<PathBuf>,
    /// Require `authorization: Bearer <token>` on Dashboard calls; the file holds the token.
    #[arg(long, value_name = "PATH", conflicts_with = "insecure")]
    pub dashboard_token_file: Option<PathBuf>,
    /// Who may read the Dashboard and the web page: `kubernetes` (a
    /// Kubernetes bearer token, reviewed with TokenReview; each reader sees
    /// the namespaces where RBAC lets them get
    /// gateways.gateway.networking.k8s.io, and the cluster list only
    /// cluster-wide), `token` (the shared token of --dashboard-token-file)
    /// or `none`. Default: `token` with --dashboard-token-file, else `none`.
    /// --dashboard-client-ca applies in every mode.
    #[arg(long, value_enum, value_name = "MODE")]
    pub dashboard_auth: Option<DashboardAuthMode>,
    /// Serve Prometheus text on GET /metrics here, with the probes GET
    /// /healthz (liveness) and GET /readyz (ready once the stored reports
    /// and hub Gateways are loaded) (off unless given).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Export traces (spans of each agent change's delta apply, aggregation
    /// and status write) to this OpenTelemetry collector, OTLP over gRPC,
    /// e.g. http://otel-collector:4317 (off unless given).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Serve the read-only web status page here (off unless given). It
    /// takes the Dashboard's TLS, client CA and connection budgets; with
    /// --dashboard-token-file its data needs the token (`Authorization:
    /// Bearer <token>` or the cookie gwhub_token, which the page sets).
    #[arg(long, value_name = "ADDR")]
    pub web_listen: Option<SocketAddr>,
    /// A name the web page answers to (repeatable). Besides these it
    /// answers only to loopback names and IP addresses, refusing other
    /// `Host`s with 421 (a defence against DNS rebinding).
    #[arg(long = "web-host", value_name = "NAME", value_parser = gwhub_hub_rules::web_host::parse_name)]
    pub web_hosts: Vec<String>,
    /// Status transitions kept in memory per hub Gateway for
    /// GetGatewayHistory (0 to 1024; 0 keeps none).
    #[arg(long, value_name = "N", default_value_t = gwhub_hub_rules::history::DEFAULT_CAPACITY,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=gwhub_hub_rules::history::MAX_CAPACITY as u64))]
    pub gateway_history: usize,
    #[command(flatten)]
    pub budgets: super::budget_args::BudgetArgs,
    #[command(flatten)]
    pub dns: super::dns_flags::DnsArgs,
    /// Address type written for cluster Hostname addresses.
    #[arg(long, value_name = "TYPE", default_value = gwhub_hub_rules::aggregate::HOSTNAME_ADDRESS_TYPE)]
    pub hostname_address_type: String,
}

/// `--dashboard-auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DashboardAuthMode {
    /// Anyone who reaches the Dashboard reads everything.
    None,
    /// The bearer token of --dashboard-token-file.
    Token,
    /// Kubernetes tokens and RBAC on the management cluster.
    Kubernetes,
}

/// Why `gwhub serve` will not start or stopped, as printed: each names
/// the flag, file or listener it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ServeCmdError {
    #[error(
        "refusing to start: no TLS material (--tls-cert, --tls-key, --client-ca) and no --insecure; \
         without either, any agent could report for any cluster. Pass --insecure to accept plaintext agents \
         that name their cluster in Hello (development only); without --no-kube the hub uses its Secrets \
         gwhub-ca and gwhub-serving"
    )]
    NoTls,
    #[error("--insecure cannot be combined with --tls-cert, --tls-key or --client-ca")]
    InsecureWithTls,
    #[error(transparent)]
    HostnameAddressType(#[from] gwhub_hub_rules::aggregate::AggregateError),
    #[error(transparent)]
    DashboardAuth(#[from] DashboardAuthError),
    #[error("--web-host: {0}")]
    WebHost(#[source] gwhub_hub_rules::web_host::BadWebHost),
    #[error("refusing to start: {0}")]
    Dns(#[source] gwhub_dns::DnsConfigError),
    #[error(transparent)]
    Tls(#[from] gwhub_identity::tls::TlsError),
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Logging(#[from] gwhub_common::logging::OtlpError),
    #[error(transparent)]
    Kube(Box<gwhub_k8s::KubeError>),
    #[error(transparent)]
    Serve(#[from] gwhub_hub::serve::ServeError),
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl From<gwhub_k8s::KubeError> for ServeCmdError {
    fn from(e: gwhub_k8s::KubeError) -> Self {
        ServeCmdError::Kube(Box::new(e))
    }
}

impl From<gwhub_hub::kube_hub::HubError> for ServeCmdError {
    fn from(e: gwhub_hub::kube_hub::HubError) -> Self {
        match e {
            gwhub_hub::kube_hub::HubError::Kube(e) => e.into(),
            gwhub_hub::kube_hub::HubError::Serve(e) => e.into(),
            gwhub_hub::kube_hub::HubError::Admin { addr, source } => {
                ServeCmdError::Metrics { addr, source }
            }
        }
    }
}

/// `--dashboard-auth` and `--dashboard-token-file` that disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DashboardAuthError {
    #[error("--dashboard-auth=token needs --dashboard-token-file (the token)")]
    TokenWithoutFile,
    #[error(
        "--dashboard-token-file is the token of --dashboard-auth=token, not of --dashboard-auth={0}"
    )]
    FileWithoutToken(&'static str),
    #[error(
        "--dashboard-auth=kubernetes asks the management cluster who readers are: it cannot be combined with --no-kube"
    )]
    KubernetesWithoutKube,
}

/// The mode `args` ask for, or why the flags disagree.
pub(crate) fn dashboard_auth(args: &Args) -> Result<DashboardAuthMode, DashboardAuthError> {
    use DashboardAuthMode as M;
    let file = args.dashboard_token_file.is_some();
    match (args.dashboard_auth, file) {
        (None, true) | (Some(M::Token), true) => Ok(M::Token),
        (None, false) | (Some(M::None), false) => Ok(M::None),
        (Some(M::Token), false) => Err(DashboardAuthError::TokenWithoutFile),
        (Some(m), true) => Err(DashboardAuthError::FileWithoutToken(if m == M::None {
            "none"
        } else {
            "kubernetes"
        })),
        (Some(M::Kubernetes), false) if args.no_kube => {
            Err(DashboardAuthError::KubernetesWithoutKube)
        }
        (Some(M::Kubernetes), false) => Ok(M::Kubernetes),
    }
}

/// A `--kube-api-qps` (hub or agent) that is not a rate: negative, or not a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: must be a number of writes per second, 0 or more (0: no limit)")]
pub(crate) struct BadQps(String);

pub(crate) fn parse_qps(s: &str) -> Result<f64, BadQps> {
    match s.parse::<f64>() {
        Ok(q) if q.is_finite() && q >= 0.0 => Ok(q),
        _ => Err(BadQps(s.to_owned())),
    }
}

/// A duration flag of `gwhub serve` that is out of its range.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DurationFlagError {
    #[error(transparent)]
    Parse(#[from] gwhub_model::time::TimeFlagError),
    #[error("{0:?}: must be at least 10s")]
    CertLifetime(String),
    #[error("{0:?}: must be whole seconds, at least 3s")]
    LeaseDuration(String),
}

/// A certificate lifetime: at least 10s (renewed at 2/3 of it).
fn parse_cert_lifetime(s: &str) -> Result<Duration, DurationFlagError> {
    let d = gwhub_model::time::parse_duration(s)?;
    if d < Duration::from_secs(10) {
        return Err(DurationFlagError::CertLifetime(s.to_owned()));
    }
    Ok(d)
}

/// The Lease API counts whole seconds, and a renewal must fit well inside.
fn parse_lease_duration(s: &str) -> Result<Duration, DurationFlagError> {
    let d = gwhub_model::time::parse_duration(s)?;
    if d.subsec_nanos() != 0 || d < Duration::from_secs(3) {
        return Err(DurationFlagError::LeaseDuration(s.to_owned()));
    }
    Ok(d)
}

/// Checks the flags' combination; the error says why the hub will not start.
pub(crate) fn config(args: &Args) -> Result<HubConfig, ServeCmdError> {
    let tls = [&args.tls_cert, &args.tls_key, &args.client_ca];
    let given = tls.iter().filter(|p| p.is_some()).count();
    if given == 0 && !args.insecure && args.no_kube {
        return Err(ServeCmdError::NoTls);
    }
    if given > 0 && args.insecure {
        return Err(ServeCmdError::InsecureWithTls);
    }
    let options = Options::with_hostname_address_type(&args.hostname_address_type)?;
    dashboard_auth(args)?;
    dns_config(args)?;
    Ok(HubConfig {
        listen: args.listen,
        dashboard_listen: args.dashboard_listen,
        insecure: args.insecure,
        stale_after: args.stale_after,
        options,
        max_messages_per_second: args.max_messages_per_second,
        budgets: args.budgets.clone().into(),
        web_listen: args.web_listen,
        web_hosts: gwhub_hub_rules::web_host::WebHosts::new(&args.web_hosts)
            .map_err(ServeCmdError::WebHost)?,
        gateway_history: args.gateway_history,
    })
}

/// Fleet DNS from the `--dns-*` flags; `None`: off.
pub(crate) fn dns_config(args: &Args) -> Result<Option<gwhub_dns::DnsConfig>, ServeCmdError> {
    args.dns
        .flags(args.no_kube)
        .check(&args.namespace, args.stale_after)
        .map_err(ServeCmdError::Dns)
}

/// Fleet DNS for the Kubernetes side, once `config` checked the flags (an
/// error here cannot happen).
fn checked_dns(args: &Args) -> Option<gwhub_dns::DnsConfig> {
    dns_config(args).ok().flatten()
}

/// Whether the hub's TLS comes from its Secrets: Kubernetes mode with
/// neither a serving certificate on disk nor --insecure.
pub(crate) fn uses_secrets(args: &Args) -> bool {
    !args.no_kube && !args.insecure && args.tls_cert.is_none() && args.tls_key.is_none()
}

/// Runs the hub until SIGINT or SIGTERM.
pub(crate) fn run(args: &Args) -> Result<String, ServeCmdError> {
    let config = config(args)?;
    let auth = dashboard_auth(args)?;
    let paths = gwhub_identity::tls::TlsPaths {
        cert: args.tls_cert.as_deref(),
        key: args.tls_key.as_deref(),
        client_ca: args.client_ca.as_deref(),
        dashboard_client_ca: args.dashboard_client_ca.as_deref(),
        dashboard_token_file: args.dashboard_token_file.as_deref(),
    };
    let from_secrets = uses_secrets(args);
    let tls = match from_secrets {
        true => None,
        false => gwhub_identity::tls::HubTls::load(&paths)?,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(ServeCmdError::Runtime)?;
    // Declared after the runtime, so dropped (flushing spans) before it.
    let _otlp = runtime.block_on(async {
        gwhub_common::logging::init_with_otlp("info", "gwhub", args.otlp_endpoint.as_deref())
    })?;
    raise_open_file_limit(&args.budgets);
    if config.insecure {
        warn_insecure(auth);
    }
    runtime.block_on(async {
        if args.no_kube {
            let mut hub = Hub::start_with(config, tls, Default::default()).await?;
            // Checked by `config` before: a dry run from the reports.
            if let Some(dns) = dns_config(args).ok().flatten() {
                hub.start_dns_without_kube(dns);
            }
            if let Some(addr) = args.metrics_listen {
                hub.serve_admin(addr, None)
                    .await
                    .map_err(|source| ServeCmdError::Metrics { addr, source })?;
            }
            return hub
                .run_until(shutdown_signal())
                .await
                .map_err(ServeCmdError::from);
        }
        // Before listening: a hub that cannot reach its store should not serve.
        let mut hub = gwhub_hub::kube_hub::Builder::new(connect_kube(args).await?, config)
            .dns(checked_dns(args));
        hub = match from_secrets {
            true => hub.tls_from_secrets(secrets_config(args), paths),
            false => hub.tls(tls),
        };
        if auth == DashboardAuthMode::Kubernetes {
            hub = hub.kubernetes_readers();
        }
        let kube = hub.admin(args.metrics_listen).start().await?;
        kube.run_until(shutdown_signal())
            .await
            .map_err(ServeCmdError::from)
    })?;
    Ok(String::new())
}

/// What `--insecure` gives up, said at start-up (and, with Kubernetes
/// Dashboard auth, that readers' tokens then cross in plaintext).
fn warn_insecure(auth: DashboardAuthMode) {
    tracing::warn!(
        "--insecure: agents are not authenticated and name their own cluster; use only on a trusted network"
    );
    if auth == DashboardAuthMode::Kubernetes {
        tracing::warn!(
            "--dashboard-auth=kubernetes without TLS: readers' Kubernetes tokens cross the network in plaintext; give the hub --tls-cert, --tls-key and --client-ca"
        );
    }
}

/// The hub's TLS Secrets as the flags name them (`--hub-san`, the
/// serving and agent certificate lifetimes) in `--namespace`.
fn secrets_config(args: &Args) -> gwhub_k8s::tls_secrets::SecretsConfig {
    let mut secrets = gwhub_k8s::tls_secrets::SecretsConfig::new(&args.namespace);
    if !args.hub_san.is_empty() {
        secrets.sans = args.hub_san.clone();
    }
    secrets.serving_lifetime = args.serving_cert_lifetime;
    secrets.agent_lifetime = args.agent_cert_lifetime;
    secrets
}

/// File descriptors the hub needs beside its connections: /metrics
/// scrapes, the Kubernetes client, logs, the runtime.
const FD_HEADROOM: u64 = 128;

/// Every connection is a file descriptor, and the default budgets (4,096
/// agents + 64 Dashboard connections) exceed the common soft limit of 1,024:
/// raise the soft limit as far as the hard limit allows, and say so when
/// even that is too low (the accept loop then backs off at the limit
/// instead of serving every budgeted connection).
fn raise_open_file_limit(budgets: &super::budget_args::BudgetArgs) {
    let need = (budgets.max_connections + budgets.max_dashboard_connections) as u64 + FD_HEADROOM;
    match rlimit::increase_nofile_limit(need) {
        Ok(limit) if limit < need => tracing::warn!(
            limit,
            need,
            "the open-file limit is below --max-connections + --max-dashboard-connections + {FD_HEADROOM}; raise it (ulimit -n) or lower the budgets"
        ),
        Ok(limit) => tracing::debug!(limit, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot read or raise the open-file limit"),
    }
}

/// `gwhub serve`'s Kubernetes side from its flags: the client, and a check
/// that the store is usable, before the hub listens.
async fn connect_kube(args: &Args) -> Result<gwhub_k8s::Connected, gwhub_k8s::KubeError> {
    let client = gwhub_k8s::client(args.kubeconfig.as_deref()).await?;
    let mut options = gwhub_k8s::KubeOptions::new(args.namespace.clone());
    options.gateway_namespace = args.gateway_namespace.clone();
    if args.no_leader_election {
        options.lease = None;
    }
    if let Some(lease) = options.lease.as_mut() {
        lease.set_duration(args.lease_duration);
    }
    options.status_shards = args.status_shards;
    options.api_qps = args.kube_api_qps;
    options.api_burst = args.kube_api_burst;
    options.inventory = args
        .inventory_namespace
        .clone()
        .map(|ns| (ns, args.inventory_mode));
    gwhub_k8s::Connected::new(client, options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--dashboard-auth` defaults to today's behaviour and refuses
    /// combinations that would not mean what they say.
    #[test]
    fn dashboard_auth_modes() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            args: Args,
        }
        let mode = |flags: &[&str]| {
            let t =
                T::try_parse_from(std::iter::once("serve").chain(flags.iter().copied())).unwrap();
            dashboard_auth(&t.args)
        };
        use DashboardAuthMode as M;
        assert_eq!(mode(&[]), Ok(M::None));
        assert_eq!(mode(&["--dashboard-token-file", "t"]), Ok(M::Token));
        assert_eq!(mode(&["--dashboard-auth", "kubernetes"]), Ok(M::Kubernetes));
        assert_eq!(mode(&["--dashboard-auth", "none"]), Ok(M::None));
        let e = mode(&["--dashboard-auth", "token"]).unwrap_err();
        assert!(e.to_string().contains("--dashboard-token-file"), "{e}");
        let e = mode(&[
            "--dashboard-auth",
            "kubernetes",
            "--dashboard-token-file",
            "t",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("--dashboard-auth=kubernetes"), "{e}");
        let e = mode(&["--dashboard-auth", "kubernetes", "--no-kube"]).unwrap_err();
        assert!(e.to_string().contains("--no-kube"), "{e}");
        assert!(T::try_parse_from(["serve", "--dashboard-auth", "rbac"]).is_err());
    }

    /// `gwhubctl` with no `--server` reaches a `gwhub serve` with no
    /// `--dashboard-listen` on the same host.
    #[test]
    fn gwhubctl_defaults_to_the_default_dashboard() {
        let listen: SocketAddr = DEFAULT_DASHBOARD_LISTEN.parse().unwrap();
        let server = DEFAULT_DASHBOARD_SERVER
            .strip_prefix("http://")
            .and_then(|a| a.parse::<SocketAddr>().ok())
            .expect("an http://host:port address");
        assert_eq!(server.port(), listen.port());
        assert!(listen.ip().is_unspecified() || listen.ip() == server.ip());
    }

    fn args(flags: &[&str]) -> Args {
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            args: Args,
        }
        use clap::Parser;
        T::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))
            .unwrap()
            .args
    }

    /// Kubernetes mode with no TLS files and no --insecure serves from the
    /// hub's Secrets; --no-kube keeps refusing to start without TLS.
    #[test]
    fn the_secrets_are_used_in_kubernetes_mode_without_tls_files() {
        assert!(uses_secrets(&args(&[])));
        assert!(uses_secrets(&args(&["--client-ca", "extra.pem"])));
        assert!(uses_secrets(&args(&["--hub-san", "hub.example.com"])));
        for flags in [
            &["--insecure"][..],
            &["--no-kube", "--insecure"],
            &["--tls-cert", "c", "--tls-key", "k", "--client-ca", "a"],
        ] {
            assert!(!uses_secrets(&args(flags)), "{flags:?}");
        }
        assert!(config(&args(&[])).is_ok());
        let e = config(&args(&["--no-kube"])).unwrap_err();
        assert!(e.to_string().contains("refusing to start"), "{e}");
    }

    /// Fleet DNS is off without a zone; bad combinations are refused with
    /// the flags named.
    #[test]
    fn dns_flags_are_checked_at_start() {
        assert!(dns_config(&args(&[])).unwrap().is_none());
        let e = config(&args(&["--dns-zone", "fleet.test"])).unwrap_err();
        assert!(e.to_string().contains("--dns-output"), "{e}");
        let e = config(&args(&["--dns-output", "dnsendpoint"])).unwrap_err();
        assert!(e.to_string().contains("--dns-zone"), "{e}");
        let e = config(&args(&[
            "--dns-zone",
            "fleet.test",
            "--dns-output",
            "rfc2136",
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("--dns-server"), "{e}");
        let c = dns_config(&args(&[
            "--dns-zone",
            "fleet.test",
            "--dns-output",
            "dnsendpoint",
            "--dns-rise",
            "1s",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.publish.rise_millis, 1000);
        assert_eq!(c.owner_id, "gwhub-system");
        // Without Kubernetes: a dry run from the reports, or nothing.
        let no_kube = ["--no-kube", "--insecure", "--dns-zone", "fleet.test"];
        let e = config(&args(&no_kube)).unwrap_err();
        assert!(e.to_string().contains("--dns-dry-run"), "{e}");
        let mut dry = no_kube.to_vec();
        dry.push("--dns-dry-run");
        assert!(dns_config(&args(&dry)).unwrap().unwrap().dry_run);
    }
}
