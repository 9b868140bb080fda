//! mTLS over real loopback TCP: the certificate names the cluster, a Hello
//! for another cluster is refused, foreign or missing client certificates
//! never get past the handshake, the Dashboard works over TLS (optionally
//! behind a client CA or a bearer token), and `gwhub certs` output drives
//! the real `gwhub serve` and `gwhub-agent run` binaries. Rotation: files
//! mounted as the kubelet mounts a Secret are reloaded, an expiring or
//! no longer trusted client certificate ends its stream.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gwhub::hub::{Layout, generate};
use gwhub_agent::runtime::dir_source::engine_evaluate;
use gwhub_agent::runtime::{DirSource, HubConfig as AgentConfig, run_dir_agent};
use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_hub::tls::{HubTls, TlsPaths};
// The test kit's process guard, binaries and free address, under the
// names this suite used.
use gwhub_proto::v1::{
    self, agent_message, dashboard_client::DashboardClient, hub_message,
    ingest_client::IngestClient,
};
use gwhub_test_kit::mounted_secret::MountedSecret;
use gwhub_test_kit::procs::{Process as Child, agent_binary, free_addr, gwhub_binary as hub_bin};
use gwhub_test_kit::raw_agent;
use gwhub_test_kit::wait::until;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const WAIT: Duration = Duration::from_secs(10);

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!(
            "gwhub-mtls-{tag}-{}-{}",
            std::process::id(),
            fastrand_suffix()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn certs(dir: &Path, clusters: &[&str]) -> Layout {
    let clusters: Vec<String> = clusters.iter().map(|c| (*c).to_owned()).collect();
    generate(dir, &clusters, &["127.0.0.1".to_owned()], false).unwrap()
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

fn cluster_files<'a>(l: &'a Layout, name: &str) -> (&'a Path, &'a Path) {
    let (_, c, k) = l.clusters.iter().find(|(n, _, _)| n == name).unwrap();
    (c, k)
}

fn hub_tls(l: &Layout) -> HubTls {
    HubTls::from_pem(&read(&l.hub_cert), &read(&l.hub_key), &read(&l.ca))
}

async fn start(tls: HubTls) -> Hub {
    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.insecure = false;
    Hub::start_with_tls(config, Some(tls)).await.unwrap()
}

/// Trusts `ca` for the server; presents `identity` if given.
fn client_tls(ca: &Path, identity: Option<(&Path, &Path)>) -> ClientTlsConfig {
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)));
    match identity {
        Some((c, k)) => tls.identity(Identity::from_pem(read(c), read(k))),
        None => tls,
    }
}

async fn channel(addr: SocketAddr, tls: ClientTlsConfig) -> Result<Channel, String> {
    Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_timeout(WAIT)
        .connect()
        .await
        .map_err(|e| format!("{e:?}"))
}

/// The test kit's Hello for `cluster`, as the stream's first message.
fn hello(cluster: &str) -> v1::AgentMessage {
    raw_agent::msg(agent_message::Message::Hello(raw_agent::hello(cluster)))
}

/// Opens a stream with a Hello and returns the hub's first answer (or the
/// error the call or stream ended with). The sender is kept alive.
async fn first_answer(
    channel: Channel,
    cluster: &str,
) -> (
    Result<hub_message::Message, tonic::Status>,
    mpsc::Sender<v1::AgentMessage>,
) {
    let mut client = IngestClient::new(channel);
    let (tx, rx) = mpsc::channel(4);
    tx.send(hello(cluster)).await.unwrap();
    let call = tokio::time::timeout(WAIT, client.report(ReceiverStream::new(rx)))
        .await
        .expect("the hub answers in time");
    let mut inbound = match call {
        Ok(r) => r.into_inner(),
        Err(s) => return (Err(s), tx),
    };
    let m = tokio::time::timeout(WAIT, inbound.next())
        .await
        .expect("the hub answers in time")
        .expect("a message or an error");
    (m.map(|m| m.message.expect("non-empty")), tx)
}

async fn try_clusters(
    addr: SocketAddr,
    tls: ClientTlsConfig,
) -> Result<Vec<v1::ClusterInfo>, String> {
    let ch = channel(addr, tls).await?;
    Ok(DashboardClient::new(ch)
        .list_clusters(v1::ListClustersRequest {})
        .await
        .map_err(|e| format!("{e:?}"))?
        .into_inner()
        .clusters)
}

async fn clusters(addr: SocketAddr, tls: ClientTlsConfig) -> Vec<v1::ClusterInfo> {
    try_clusters(addr, tls).await.unwrap()
}

