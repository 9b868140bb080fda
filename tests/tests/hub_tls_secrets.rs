//! The hub's CA and serving certificate in Secrets (spec section 7), on a
//! real API server, the hub acting as its ServiceAccount from
//! `manifests/`: it makes `gwhub-ca` and `gwhub-serving` when absent and
//! serves with them on every listener (a client trusting the CA from the
//! Secret connects), the leader renews the serving
//! certificate before it expires, an operator's replacement Secret is
//! served without a restart and never overwritten, a corrupt hub-made
//! CA is written back from memory or, with no hub holding it, replaced,
//! and the shipped install is mTLS (only the dev overlay is plaintext).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gwhub_identity::tls::TlsPaths;
use gwhub_k8s::tls_secrets::{CA_SECRET, MANAGED_BY, SERVING_SECRET, SecretsConfig};
use gwhub_k8s::{Connected, KubeOptions};
use gwhub_test_kit::install::{SYSTEM_NS, management};
use gwhub_test_kit::wait::until;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{self, pki_types};

use crate::support::hub_secrets::{WAIT, key, start_hub};

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

#[tokio::test]
async fn the_hub_makes_serves_renews_and_follows_its_secrets() {
    gwhub_common::logging::init("info");
    let Some((_fleet, admin, as_hub)) =
        management("the_hub_makes_serves_renews_and_follows_its_secrets").await
    else {
        return;
    };
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
    gwhub::hub::set_window(&mut p, now - 120, now + 30);
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

fn kustomize(dir: &str) -> String {
    let out = std::process::Command::new(gwhub_test_kit::install::kubectl())
        .arg("kustomize")
        .arg(gwhub_test_kit::install::manifests_dir().join(dir))
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize manifests/{dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Secure by default: nothing `kubectl apply -k manifests/` (or
/// manifests/agent/) installs runs plaintext; the agent joins with the
/// token Secret; only the development overlay runs --insecure.
#[test]
fn the_shipped_install_is_mtls_and_only_the_dev_overlay_is_plaintext() {
    for dir in ["", "hub", "agent"] {
        assert!(!kustomize(dir).contains("--insecure"), "manifests/{dir}");
    }
    let agent = kustomize("agent");
    for flag in [
        "--join-token-file=",
        "--hub-ca-hash=",
        "secretName: gwhub-join-token",
    ] {
        assert!(
            agent.contains(flag),
            "manifests/agent lacks {flag}:\n{agent}"
        );
    }
    for dir in ["dev", "dev/agent"] {
        assert!(kustomize(dir).contains("--insecure"), "manifests/{dir}");
    }
    assert!(!kustomize("dev/agent").contains("--join-token-file"));
}

/// What the hub made, it repairs, for its CA. `gwhub-ca`
/// half-written or corrupted while a hub runs is written back byte for
/// byte from the CA the hub holds (its agents' certificates stay good).
/// Corrupted while no hub runs, the starting hub waits out
/// `CA_REPAIR_GRACE`, keeps the corrupt Secret as a labelled copy, issues
/// a new CA (a Warning Event says agents must join again) and serves with
/// it. An operator's corrupt CA is only reported: the start fails, the
/// Secret stays as it was.
#[tokio::test]
async fn a_corrupt_hub_ca_is_written_back_or_replaced() {
    gwhub_common::logging::init("info");
    let Some((_fleet, admin, as_hub)) =
        management("a_corrupt_hub_ca_is_written_back_or_replaced").await
    else {
        return;
    };
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let corrupt = |half: bool, operator: bool| {
        let secrets = secrets.clone();
        async move {
            let mut ca = secrets.get(CA_SECRET).await.unwrap();
            let data = ca.data.as_mut().unwrap();
            if half {
                // A write cut short (a kubernetes.io/tls Secret keeps its keys).
                let key = &mut data.get_mut("tls.key").unwrap().0;
                key.truncate(key.len() / 2);
            } else {
                data.insert("tls.crt".into(), ByteString(b"not a certificate".to_vec()));
            }
            if operator {
                ca.metadata.annotations = None;
            }
            secrets
                .replace(CA_SECRET, &PostParams::default(), &ca)
                .await
                .unwrap()
        }
    };

    // While a hub runs: written back, byte for byte; still served.
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let original = secrets.get(CA_SECRET).await.unwrap();
    let ca_pem = key(&original, "tls.crt");
    for half in [true, false] {
        corrupt(half, false).await;
        until(
            WAIT,
            || async { secrets.get(CA_SECRET).await.unwrap() },
            |s| s.data == original.data,
        )
        .await;
    }
    served(hub.hub.ingest_addr, &ca_pem, "localhost")
        .await
        .unwrap();
    hub.shutdown().await.unwrap();

    // While none runs: the hub starts, the corrupt Secret kept aside, a
    // new CA in gwhub-ca and in the served chain.
    let corrupted = corrupt(false, false).await;
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let now = secrets.get(CA_SECRET).await.unwrap();
    let new_pem = key(&now, "tls.crt");
    assert_ne!(new_pem, ca_pem);
    gwhub_identity::pki::check_ca(&gwhub_identity::pki::Pair {
        cert_pem: String::from_utf8(new_pem.clone()).unwrap(),
        key_pem: String::from_utf8(key(&now, "tls.key")).unwrap(),
    })
    .unwrap();
    assert_eq!(
        now.metadata.annotations.as_ref().unwrap()[MANAGED_BY],
        "gwhub"
    );
    let copies = secrets
        .list(&kube::api::ListParams::default().labels(&format!(
            "{}={CA_SECRET}",
            gwhub_k8s::tls_secrets::CORRUPT_COPY_OF
        )))
        .await
        .unwrap();
    assert_eq!(copies.items.len(), 1);
    assert_eq!(copies.items[0].data, corrupted.data);
    assert_eq!(
        key(&secrets.get(SERVING_SECRET).await.unwrap(), "ca.crt"),
        new_pem
    );
    let leaf = served(hub.hub.ingest_addr, &new_pem, "localhost")
        .await
        .unwrap();
    assert!(!leaf.is_empty());
    assert!(
        served(hub.hub.ingest_addr, &ca_pem, "localhost")
            .await
            .is_err()
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(admin.clone(), SYSTEM_NS);
    until(
        WAIT,
        || async {
            events
                .list(&kube::api::ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| {
                    e.reason.as_deref() == Some(gwhub_k8s::tls_secrets::CA_REISSUED)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(CA_SECRET)
                })
                .count()
        },
        |n| *n == 1,
    )
    .await;
    hub.shutdown().await.unwrap();

    // An operator's CA: only reported.
    let theirs = corrupt(false, true).await;
    let connected = Connected::new(as_hub.clone(), KubeOptions::new(SYSTEM_NS))
        .await
        .unwrap();
    let mut config = SecretsConfig::new(SYSTEM_NS);
    config.sans = vec!["localhost".into()];
    let Err(e) = connected
        .tls_from_secrets(config, &TlsPaths::default())
        .await
    else {
        panic!("an operator's corrupt CA stops the start");
    };
    assert!(e.to_string().contains(CA_SECRET), "{e}");
    let after = secrets.get(CA_SECRET).await.unwrap();
    assert_eq!(after.data, theirs.data);
    assert_eq!(
        after.metadata.resource_version,
        theirs.metadata.resource_version
    );
}
