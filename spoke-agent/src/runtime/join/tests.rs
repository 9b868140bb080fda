//! What joining refuses before it sends anything, and the pure pieces of
//! the flow (which answers a tokenless join waits through, whether an
//! issued certificate is for the agent's key). The flow against a real hub
//! and API server is in the `hub_tls_secrets` and `attacks_join` suites.

use super::*;

fn plan(hub: &str, token_file: Option<PathBuf>, pin: &str) -> JoinPlan {
    JoinPlan {
        hub: hub.to_owned(),
        cluster: "east".to_owned(),
        token_file,
        pin: pin.to_owned(),
        namespace: "gwhub-system".to_owned(),
        kubeconfig: None,
    }
}

fn good_pin() -> String {
    format!("sha256:{}", "a".repeat(64))
}

/// The CA found by its pin is written as rcgen writes certificates.
#[test]
fn the_discovered_ca_is_written_as_rcgen_writes_it() {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["a".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    assert_eq!(
        gwhub_common::pem::encode("CERTIFICATE", cert.der()).replace("\r\n", "\n"),
        cert.pem().replace("\r\n", "\n")
    );
}

/// A tokenless join asks again while it waits for approval or the hub is
/// busy or down; anything else is the hub's final answer.
#[test]
fn a_tokenless_join_retries_only_waiting_busy_and_down() {
    use tonic::Code;
    for (code, retry) in [
        (Code::FailedPrecondition, true),
        (Code::Unavailable, true),
        (Code::ResourceExhausted, true),
        (Code::PermissionDenied, false),
        (Code::Unauthenticated, false),
        (Code::InvalidArgument, false),
        (Code::NotFound, false),
        (Code::Internal, false),
    ] {
        assert_eq!(retry_without_token(code), retry, "{code:?}");
    }
}

/// A certificate is accepted only for the request's own key.
#[test]
fn an_issued_certificate_must_be_for_the_requests_key() {
    let request = Request::new("east").unwrap();
    assert!(request.key_sha256.starts_with("sha256:"));
    let ours = rcgen::CertificateParams::new(vec!["a".to_owned()])
        .unwrap()
        .self_signed(&request.key)
        .unwrap()
        .pem();
    let other_key = rcgen::KeyPair::generate().unwrap();
    let theirs = rcgen::CertificateParams::new(vec!["a".to_owned()])
        .unwrap()
        .self_signed(&other_key)
        .unwrap()
        .pem();
    assert!(request.check_issued(&ours).is_ok());
    for (what, pem) in [("another key", theirs.as_str()), ("not PEM", "junk")] {
        let e = request.check_issued(pem).unwrap_err();
        assert!(matches!(e, JoinError::NotForThisKey { .. }), "{what}: {e}");
        assert!(e.to_string().contains(&request.key_sha256), "{what}: {e}");
    }
}

/// A cluster name a URI cannot carry is refused naming --cluster.
#[test]
fn a_request_needs_a_cluster_a_uri_can_carry() {
    let e = Request::new("ést").err().unwrap();
    assert!(matches!(e, JoinError::BadCluster { .. }), "{e}");
    assert!(e.to_string().starts_with("--cluster \"ést\""), "{e}");
}

/// Each mistake is refused before anything is sent, naming what to fix.
#[tokio::test]
async fn joining_refuses_bad_flags_before_sending_anything() {
    let dir = gwhub_test_kit::procs::temp_dir("agent-join-flags");
    let junk = dir.join("junk-token");
    std::fs::write(&junk, "not a token").unwrap();
    let missing = dir.join("missing-token");
    let closed = format!("https://{}", gwhub_test_kit::procs::free_addr());
    let cases: [(&str, JoinPlan, &str); 5] = [
        (
            "unreadable token file",
            plan("https://h:1", Some(missing.clone()), &good_pin()),
            "--join-token-file ",
        ),
        (
            "not a token",
            plan("https://h:1", Some(junk.clone()), &good_pin()),
            "--join-token-file ",
        ),
        (
            "bad pin",
            plan("https://h:1", None, "md5:00"),
            "--hub-ca-hash: ",
        ),
        (
            "plaintext hub",
            plan("http://h:1", None, &good_pin()),
            "--hub \"http://h:1\": joining needs an https:// URL",
        ),
        (
            "nothing listens",
            plan(&closed, None, &good_pin()),
            "cannot reach the hub at https://",
        ),
    ];
    for (what, plan, says) in cases {
        let e = join(&plan).await.err().unwrap();
        let text = e.to_string();
        assert!(text.starts_with(says), "{what}: {text}");
        let variant_ok = match what {
            "unreadable token file" => {
                matches!(&e, JoinError::TokenFileUnreadable { path, .. } if *path == missing)
            }
            "not a token" => matches!(&e, JoinError::BadToken { path, .. } if *path == junk),
            "bad pin" => matches!(e, JoinError::BadPin(_)),
            "plaintext hub" => matches!(e, JoinError::BadHubUrl { .. }),
            _ => matches!(e, JoinError::HubUnreachable { .. }),
        };
        assert!(variant_ok, "{what}: {e:?}");
    }
    // obtain checks the pin before it looks for a Kubernetes config.
    let e = obtain(&plan("https://h:1", None, "sha256:zz")).unwrap_err();
    assert!(matches!(e, JoinError::BadPin(_)), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
