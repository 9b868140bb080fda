//! The hub's CA and serving certificate in Secrets (spec section 7), on a
//! real API server, the hub acting as its ServiceAccount from
//! `manifests/`: it makes `gwhub-ca` and `gwhub-serving` when absent and
//! serves with them on every listener (a client trusting the CA from the
//! Secret connects), the leader renews the serving
//! certificate before it expires, an operator's replacement Secret is
//! served without a restart and never overwritten, and a corrupt hub-made
//! CA is written back from memory or, with no hub holding it, replaced.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gwhub_common::join::JoinToken;
use gwhub_hub::kube::join::token_secret;
use gwhub_hub::kube::tls_secrets::{CA_SECRET, MANAGED_BY, SERVING_SECRET, SecretsConfig};
use gwhub_hub::kube::{Connected, KubeHub, KubeOptions};
use gwhub_hub::tls::TlsPaths;
use gwhub_proto::client::open_report;
use gwhub_proto::v1;
use gwhub_test_kit::apiserver::{Fleet, require_assets};
use gwhub_test_kit::install::{SYSTEM_NS, install_hub, management};
use gwhub_test_kit::raw_agent::{admitted, hello, refusal, tls_ingest};
use gwhub_test_kit::wait::until;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{self, pki_types};

use crate::support::kube_hub::kube_hub;

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
    start_hub_with(client, lifetime, gwhub_hub::pki::AGENT_CERT_LIFETIME).await
}

