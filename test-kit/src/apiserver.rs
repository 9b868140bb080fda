//! Starts one etcd and N kube-apiservers on loopback, each API server its own
//! "cluster" separated by `--etcd-prefix`. Processes are killed when the
//! [`Fleet`] is dropped, so a failing test leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::FleetError;

type Result<T, E = FleetError> = std::result::Result<T, E>;

const TOKEN: &str = "gwhub-e2e-token";

/// Users the API server knows by a static token ([`static_token`]) and
/// nothing else: no groups, no rights until a test binds them a Role. On
/// 1.20 without a controller-manager no ServiceAccount token is minted,
/// so readers of the hub's Dashboard are these.
pub(crate) const STATIC_USERS: [&str; 3] = ["reader-one", "reader-all", "reader-none"];

/// The bearer token of a `STATIC_USERS` user.
pub fn static_token(user: &str) -> String {
    format!("gwhub-e2e-{user}-token")
}

/// Where the built assets live: `GWHUB_KUBE_ASSETS`, else the cache
/// `scripts/kube-assets.sh` fills.
pub(crate) fn assets_dir() -> PathBuf {
    std::env::var_os("GWHUB_KUBE_ASSETS")
        .or_else(|| std::env::var_os("KUBEBUILDER_ASSETS"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/gwhub-kube-assets"))
}

/// True when the real API server can run here. Tests that need it call
/// [`require_assets`]: under CI (`CI=true` or `GWHUB_REQUIRE_KUBE=1`) a missing
/// server is a failure, elsewhere the test says it was skipped.
pub fn assets_present() -> bool {
    let d = assets_dir();
    d.join("kube-apiserver").exists() && d.join("etcd").exists()
}

/// Returns false (after saying so) when the test should be skipped; panics
/// under CI, where skipping would hide a broken set-up.
pub fn require_assets(test: &str) -> bool {
    if assets_present() {
        return true;
    }
    let strict = std::env::var("GWHUB_REQUIRE_KUBE").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true");
    let msg = FleetError::NoAssets(assets_dir().display().to_string());
    assert!(!strict, "{test}: {msg}");
    eprintln!("SKIPPED {test}: {msg}");
    false
}

/// One simulated cluster: an API server and a kubeconfig for it.
pub struct Cluster {
    pub name: String,
    pub port: u16,
    pub kubeconfig: PathBuf,
    process: Child,
}

impl Cluster {
    /// A client for this cluster.
    pub async fn client(&self) -> Result<Client> {
        let kc = Kubeconfig::read_from(&self.kubeconfig)?;
        let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(cfg)?)
    }

    /// Kills the API server (as `kill -9` would) to test recovery.
    pub fn kill(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// etcd plus one API server per cluster name.
pub struct Fleet {
    pub dir: PathBuf,
    pub clusters: Vec<Cluster>,
    etcd: Child,
    etcd_port: u16,
    _tmp: Option<TempDir>,
}

impl Fleet {
    /// Starts the fleet and installs the CRDs into every cluster (Gateway
    /// API of `GATEWAY_API_VERSION`, see `crate::crds::gateway_api_version`).
    pub async fn start(names: &[&str]) -> Result<Self> {
        let version = crate::crds::gateway_api_version()?;
        let clusters: Vec<(&str, &str)> = names.iter().map(|n| (*n, version.as_str())).collect();
        Self::start_versions(&clusters).await
    }

    /// Starts the fleet with each cluster's own Gateway API CRD version,
    /// `(name, version)` (a mixed fleet: e.g. a management cluster on v1.3.0
    /// and workload clusters on v1.2.1 and v1.5.1).
    pub async fn start_versions(clusters: &[(&str, &str)]) -> Result<Self> {
        let assets = assets_dir();
        if !assets_present() {
            return Err(FleetError::NoAssets(assets.display().to_string()));
        }
        let tmp = TempDir::new("gwhub-e2e")?;
        let dir = tmp.path().to_path_buf();
        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd = spawn(
            Command::new(assets.join("etcd"))
                .arg("--data-dir")
                .arg(dir.join("etcd"))
                .arg(format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"))
                .arg(format!(
                    "--advertise-client-urls=http://127.0.0.1:{etcd_port}"
                ))
                .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
                .arg(format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
                ))
                .arg(format!(
                    "--initial-cluster=default=http://127.0.0.1:{peer_port}"
                )),
            &dir.join("etcd.log"),
        )?;
        run(Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(dir.join("sa.key"))
            .arg("2048"))?;
        run(Command::new("openssl")
            .args(["rsa", "-in"])
            .arg(dir.join("sa.key"))
            .arg("-pubout")
            .arg("-out")
            .arg(dir.join("sa.pub")))?;
        let mut tokens = format!("{TOKEN},admin,admin,system:masters\n");
        for user in STATIC_USERS {
            tokens.push_str(&format!("{},{user},{user}-uid\n", static_token(user)));
        }
        write(&dir.join("tokens.csv"), &tokens)?;
        let mut fleet = Fleet {
            dir: dir.clone(),
            clusters: Vec::new(),
            etcd,
            etcd_port,
            _tmp: Some(tmp),
        };
        for (name, _) in clusters {
            let c = fleet.spawn_apiserver(name, free_port()?)?;
            fleet.clusters.push(c);
        }
        for (c, (_, version)) in fleet.clusters.iter().zip(clusters) {
            let client = wait_ready(c).await?;
            crate::crds::install_version(&client, version).await?;
            create_namespaces(&client, &["default", "openshift-ingress"]).await?;
        }
        Ok(fleet)
    }

    fn spawn_apiserver(&self, name: &str, port: u16) -> Result<Cluster> {
        let etcd_port = self.etcd_port;
        let dir = &self.dir;
        let process = spawn(
            Command::new(assets_dir().join("kube-apiserver"))
                .arg(format!("--etcd-servers=http://127.0.0.1:{etcd_port}"))
                .arg(format!("--etcd-prefix=/{name}"))
                .arg("--bind-address=127.0.0.1")
                .arg(format!("--secure-port={port}"))
                .arg(format!(
                    "--cert-dir={}",
                    dir.join(format!("{name}-certs")).display()
                ))
                .arg(format!(
                    "--token-auth-file={}",
                    dir.join("tokens.csv").display()
                ))
                .arg("--authorization-mode=RBAC")
                .arg("--service-account-issuer=https://kubernetes.default.svc")
                .arg(format!(
                    "--service-account-key-file={}",
                    dir.join("sa.pub").display()
                ))
                .arg(format!(
                    "--service-account-signing-key-file={}",
                    dir.join("sa.key").display()
                ))
                .arg("--service-cluster-ip-range=10.0.0.0/24")
                .arg("--advertise-address=127.0.0.1")
                // No beta API versions: gwhub, its manifests and kubectl
                // use only GA ones (and CRDs, which this does not touch).
                // Priority and fairness stays on, as on OpenShift: its only
                // version in 1.20 is beta. Measured on the 2-core machine,
                // one API server's CPU to ready and through the v1.5.1 CRDs
                // fell from ~5.7 s to ~4.1 s; the suites are CPU-bound on
                // their API servers (~250 starts a run).
                .arg("--runtime-config=api/beta=false,flowcontrol.apiserver.k8s.io/v1beta1=true"),
            &dir.join(format!("{name}.log")),
        )?;
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        write(&kubeconfig, &kubeconfig_text(name, port, ""))?;
        Ok(Cluster {
            name: name.to_owned(),
            port,
            kubeconfig,
            process,
        })
    }

    /// Kills `name`'s API server (as `kill -9` would); its data stays in
    /// etcd. [`Fleet::start_apiserver`] brings it back.
    pub fn kill_apiserver(&mut self, name: &str) {
        self.cluster_mut(name).kill();
    }

    /// Starts `name`'s API server again on the same port (after
    /// [`Fleet::kill_apiserver`]) and waits until it serves.
    pub async fn start_apiserver(&mut self, name: &str) -> Result<()> {
        self.cluster_mut(name).kill();
        let port = self.cluster(name).port;
        let fresh = self.spawn_apiserver(name, port)?;
        *self.cluster_mut(name) = fresh;
        let client = wait_ready(self.cluster(name)).await?;
        // /version answers before the CRDs' handlers are back (a 404 "page
        // not found" for Gateways): wait until they serve again.
        use gateway_api::apis::standard::gateways::Gateway;
        let gateways: kube::Api<Gateway> = kube::Api::all(client);
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Err(e) = gateways
            .list(&kube::api::ListParams::default().limit(1))
            .await
        {
            if Instant::now() > deadline {
                return Err(FleetError::Start(format!(
                    "API server {name} does not serve Gateways after a restart: {e}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    fn cluster_mut(&mut self, name: &str) -> &mut Cluster {
        self.clusters
            .iter_mut()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no cluster {name} in this fleet"))
    }

    /// The cluster called `name`.
    pub fn cluster(&self, name: &str) -> &Cluster {
        self.clusters
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no cluster {name} in this fleet"))
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.clusters {
            c.kill();
        }
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
        if std::thread::panicking() {
            // Keep the logs of a failed test for a post-mortem.
            if let Some(tmp) = self._tmp.take() {
                eprintln!("e2e logs kept in {}", tmp.keep().display());
            }
        }
    }
}

/// A kubeconfig for the API server on `port` with the admin token, plus
/// `extra` fields on its user (e.g. `as: ...`).
pub(crate) fn kubeconfig_text(name: &str, port: u16, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { ", " };
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: {name}, cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}}}]\n\
         users: [{{name: admin, user: {{token: {TOKEN}{sep}{extra}}}}}]\n\
         contexts: [{{name: {name}, context: {{cluster: {name}, user: admin}}}}]\n\
         current-context: {name}\n"
    )
}

/// How long [`wait_ready`] waits: only how long a broken start takes to
/// report. On a machine loaded to 30 on 2 cores the RBAC bootstrap alone
/// took over 90 s.
const READY_WITHIN: Duration = Duration::from_secs(300);

/// Waits for `/readyz`, not just `/version`: until the post-start hooks
/// are done (rbac/bootstrap-roles among them) the admission plugins that
/// authorize by RBAC alone (a CSR's `approval`, signers) refuse even
/// `system:masters`, which a fast test on a loaded machine would hit.
async fn wait_ready(c: &Cluster) -> Result<Client> {
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        let attempt = async {
            let client = c.client().await?;
            let readyz = tonic::codegen::http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| FleetError::Start(format!("/readyz request: {e}")))?;
            client.request_text(readyz).await?;
            Ok::<_, FleetError>(client)
        };
        match attempt.await {
            Ok(client) => return Ok(client),
            Err(e) if Instant::now() > deadline => {
                return Err(FleetError::Start(format!(
                    "API server {} not ready after {READY_WITHIN:?}: {e}",
                    c.name
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// There is no controller-manager to create `default`; tests need it and the
/// namespace OpenShift Gateways live in.
pub async fn create_namespaces(client: &Client, names: &[&str]) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, Patch, PatchParams};
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        api.patch(name, &PatchParams::apply("gwhub-tests"), &Patch::Apply(&ns))
            .await?;
    }
    Ok(())
}

fn free_port() -> Result<u16> {
    crate::procs::try_free_port().map_err(|source| FleetError::Io {
        what: "bind a free port".into(),
        source,
    })
}

fn spawn(cmd: &mut Command, log: &Path) -> Result<Child> {
    // Appends: a restarted API server keeps its predecessor's log.
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|source| FleetError::Io {
            what: format!("create {}", log.display()),
            source,
        })?;
    let err = out.try_clone().map_err(|source| FleetError::Io {
        what: "dup log".into(),
        source,
    })?;
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|source| FleetError::Io {
            what: format!("spawn {:?}", cmd.get_program()),
            source,
        })
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().map_err(|source| FleetError::Io {
        what: format!("run {:?}", cmd.get_program()),
        source,
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(FleetError::Start(format!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| FleetError::Io {
        what: format!("write {}", path.display()),
        source,
    })
}

/// A temporary directory removed on drop (unless kept for a post-mortem).
struct TempDir(Option<PathBuf>);

impl TempDir {
    fn new(prefix: &str) -> Result<Self> {
        let base = std::env::temp_dir();
        for n in 0..1000u32 {
            let p = base.join(format!("{prefix}-{}-{n}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir(Some(p)));
            }
        }
        Err(FleetError::Start(
            "could not create a temporary directory".into(),
        ))
    }
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new("/nonexistent"))
    }
    fn keep(mut self) -> PathBuf {
        self.0.take().unwrap_or_default()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}
