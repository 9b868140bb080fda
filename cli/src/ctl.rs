//! `gwhubctl`: a kubectl-style client of the Dashboard API.

use std::io::Write;

use gwhub_common::{OutputFormat, render_list, render_object};
use gwhub_hub::web::{MissingView, OmissionView};
use gwhub_proto::{convert, v1, v1::dashboard_client::DashboardClient};
use serde_json::{Value, json};
use tokio_stream::StreamExt;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::{Interceptor, interceptor::InterceptedService};
use tonic::transport::Channel;

/// gwhubctl: read the hub's aggregated Gateways and clusters.
#[derive(Debug, clap::Parser)]
#[command(name = "gwhubctl", version, about)]
pub struct Cli {
    /// The hub's Dashboard API (by default where `gwhub serve` listens for
    /// it by default, on this host).
    #[arg(
        long,
        global = true,
        default_value = crate::hub::serve::DEFAULT_DASHBOARD_SERVER,
        env = "GWHUB_SERVER"
    )]
    pub server: String,
    /// CA (PEM) the hub's certificate chains to; use with an https:// --server.
    #[arg(long, global = true, value_name = "PATH", env = "GWHUB_CA")]
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM), for a hub run with --dashboard-client-ca.
    #[arg(long, global = true, value_name = "PATH", requires_all = ["tls_key", "ca"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Client private key (PEM) for --tls-cert.
    #[arg(long, global = true, value_name = "PATH", requires_all = ["tls_cert", "ca"])]
    pub tls_key: Option<std::path::PathBuf>,
    /// File holding a bearer token, for a hub run with --dashboard-token-file.
    #[arg(long, global = true, value_name = "PATH", env = "GWHUB_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// A bearer token (a Kubernetes token for a hub run with
    /// --dashboard-auth=kubernetes); visible to other local users in the
    /// process list, so prefer --token-file or the kubeconfig.
    #[arg(
        long,
        global = true,
        value_name = "TOKEN",
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// Kubeconfig whose current context's user token (`token` or
    /// `tokenFile`) is sent, for a hub run with --dashboard-auth=kubernetes.
    /// Without --token, --token-file or this flag, KUBECONFIG or
    /// ~/.kube/config is used for an https:// --server (never sent in
    /// plaintext unless named here).
    #[arg(long, global = true, value_name = "PATH", conflicts_with_all = ["token_file", "token"])]
    pub kubeconfig: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Join tokens for workload clusters (uses the management cluster's
    /// kubeconfig, not the Dashboard).
    #[command(subcommand)]
    Join(crate::join::JoinCommand),
    /// Clusters of the fleet (uses the management cluster's kubeconfig).
    #[command(subcommand)]
    Cluster(crate::join::ClusterCommand),
    /// List hub Gateways or clusters.
    Get {
        what: What,
        /// wide (more columns), yaml or json; a table by default.
        #[arg(short, long)]
        output: Option<Output>,
        #[command(flatten)]
        filter: FilterArgs,
        /// Gateways fetched per call (1 to 1000); all pages are printed.
        #[arg(long, value_name = "N", default_value_t = 500,
              value_parser = clap::value_parser!(u32).range(1..=gwhub_hub_rules::listing::MAX_PAGE_SIZE as i64))]
        page_size: u32,
    },
    /// Show one hub Gateway with each cluster's report and what was left out.
    Describe {
        /// Only `gateway` for now.
        what: DescribeWhat,
        /// NAMESPACE/NAME
        name: String,
        /// yaml or json (the Gateway with each cluster's report); text by default.
        #[arg(short, long)]
        output: Option<Output>,
    },
    /// Print the hub Gateways, then a line per change (like `kubectl get -w`).
    Watch {
        /// wide (more columns), or yaml or json: one watch event
        /// (`{type, object}`) per change, as `kubectl get -w
        /// --output-watch-events -o json|yaml` prints them.
        #[arg(short, long)]
        output: Option<Output>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Fleet DNS: what the hub would publish (reads the Dashboard only).
    #[command(subcommand)]
    Dns(DnsCommand),
    /// Show the last status transitions of one hub Gateway (aggregated and
    /// per cluster), oldest first, as the hub saw them since it started.
    History {
        /// NAMESPACE/NAME
        name: String,
        /// Only the newest N transitions (0: every one the hub keeps).
        #[arg(long, value_name = "N", default_value_t = 0)]
        limit: u32,
        /// yaml or json; a table by default.
        #[arg(short, long)]
        output: Option<Output>,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum DnsCommand {
    /// What the hub would publish now, against what it published: per
    /// name, the targets a write would add and remove and each cluster's
    /// eligibility with the rule it fails. Writes nothing.
    Plan {
        /// Only names of hub Gateways in this namespace.
        #[arg(short = 'n', long, value_name = "NS")]
        namespace: Option<String>,
        /// yaml or json; text by default.
        #[arg(short, long)]
        output: Option<Output>,
    },
}

/// Which hub Gateways `get gateways` and `watch` show (ignored by `get
/// clusters`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct FilterArgs {
    /// Only hub Gateways in this namespace.
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Only hub Gateways this cluster reports.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Only hub Gateways with an aggregated condition that is not True.
    #[arg(long)]
    pub not_ready: bool,
}

impl FilterArgs {
    fn to_proto(&self) -> Option<v1::GatewayFilter> {
        Some(v1::GatewayFilter {
            namespace: self.namespace.clone().unwrap_or_default(),
            cluster: self.cluster.clone().unwrap_or_default(),
            not_ready: self.not_ready,
        })
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum What {
    #[value(alias = "gateway", alias = "gw")]
    Gateways,
    #[value(alias = "cluster")]
    Clusters,
    /// Fleet DNS names (`-n` filters by the owning hub Gateway's namespace).
    #[value(alias = "dnsnames")]
    Dns,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DescribeWhat {
    #[value(alias = "gateways", alias = "gw")]
    Gateway,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Wide,
    Yaml,
    Json,
}

pub fn run(cli: Cli) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    if matches!(cli.command, Command::Join(_) | Command::Cluster(_)) {
        drop(runtime);
        let text = match cli.command {
            Command::Join(cmd) => crate::join::run(cmd)?,
            Command::Cluster(cmd) => crate::join::run_cluster(cmd)?,
            _ => String::new(),
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
        return Ok(());
    }
    runtime.block_on(async {
        let mut client = connect(&cli).await?;
        let mut out = std::io::stdout().lock();
        let text = match cli.command {
            Command::Get {
                what,
                output,
                filter,
                page_size,
            } => get(&mut client, what, output, &filter, page_size).await?,
            Command::Describe { name, output, .. } => describe(&mut client, &name, output).await?,
            Command::Dns(DnsCommand::Plan { namespace, output }) => {
                dns_plan(&mut client, namespace.as_deref(), output).await?
            }
            Command::History {
                name,
                limit,
                output,
            } => history(&mut client, &name, limit, output).await?,
            Command::Watch { output, filter } => {
                return watch(&mut client, output, &filter, &mut out).await;
            }
            Command::Join(_) | Command::Cluster(_) => return Ok(()),
        };
        // A closed pipe (e.g. `| head`) is not worth an error.
        let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
        Ok(())
    })
}

/// A Dashboard client that sends the bearer token, if any, on every call.
type Client = DashboardClient<InterceptedService<Channel, BearerToken>>;

/// Adds `authorization: Bearer <token>` to each request.
#[derive(Clone)]
struct BearerToken(Option<MetadataValue<Ascii>>);

impl Interceptor for BearerToken {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.0 {
            req.metadata_mut().insert("authorization", token.clone());
        }
        Ok(req)
    }
}

/// The token to send and where it came from (for errors): `--token`,
/// `--token-file`, `--kubeconfig`, else the default kubeconfig for an
/// https:// server (a missing one, or one without a token, sends none).
fn bearer_token(cli: &Cli) -> Result<BearerToken, String> {
    let (token, from) = if let Some(t) = &cli.token {
        (t.trim().to_owned(), "--token".to_owned())
    } else if let Some(path) = &cli.token_file {
        let from = format!("--token-file {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| format!("{from}: {e}"))?;
        (text.trim().to_owned(), from)
    } else if let Some(path) = &cli.kubeconfig {
        let from = format!("--kubeconfig {}", path.display());
        let paths = [path.clone()];
        match kubeconfig::token(&paths).map_err(|e| format!("{from}: {e}"))? {
            Some(t) => (t, from),
            None => {
                return Err(format!(
                    "{from}: the current context's user has no token or tokenFile (use --token-file)"
                ));
            }
        }
    } else if cli.server.starts_with("https://") {
        let paths = kubeconfig::default_paths();
        match kubeconfig::token(&paths) {
            Ok(Some(t)) => (t, "the kubeconfig".to_owned()),
            // Not every hub wants a token: a kubeconfig that has none (or
            // cannot be read) sends none, and a hub that needs one says so.
            Ok(None) | Err(_) => return Ok(BearerToken(None)),
        }
    } else {
        return Ok(BearerToken(None));
    };
    if token.is_empty() {
        return Err(format!("{from}: the token is empty"));
    }
    MetadataValue::try_from(format!("Bearer {token}"))
        .map(|v| BearerToken(Some(v)))
        .map_err(|_| format!("{from}: the token is not printable ASCII"))
}

/// The bearer token of a kubeconfig's current context, read as kubectl
/// does (files merged in order, the first to set a value wins); only
/// static tokens (`token`, `tokenFile`), not exec plugins.
mod kubeconfig {
    use std::path::{Path, PathBuf};

    use serde_json::Value;

    /// KUBECONFIG's files, else ~/.kube/config.
    pub(super) fn default_paths() -> Vec<PathBuf> {
        match std::env::var_os("KUBECONFIG") {
            Some(v) if !v.is_empty() => std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect(),
            _ => std::env::var_os("HOME")
                .map(|h| vec![Path::new(&h).join(".kube").join("config")])
                .unwrap_or_default(),
        }
    }

    /// The current context's user token; `None` when it has none.
    pub(super) fn token(paths: &[PathBuf]) -> Result<Option<String>, String> {
        let mut docs = Vec::new();
        for p in paths {
            let text = match std::fs::read_to_string(p) {
                Ok(t) => t,
                // kubectl skips files of KUBECONFIG that do not exist.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && paths.len() > 1 => continue,
                Err(e) => return Err(format!("{}: {e}", p.display())),
            };
            let doc: Value = serde_norway::from_str(&text)
                .map_err(|e| format!("{}: not a kubeconfig: {e}", p.display()))?;
            docs.push(doc);
        }
        let Some(user) = current_user(&docs)? else {
            return Ok(None);
        };
        if let Some(t) = user.get("token").and_then(Value::as_str) {
            return Ok(Some(t.trim().to_owned()));
        }
        if let Some(f) = user.get("tokenFile").and_then(Value::as_str) {
            let text = std::fs::read_to_string(f).map_err(|e| format!("tokenFile {f}: {e}"))?;
            return Ok(Some(text.trim().to_owned()));
        }
        Ok(None)
    }

    /// The `user` fields of the current context's user.
    pub(super) fn current_user(docs: &[Value]) -> Result<Option<&Value>, String> {
        let Some(current) = docs
            .iter()
            .find_map(|d| d.get("current-context").and_then(Value::as_str))
            .filter(|c| !c.is_empty())
        else {
            return Ok(None);
        };
        let named = |list: &str, name: &str, field: &str| {
            docs.iter().find_map(|d| {
                d.get(list)?
                    .as_array()?
                    .iter()
                    .find(|e| e.get("name").and_then(Value::as_str) == Some(name))?
                    .get(field)
            })
        };
        let context = named("contexts", current, "context")
            .ok_or_else(|| format!("the current context {current:?} is not defined"))?;
        let Some(user) = context.get("user").and_then(Value::as_str) else {
            return Ok(None);
        };
        named("users", user, "user")
            .map(Some)
            .ok_or_else(|| format!("the user {user:?} of context {current:?} is not defined"))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_current_contexts_user_token_first_file_wins() {
            let a: Value = serde_norway::from_str(
                "current-context: mgmt\ncontexts: [{name: mgmt, context: {cluster: c, user: alice}}]\n",
            )
            .unwrap();
            let b: Value = serde_norway::from_str(
                "current-context: other\nusers: [{name: alice, user: {token: t-alice}}, {name: bob, user: {token: t-bob}}]\n",
            )
            .unwrap();
            let docs = [a.clone(), b.clone()];
            let user = current_user(&docs).unwrap().unwrap();
            assert_eq!(user["token"], "t-alice");
            // No user defined anywhere: an error naming it.
            let e = current_user(std::slice::from_ref(&a)).unwrap_err();
            assert!(e.contains("\"alice\""), "{e}");
            // No current context: no token.
            let none: Value = serde_norway::from_str("users: []").unwrap();
            assert!(current_user(&[none]).unwrap().is_none());
        }

        #[test]
        fn token_file_is_read() {
            let dir = tempfile::tempdir().unwrap();
            let tf = dir.path().join("t");
            std::fs::write(&tf, "from-file\n").unwrap();
            let kc = dir.path().join("kc");
            std::fs::write(
                &kc,
                format!(
                    "current-context: x\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\nusers: [{{name: u, user: {{tokenFile: {}}}}}]\n",
                    tf.display()
                ),
            )
            .unwrap();
            assert_eq!(token(&[kc]).unwrap().as_deref(), Some("from-file"));
        }
    }
}

async fn connect(cli: &Cli) -> Result<Client, String> {
    let token = bearer_token(cli)?;
    let server = &cli.server;
    let mut endpoint = Channel::from_shared(server.to_owned())
        .map_err(|e| format!("invalid --server {server:?}: {e}"))?;
    // The Dashboard shares the hub's server certificate when mTLS is on.
    if let Some(ca) = &cli.ca {
        let read = |flag: &str, p: &std::path::Path| {
            std::fs::read(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
        };
        let mut tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(read("--ca", ca)?));
        if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
            tls = tls.identity(tonic::transport::Identity::from_pem(
                read("--tls-cert", cert)?,
                read("--tls-key", key)?,
            ));
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| {
            format!(
                "--ca/--tls-cert/--tls-key: {}",
                gwhub_model::error_chain(&e)
            )
        })?;
    }
    let channel = endpoint.connect().await.map_err(|e| {
        format!(
            "cannot reach the hub at {server}: {}",
            gwhub_model::error_chain(&e)
        )
    })?;
    Ok(DashboardClient::with_interceptor(channel, token)
        .max_decoding_message_size(MAX_ANSWER_BYTES))
}

/// The largest Dashboard answer gwhubctl reads. gRPC's default (4 MiB) is
/// far too small for a large fleet: 1,000 clusters x 100 Gateways list as
/// ~47 MB, mostly the names of entries the hub left out.
const MAX_ANSWER_BYTES: usize = 1 << 30;

fn status_error(s: tonic::Status) -> String {
    format!("{:?}: {}", s.code(), printable(s.message()))
}

/// Text from the server shown escaped (controls and bidi controls), the
/// one rule the web page follows too.
pub use gwhub_model::text::printable;

/// Renders rows as a kubectl-style table: left-aligned, three spaces apart.
/// Cells are [`printable`].
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c).into_owned()).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i + 1 == widths.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}   "));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// The aggregated condition of `type_`, if the hub wrote one.
pub fn condition<'a>(g: &'a v1::AggregatedGateway, type_: &str) -> Option<&'a v1::Condition> {
    g.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == type_)
}