async fn wait_cluster(addr: SocketAddr, tls: ClientTlsConfig, name: &str) -> v1::ClusterInfo {
    let deadline = Instant::now() + WAIT;
    loop {
        let list = try_clusters(addr, tls.clone()).await.unwrap_or_default();
        if let Some(c) = list.iter().find(|c| c.name == name && c.gateway_count > 0) {
            return c.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {name}: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spoke-agent/examples/aws-healthy")
}

#[tokio::test]
async fn agent_with_east_certificate_reports_as_east() {
    let dir = TempDir::new("east");
    let l = certs(&dir.0, &["east", "west"]);
    let hub = start(hub_tls(&l)).await;

    let (cert, key) = cluster_files(&l, "east");
    let tls = gwhub_agent::runtime::tls::ClientTls::load(cert, key, &l.ca, None).unwrap();
    assert_eq!(tls.cluster, "east");
    let mut config = AgentConfig::new(format!("https://{}", hub.ingest_addr), &tls.cluster);
    config.tls = Some(tls.config);
    let source = DirSource::new(example_dir(), engine_evaluate(Default::default())).unwrap();
    let stop = CancellationToken::new();
    let agent = tokio::spawn(run_dir_agent(config, source, stop.clone()));

    let info = wait_cluster(hub.dashboard_addr, client_tls(&l.ca, None), "east").await;
    assert!(info.connected);
    let all = clusters(hub.dashboard_addr, client_tls(&l.ca, None)).await;
    assert_eq!(
        all.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["east"]
    );

    stop.cancel();
    agent.await.unwrap();
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn hello_for_another_cluster_is_permission_denied() {
    let dir = TempDir::new("claim");
    let l = certs(&dir.0, &["east", "west"]);
    let hub = start(hub_tls(&l)).await;
    let east = client_tls(&l.ca, Some(cluster_files(&l, "east")));

    // An empty claim defers to the certificate.
    let ch = channel(hub.ingest_addr, east.clone()).await.unwrap();
    let (answer, tx) = first_answer(ch, "").await;
    match answer {
        Ok(hub_message::Message::Hello(h)) => assert_eq!(h.cluster, "east"),
        other => panic!("expected HubHello for east, got {other:?}"),
    }
    drop(tx);

    let ch = channel(hub.ingest_addr, east).await.unwrap();
    let (answer, _tx) = first_answer(ch, "west").await;
    let status = answer.expect_err("a Hello for west on an east certificate is refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("\"west\"") && status.message().contains("\"east\""),
        "{status:?}"
    );
    let all = clusters(hub.dashboard_addr, client_tls(&l.ca, None)).await;
    assert!(all.iter().all(|c| c.name != "west"), "{all:?}");
    hub.shutdown().await.unwrap();
}

/// The handshake (or the first exchange, as TLS 1.3 reports a rejected
/// client certificate after the client's Finished) fails below gRPC.
async fn assert_refused_by_tls(hub: &Hub, tls: ClientTlsConfig) {
    let outcome = match channel(hub.ingest_addr, tls).await {
        Err(e) => Err(e),
        Ok(ch) => first_answer(ch, "east")
            .await
            .0
            .map_err(|s| format!("{s:?}")),
    };
    let err = outcome.expect_err("refused");
    // e.g. DecryptError (signature from another CA), CertificateRequired.
    assert!(
        err.contains("received fatal alert"),
        "refused by something other than TLS: {err}"
    );
}

#[tokio::test]
async fn foreign_ca_or_no_client_certificate_is_refused_at_the_handshake() {
    let dir = TempDir::new("foreign");
    let l = certs(&dir.0.join("ours"), &["east"]);
    let theirs = certs(&dir.0.join("theirs"), &["east"]);
    let hub = start(hub_tls(&l)).await;

    // Trusts our hub, but presents a certificate from another CA.
    assert_refused_by_tls(
        &hub,
        client_tls(&l.ca, Some(cluster_files(&theirs, "east"))),
    )
    .await;
    // No client certificate at all.
    assert_refused_by_tls(&hub, client_tls(&l.ca, None)).await;
    // Plaintext against the TLS listener.
    let plain = IngestClient::connect(format!("http://{}", hub.ingest_addr)).await;
    if let Ok(c) = plain {
        let (tx, rx) = mpsc::channel(1);
        tx.send(hello("east")).await.unwrap();
        let mut c = c;
        let r = tokio::time::timeout(WAIT, c.report(ReceiverStream::new(rx)))
            .await
            .unwrap();
        assert!(r.is_err(), "plaintext must not reach the ingest service");
    }

    let all = clusters(hub.dashboard_addr, client_tls(&l.ca, None)).await;
    assert!(all.is_empty(), "{all:?}");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_connection_left_idle_after_a_refused_call_is_closed() {
    let dir = TempDir::new("idle");
    let l = certs(&dir.0, &["east"]);
    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.insecure = false;
    config.budgets.idle_connection_timeout = Duration::from_millis(300);
    let hub = Hub::start_with_tls(config, Some(hub_tls(&l).with_dashboard_token("s3cret")))
        .await
        .unwrap();
    let ch = channel(hub.dashboard_addr, client_tls(&l.ca, None))
        .await
        .unwrap();
    // The client keeps its connection open.
    let mut d = DashboardClient::new(ch);
    let e = d
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    let counters = hub.metrics.listeners.clone();
    let deadline = tokio::time::Instant::now() + WAIT;
    while counters.dashboard.idle_closed.get() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a connection with no open call kept its slot"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn dashboard_over_tls_with_token_and_client_ca() {
    let dir = TempDir::new("dash");
    let l = certs(&dir.0, &["east"]);

    // Plain server TLS: any client trusting the CA reads.
    let hub = start(hub_tls(&l)).await;
    assert!(
        clusters(hub.dashboard_addr, client_tls(&l.ca, None))
            .await
            .is_empty()
    );
    hub.shutdown().await.unwrap();

    // Bearer token.
    let hub = start(hub_tls(&l).with_dashboard_token("s3cret")).await;
    let ch = channel(hub.dashboard_addr, client_tls(&l.ca, None))
        .await
        .unwrap();
    let e = DashboardClient::new(ch.clone())
        .list_clusters(v1::ListClustersRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    let mut req = tonic::Request::new(v1::ListClustersRequest {});
    req.metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    DashboardClient::new(ch).list_clusters(req).await.unwrap();
    // gwhubctl: refused without the token, reads with --token-file.
    // (The hub runs on this test's runtime: run the client off it.)
    let o = ctl_get_clusters(hub.dashboard_addr, &l.ca, &[]).await;
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("Unauthenticated"));
    let token = dir.0.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let o = ctl_get_clusters(
        hub.dashboard_addr,
        &l.ca,
        &["--token-file".as_ref(), token.as_ref()],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    hub.shutdown().await.unwrap();

    // Client CA: no certificate, no Dashboard; with one, it reads.
    let hub = start(hub_tls(&l).with_dashboard_client_ca(&read(&l.ca))).await;
    let no_cert = match channel(hub.dashboard_addr, client_tls(&l.ca, None)).await {
        Err(e) => Err(e),
        Ok(ch) => DashboardClient::new(ch)
            .list_clusters(v1::ListClustersRequest {})
            .await
            .map(|_| ())
            .map_err(|e| format!("{e:?}")),
    };
    assert!(no_cert.is_err());
    let with_cert = client_tls(&l.ca, Some(cluster_files(&l, "east")));
    assert!(clusters(hub.dashboard_addr, with_cert).await.is_empty());
    // gwhubctl presents its kubeconfig user's client certificate when
    // --tls-cert/--tls-key are not given.
    let (cert, key) = cluster_files(&l, "east");
    let kubeconfig = dir.0.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\n\
             contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
             clusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:1\"}}}}]\n\
             users: [{{name: u, user: {{client-certificate: {}, client-key: {}}}}}]\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let o = ctl_get_clusters(
        hub.dashboard_addr,
        &l.ca,
        &["--kubeconfig".as_ref(), kubeconfig.as_ref()],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    hub.shutdown().await.unwrap();
}

/// `gwhubctl --server https://ADDR --ca CA ARGS.. get clusters`, run off
/// this test's runtime (the hub it asks runs on it).
async fn ctl_get_clusters(
    addr: SocketAddr,
    ca: &Path,
    args: &[&std::ffi::OsStr],
) -> std::process::Output {
    let mut c = Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhubctl",
        "GWHUB_CTL_BIN",
    ));
    c.args(["--server", &format!("https://{addr}")])
        .arg("--ca")
        .arg(ca)
        .args(args)
        .args(["get", "clusters"]);
    tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap()
}

// ---- the real binaries ------------------------------------------------------

#[tokio::test]
async fn gwhub_certs_output_works_with_the_binaries() {
    let agent_bin = agent_binary();
    let dir = TempDir::new("bin");
    let out = dir.0.join("certs");
    let o = Command::new(hub_bin())
        .args(["certs", "--out"])
        .arg(&out)
        .args(["--clusters", "east,west"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("--tls-cert") && text.contains("spiffe://gwhub/cluster/east"),
        "{text}"
    );
    // A second run refuses to overwrite.
    let again = Command::new(hub_bin())
        .args(["certs", "--out"])
        .arg(&out)
        .args(["--clusters", "east"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    // The one cluster-name rule: no uppercase twin, no `..`.
    for (bad, why) in [
        ("EAST", "has uppercase letters"),
        ("..", "names a directory"),
    ] {
        let o = Command::new(hub_bin())
            .args(["certs", "--out"])
            .arg(dir.0.join("bad"))
            .args(["--clusters", bad])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(why), "{bad}: {err}");
    }

    let f = |n: &str| out.join(n);
    let (listen, dashboard) = (free_addr(), free_addr());
    let _hub = Child(
        Command::new(hub_bin())
            .args(["serve", "--no-kube", "--listen", &listen.to_string()])
            .args(["--dashboard-listen", &dashboard.to_string()])
            .arg("--tls-cert")
            .arg(f("hub.pem"))
            .arg("--tls-key")
            .arg(f("hub-key.pem"))
            .arg("--client-ca")
            .arg(f("ca.pem"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let agent = |cluster_flag: Option<&str>| {
        let mut c = Command::new(&agent_bin);
        c.args(["run", "--hub", &format!("https://{listen}")])
            .arg("--tls-cert")
            .arg(f("east.pem"))
            .arg("--tls-key")
            .arg(f("east-key.pem"))
            .arg("--ca")
            .arg(f("ca.pem"))
            .arg("--from-dir")
            .arg(example_dir())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null());
        if let Some(name) = cluster_flag {
            c.args(["--cluster", name]);
        }
        c
    };
    // A --cluster that disagrees with the certificate fails fast, locally.
    let o = agent(Some("west")).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("\"west\"") && err.contains("\"east\""),
        "{err}"
    );

    let _agent = Child(agent(None).spawn().unwrap());
    let info = wait_cluster(dashboard, client_tls(&f("ca.pem"), None), "east").await;
    assert!(info.connected);

    // gwhubctl reads the Dashboard over TLS with the same CA.
    let o = Command::new(gwhub_test_kit::workspace_bin::workspace_binary(
        "gwhub",
        "gwhubctl",
        "GWHUB_CTL_BIN",
    ))
    .args(["--server", &format!("https://{dashboard}"), "--ca"])
    .arg(f("ca.pem"))
    .args(["get", "clusters"])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("east"));
}

// ---- identity rule: SAN URI, else CN, else Unauthenticated -------------------

/// A CA made here (so leaves can be shaped freely) with a hub certificate.
struct Pki {
    ca_pem: String,
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_pem = p.self_signed(&key).unwrap().pem();
        Pki {
            ca_pem,
            ca: rcgen::Issuer::new(p, key),
        }
    }

    /// `(cert, key)` PEMs.
    fn leaf(&self, cn: Option<&str>, sans: Vec<rcgen::SanType>) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        // rcgen's default subject has a CN of its own.
        p.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        }
        p.subject_alt_names = sans;
        (
            p.signed_by(&key, &self.ca).unwrap().pem(),
            key.serialize_pem(),
        )
    }

    fn hub(&self) -> HubTls {
        let ip = rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap());
        let (c, k) = self.leaf(Some("hub"), vec![ip]);
        HubTls::from_pem(c.as_bytes(), k.as_bytes(), self.ca_pem.as_bytes())
    }

    fn client(&self, leaf: &(String, String)) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(Identity::from_pem(&leaf.0, &leaf.1))
    }
}

