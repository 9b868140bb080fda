//! Joining the fleet against the hub on a real API server: a valid join
//! token gets one certificate naming the cluster (recorded; its
//! CertificateSigningRequest deleted) and is used up, while reused,
//! forged, expired or other-cluster tokens and CSRs for another name get
//! nothing; without a token the request waits for an admin's approval (a
//! denied one is refused) and the approved agent then streams.

use std::time::Duration;

use gwhub_k8s::tls_secrets::CA_SECRET;
use gwhub_proto::client::open_report;
use gwhub_proto::v1;
use gwhub_test_kit::install::{SYSTEM_NS, management, management_and};
use gwhub_test_kit::raw_agent::{admitted, hello, tls_ingest};
use gwhub_test_kit::wait::until;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::support::hub_secrets::{WAIT, csr_for, decide, key, make_token, start_hub};

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
    let Some((fleet, admin, as_hub)) = management_and(
        "a_tokenless_agent_streams_once_its_request_is_approved",
        &["east"],
    )
    .await
    else {
        return;
    };
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