/// `True`/`False`/`Unknown`, or `-` for a missing condition.
pub fn status_word(c: Option<&v1::Condition>) -> String {
    match c.map(|c| v1::ConditionStatus::try_from(c.status)) {
        Some(Ok(v1::ConditionStatus::True)) => "True".into(),
        Some(Ok(v1::ConditionStatus::False)) => "False".into(),
        Some(Ok(v1::ConditionStatus::Unknown)) => "Unknown".into(),
        _ => "-".into(),
    }
}

const GATEWAY_HEADER: [&str; 6] = [
    "NAMESPACE",
    "NAME",
    "CLUSTERS",
    "ACCEPTED",
    "PROGRAMMED",
    "AGGREGATED",
];
const GATEWAY_WIDE: [&str; 3] = ["ADDRESSES", "LISTENERS", "LEFT-OUT"];

fn gateway_row(g: &v1::AggregatedGateway, wide: bool) -> Vec<String> {
    let own = condition(g, "kuadrant.io/MultiClusterAggregated");
    let aggregated = match own {
        Some(c) if c.status == v1::ConditionStatus::True as i32 => c.reason.clone(),
        Some(c) => format!("{} ({})", status_word(Some(c)), c.reason),
        None => "-".into(),
    };
    let mut row = vec![
        g.namespace.clone(),
        g.name.clone(),
        clusters_cell(g, wide),
        status_word(condition(g, "Accepted")),
        status_word(condition(g, "Programmed")),
        aggregated,
    ];
    if wide {
        let s = g.status.clone().unwrap_or_default();
        row.push(s.addresses.len().to_string());
        row.push(s.listeners.len().to_string());
        row.push(
            g.omissions
                .iter()
                .map(|o| o.names.len())
                .sum::<usize>()
                .to_string(),
        );
    }
    row
}

