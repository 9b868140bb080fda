//! mTLS over real loopback TCP: the certificate names the cluster, a Hello
//! for another cluster is refused, foreign or missing client certificates
//! never get past the handshake, the Dashboard and the web page work over
//! TLS (optionally behind a client CA or a bearer token), an identity is
//! read from the SAN URI, then the CN, and `gwhub certs` output drives the
//! real `gwhub serve` and `gwhub-agent run` binaries.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gwhub::hub::{Layout, generate};
use gwhub_agent::runtime::dir_source::engine_evaluate;
use gwhub_agent::runtime::{DirSource, HubConfig as AgentConfig, run_dir_agent};
use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_identity::tls::HubTls;
// The test kit's process guard, binaries and free address, under the
// names this suite used.
use gwhub_proto::v1::{
    self, dashboard_client::DashboardClient, hub_message, ingest_client::IngestClient,
};
use gwhub_test_kit::procs::{Process as Child, agent_binary, free_addr, gwhub_binary as hub_bin};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::support::mtls::{
    Pki, TempDir, WAIT, assert_refused_by_tls, channel, example_dir, first_answer, hello, start,
    uri,
};

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

/// Trusts `ca` for the server; presents `identity` if given.
fn client_tls(ca: &Path, identity: Option<(&Path, &Path)>) -> ClientTlsConfig {
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)));
    match identity {
        Some((c, k)) => tls.identity(Identity::from_pem(read(c), read(k))),
        None => tls,
    }
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

// ---- rotation: TLS files mounted as the kubelet mounts a Secret ------------
