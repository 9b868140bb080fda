//! `gwhubctl join create CLUSTER` (spec section 7): a join token bound to
//! one cluster, recorded on the management cluster (only its hash, in
//! Secret `gwhub-join-<id>` in the hub's namespace), printed with what the
//! agent needs: the hub's address, the token and the hash of the hub CA
//! (read from Secret `gwhub-ca`) the agent pins.

use std::time::Duration;

use gwhub_common::join::{JoinToken, ca_pin_pem};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;

/// `gwhubctl join ...`
#[derive(Debug, clap::Subcommand)]
pub enum JoinCommand {
    /// Make a join token for CLUSTER and print what its agent needs.
    Create(CreateArgs),
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The cluster the token is for (the name its certificate will carry).
    pub cluster: String,
    /// How long the token can be used (once).
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = gwhub_model::time::parse_duration)]
    pub ttl: Duration,
    /// text (default), json ({"cluster","token","caHash","expires"}) or
    /// yaml (the Secret gwhub-join-token to apply on the workload cluster
    /// next to manifests/agent).
    #[arg(short, long, value_name = "FORMAT")]
    pub output: Option<JoinOutput>,
    /// The hub's ingest address as agents reach it, e.g.
    /// https://gwhub.example.com:7443: where the Service gwhub (port
    /// `ingest`) of the hub's namespace is exposed to the workload
    /// clusters (LoadBalancer, Route or Ingress with TLS passthrough).
    #[arg(long, value_name = "URL")]
    pub hub_address: Option<String>,
    /// The hub's namespace on the management cluster.
    #[arg(long, value_name = "NS", default_value = "gwhub-system")]
    pub hub_namespace: String,
    /// Kubeconfig of the management cluster (default: KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Namespace of the agent on the workload cluster (`-o yaml`).
    #[arg(long, value_name = "NS", default_value = "gwhub-system")]
    pub agent_namespace: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum JoinOutput {
    Json,
    Yaml,
}

/// The Secret the agent's manifests read the token (and pin, hub address) from.
pub(crate) const AGENT_TOKEN_SECRET: &str = "gwhub-join-token";