fn rfc3339(secs: i64) -> String {
    if secs <= 0 {
        return "never".into();
    }
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| secs.to_string())
}

/// The hub Gateway as `-o yaml|json` prints it (shared with `gwhub demo --once`).
/// The CLUSTERS cell: the reporting clusters (their count, or their names
/// with `wide`), then the expected ones missing, marked.
fn clusters_cell(g: &v1::AggregatedGateway, wide: bool) -> String {
    let missing = &g.missing_clusters;
    match (wide, missing.is_empty()) {
        (false, true) => g.clusters.len().to_string(),
        (false, false) => format!("{} ({} missing)", g.clusters.len(), missing.len()),
        (true, _) => g
            .clusters
            .iter()
            .cloned()
            .chain(missing.iter().map(|m| format!("!{}", m.cluster)))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// A hub Gateway as `get -o json|yaml` prints it: a Gateway API object,
/// the hub's own fields under `gwhub` (the omissions and missing clusters
/// in the web page's shapes).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct GatewayObject<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectName<'a>,
    status: gateway_api::apis::standard::gateways::GatewayStatus,
    gwhub: HubFields<'a>,
}

#[derive(serde::Serialize)]
struct ObjectName<'a> {
    namespace: &'a str,
    name: &'a str,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct HubFields<'a> {
    clusters: &'a [String],
    revision: u64,
    omissions: Vec<OmissionView<'a>>,
    /// Only where the hub Gateway expects clusters (the shape is
    /// otherwise unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    missing_clusters: Vec<MissingView<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    unexpected_clusters: &'a [String],
}

pub fn gateway_json(g: &v1::AggregatedGateway) -> Value {
    let status = g
        .status
        .clone()
        .and_then(|s| convert::status_from_proto(s).ok())
        .unwrap_or_default();
    let object = GatewayObject {
        api_version: "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        metadata: ObjectName {
            namespace: &g.namespace,
            name: &g.name,
        },
        status,
        gwhub: HubFields {
            clusters: &g.clusters,
            revision: g.revision,
            omissions: g.omissions.iter().map(OmissionView::of).collect(),
            missing_clusters: g.missing_clusters.iter().map(MissingView::of).collect(),
            unexpected_clusters: &g.unexpected_clusters,
        },
    };
    serde_json::to_value(object).unwrap_or(Value::Null)
}

