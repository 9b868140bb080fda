//! The hub's CA and serving certificate in Secrets (spec section 7), on a
//! real API server, the hub acting as its ServiceAccount from
//! `manifests/`: it makes `gwhub-ca` and `gwhub-serving` when absent and
//! serves with them on every listener (a client trusting the CA from the
//! Secret connects), the leader renews the serving
//! certificate before it expires, and an operator's replacement Secret is
//! served without a restart and never overwritten.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gwhub_hub::kube::leader::LeaseConfig;
use gwhub_hub::kube::tls_secrets::{CA_SECRET, MANAGED_BY, SERVING_SECRET, SecretsConfig};
use gwhub_hub::kube::{Connected, KubeHub, KubeOptions};
use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_hub::tls::TlsPaths;
use gwhub_test_kit::apiserver::{Fleet, require_assets};
use gwhub_test_kit::install::{SYSTEM_NS, install_hub};
use gwhub_test_kit::wait::until;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{self, pki_types};

const WAIT: Duration = Duration::from_secs(20);

fn key(s: &Secret, k: &str) -> Vec<u8> {
    s.data.as_ref().unwrap()[k].0.clone()
}

fn der(pem: &[u8]) -> Vec<u8> {
    pki_types::CertificateDer::from_pem_slice(pem)
        .unwrap()
        .to_vec()
}

/// The leaf `addr` serves, verified against `ca` for `name`.
async fn served(addr: SocketAddr, ca: &[u8], name: &str) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in pki_types::CertificateDer::pem_slice_iter(ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    Ok(tls.get_ref().1.peer_certificates().unwrap()[0].to_vec())
}

async fn start_hub(client: &kube::Client, lifetime: Duration) -> KubeHub {
    let mut options = KubeOptions::new(SYSTEM_NS);
    options.lease = Some(LeaseConfig {
        name: "gwhub-hub".into(),
        identity: "tls-secrets".into(),
        lease_duration: Duration::from_secs(4),
        renew_every: Duration::from_millis(500),
    });
    let mut connected = Connected::new(client.clone(), options).await.unwrap();
    let mut secrets = SecretsConfig::new(SYSTEM_NS);
    secrets.sans = vec!["localhost".into(), "127.0.0.1".into()];
    secrets.serving_lifetime = lifetime;
    let tls = connected
        .tls_from_secrets(secrets, &TlsPaths::default())
        .await
        .expect("the hub makes and reads its Secrets");
    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.insecure = false;
    let hub = Hub::start_with_tls(config, Some(tls)).await.unwrap();
    connected.attach(hub)
}

#[tokio::test]
async fn the_hub_makes_serves_renews_and_follows_its_secrets() {
    if !require_assets("the_hub_makes_serves_renews_and_follows_its_secrets") {
        return;
    }
    gwhub_common::logging::init("info");
    let fleet = Fleet::start(&["mgmt"]).await.expect("start API server");
    let as_hub = install_hub(fleet.cluster("mgmt")).await;
    let admin = fleet.cluster("mgmt").client().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NS);

    // Absent: made (one CA, a serving chain ending with it), marked.
    let hub = start_hub(&as_hub, Duration::from_secs(15)).await;
    let ca = secrets.get(CA_SECRET).await.unwrap();
    let serving = secrets.get(SERVING_SECRET).await.unwrap();
    for s in [&ca, &serving] {
        assert_eq!(s.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(
            s.metadata.annotations.as_ref().unwrap()[MANAGED_BY],
            "gwhub"
        );
    }
    let ca_pem = key(&ca, "tls.crt");
    assert_eq!(key(&serving, "ca.crt"), ca_pem);
    let chain = String::from_utf8(key(&serving, "tls.crt")).unwrap();
    assert!(chain.ends_with(std::str::from_utf8(&ca_pem).unwrap()));

    // Both listeners serve it; a client trusting the Secret's CA connects.
    let first = der(&key(&serving, "tls.crt"));
    for addr in [hub.hub.ingest_addr, hub.hub.dashboard_addr] {
        assert_eq!(served(addr, &ca_pem, "localhost").await.unwrap(), first);
    }
    assert!(
        served(hub.hub.dashboard_addr, &ca_pem, "gwhub.elsewhere")
            .await
            .is_err()
    );

    // At 2/3 of its 15 s the leader renews it; new handshakes get it.
    let renewed = until(
        WAIT,
        || async { der(&key(&secrets.get(SERVING_SECRET).await.unwrap(), "tls.crt")) },
        |d| *d != first,
    )
    .await;
    let _ = until(
        WAIT,
        || served(hub.hub.dashboard_addr, &ca_pem, "localhost"),
        |d| d.as_ref().ok() == Some(&renewed),
    )
    .await;
    // The CA stays.
    assert_eq!(
        key(&secrets.get(CA_SECRET).await.unwrap(), "tls.crt"),
        ca_pem
    );

    // The operator replaces gwhub-serving with their own (no mark): it is
    // served without a restart and never overwritten, even when "due".
    let other_key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    p.is_ca = rcgen::IsCa::NoCa;
    let now = jiff::Timestamp::now().as_second();
    gwhub::hub::certs::set_window(&mut p, now - 60, now + 12);
    let other = p.self_signed(&other_key).unwrap();
    let mut current = secrets.get(SERVING_SECRET).await.unwrap();
    current.metadata = ObjectMeta {
        name: Some(SERVING_SECRET.to_owned()),
        resource_version: current.metadata.resource_version.clone(),
        ..ObjectMeta::default()
    };
    current.data = Some(
        [
            ("tls.crt", other.pem()),
            ("tls.key", other_key.serialize_pem()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
        .collect(),
    );
    secrets
        .replace(SERVING_SECRET, &PostParams::default(), &current)
        .await
        .unwrap();
    let want = other.der().to_vec();
    let other_pem = other.pem();
    let _ = until(
        WAIT,
        || served(hub.hub.dashboard_addr, other_pem.as_bytes(), "localhost"),
        |d| d.as_ref().ok() == Some(&want),
    )
    .await;
    // Past its own 2/3 (and the hub's check period): still the operator's.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let kept = secrets.get(SERVING_SECRET).await.unwrap();
    assert_eq!(key(&kept, "tls.crt"), other.pem().into_bytes());
    assert!(
        kept.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(MANAGED_BY))
    );
    hub.shutdown().await.unwrap();

    // A restarted hub reads what is there (no new CA).
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    assert_eq!(
        key(&secrets.get(CA_SECRET).await.unwrap(), "tls.crt"),
        ca_pem
    );
    assert_eq!(
        served(hub.hub.dashboard_addr, other.pem().as_bytes(), "localhost")
            .await
            .unwrap(),
        want
    );
    hub.shutdown().await.unwrap();
}