fn uri(s: &str) -> rcgen::SanType {
    rcgen::SanType::URI(s.try_into().unwrap())
}

#[test]
fn identity_prefers_the_san_uri_then_the_cn() {
    use gwhub_common::identity::{IdentityError, IdentitySource, cluster_from_pem};
    let pki = Pki::new();
    let id = |cn, sans| cluster_from_pem(pki.leaf(cn, sans).0.as_bytes());
    let both = id(
        Some("from-cn"),
        vec![
            uri("https://other/x"),
            uri("spiffe://gwhub/cluster/from-san"),
        ],
    )
    .unwrap();
    assert_eq!(
        (both.cluster.as_str(), both.source),
        ("from-san", IdentitySource::SanUri)
    );
    let cn = id(Some("from-cn"), vec![uri("spiffe://elsewhere/cluster/x")]).unwrap();
    assert_eq!(
        (cn.cluster.as_str(), cn.source),
        ("from-cn", IdentitySource::CommonName)
    );
    assert_eq!(id(None, vec![]), Err(IdentityError::Missing));
    // A certificate naming two clusters speaks for neither.
    let two = id(
        None,
        vec![
            uri("spiffe://gwhub/cluster/east"),
            uri("spiffe://gwhub/cluster/west"),
        ],
    );
    assert_eq!(
        two,
        Err(IdentityError::Ambiguous(vec!["east".into(), "west".into()]))
    );
    // The same cluster twice is still one.
    let same = id(
        None,
        vec![
            uri("spiffe://gwhub/cluster/east"),
            uri("spiffe://gwhub/cluster/east"),
        ],
    )
    .unwrap();
    assert_eq!(same.cluster, "east");
    assert!(matches!(
        id(Some("has space"), vec![]),
        Err(IdentityError::Invalid(..))
    ));
    // The one name rule holds for a SPIFFE SAN too: no `.`/`..`, no
    // uppercase (two clusters never differ only by case).
    for bad in ["EAST", "East", ".", ".."] {
        let got = id(None, vec![uri(&format!("spiffe://gwhub/cluster/{bad}"))]);
        assert!(
            matches!(got, Err(IdentityError::Invalid(..))),
            "{bad}: {got:?}"
        );
    }
}