fn format_of(output: Option<Output>) -> Option<OutputFormat> {
    match output {
        Some(Output::Yaml) => Some(OutputFormat::Yaml),
        Some(Output::Json) => Some(OutputFormat::Json),
        _ => None,
    }
}

/// Every hub Gateway matching `filter`, fetched `page_size` at a time.
async fn list_all(
    client: &mut Client,
    filter: &FilterArgs,
    page_size: u32,
) -> Result<Vec<v1::AggregatedGateway>, String> {
    let mut gateways = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_gateways(v1::ListGatewaysRequest {
                page_size,
                page_token,
                filter: filter.to_proto(),
            })
            .await
            .map_err(status_error)?
            .into_inner();
        gateways.extend(page.gateways);
        if page.next_page_token.is_empty() {
            return Ok(gateways);
        }
        page_token = page.next_page_token;
    }
}

async fn get(
    client: &mut Client,
    what: What,
    output: Option<Output>,
    filter: &FilterArgs,
    page_size: u32,
) -> Result<String, String> {
    let wide = output == Some(Output::Wide);
    match what {
        What::Gateways => {
            let gateways = list_all(client, filter, page_size).await?;
            if let Some(f) = format_of(output) {
                return Ok(render_list(gateways.iter().map(gateway_json).collect(), f));
            }
            let mut header = GATEWAY_HEADER.to_vec();
            if wide {
                header.extend(GATEWAY_WIDE);
            }
            let rows: Vec<_> = gateways.iter().map(|g| gateway_row(g, wide)).collect();
            Ok(table(&header, &rows))
        }
        What::Clusters => {
            let clusters = client
                .list_clusters(v1::ListClustersRequest {})
                .await
                .map_err(status_error)?
                .into_inner()
                .clusters;
            // Only a hub with a fleet inventory says where each cluster
            // stands with it (an inventory lists at least one cluster).
            let inventory = clusters
                .iter()
                .any(|c| c.in_inventory || c.outside_inventory);
            if let Some(f) = format_of(output) {
                let items = clusters
                    .iter()
                    .map(|c| {
                        let mut item = json!({
                            "kind": "Cluster",
                            "name": c.name,
                            "connected": c.connected,
                            "stale": c.stale,
                            "gatewayCount": c.gateway_count,
                            "lastReportTime": (c.last_report_time > 0).then(|| rfc3339(c.last_report_time)),
                            "lastSeenTime": (c.last_seen_time > 0).then(|| rfc3339(c.last_seen_time)),
                            "agentVersion": c.agent_version,
                        });
                        if inventory {
                            item["inventory"] = json!(inventory_state(c));
                        }
                        item
                    })
                    .collect();
                return Ok(render_list(items, f));
            }
            let mut header = vec!["NAME", "CONNECTED", "STALE", "GATEWAYS", "LAST-REPORT"];
            if inventory {
                header.push("INVENTORY");
            }
            if wide {
                header.extend(["LAST-SEEN", "AGENT"]);
            }
            let rows: Vec<_> = clusters
                .iter()
                .map(|c| {
                    let mut row = vec![
                        c.name.clone(),
                        c.connected.to_string(),
                        c.stale.to_string(),
                        c.gateway_count.to_string(),
                        rfc3339(c.last_report_time),
                    ];
                    if inventory {
                        row.push(inventory_state(c).to_owned());
                    }
                    if wide {
                        row.push(rfc3339(c.last_seen_time));
                        row.push(c.agent_version.clone());
                    }
                    row
                })
                .collect();
            Ok(table(&header, &rows))
        }
        What::Dns => get_dns(client, filter.namespace.as_deref(), output).await,
    }
}