/// Why `gwhubctl join` or `gwhubctl cluster` failed on the management
/// cluster; each names the cluster, Secret or namespace it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ManagementError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cluster {name:?}: {source}")]
    ClusterName {
        name: String,
        #[source]
        source: gwhub_model::ClusterNameError,
    },
    #[error(transparent)]
    Kube(Box<gwhub_k8s::KubeError>),
    #[error("cannot read Secret {ns}/gwhub-ca: {source}")]
    ReadCa {
        ns: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "Secret {0}/gwhub-ca does not exist: is the hub installed (and started) in namespace {0}?"
    )]
    NoCa(String),
    #[error("Secret {0}/gwhub-ca has no tls.crt")]
    NoCaCert(String),
    #[error("Secret {ns}/gwhub-ca tls.crt: {source}")]
    CaPin {
        ns: String,
        #[source]
        source: gwhub_common::join::JoinError,
    },
    /// No randomness for the token.
    #[error(transparent)]
    Token(#[from] gwhub_common::join::JoinError),
    /// `--ttl` reaches past the last time a timestamp holds.
    #[error("--ttl: {0}")]
    Ttl(#[source] jiff::Error),
    #[error("cannot create the join token in namespace {ns}: {source}")]
    CreateToken {
        ns: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("namespace {ns}: {source}")]
    Revoke {
        ns: String,
        #[source]
        source: Box<gwhub_k8s::revocations::RevocationsError>,
    },
    #[error("cannot list join tokens in {ns}: {source}")]
    ListTokens {
        ns: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cannot delete join token {name}: {source}")]
    DeleteToken {
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

impl From<gwhub_k8s::KubeError> for ManagementError {
    fn from(e: gwhub_k8s::KubeError) -> Self {
        ManagementError::Kube(Box::new(e))
    }
}

fn valid_cluster(name: &str) -> Result<(), ManagementError> {
    gwhub_model::cluster::validate(name).map_err(|source| ManagementError::ClusterName {
        name: name.to_owned(),
        source,
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, ManagementError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ManagementError::Runtime)
}

/// Runs `gwhubctl join ...`; returns what to print.
pub(crate) fn run(cmd: JoinCommand) -> Result<String, ManagementError> {
    let runtime = runtime()?;
    match cmd {
        JoinCommand::Create(args) => runtime.block_on(create(&args)),
    }
}

async fn create(args: &CreateArgs) -> Result<String, ManagementError> {
    valid_cluster(&args.cluster)?;
    let client = gwhub_k8s::client(args.kubeconfig.as_deref()).await?;
    let secrets: Api<Secret> = Api::namespaced(client, &args.hub_namespace);
    let ns = &args.hub_namespace;
    let ca = secrets
        .get_opt(gwhub_k8s::tls_secrets::CA_SECRET)
        .await
        .map_err(|source| ManagementError::ReadCa {
            ns: ns.clone(),
            source: Box::new(source),
        })?
        .ok_or_else(|| ManagementError::NoCa(ns.clone()))?;
    let ca_pem = ca
        .data
        .as_ref()
        .and_then(|d| d.get("tls.crt"))
        .map(|b| b.0.clone())
        .ok_or_else(|| ManagementError::NoCaCert(ns.clone()))?;
    let ca_hash = ca_pin_pem(&ca_pem).map_err(|source| ManagementError::CaPin {
        ns: ns.clone(),
        source,
    })?;
    let token = JoinToken::generate()?;
    let ttl = jiff::SignedDuration::try_from(args.ttl).map_err(ManagementError::Ttl)?;
    let expires = jiff::Timestamp::now()
        .checked_add(ttl)
        .map_err(ManagementError::Ttl)?;
    let expires = jiff::Timestamp::from_second(expires.as_second()).unwrap_or(expires);
    secrets
        .create(
            &PostParams::default(),
            &gwhub_k8s::join::token_secret(&token, &args.cluster, expires),
        )
        .await
        .map_err(|source| ManagementError::CreateToken {
            ns: ns.clone(),
            source: Box::new(source),
        })?;
    Ok(render(args, &token.reveal(), &ca_hash, expires))
}

/// What `join create` prints.
pub(crate) fn render(
    args: &CreateArgs,
    token: &str,
    ca_hash: &str,
    expires: jiff::Timestamp,
) -> String {
    let hub = args.hub_address.clone();
    match args.output {
        Some(JoinOutput::Json) => {
            let v = json!({
                "cluster": args.cluster,
                "token": token,
                "caHash": ca_hash,
                "expires": expires.to_string(),
            });
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        Some(JoinOutput::Yaml) => {
            let mut data = serde_json::Map::new();
            data.insert("token".into(), json!(token));
            data.insert("caHash".into(), json!(ca_hash));
            data.insert("cluster".into(), json!(args.cluster));
            data.insert(
                "hub".into(),
                json!(hub.unwrap_or_else(|| "https://HUB-ADDRESS:7443".to_owned())),
            );
            let v = json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": AGENT_TOKEN_SECRET, "namespace": args.agent_namespace},
                "type": "Opaque",
                "stringData": data,
            });
            serde_norway::to_string(&v).unwrap_or_default()
        }
        None => {
            let hub_shown = hub.clone().unwrap_or_else(|| {
                "(pass --hub-address: where agents reach the Service gwhub, port ingest)".to_owned()
            });
            format!(
                "join token for cluster {cluster}, valid once until {expires}\n\
                 hub address:  {hub_shown}\n\
                 token:        {token}\n\
                 hub CA hash:  {ca_hash}\n\n\
                 On the workload cluster:\n  \
                 gwhub-agent run --hub {hub} --join-token-file TOKEN_FILE --hub-ca-hash {ca_hash}\n\
                 or apply `gwhubctl join create {cluster} -o yaml --hub-address ...` and manifests/agent/.\n",
                cluster = args.cluster,
                hub = hub.as_deref().unwrap_or("HUB-ADDRESS"),
            )
        }
    }
}

/// `gwhubctl cluster ...`
#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Remove CLUSTER from the hub: its certificates issued until now are
    /// refused and its streams end on every hub replica (recorded in
    /// ConfigMap gwhub-revoked); its pending join tokens are deleted.
    /// Joining again needs a new token.
    Remove(RemoveArgs),
}

#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    pub cluster: String,
    /// The hub's namespace on the management cluster.
    #[arg(long, value_name = "NS", default_value = "gwhub-system")]
    pub hub_namespace: String,
    /// Kubeconfig of the management cluster.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
}

/// Runs `gwhubctl cluster ...`; returns what to print.
pub(crate) fn run_cluster(cmd: ClusterCommand) -> Result<String, ManagementError> {
    let runtime = runtime()?;
    match cmd {
        ClusterCommand::Remove(args) => runtime.block_on(remove(&args)),
    }
}

async fn remove(args: &RemoveArgs) -> Result<String, ManagementError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    valid_cluster(&args.cluster)?;
    let client = gwhub_k8s::client(args.kubeconfig.as_deref()).await?;
    let ns = &args.hub_namespace;
    let now = gwhub_k8s::revocations::now();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    gwhub_k8s::revocations::record(&configmaps, &args.cluster, now)
        .await
        .map_err(|source| ManagementError::Revoke {
            ns: ns.clone(),
            source: Box::new(source),
        })?;
    let secrets: Api<Secret> = Api::namespaced(client, ns);
    let pending = secrets
        .list(&kube::api::ListParams::default().labels(&format!(
            "{},gwhub.io/cluster={}",
            gwhub_common::join::TOKEN_LABEL,
            gwhub_k8s::join_csr::cluster_label(&args.cluster)
        )))
        .await
        .map_err(|source| ManagementError::ListTokens {
            ns: ns.clone(),
            source: Box::new(source),
        })?;
    for s in pending.items {
        if let Some(name) = s.metadata.name {
            secrets
                .delete(&name, &Default::default())
                .await
                .map_err(|source| ManagementError::DeleteToken {
                    name: name.clone(),
                    source: Box::new(source),
                })?;
        }
    }
    Ok(format!(
        "cluster {} removed at {now}: its certificates issued until then are refused and its streams end; join it again with a new token (gwhubctl join create)\n",
        args.cluster
    ))
}