async fn start_hub_with(
    client: &kube::Client,
    lifetime: Duration,
    agent_lifetime: Duration,
) -> KubeHub {
    kube_hub(client)
        .identity("tls-secrets")
        .tls_from_secrets(|s| {
            s.serving_lifetime = lifetime;
            s.agent_lifetime = agent_lifetime;
        })
        .start()
        .await
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

fn csr_for(cluster: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.subject_alt_names = vec![rcgen::SanType::URI(
        format!("spiffe://gwhub/cluster/{cluster}")
            .try_into()
            .unwrap(),
    )];
    (
        p.serialize_request(&key).unwrap().pem().unwrap(),
        key.serialize_pem(),
    )
}

async fn make_token(secrets: &Api<Secret>, cluster: &str, ttl: i64) -> String {
    let token = JoinToken::generate().unwrap();
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(ttl);
    secrets
        .create(
            &PostParams::default(),
            &token_secret(&token, cluster, expires),
        )
        .await
        .unwrap();
    token.reveal()
}

/// Join on a real API server: a valid token gets a certificate naming the
/// cluster (recorded in ConfigMap gwhub-issued; its CertificateSigningRequest
/// deleted once issued) that then streams; the token is used up. A reused, forged, expired or other-cluster token, or a CSR for
/// another name, is refused and issues nothing; Report without a
/// certificate is still refused.
#[tokio::test]
async fn a_join_token_gets_one_certificate_and_bad_tokens_none() {
    let Some((fleet, admin, as_hub)) =
        management("a_join_token_gets_one_certificate_and_bad_tokens_none").await
    else {
        return;
    };
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let ca_pem = key(&secrets.get(CA_SECRET).await.unwrap(), "tls.crt");
    let addr = hub.hub.ingest_addr;

    // gwhubctl join create, as an operator runs it (awaited: the hub in
    // this process keeps running meanwhile).
    let ctl = async |args: &[&str]| {
        let out = tokio::process::Command::new(gwhub_test_kit::procs::workspace_binary(
            "gwhub",
            "gwhubctl",
            "GWHUBCTL_BIN",
        ))
        .args(["join", "create"])
        .args(args)
        .arg("--kubeconfig")
        .arg(&fleet.cluster("mgmt").kubeconfig)
        .output()
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let printed: serde_json::Value =
        serde_json::from_str(&ctl(&["east", "--ttl", "1h", "-o", "json"]).await).unwrap();
    let keys: Vec<&String> = printed.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["caHash", "cluster", "expires", "token"]);
    assert_eq!(printed["cluster"], "east");
    assert_eq!(
        printed["caHash"],
        gwhub_common::join::ca_pin_pem(&ca_pem).unwrap()
    );
    let token = printed["token"].as_str().unwrap().to_owned();
    let yaml = ctl(&[
        "east",
        "-o",
        "yaml",
        "--hub-address",
        "https://hub.example:7443",
    ])
    .await;
    let secret: Secret = serde_norway::from_str(&yaml).unwrap();
    assert_eq!(secret.metadata.name.as_deref(), Some("gwhub-join-token"));
    let sd = secret.string_data.unwrap();
    assert_eq!(sd["hub"], "https://hub.example:7443");
    assert_eq!(sd["caHash"], printed["caHash"].as_str().unwrap());
    // Only the hash is stored on the management cluster.
    let stored = secrets
        .get(&format!("gwhub-join-{}", token.split_once('.').unwrap().0))
        .await
        .unwrap();
    let stored_text = format!("{:?}", stored.data);
    assert!(!stored_text.contains(token.split_once('.').unwrap().1));
    let (csr, key_pem) = csr_for("east");
    let mut anon = tls_ingest(addr, &ca_pem, None).await;
    let join = |token: &str, cluster: &str, csr: &str| v1::JoinRequest {
        cluster: cluster.into(),
        token: token.into(),
        csr_pem: csr.into(),
    };
    // Report without a certificate: refused as before.
    let e = open_report(&mut anon, hello("east"), 4)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");

    // A CSR naming another cluster: refused, the token kept.
    let (west_csr, _) = csr_for("west");
    let e = anon
        .join(join(&token, "east", &west_csr))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(
        csrs.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let issued = anon
        .join(join(&token, "east", &csr))
        .await
        .expect("a valid token joins")
        .into_inner();
    assert_eq!(issued.ca_pem.as_bytes(), ca_pem.as_slice());
    let id = gwhub_common::identity::cluster_from_pem(issued.certificate_pem.as_bytes()).unwrap();
    assert_eq!(id.cluster, "east");
    // Recorded (created, approved, signed), then deleted once issued; the
    // identity is recorded in gwhub-issued.
    assert!(
        csrs.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let issued_cm =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), SYSTEM_NS)
            .get("gwhub-issued")
            .await
            .unwrap();
    assert!(issued_cm.data.unwrap().contains_key("east"));
    // Single use.
    let e = anon.join(join(&token, "east", &csr)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("unknown"), "{e:?}");
    assert!(!e.message().contains(token.split_once('.').unwrap().1));

    // The certificate streams as east.
    let east = || tls_ingest(addr, &ca_pem, Some((&issued.certificate_pem, &key_pem)));
    admitted(east, hello("east"), WAIT).await;

    // Forged, expired, other-cluster: refused, naming why; nothing issued.
    let real = make_token(&secrets, "east", 600).await;
    let forged = format!("{}.{}", real.split_once('.').unwrap().0, "0123456789abcdef");
    let expired = make_token(&secrets, "east", -5).await;
    let west = make_token(&secrets, "west", 600).await;
    for (t, code, says) in [
        (forged.as_str(), tonic::Code::Unauthenticated, "unknown"),
        (
            "abcdef.0123456789abcdef",
            tonic::Code::Unauthenticated,
            "unknown",
        ),
        (
            "not a token",
            tonic::Code::Unauthenticated,
            "not a join token",
        ),
        (expired.as_str(), tonic::Code::Unauthenticated, "expired"),
        (
            west.as_str(),
            tonic::Code::PermissionDenied,
            "another cluster",
        ),
    ] {
        let e = anon.join(join(t, "east", &csr)).await.unwrap_err();
        assert_eq!(e.code(), code, "{t}: {e:?}");
        assert!(e.message().contains(says), "{t}: {e:?}");
    }
    assert!(
        csrs.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // The forged attempt did not use up the real token.
    let (csr2, _) = csr_for("east");
    anon.join(join(&real, "east", &csr2)).await.unwrap();
    hub.shutdown().await.unwrap();
}

/// The CSR `name` with condition `type_` (Approved, Denied) set by an
/// admin, as `kubectl certificate approve|deny` does.
async fn decide(csrs: &Api<CertificateSigningRequest>, name: &str, type_: &str) {
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };
    let mut csr = csrs.get(name).await.unwrap();
    csr.status = Some(CertificateSigningRequestStatus {
        conditions: Some(vec![CertificateSigningRequestCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some("KubectlApprove".into()),
            message: Some("by the join test".into()),
            ..Default::default()
        }]),
        certificate: None,
    });
    csrs.replace_subresource("approval", name, &PostParams::default(), &csr)
        .await
        .unwrap();
}