#[tokio::test]
async fn cn_identity_works_and_no_identity_is_unauthenticated() {
    let pki = Pki::new();
    let hub = start(pki.hub()).await;

    let cn_only = pki.leaf(Some("north"), vec![]);
    let ch = channel(hub.ingest_addr, pki.client(&cn_only))
        .await
        .unwrap();
    let (answer, tx) = first_answer(ch, "").await;
    match answer {
        Ok(hub_message::Message::Hello(h)) => assert_eq!(h.cluster, "north"),
        other => panic!("expected HubHello for north, got {other:?}"),
    }
    drop(tx);

    for (what, leaf) in [
        ("no CN, no SAN URI", pki.leaf(None, vec![])),
        ("unusable CN", pki.leaf(Some("two words"), vec![])),
        (
            "two clusters",
            pki.leaf(
                Some("east"),
                vec![
                    uri("spiffe://gwhub/cluster/east"),
                    uri("spiffe://gwhub/cluster/west"),
                ],
            ),
        ),
    ] {
        let ch = channel(hub.ingest_addr, pki.client(&leaf)).await.unwrap();
        let (answer, _tx) = first_answer(ch, "").await;
        let status = answer.expect_err(what);
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{what}: {status:?}"
        );
    }
    hub.shutdown().await.unwrap();
}

