//! The project installed as its README says: `kubectl apply -k manifests/`
//! on the management cluster (the hub) and `kubectl apply -k manifests/agent/`
//! on a workload cluster, then the binaries run as the ServiceAccounts those
//! manifests create. The tests' admin (in `system:masters`) may impersonate
//! anyone, so a kubeconfig whose user carries
//! `as: system:serviceaccount:gwhub-system:<name>` gets exactly what the
//! shipped RBAC grants: a verb the code needs and the Roles lack fails the
//! suites.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::{Client, Config};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::apiserver::{Cluster, Fleet, kubeconfig_text, require_assets};
use crate::error::FleetError;

/// The namespace the manifests install into (hub and agent alike).
pub const SYSTEM_NS: &str = "gwhub-system";
/// The hub's ServiceAccount (`manifests/hub/rbac.yaml`).
pub const HUB_SA: &str = "gwhub";
/// The agent's ServiceAccount (`manifests/agent/rbac.yaml`).
pub const AGENT_SA: &str = "gwhub-agent";

/// The user name a ServiceAccount authenticates as.
pub fn service_account_user(name: &str) -> String {
    format!("system:serviceaccount:{SYSTEM_NS}:{name}")
}

/// Clusters seen as a ServiceAccount the manifests create (here, beside
/// the ServiceAccounts, so the API server harness needs nothing from the
/// install).
impl Cluster {
    /// A kubeconfig for this cluster whose user acts as ServiceAccount
    /// `gwhub-system/<service_account>` (the admin impersonates it), so a
    /// binary run with it has exactly the RBAC the manifests grant.
    pub fn kubeconfig_as(&self, service_account: &str) -> PathBuf {
        let path = self
            .kubeconfig
            .with_file_name(format!("{}-as-{service_account}.kubeconfig", self.name));
        let user = service_account_user(service_account);
        let text = kubeconfig_text(&self.name, self.port, &format!("as: \"{user}\""));
        // Written aside and renamed over: a process started by an earlier
        // call may be reading it right now, and must not see it truncated.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let aside = path.with_extension(format!("kubeconfig.{}-{n}", std::process::id()));
        if let Err(e) = std::fs::write(&aside, text).and_then(|()| std::fs::rename(&aside, &path)) {
            panic!("write {}: {e}", path.display());
        }
        path
    }

    /// A client acting as ServiceAccount `gwhub-system/<service_account>`.
    pub(crate) async fn client_as(&self, service_account: &str) -> Result<Client, FleetError> {
        let kc = Kubeconfig::read_from(self.kubeconfig_as(service_account))?;
        let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(cfg)?)
    }
}

/// The repository's `manifests/` directory.
pub fn manifests_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests"))
}

/// `kubectl`: `GWHUB_KUBECTL`, else the one on `PATH`.
pub fn kubectl() -> PathBuf {
    std::env::var_os("GWHUB_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// `kubectl apply -k <dir>` against the cluster of `kubeconfig`; its output.
pub fn apply_k(kubeconfig: &Path, dir: &Path) -> Result<String, FleetError> {
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "-k"])
        .arg(dir)
        .output()
        .map_err(|source| FleetError::Io {
            what: format!("run {} (is kubectl installed?)", kubectl().display()),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(FleetError::Start(format!(
            "kubectl apply -k {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// The hub as installed on a management cluster: `kubectl apply -k
/// manifests/`, waits until `ClusterReport`s are served, and returns a
/// client acting as the hub's ServiceAccount.
pub async fn install_hub(cluster: &Cluster) -> Client {
    apply_k(&cluster.kubeconfig, &manifests_dir())
        .unwrap_or_else(|e| panic!("install the hub on {}: {e}", cluster.name));
    let admin = cluster.client().await.expect("admin client");
    crate::kube_objects::wait_project_crd(&admin, SYSTEM_NS).await;
    cluster.client_as(HUB_SA).await.expect("hub client")
}

/// A management cluster with the hub installed ([`install_hub`]): one API
/// server `mgmt`, the admin's client and one acting as the hub's
/// ServiceAccount, as `(fleet, admin, as_hub)`; `None` (the test is
/// skipped, see [`require_assets`]) where the kube-apiserver assets are
/// missing. Suites needing more CRDs install them on the admin's client.
pub async fn management(test: &str) -> Option<(Fleet, Client, Client)> {
    management_and(test, &[]).await
}

/// [`management`] and a workload cluster for each of `workloads`, each
/// with the agent installed ([`install_agent`]), as the fleet install
/// leaves them; their admins' clients from `fleet.cluster(name)`.
pub async fn management_and(test: &str, workloads: &[&str]) -> Option<(Fleet, Client, Client)> {
    if !require_assets(test) {
        return None;
    }
    let names: Vec<&str> = std::iter::once("mgmt")
        .chain(workloads.iter().copied())
        .collect();
    let fleet = Fleet::start(&names).await.expect("start API servers");
    let as_hub = install_hub(fleet.cluster("mgmt")).await;
    for w in workloads {
        install_agent(fleet.cluster(w)).await;
    }
    let admin = fleet.cluster("mgmt").client().await.expect("admin client");
    Some((fleet, admin, as_hub))
}

/// The agent as installed on a workload cluster: `kubectl apply -k
/// manifests/agent/`; returns a client acting as the agent's ServiceAccount.
pub async fn install_agent(cluster: &Cluster) -> Client {
    apply_k(&cluster.kubeconfig, &manifests_dir().join("agent"))
        .unwrap_or_else(|e| panic!("install the agent on {}: {e}", cluster.name));
    cluster.client_as(AGENT_SA).await.expect("agent client")
}