/// Join without a token, on a real API server: the request is recorded
/// as an unapproved CertificateSigningRequest of signer
/// gwhub.io/cluster-agent named after the cluster and the key (a retry
/// with the same key finds it; another key for the cluster gets its own)
/// and the hub answers FAILED_PRECONDITION naming it; once an admin
/// approves it, the next attempt gets a certificate that streams, once
/// (the request is deleted; asking again is ALREADY_EXISTS); a denied
/// request is refused naming it; a bad token is still refused with no
/// request recorded; with 64 pending no new one is.
#[tokio::test]
async fn a_tokenless_join_waits_for_approval_and_a_denied_one_is_refused() {
    let Some((_fleet, admin, as_hub)) =
        management("a_tokenless_join_waits_for_approval_and_a_denied_one_is_refused").await
    else {
        return;
    };
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let ca_pem = key(&secrets.get(CA_SECRET).await.unwrap(), "tls.crt");
    let addr = hub.hub.ingest_addr;
    let mut anon = tls_ingest(addr, &ca_pem, None).await;
    let join = |cluster: &str, token: &str, csr: &str| v1::JoinRequest {
        cluster: cluster.into(),
        token: token.into(),
        csr_pem: csr.into(),
    };
    let count = || async { csrs.list(&Default::default()).await.unwrap().items.len() };

    // A bad token: refused, nothing recorded.
    let (csr, key_pem) = csr_for("east");
    let e = anon
        .join(join("east", "abcdef.0123456789abcdef", &csr))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    assert_eq!(count().await, 0);

    // No token: recorded, not approved, nothing issued.
    let e = anon.join(join("east", "", &csr)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    let name = e
        .message()
        .strip_prefix("waiting for approval: kubectl certificate approve ")
        .unwrap_or_else(|| panic!("{e:?}"))
        .to_owned();
    assert!(name.starts_with("gwhub-east-key-"), "{name}");
    let pending = csrs.get(&name).await.unwrap();
    assert_eq!(pending.spec.signer_name, "gwhub.io/cluster-agent");
    assert!(
        pending
            .status
            .as_ref()
            .is_none_or(|s| s.certificate.is_none() && s.conditions.is_none()),
        "{pending:?}"
    );
    // The same key again (a new request from it): the same name.
    let key = rcgen::KeyPair::from_pem(&key_pem).unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.subject_alt_names = vec![rcgen::SanType::URI(
        "spiffe://gwhub/cluster/east".try_into().unwrap(),
    )];
    let again = p.serialize_request(&key).unwrap().pem().unwrap();
    let e = anon.join(join("east", "", &again)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(e.message().ends_with(&name), "{e:?}");
    assert_eq!(count().await, 1);
    // Another key for east while it waits: its own request, never
    // another's.
    let (other, _) = csr_for("east");
    let e = anon.join(join("east", "", &other)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(e.message().starts_with("waiting for approval"), "{e:?}");
    assert!(!e.message().contains(&name), "{e:?}");
    assert_eq!(count().await, 2);

    // kubectl certificate approve: the next attempt gets the certificate.
    decide(&csrs, &name, "Approved").await;
    let issued = anon
        .join(join("east", "", &again))
        .await
        .expect("an approved request is signed")
        .into_inner();
    assert_eq!(issued.ca_pem.as_bytes(), ca_pem.as_slice());
    let id = gwhub_common::identity::cluster_from_pem(issued.certificate_pem.as_bytes()).unwrap();
    assert_eq!(id.cluster, "east");
    // Once: the request is deleted, the same key again refused.
    assert!(csrs.get_opt(&name).await.unwrap().is_none());
    let e = anon.join(join("east", "", &csr)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::AlreadyExists, "{e:?}");
    let east = || tls_ingest(addr, &ca_pem, Some((&issued.certificate_pem, &key_pem)));
    admitted(east, hello("east"), WAIT).await;

    // kubectl certificate deny: refused, naming it.
    let (west, _) = csr_for("west");
    let e = anon.join(join("west", "", &west)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    let west_name = e.message().rsplit(' ').next().unwrap().to_owned();
    decide(&csrs, &west_name, "Denied").await;
    let e = anon.join(join("west", "", &west)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains(&west_name), "{e:?}");
    assert!(e.message().contains("denied"), "{e:?}");

    // 64 pending: no new one.
    for i in 0..64 {
        let mut c = pending.clone();
        c.metadata = ObjectMeta {
            name: Some(format!("filler-{i}")),
            labels: Some(
                [
                    ("gwhub.io/approval".to_owned(), "manual".to_owned()),
                    ("gwhub.io/cluster".to_owned(), format!("c{i}")),
                ]
                .into(),
            ),
            ..Default::default()
        };
        c.status = None;
        csrs.create(&PostParams::default(), &c).await.unwrap();
    }
    let before = count().await;
    let (north, _) = csr_for("north");
    let e = anon.join(join("north", "", &north)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("wait for approval"), "{e:?}");
    assert_eq!(count().await, before);
    hub.shutdown().await.unwrap();
}

/// The real `gwhub-agent run --hub-ca-hash` without a join token: it
/// waits (retrying, not exiting, not streaming) while its request is
/// pending, logging its key's fingerprint (the one on its request); after
/// `kubectl certificate approve` its next attempt gets the certificate,
/// stores it and streams.
#[tokio::test]
async fn a_tokenless_agent_streams_once_its_request_is_approved() {
    if !require_assets("a_tokenless_agent_streams_once_its_request_is_approved") {
        return;
    }
    let fleet = Fleet::start(&["mgmt", "east"])
        .await
        .expect("start API servers");
    let as_hub = install_hub(fleet.cluster("mgmt")).await;
    gwhub_test_kit::install::install_agent(fleet.cluster("east")).await;
    let admin = fleet.cluster("mgmt").client().await.unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let east_admin = fleet.cluster("east").client().await.unwrap();
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let ca_pem = key(
        &Api::<Secret>::namespaced(admin.clone(), SYSTEM_NS)
            .get(CA_SECRET)
            .await
            .unwrap(),
        "tls.crt",
    );
    let pin = gwhub_common::join::ca_pin_pem(&ca_pem).unwrap();
    let url = format!("https://localhost:{}", hub.hub.ingest_addr.port());
    let log = fleet.dir.join("agent-tokenless.log");
    let mut agent = gwhub_test_kit::procs::Process(
        std::process::Command::new(gwhub_test_kit::procs::agent_binary())
            .args(["run", "--hub", &url, "--cluster", "east"])
            .args(["--hub-ca-hash", &pin])
            .arg("--kubeconfig")
            .arg(
                fleet
                    .cluster("east")
                    .kubeconfig_as(gwhub_test_kit::install::AGENT_SA),
            )
            .env("POD_NAMESPACE", SYSTEM_NS)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let connected = || {
        hub.hub
            .index
            .clusters()
            .into_iter()
            .any(|c| c.name == "east" && c.connected)
    };
    let lp = kube::api::ListParams::default().labels("gwhub.io/approval=manual");
    let pending = until(
        WAIT,
        || async { csrs.list(&lp).await.unwrap().items },
        |items| items.len() == 1,
    )
    .await;
    let name = pending[0].metadata.name.clone().unwrap();
    // The operator matches the request to the agent by its key's
    // fingerprint: on the request, and in the agent's log.
    let fingerprint =
        pending[0].metadata.annotations.as_ref().unwrap()["gwhub.io/key-sha256"].clone();
    assert!(fingerprint.starts_with("sha256:"), "{fingerprint}");
    // Waiting: still running, asking again, not streaming.
    until(
        WAIT,
        || async { std::fs::read_to_string(&log).unwrap_or_default() },
        |t| t.matches("waiting for approval").count() >= 2 && t.contains(&fingerprint),
    )
    .await;
    assert!(agent.0.try_wait().unwrap().is_none(), "the agent exited");
    assert!(!connected());
    assert_eq!(csrs.list(&lp).await.unwrap().items.len(), 1);

    decide(&csrs, &name, "Approved").await;
    until(Duration::from_secs(60), || async { connected() }, |c| *c).await;
    let identity = Api::<Secret>::namespaced(east_admin, SYSTEM_NS)
        .get("gwhub-agent-identity")
        .await
        .unwrap();
    assert!(!key(&identity, "tls.crt").is_empty());
    // Issued once: the request is deleted.
    assert!(csrs.get_opt(&name).await.unwrap().is_none());
    hub.shutdown().await.unwrap();
}

/// The fleet install as a user does it, on two real API servers: the hub
/// (its ServiceAccount) makes its Secrets; `gwhubctl join create east`;
/// the real `gwhub-agent run --join-token-file --hub-ca-hash` (the
/// agent's ServiceAccount, on the workload cluster) makes its key, joins,
/// stores its identity in Secret gwhub-agent-identity there and streams as
/// east; restarted with the same (now used-up) token it streams again from
/// the stored identity. A wrong pin is refused before any token is sent.
#[tokio::test]
async fn an_agent_joins_streams_and_restarts_from_its_stored_identity() {
    if !require_assets("an_agent_joins_streams_and_restarts_from_its_stored_identity") {
        return;
    }
    let fleet = Fleet::start(&["mgmt", "east"])
        .await
        .expect("start API servers");
    let as_hub = install_hub(fleet.cluster("mgmt")).await;
    gwhub_test_kit::install::install_agent(fleet.cluster("east")).await;
    let east_admin = fleet.cluster("east").client().await.unwrap();
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let url = format!("https://localhost:{}", hub.hub.ingest_addr.port());

    let out = tokio::process::Command::new(gwhub_test_kit::procs::workspace_binary(
        "gwhub",
        "gwhubctl",
        "GWHUBCTL_BIN",
    ))
    .args(["join", "create", "east", "-o", "json", "--kubeconfig"])
    .arg(&fleet.cluster("mgmt").kubeconfig)
    .output()
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let token_file = fleet.dir.join("join-token");
    std::fs::write(&token_file, printed["token"].as_str().unwrap()).unwrap();
    let pin = printed["caHash"].as_str().unwrap().to_owned();

    let agent = |pin: &str, log: &str| {
        gwhub_test_kit::procs::Process(
            std::process::Command::new(gwhub_test_kit::procs::agent_binary())
                .args(["run", "--hub", &url, "--cluster", "east"])
                .arg("--join-token-file")
                .arg(&token_file)
                .args(["--hub-ca-hash", pin])
                .arg("--kubeconfig")
                .arg(
                    fleet
                        .cluster("east")
                        .kubeconfig_as(gwhub_test_kit::install::AGENT_SA),
                )
                .env("POD_NAMESPACE", SYSTEM_NS)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(fleet.dir.join(log)).unwrap())
                .spawn()
                .unwrap(),
        )
    };
    let connected = || {
        hub.hub
            .index
            .clusters()
            .into_iter()
            .find(|c| c.name == "east")
            .filter(|c| c.connected)
            .map(|c| c.session)
    };

    // A wrong pin: refused, the token not sent (still usable below).
    let wrong = format!("sha256:{}", "0".repeat(64));
    let mut bad = agent(&wrong, "agent-wrong-pin.log");
    let status = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(s) = bad.0.try_wait().unwrap() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the agent exits");
    assert!(!status.success());
    let log = std::fs::read_to_string(fleet.dir.join("agent-wrong-pin.log")).unwrap();
    assert!(log.contains("--hub-ca-hash"), "{log}");

    let first = agent(&pin, "agent-1.log");
    let session = until(WAIT, || async { connected() }, |s| s.is_some())
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(east_admin.clone(), SYSTEM_NS);
    let identity = secrets.get("gwhub-agent-identity").await.unwrap();
    assert_eq!(identity.type_.as_deref(), Some("kubernetes.io/tls"));
    let cert = key(&identity, "tls.crt");
    assert_eq!(
        gwhub_common::identity::cluster_from_pem(&cert)
            .unwrap()
            .cluster,
        "east"
    );
    assert!(
        String::from_utf8(key(&identity, "tls.key"))
            .unwrap()
            .contains("PRIVATE KEY")
    );
    drop(first);

    // Restarted: the token is used up, the stored identity streams.
    let _second = agent(&pin, "agent-2.log");
    until(
        WAIT,
        || async { connected() },
        |s| s.is_some_and(|s| s != session),
    )
    .await;
    let log = std::fs::read_to_string(fleet.dir.join("agent-2.log")).unwrap();
    assert!(log.contains("using the stored identity"), "{log}");
    assert_eq!(
        key(
            &secrets.get("gwhub-agent-identity").await.unwrap(),
            "tls.crt"
        ),
        cert
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

/// Renewal: with 20 s agent certificates, the joined agent renews at 2/3
/// of the lifetime over its authenticated connection (recorded in
/// gwhub-issued, its CertificateSigningRequest deleted), updates its Secret, and after the first
/// certificate expired (the hub ends that stream) it streams on with the
/// renewed one, never going stale.
#[tokio::test]
async fn a_joined_agent_renews_before_its_certificate_expires() {
    if !require_assets("a_joined_agent_renews_before_its_certificate_expires") {
        return;
    }
    let fleet = Fleet::start(&["mgmt", "east"])
        .await
        .expect("start API servers");
    let as_hub = install_hub(fleet.cluster("mgmt")).await;
    gwhub_test_kit::install::install_agent(fleet.cluster("east")).await;
    let admin = fleet.cluster("mgmt").client().await.unwrap();
    let east_admin = fleet.cluster("east").client().await.unwrap();
    let hub = start_hub_with(&as_hub, Duration::from_secs(3600), Duration::from_secs(20)).await;
    let url = format!("https://localhost:{}", hub.hub.ingest_addr.port());
    let mgmt_secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let ca_pem = key(&mgmt_secrets.get(CA_SECRET).await.unwrap(), "tls.crt");
    let token = make_token(&mgmt_secrets, "east", 600).await;
    let token_file = fleet.dir.join("join-token");
    std::fs::write(&token_file, token).unwrap();
    let pin = gwhub_common::join::ca_pin_pem(&ca_pem).unwrap();
    let _agent = gwhub_test_kit::procs::Process(
        std::process::Command::new(gwhub_test_kit::procs::agent_binary())
            .args(["run", "--hub", &url, "--cluster", "east"])
            .arg("--join-token-file")
            .arg(&token_file)
            .args(["--hub-ca-hash", &pin])
            .arg("--kubeconfig")
            .arg(
                fleet
                    .cluster("east")
                    .kubeconfig_as(gwhub_test_kit::install::AGENT_SA),
            )
            .env("POD_NAMESPACE", SYSTEM_NS)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(fleet.dir.join("agent-renew.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let state = || {
        hub.hub
            .index
            .clusters()
            .into_iter()
            .find(|c| c.name == "east")
            .map(|c| (c.connected, c.stale, c.session))
    };
    let (_, _, session) = until(
        WAIT,
        || async { state() },
        |s| matches!(s, Some((true, false, _))),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(east_admin.clone(), SYSTEM_NS);
    let first = key(
        &secrets.get("gwhub-agent-identity").await.unwrap(),
        "tls.crt",
    );
    let first_na = gwhub_common::identity::soonest_expiry_pem(&first).unwrap();

    // Renewed before the first expires.
    let renewed = until(
        Duration::from_secs(30),
        || async {
            key(
                &secrets.get("gwhub-agent-identity").await.unwrap(),
                "tls.crt",
            )
        },
        |c| *c != first,
    )
    .await;
    assert!(
        jiff::Timestamp::now().as_second() < first_na,
        "renewed only after expiry"
    );
    assert!(gwhub_common::identity::soonest_expiry_pem(&renewed).unwrap() > first_na);
    // Recorded in gwhub-issued (the renewed identity); its
    // CertificateSigningRequest deleted once issued.
    let issued = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), SYSTEM_NS)
        .get("gwhub-issued")
        .await
        .unwrap()
        .data
        .unwrap();
    let east: gwhub_hub::kube::issued::Issued = serde_json::from_str(&issued["east"]).unwrap();
    assert!(east.not_after > first_na, "{east:?}");
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    assert!(
        csrs.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Past the first certificate's expiry: the old stream was ended, the
    // agent streams with the renewed certificate, never stale.
    while jiff::Timestamp::now().as_second() <= first_na + 3 {
        assert!(!matches!(state(), Some((_, true, _))), "went stale");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    until(
        WAIT,
        || async { state() },
        |s| matches!(s, Some((true, false, s)) if *s != session),
    )
    .await;
    hub.shutdown().await.unwrap();
}

/// Leave: `gwhubctl cluster remove east` ends east's stream (recorded in
/// ConfigMap gwhub-revoked), its certificate is refused from then on, also
/// by a restarted hub, its ClusterReport is deleted and it leaves the
/// hub's list, and its pending tokens are gone; a join with a new
/// token gets a certificate that streams.
#[tokio::test]
async fn a_removed_cluster_is_refused_until_it_joins_again() {
    let Some((fleet, admin, as_hub)) =
        management("a_removed_cluster_is_refused_until_it_joins_again").await
    else {
        return;
    };
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NS);
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let ca_pem = key(&secrets.get(CA_SECRET).await.unwrap(), "tls.crt");
    let join = |token: String, csr: String| v1::JoinRequest {
        cluster: "east".into(),
        token,
        csr_pem: csr,
    };
    let (csr, key_pem) = csr_for("east");
    let token = make_token(&secrets, "east", 600).await;
    let mut anon = tls_ingest(hub.hub.ingest_addr, &ca_pem, None).await;
    let cert = anon
        .join(join(token, csr))
        .await
        .unwrap()
        .into_inner()
        .certificate_pem;
    let east = || tls_ingest(hub.hub.ingest_addr, &ca_pem, Some((&cert, &key_pem)));
    let mut stream = admitted(east, hello("east"), WAIT).await;
    stream
        .tx
        .send(v1::AgentMessage {
            message: Some(v1::agent_message::Message::Snapshot(v1::SnapshotChunk {
                snapshot_id: 1,
                chunk: 0,
                r#final: true,
                seq: 1,
                gateways: vec![],
            })),
        })
        .await
        .unwrap();
    let reports: Api<gwhub_hub_rules::report::ClusterReport> =
        Api::namespaced(admin.clone(), SYSTEM_NS);
    until(
        WAIT,
        || async { reports.get_opt("east").await.unwrap().is_some() },
        |stored| *stored,
    )
    .await;
    let _pending = make_token(&secrets, "east", 600).await;

    let out = tokio::process::Command::new(gwhub_test_kit::procs::workspace_binary(
        "gwhub",
        "gwhubctl",
        "GWHUBCTL_BIN",
    ))
    .args(["cluster", "remove", "east", "--kubeconfig"])
    .arg(&fleet.cluster("mgmt").kubeconfig)
    .output()
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The open stream ends, naming why.
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match stream.rx.next().await {
                Some(Ok(_)) => continue,
                Some(Err(s)) => return Some(s),
                None => return None,
            }
        }
    })
    .await
    .expect("the stream ends")
    .expect("with a status");
    assert_eq!(ended.code(), tonic::Code::PermissionDenied, "{ended:?}");
    assert!(ended.message().contains("removed"), "{ended:?}");
    let e = refusal(east, hello("east"), WAIT).await;
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    // Its pending token went with it.
    let tokens = secrets
        .list(&kube::api::ListParams::default().labels("gwhub.io/cluster=east"))
        .await
        .unwrap();
    assert!(tokens.items.is_empty());

    // Its reports are deleted (the deregistration path): it leaves the hub.
    until(
        WAIT,
        || async {
            let stored = reports.get_opt("east").await.unwrap().is_some();
            let listed = hub.hub.index.clusters().iter().any(|c| c.name == "east");
            (stored, listed)
        },
        |s| *s == (false, false),
    )
    .await;

    // A restarted hub still refuses the old certificate.
    hub.shutdown().await.unwrap();
    let hub = start_hub(&as_hub, Duration::from_secs(3600)).await;
    let east = || tls_ingest(hub.hub.ingest_addr, &ca_pem, Some((&cert, &key_pem)));
    let e = refusal(east, hello("east"), WAIT).await;
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");

    // Joining again with a new token (issued after the removal) streams.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (csr, key_pem) = csr_for("east");
    let token = make_token(&secrets, "east", 600).await;
    let mut anon = tls_ingest(hub.hub.ingest_addr, &ca_pem, None).await;
    let cert = anon
        .join(join(token, csr))
        .await
        .unwrap()
        .into_inner()
        .certificate_pem;
    let east = || tls_ingest(hub.hub.ingest_addr, &ca_pem, Some((&cert, &key_pem)));
    admitted(east, hello("east"), WAIT).await;
    hub.shutdown().await.unwrap();
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
    gwhub_hub::pki::check_ca(&gwhub_hub::pki::Pair {
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
            gwhub_hub::kube::tls_secrets::CORRUPT_COPY_OF
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
                    e.reason.as_deref() == Some(gwhub_hub::kube::tls_secrets::CA_REISSUED)
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
    let mut connected = Connected::new(as_hub.clone(), KubeOptions::new(SYSTEM_NS))
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