/// GET `path` over TLS (trusting `ca`) with `headers`: the status code and
/// the answer, read until the connection closes or an event arrives.
async fn https_get(addr: SocketAddr, ca: &Path, path: &str, headers: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::{self, pki_types};
    let mut roots = rustls::RootCertStore::empty();
    for cert in pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(Ok(n)) = tokio::time::timeout(WAIT, tls.read(&mut buf)).await {
        text.extend_from_slice(&buf[..n]);
        if n == 0 || String::from_utf8_lossy(&text).contains("event: snapshot") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&text).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    (code, text)
}

/// The web page takes the Dashboard's TLS and bearer token: the page
/// itself is served to anyone who completes the handshake, its data only
/// with the token, in the header or the page's cookie.
#[tokio::test]
async fn the_web_page_takes_the_dashboards_tls_and_token() {
    let dir = TempDir::new("web");
    let l = certs(&dir.0, &["east"]);
    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.insecure = false;
    config.web_listen = Some("127.0.0.1:0".parse().unwrap());
    let hub = Hub::start_with_tls(config, Some(hub_tls(&l).with_dashboard_token("s3cret")))
        .await
        .unwrap();
    let web = hub.web_addr.unwrap();

    // Plaintext gets no page.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(web).await.unwrap();
        let _ = s
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await;
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut buf)).await;
        assert!(
            !String::from_utf8_lossy(&buf).contains("200 OK"),
            "plaintext answered"
        );
    }

    let (code, page) = https_get(web, &l.ca, "/", "").await;
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("<!doctype html>"), "{page}");
    // Over TLS every answer tells the browser to stay on https.
    assert!(
        page.contains("strict-transport-security: max-age=31536000"),
        "{page}"
    );
    let (code, text) = https_get(web, &l.ca, "/api/fleet", "").await;
    assert_eq!(code, 401, "{text}");
    assert!(
        text.contains("strict-transport-security: max-age="),
        "{text}"
    );
    for (headers, want) in [
        ("", 401),
        ("Authorization: Bearer wrong\r\n", 401),
        ("Cookie: gwhub_token=wrong\r\n", 401),
        ("Authorization: Bearer s3cret\r\n", 200),
        ("Cookie: theme=dark; gwhub_token=s3cret\r\n", 200),
    ] {
        for path in [
            "/api/fleet",
            "/api/gateway?namespace=a&name=b",
            "/api/events",
        ] {
            let (code, text) = https_get(web, &l.ca, path, headers).await;
            // A Gateway no cluster reports: 404 once past the token.
            let want = match (path.starts_with("/api/gateway"), want) {
                (true, 200) => 404,
                (_, w) => w,
            };
            if path == "/api/events" && want == 200 {
                // An open stream, starting with the snapshot.
                assert_eq!(code, 200, "{text}");
                assert!(text.contains("text/event-stream"), "{text}");
                continue;
            }
            assert_eq!(code, want, "{headers:?} {path}: {text}");
            if want == 401 {
                assert!(text.contains("gwhub_token"), "{text}");
            }
        }
    }
    hub.shutdown().await.unwrap();
}

