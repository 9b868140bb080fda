//! A joined agent's identity over its life, against the hub on a real API
//! server: it streams and restarts from the identity it stored, renews
//! before its certificate expires, and once its cluster is removed it is
//! refused until it joins again.

use std::time::Duration;

use futures::StreamExt;
use gwhub_k8s::tls_secrets::CA_SECRET;
use gwhub_proto::v1;
use gwhub_test_kit::install::{SYSTEM_NS, management, management_and};
use gwhub_test_kit::raw_agent::{admitted, hello, refusal, tls_ingest};
use gwhub_test_kit::wait::until;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use crate::support::hub_secrets::{WAIT, csr_for, key, make_token, start_hub, start_hub_with};

/// The fleet install as a user does it, on two real API servers: the hub
/// (its ServiceAccount) makes its Secrets; `gwhubctl join create east`;
/// the real `gwhub-agent run --join-token-file --hub-ca-hash` (the
/// agent's ServiceAccount, on the workload cluster) makes its key, joins,
/// stores its identity in Secret gwhub-agent-identity there and streams as
/// east; a clean stop removes the identity files it wrote (mode 0700, under
/// its temporary directory); restarted with the same (now used-up) token it
/// streams again from the stored identity. A wrong pin is refused before
/// any token is sent.
#[tokio::test]
async fn an_agent_joins_streams_and_restarts_from_its_stored_identity() {
    let Some((fleet, _admin, as_hub)) = management_and(
        "an_agent_joins_streams_and_restarts_from_its_stored_identity",
        &["east"],
    )
    .await
    else {
        return;
    };
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
    // The agents' temporary directory, where each writes its identity files.
    let agent_tmp = fleet.dir.join("agent-tmp");
    std::fs::create_dir(&agent_tmp).unwrap();

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
                .env("TMPDIR", &agent_tmp)
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

    let mut first = agent(&pin, "agent-1.log");
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
    // Its key on disk: in one private directory of its own...
    let dirs: Vec<_> = std::fs::read_dir(&agent_tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dirs[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{:?}", dirs[0]);
    }
    assert!(dirs[0].join("tls.key").is_file());
    // ...which a clean stop removes: no key is left behind.
    assert!(first.terminate().success());
    assert_eq!(
        std::fs::read_dir(&agent_tmp).unwrap().count(),
        0,
        "the stopped agent's identity files remain"
    );

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

/// Renewal: with 20 s agent certificates, the joined agent renews at 2/3
/// of the lifetime over its authenticated connection (recorded in
/// gwhub-issued, its CertificateSigningRequest deleted), updates its Secret, and after the first
/// certificate expired (the hub ends that stream) it streams on with the
/// renewed one, never going stale.
#[tokio::test]
async fn a_joined_agent_renews_before_its_certificate_expires() {
    let Some((fleet, admin, as_hub)) = management_and(
        "a_joined_agent_renews_before_its_certificate_expires",
        &["east"],
    )
    .await
    else {
        return;
    };
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
    let east: gwhub_k8s::issued::Issued = serde_json::from_str(&issued["east"]).unwrap();
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
        .send(gwhub_test_kit::raw_agent::one_chunk_snapshot(1, 1, vec![]))
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
