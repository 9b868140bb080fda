//! Certificate rotation over real loopback TCP: TLS files mounted as the
//! kubelet mounts a Secret are reloaded, so a swapped serving certificate
//! is served without a restart, a replaced client CA ends and refuses the
//! old CA's agents, and an expiring client certificate ends its stream
//! until it is renewed.

use std::net::SocketAddr;
use std::time::Duration;

use gwhub_agent::runtime::dir_source::engine_evaluate;
use gwhub_agent::runtime::{DirSource, HubConfig as AgentConfig, run_dir_agent};
use gwhub_hub::serve::Hub;
use gwhub_identity::tls::{HubTls, TlsPaths};
// The test kit's process guard, binaries and free address, under the
// names this suite used.
use gwhub_proto::v1::ingest_client::IngestClient;
use gwhub_test_kit::mounted_secret::MountedSecret;
use gwhub_test_kit::wait::until;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::support::mtls::{
    Pki, TempDir, WAIT, assert_refused_by_tls, channel, example_dir, hello, start, uri,
};

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