// ---- rotation (issue 23): TLS files mounted as the kubelet mounts a Secret ----

/// How often the hub compares its TLS files in these tests.
const RELOAD: Duration = Duration::from_millis(200);
/// The short-lived certificates' lifetime (s): the agent connects well
/// within it.
const LIFETIME: i64 = 8;
/// Long enough for a certificate to expire and a stream to notice.
const EXPIRY_WAIT: Duration = Duration::from_secs(30);

fn unix_now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn der(pem: &str) -> Vec<u8> {
    use tokio_rustls::rustls::pki_types::{CertificateDer, pem::PemObject};
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

impl Pki {
    /// A hub serving certificate for 127.0.0.1.
    fn hub_leaf(&self) -> (String, String) {
        let ip = rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap());
        self.leaf(Some("hub"), vec![ip])
    }

    /// `cluster`'s certificate, valid over `window` (Unix seconds) if given.
    fn cluster(&self, cluster: &str, window: Option<(i64, i64)>) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.subject_alt_names = vec![uri(&format!("spiffe://gwhub/cluster/{cluster}"))];
        if let Some((from, to)) = window {
            gwhub::hub::set_window(&mut p, from, to);
        }
        (
            p.signed_by(&key, &self.ca).unwrap().pem(),
            key.serialize_pem(),
        )
    }
}

/// A Secret's files: `tls.crt`, `tls.key`, `ca.crt`.
fn secret_files<'a>(leaf: &'a (String, String), ca: &'a str) -> [(&'static str, &'a [u8]); 3] {
    [
        ("tls.crt", leaf.0.as_bytes()),
        ("tls.key", leaf.1.as_bytes()),
        ("ca.crt", ca.as_bytes()),
    ]
}

/// A hub reading `--tls-cert`, `--tls-key` and `--client-ca` from the
/// mounted `secret`, compared every [`RELOAD`].
async fn start_mounted(secret: &MountedSecret) -> Hub {
    let (cert, key, ca) = (
        secret.path("tls.crt"),
        secret.path("tls.key"),
        secret.path("ca.crt"),
    );
    let tls = HubTls::load(&TlsPaths {
        cert: Some(&cert),
        key: Some(&key),
        client_ca: Some(&ca),
        ..TlsPaths::default()
    })
    .unwrap()
    .unwrap()
    .with_reload_interval(RELOAD);
    start(tls).await
}

/// An in-process agent with `--tls-cert`, `--tls-key` and `--ca` from the
/// mounted `secret` (re-read at each connect), reconnecting quickly; its
/// certificate-expiry gauge.
fn spawn_agent(
    hub: &Hub,
    secret: &MountedSecret,
    stop: &CancellationToken,
) -> (tokio::task::JoinHandle<()>, impl Fn() -> i64 + use<>) {
    let url = format!("https://{}", hub.ingest_addr);
    let (cert, key, ca) = (
        secret.path("tls.crt"),
        secret.path("tls.key"),
        secret.path("ca.crt"),
    );
    let (cluster, tls) = gwhub_agent::runtime::tls::hub_connection(
        &url,
        false,
        None,
        Some(&cert),
        Some(&key),
        Some(&ca),
    )
    .unwrap();
    let (tls, files) = tls.unwrap();
    let expiry = files.expiry.clone();
    let mut config = AgentConfig::new(url, &cluster);
    config.tls = Some(tls);
    config.tls_files = Some(files);
    config.backoff_max = Duration::from_millis(300);
    let source = DirSource::new(example_dir(), engine_evaluate(Default::default())).unwrap();
    (
        tokio::spawn(run_dir_agent(config, source, stop.clone())),
        move || expiry.get(),
    )
}