/// The fleet DNS names, or why the hub has none to tell (off, or this
/// replica does not lead).
async fn dns_names(
    client: &mut Client,
    namespace: Option<&str>,
) -> Result<Vec<v1::DnsName>, String> {
    let r = client
        .list_dns_names(v1::ListDnsNamesRequest {
            namespace: namespace.unwrap_or_default().to_owned(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    if !r.enabled || !r.leading {
        return Err(printable(&r.message).into_owned());
    }
    Ok(r.names)
}

/// A name's sets as `A=1.2.3.4,5.6.7.8 AAAA=...`; `-` if none.
pub fn sets_cell(sets: &[v1::DnsRecordSet]) -> String {
    if sets.is_empty() {
        return "-".into();
    }
    sets.iter()
        .map(|s| format!("{}={}", s.r#type, s.targets.join(",")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn dns_item(n: &v1::DnsName) -> Value {
    let mut v = gwhub_hub::web::dns::dns_name_json(n);
    if let Some(o) = v.as_object_mut() {
        let mut item = serde_json::Map::new();
        item.insert("kind".into(), json!("DnsName"));
        item.append(o);
        return Value::Object(item);
    }
    v
}

/// `get dns`: a row per name (published sets, state, last write).
async fn get_dns(
    client: &mut Client,
    namespace: Option<&str>,
    output: Option<Output>,
) -> Result<String, String> {
    let names = dns_names(client, namespace).await?;
    if let Some(f) = format_of(output) {
        return Ok(render_list(names.iter().map(dns_item).collect(), f));
    }
    let wide = output == Some(Output::Wide);
    let mut header = vec![
        "HOSTNAME",
        "GATEWAY",
        "PUBLISHED",
        "ELIGIBLE",
        "STATE",
        "LAST-WRITE",
    ];
    if wide {
        header.extend(["ZONE", "DESIRED", "MESSAGE"]);
    }
    let rows: Vec<_> = names
        .iter()
        .map(|n| {
            let eligible = n.clusters.iter().filter(|c| c.eligible).count();
            let mut row = vec![
                n.hostname.clone(),
                gwhub_hub::web::dns::owner(n),
                sets_cell(&n.published),
                format!("{eligible}/{}", n.clusters.len()),
                n.state.clone(),
                n.last_write
                    .as_ref()
                    .map(|w| format!("{} {}", w.result, millis_rfc3339(w.time_millis)))
                    .unwrap_or_else(|| "-".into()),
            ];
            if wide {
                row.push(n.zone.clone());
                row.push(sets_cell(&n.desired));
                row.push(n.state_message.clone());
            }
            row
        })
        .collect();
    Ok(table(&header, &rows))
}

/// `dns plan`: per name, desired against published and each cluster's
/// reason.
async fn dns_plan(
    client: &mut Client,
    namespace: Option<&str>,
    output: Option<Output>,
) -> Result<String, String> {
    let names = dns_names(client, namespace).await?;
    match output {
        None => {}
        Some(Output::Wide) => return Err("dns plan prints no table: use -o yaml or -o json".into()),
        Some(o) => {
            let f = format_of(Some(o)).unwrap_or_default();
            return Ok(render_list(names.iter().map(dns_item).collect(), f));
        }
    }
    if names.is_empty() {
        return Ok("No fleet DNS names.\n".into());
    }
    Ok(names.iter().map(plan_text).collect::<Vec<_>>().join("\n"))
}

/// One name of `dns plan` as text.
pub fn plan_text(n: &v1::DnsName) -> String {
    let mut out = format!(
        "{} (hub Gateway {}, zone {}): {}",
        printable(&n.hostname),
        printable(&gwhub_hub::web::dns::owner(n)),
        printable(&n.zone),
        printable(&n.state)
    );
    if !n.state_message.is_empty() {
        out.push_str(&format!(" ({})", printable(&n.state_message)));
    }
    out.push('\n');
    out.push_str(&format!("  published: {}\n", sets_cell(&n.published)));
    out.push_str(&format!("  desired:   {}\n", sets_cell(&n.desired)));
    let plan = gwhub_hub::web::dns::plan(n);
    if plan.is_empty() {
        out.push_str("  would write: nothing (the published sets are the desired ones)\n");
    } else {
        for (t, (add, remove)) in plan {
            let mut parts: Vec<String> = add.iter().map(|a| format!("+{a}")).collect();
            parts.extend(remove.iter().map(|r| format!("-{r}")));
            out.push_str(&format!(
                "  would write {t}: {}\n",
                printable(&parts.join(" "))
            ));
        }
    }
    for r in &n.reasons {
        out.push_str(&format!("  {}\n", printable(r)));
    }
    let rows: Vec<Vec<String>> = n
        .clusters
        .iter()
        .map(|c| {
            if c.eligible {
                vec![c.cluster.clone(), "eligible".into(), String::new()]
            } else {
                vec![
                    c.cluster.clone(),
                    format!("rule {}: {}", c.rule, c.reason),
                    c.message.clone(),
                ]
            }
        })
        .collect();
    for line in table(&["CLUSTER", "ELIGIBILITY", "WHY"], &rows).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// Where a cluster stands with the hub's fleet inventory, in one word.
fn inventory_state(c: &v1::ClusterInfo) -> &'static str {
    if c.never_connected {
        "never-connected"
    } else if c.in_inventory {
        "member"
    } else if c.outside_inventory {
        "outside"
    } else {
        "-"
    }
}

fn conditions_table(indent: &str, list: &[v1::Condition]) -> String {
    let rows: Vec<_> = list
        .iter()
        .map(|c| {
            vec![
                c.r#type.clone(),
                status_word(Some(c)),
                c.reason.clone(),
                c.message.clone(),
            ]
        })
        .collect();
    table(&["TYPE", "STATUS", "REASON", "MESSAGE"], &rows)
        .lines()
        .map(|l| format!("{indent}{l}\n"))
        .collect()
}

fn status_text(indent: &str, s: &v1::GatewayStatus) -> String {
    let mut out = format!("{indent}Conditions:\n");
    out.push_str(&conditions_table(&format!("{indent}  "), &s.conditions));
    out.push_str(&format!("{indent}Addresses:\n"));
    for a in &s.addresses {
        out.push_str(&format!(
            "{indent}  {} {}\n",
            printable(a.r#type.as_deref().unwrap_or("IPAddress")),
            printable(&a.value)
        ));
    }
    out.push_str(&format!("{indent}Listeners:\n"));
    for l in &s.listeners {
        out.push_str(&format!(
            "{indent}  {} (attachedRoutes: {})\n",
            printable(&l.name),
            l.attached_routes
        ));
        out.push_str(&conditions_table(&format!("{indent}    "), &l.conditions));
    }
    out
}

async fn describe(
    client: &mut Client,
    name: &str,
    output: Option<Output>,
) -> Result<String, String> {
    let Some((namespace, gw)) = name.split_once('/') else {
        return Err(format!("{name:?} is not NAMESPACE/NAME"));
    };
    let r = client
        .get_gateway(v1::GetGatewayRequest {
            namespace: namespace.into(),
            name: gw.into(),
        })
        .await
        .map_err(status_error)?
        .into_inner();
    let g = r.gateway.clone().unwrap_or_default();
    match output {
        None => {}
        Some(Output::Wide) => return Err("describe prints no table: use -o yaml or -o json".into()),
        Some(o) => {
            let f = format_of(Some(o)).unwrap_or_default();
            return Ok(render_object(&describe_json(&r), f));
        }
    }
    let mut out = format!(
        "Name:       {}\nNamespace:  {}\nClusters:   {}\nRevision:   {}\nAggregated status:\n",
        printable(&g.name),
        printable(&g.namespace),
        printable(&g.clusters.join(", ")),
        g.revision
    );
    if !g.missing_clusters.is_empty() {
        let missing: Vec<String> = g
            .missing_clusters
            .iter()
            .map(|m| {
                let why = match m.never_reported {
                    true => "never reported",
                    false => "does not report this Gateway",
                };
                format!("{} ({why})", printable(&m.cluster))
            })
            .collect();
        out.push_str(&format!("Missing:    {}\n", missing.join(", ")));
    }
    if !g.unexpected_clusters.is_empty() {
        out.push_str(&format!(
            "Unexpected: {}\n",
            printable(&g.unexpected_clusters.join(", "))
        ));
    }
    out.push_str(&status_text("  ", &g.status.clone().unwrap_or_default()));
    out.push_str("Left out:\n");
    if g.omissions.is_empty() {
        out.push_str("  (nothing)\n");
    }
    for o in &g.omissions {
        out.push_str(&format!("  {}\n", printable(&o.message)));
    }
    out.push_str("Per cluster:\n");
    for c in &r.clusters {
        let fresh = if c.stale { "stale" } else { "fresh" };
        out.push_str(&format!(
            "  {} ({fresh}, last report {}):\n",
            printable(&c.cluster),
            rfc3339(c.last_report_time)
        ));
        out.push_str(&status_text("    ", &c.status.clone().unwrap_or_default()));
    }
    Ok(out)
}

/// `describe -o yaml|json`: the hub Gateway as `get -o` prints it, plus
/// each cluster's report under `gwhub.reports`.
pub fn describe_json(r: &v1::GetGatewayResponse) -> Value {
    let mut v = gateway_json(&r.gateway.clone().unwrap_or_default());
    v["gwhub"]["reports"] = r
        .clusters
        .iter()
        .map(|c| {
            let status = c
                .status
                .clone()
                .and_then(|s| convert::status_from_proto(s).ok())
                .unwrap_or_default();
            json!({
                "cluster": c.cluster,
                "stale": c.stale,
                "lastReportTime": (c.last_report_time > 0).then(|| rfc3339(c.last_report_time)),
                "status": status,
            })
        })
        .collect();
    v
}

/// `watch -o yaml|json`: one watch event per upserted or deleted Gateway
/// (`ADDED` for the first snapshot, however many messages carry it:
/// `in_snapshot` when the last one had `snapshot_incomplete`; then
/// `MODIFIED`/`DELETED`).
pub fn watch_events(msg: &v1::WatchGatewaysResponse, in_snapshot: bool) -> Vec<Value> {
    let kind = if msg.snapshot || in_snapshot {
        "ADDED"
    } else {
        "MODIFIED"
    };
    let mut events: Vec<Value> = msg
        .upserted
        .iter()
        .map(|g| json!({"type": kind, "object": gateway_json(g)}))
        .collect();
    events.extend(msg.deleted.iter().map(|d| {
        json!({"type": "DELETED", "object": {
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"namespace": d.namespace, "name": d.name}}})
    }));
    events
}

/// `ConditionStatus` as a word, `-` for none.
fn status_name(s: i32) -> &'static str {
    gwhub_proto::convert::status_word(s).unwrap_or("-")
}

use gwhub_hub::web::dns::millis_rfc3339;

/// `history -o yaml|json`: one object per transition, as the web page
/// gives it but with an RFC 3339 `time`.
pub fn history_json(t: &v1::GatewayTransition) -> Value {
    gwhub_hub::web::transition_json(t, "time", json!(millis_rfc3339(t.time_millis)))
}

async fn history(
    client: &mut Client,
    name: &str,
    limit: u32,
    output: Option<Output>,
) -> Result<String, String> {
    let Some((namespace, gw)) = name.split_once('/') else {
        return Err(format!("{name:?} is not NAMESPACE/NAME"));
    };
    let r = client
        .get_gateway_history(v1::GetGatewayHistoryRequest {
            namespace: namespace.into(),
            name: gw.into(),
            limit,
        })
        .await
        .map_err(status_error)?
        .into_inner();
    if let Some(f) = format_of(output) {
        return Ok(render_list(
            r.transitions.iter().map(history_json).collect(),
            f,
        ));
    }
    let rows: Vec<_> = r
        .transitions
        .iter()
        .map(|t| {
            vec![
                millis_rfc3339(t.time_millis),
                if t.cluster.is_empty() {
                    "(hub)".into()
                } else {
                    t.cluster.clone()
                },
                t.condition_type.clone(),
                format!(
                    "{} -> {}",
                    status_name(t.previous_status),
                    status_name(t.status)
                ),
                if t.reason.is_empty() {
                    "-".into()
                } else {
                    t.reason.clone()
                },
                t.message.clone(),
            ]
        })
        .collect();
    Ok(table(
        &[
            "TIME",
            "CLUSTER",
            "CONDITION",
            "STATUS",
            "REASON",
            "MESSAGE",
        ],
        &rows,
    ))
}

async fn watch(
    client: &mut Client,
    output: Option<Output>,
    filter: &FilterArgs,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut stream = client
        .watch_gateways(v1::WatchGatewaysRequest {
            filter: filter.to_proto(),
            ..Default::default()
        })
        .await
        .map_err(status_error)?
        .into_inner();
    // The snapshot may come as several messages (`snapshot_incomplete`).
    let mut in_snapshot = false;
    if let Some(f) = format_of(output) {
        while let Some(msg) = stream.next().await {
            let msg = msg.map_err(status_error)?;
            let events = watch_events(&msg, in_snapshot);
            in_snapshot = msg.snapshot_incomplete;
            for event in events {
                let mut text = render_object(&event, f);
                if f == OutputFormat::Yaml {
                    text = format!("---\n{text}");
                }
                if out
                    .write_all(text.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return Ok(());
                }
            }
        }
        return Ok(());
    }
    let wide = output == Some(Output::Wide);
    let mut header = vec!["EVENT"];
    header.extend(GATEWAY_HEADER);
    if wide {
        header.extend(GATEWAY_WIDE);
    }
    let mut printed_header = false;
    while let Some(msg) = stream.next().await {
        let msg = msg.map_err(status_error)?;
        let event = if msg.snapshot || in_snapshot {
            ""
        } else {
            "MODIFIED"
        };
        in_snapshot = msg.snapshot_incomplete;
        let mut rows: Vec<Vec<String>> = msg
            .upserted
            .iter()
            .map(|g| {
                let mut row = vec![event.to_owned()];
                row.extend(gateway_row(g, wide));
                row
            })
            .collect();
        rows.extend(msg.deleted.iter().map(|d| {
            let mut row = vec![
                "DELETED".into(),
                d.namespace.clone(),
                d.name.clone(),
                "0".into(),
            ];
            row.resize(header.len(), "-".into());
            row
        }));
        let text = table(&header, &rows);
        let text = if printed_header {
            text.split_once('\n')
                .map(|(_, rest)| rest)
                .unwrap_or_default()
        } else {
            &text
        };
        printed_header = true;
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `get -o json|yaml`'s object: the Gateway API shape, the hub's fields
    /// under `gwhub`, missing and unexpected clusters only when there are.
    #[test]
    fn a_gateway_object_has_the_hubs_fields_under_gwhub() {
        let mut g = v1::AggregatedGateway {
            namespace: "ns".into(),
            name: "gw".into(),
            clusters: vec!["east".into()],
            revision: 3,
            omissions: vec![v1::Omission {
                cluster: "east".into(),
                item: "listener".into(),
                names: vec!["a".into()],
                rule: "r".into(),
                message: "m".into(),
            }],
            ..Default::default()
        };
        let v = gateway_json(&g);
        assert_eq!(v["apiVersion"], "gateway.networking.k8s.io/v1");
        assert_eq!(v["kind"], "Gateway");
        assert_eq!(v["metadata"], json!({"namespace": "ns", "name": "gw"}));
        assert_eq!(
            v["gwhub"],
            json!({"clusters": ["east"], "revision": 3, "omissions": [
                {"cluster": "east", "item": "listener", "names": ["a"], "rule": "r", "message": "m"}
            ]})
        );
        g.missing_clusters = vec![v1::MissingCluster {
            cluster: "west".into(),
            never_reported: true,
        }];
        g.unexpected_clusters = vec!["north".into()];
        let v = gateway_json(&g);
        assert_eq!(
            v["gwhub"]["missingClusters"],
            json!([{"cluster": "west", "neverReported": true}])
        );
        assert_eq!(v["gwhub"]["unexpectedClusters"], json!(["north"]));
    }

    #[test]
    fn server_text_is_printed_with_control_characters_escaped() {
        assert_eq!(printable("east"), "east");
        assert_eq!(
            printable("a\u{1b}[2Jb\u{7}\r\nfake-row\u{202e}"),
            "a\\u{1b}[2Jb\\u{7}\\r\\nfake-row\\u{202e}"
        );
        let t = table(&["NAME"], &[vec!["gw\nwest   True".into()]]);
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(!t.contains('\u{1b}'));
    }

    /// A snapshot sent as several messages is ADDED throughout; what
    /// follows it is MODIFIED.
    #[test]
    fn a_paged_snapshot_is_added_throughout() {
        let gw = |name: &str| v1::AggregatedGateway {
            namespace: "ns".into(),
            name: name.into(),
            ..Default::default()
        };
        let first = v1::WatchGatewaysResponse {
            snapshot: true,
            snapshot_incomplete: true,
            upserted: vec![gw("a")],
            ..Default::default()
        };
        let rest = v1::WatchGatewaysResponse {
            upserted: vec![gw("b")],
            ..Default::default()
        };
        let kind = |events: Vec<Value>| events[0]["type"].as_str().unwrap().to_owned();
        assert_eq!(kind(watch_events(&first, false)), "ADDED");
        assert_eq!(
            kind(watch_events(&rest, first.snapshot_incomplete)),
            "ADDED"
        );
        assert_eq!(
            kind(watch_events(&rest, rest.snapshot_incomplete)),
            "MODIFIED"
        );
    }
}