/// `cluster`'s (connected, stale, session) in the hub, if known.
fn state(hub: &Hub, cluster: &str) -> Option<(bool, bool, u64)> {
    hub.index
        .clusters()
        .into_iter()
        .find(|c| c.name == cluster)
        .map(|c| (c.connected, c.stale, c.session))
}

async fn connected(hub: &Hub, cluster: &str) -> u64 {
    let s = until(
        WAIT,
        || async { state(hub, cluster) },
        |s| matches!(s, Some((true, false, _))),
    )
    .await;
    s.map(|(_, _, session)| session).unwrap_or_default()
}

/// The certificate the hub presents on `addr` now (trusting `ca`).
async fn served_cert(addr: SocketAddr, ca: &str) -> Vec<u8> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::{self, pki_types};
    let mut roots = rustls::RootCertStore::empty();
    for cert in pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// The serving certificate's Secret is updated (the kubelet's `..data`
/// swap): new handshakes get the new certificate within seconds, with no
/// restart, and the agent's open stream is not dropped.
#[tokio::test]
async fn a_swapped_serving_certificate_is_served_without_a_restart() {
    let dir = TempDir::new("swap-serving");
    let pki = Pki::new();
    let first = pki.hub_leaf();
    let mut hub_secret =
        MountedSecret::new(&dir.0.join("hub"), &secret_files(&first, &pki.ca_pem)).unwrap();
    let east = pki.cluster("east", None);
    let east_secret =
        MountedSecret::new(&dir.0.join("east"), &secret_files(&east, &pki.ca_pem)).unwrap();
    let hub = start_mounted(&hub_secret).await;
    assert_eq!(
        served_cert(hub.dashboard_addr, &pki.ca_pem).await,
        der(&first.0)
    );
    let stop = CancellationToken::new();
    let (agent, _) = spawn_agent(&hub, &east_secret, &stop);
    let session = connected(&hub, "east").await;

    let second = pki.hub_leaf();
    hub_secret
        .swap(&secret_files(&second, &pki.ca_pem))
        .unwrap();
    let want = der(&second.0);
    until(
        WAIT,
        || served_cert(hub.dashboard_addr, &pki.ca_pem),
        |d| *d == want,
    )
    .await;
    let tls = hub.metrics.tls.clone();
    // Counted once the new certificate is in place (not necessarily before
    // the first handshake with it).
    until(WAIT, || async { tls.reloads("serving", "ok") }, |n| *n == 1).await;
    // The agent's stream went on through the swap (and a few more looks).
    tokio::time::sleep(RELOAD * 3).await;
    assert_eq!(
        state(&hub, "east"),
        Some((true, false, session)),
        "east's stream did not survive the serving certificate's swap"
    );

    // A file that does not parse keeps the certificate in use.
    hub_secret
        .swap(&[
            ("tls.crt", b"garbage".as_slice()),
            ("tls.key", second.1.as_bytes()),
            ("ca.crt", pki.ca_pem.as_bytes()),
        ])
        .unwrap();
    until(
        WAIT,
        || async { tls.reloads("serving", "error") },
        |n| *n == 1,
    )
    .await;
    assert_eq!(served_cert(hub.dashboard_addr, &pki.ca_pem).await, want);
    assert_eq!(state(&hub, "east"), Some((true, false, session)));

    stop.cancel();
    agent.await.unwrap();
    hub.shutdown().await.unwrap();
}

/// The client CA's Secret is replaced by another CA: the stream of an
/// agent with an old-CA certificate is ended, a fresh old-CA connection is
/// refused at the handshake, and an agent with a new-CA certificate streams.
#[tokio::test]
async fn a_replaced_client_ca_ends_and_refuses_old_ca_agents() {
    let dir = TempDir::new("swap-ca");
    let (old, new) = (Pki::new(), Pki::new());
    // The hub's serving certificate stays from the old CA, which both
    // agents trust for the hub.
    let serving = old.hub_leaf();
    let mut hub_secret =
        MountedSecret::new(&dir.0.join("hub"), &secret_files(&serving, &old.ca_pem)).unwrap();
    let east = old.cluster("east", None);
    let east_secret =
        MountedSecret::new(&dir.0.join("east"), &secret_files(&east, &old.ca_pem)).unwrap();
    let west = new.cluster("west", None);
    let west_secret =
        MountedSecret::new(&dir.0.join("west"), &secret_files(&west, &old.ca_pem)).unwrap();
    let hub = start_mounted(&hub_secret).await;
    let stop = CancellationToken::new();
    let (east_agent, _) = spawn_agent(&hub, &east_secret, &stop);
    connected(&hub, "east").await;

    hub_secret
        .swap(&secret_files(&serving, &new.ca_pem))
        .unwrap();
    let tls = hub.metrics.tls.clone();
    until(
        WAIT,
        || async { tls.streams_ended("untrusted") },
        |n| *n == 1,
    )
    .await;
    until(
        WAIT,
        || async { state(&hub, "east") },
        |s| matches!(s, Some((false, _, _))),
    )
    .await;
    until(
        WAIT,
        || async { tls.reloads("client_ca", "ok") },
        |n| *n == 1,
    )
    .await;
    // A fresh connection with the old CA's certificate.
    assert_refused_by_tls(&hub, old.client(&east)).await;
    assert!(tls.handshakes_refused("ingest", "untrusted") >= 1);

    let (west_agent, _) = spawn_agent(&hub, &west_secret, &stop);
    connected(&hub, "west").await;
    // The old-CA agent, retrying all along, is still out.
    assert!(matches!(state(&hub, "east"), Some((false, _, _))));

    stop.cancel();
    east_agent.await.unwrap();
    west_agent.await.unwrap();
    hub.shutdown().await.unwrap();
}

/// A client certificate expiring mid-stream: the hub ends the stream with
/// a clear status; once the agent's Secret holds a renewed certificate the
/// agent reconnects with it and the cluster is fresh again.
#[tokio::test]
async fn an_expiring_client_certificate_ends_the_stream_until_renewed() {
    let dir = TempDir::new("expiry");
    let pki = Pki::new();
    let hub_secret = MountedSecret::new(
        &dir.0.join("hub"),
        &secret_files(&pki.hub_leaf(), &pki.ca_pem),
    )
    .unwrap();
    let hub = start_mounted(&hub_secret).await;
    let now = unix_now();
    let short = pki.cluster("east", Some((now - 300, now + LIFETIME)));
    let mut east_secret =
        MountedSecret::new(&dir.0.join("east"), &secret_files(&short, &pki.ca_pem)).unwrap();
    let stop = CancellationToken::new();
    let (agent, expiry) = spawn_agent(&hub, &east_secret, &stop);
    assert_eq!(expiry(), now + LIFETIME);
    let session = connected(&hub, "east").await;

    // What the hub says, on a raw stream of another short-lived cluster.
    let south = pki.cluster("south", Some((now - 300, now + LIFETIME)));
    let ch = channel(hub.ingest_addr, pki.client(&south)).await.unwrap();
    let mut client = IngestClient::new(ch);
    let (tx, rx) = mpsc::channel(4);
    tx.send(hello("south")).await.unwrap();
    let mut inbound = client
        .report(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let status = tokio::time::timeout(EXPIRY_WAIT, async {
        loop {
            match inbound.next().await {
                Some(Ok(_)) => continue,
                Some(Err(status)) => return status,
                None => panic!("the stream closed without a status"),
            }
        }
    })
    .await
    .expect("the hub ends the stream of an expired certificate");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains("expired"), "{status:?}");
    drop(tx);

    let tls = hub.metrics.tls.clone();
    until(
        EXPIRY_WAIT,
        || async { tls.streams_ended("expired") },
        |n| *n == 2,
    )
    .await;
    until(
        WAIT,
        || async { state(&hub, "east") },
        |s| matches!(s, Some((false, _, _))),
    )
    .await;
    // The expired certificate is refused at the handshake now.
    assert_refused_by_tls(&hub, pki.client(&short)).await;
    assert!(tls.handshakes_refused("ingest", "expired") >= 1);

    let renewed = pki.cluster("east", Some((now - 300, now + 86_400)));
    east_secret
        .swap(&secret_files(&renewed, &pki.ca_pem))
        .unwrap();
    let s = until(
        WAIT,
        || async { state(&hub, "east") },
        |s| matches!(s, Some((true, false, n)) if *n != session),
    )
    .await;
    assert!(s.is_some());
    assert_eq!(expiry(), now + 86_400);

    stop.cancel();
    agent.await.unwrap();
    hub.shutdown().await.unwrap();
}
