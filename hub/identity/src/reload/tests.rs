//! Unit tests of `reload`, in their own file so the module itself reads in
//! one sitting.

use super::*;

fn ca() -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let pem = p.self_signed(&key).unwrap().pem();
    (pem, rcgen::Issuer::new(p, key))
}

#[test]
fn bad_material_names_the_file() {
    let e = Trust::parse(b"nope", "--client-ca /x").unwrap_err();
    assert!(matches!(e, TlsError::NoPem { .. }), "{e:?}");
    assert!(e.to_string().contains("--client-ca /x"), "{e}");
    let (ca_pem, _) = ca();
    let e = Serving::parse(ca_pem.as_bytes(), b"", "--tls-cert /c", "--tls-key /k").unwrap_err();
    assert!(e.to_string().contains("--tls-key /k"), "{e}");
    assert!(Trust::parse(ca_pem.as_bytes(), "x").is_ok());
}

fn leaf(issuer: &rcgen::Issuer<'static, rcgen::KeyPair>) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let p = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    (
        p.signed_by(&key, issuer).unwrap().pem(),
        key.serialize_pem(),
    )
}

/// Every file is followed: a changed CA is swapped in and counted, a
/// garbage one or a missing one keeps what is in use, nothing panics.
#[tokio::test]
async fn files_are_followed_and_bad_ones_kept_out() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, issuer) = ca();
    let (cert, key) = leaf(&issuer);
    let file = |name: &str, content: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    };
    let src = |flag, path| Pem::File { flag, path };
    let sources = Sources {
        cert: src("--tls-cert", file("tls.crt", &cert)),
        key: src("--tls-key", file("tls.key", &key)),
        client_ca: src("--client-ca", file("ca.crt", &ca_pem)),
        dashboard_client_ca: Some(src("--dashboard-client-ca", file("dash.crt", &ca_pem))),
        reload_every: Duration::from_millis(20),
        client_cert_optional: false,
        revoked: None,
    };
    let metrics = TlsMetrics::default();
    let (runtime, follow) = TlsRuntime::start(sources, metrics.clone()).unwrap();
    let follow = tokio::spawn(follow.expect("files are followed"));
    let wait = |certificate, result, n| {
        let metrics = metrics.clone();
        async move {
            for _ in 0..250 {
                if metrics.reloads(certificate, result) == n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("{certificate} {result} never reached {n}");
        }
    };
    let dashboard = runtime.dashboard_ca.clone().unwrap();
    let before = dashboard.borrow().clone();
    let (other_ca, _) = ca();
    file("dash.crt", &other_ca);
    wait(DASHBOARD_CLIENT_CA, "ok", 1).await;
    assert!(!Arc::ptr_eq(&before, &dashboard.borrow()));
    let current = dashboard.borrow().clone();
    file("dash.crt", "garbage");
    wait(DASHBOARD_CLIENT_CA, "error", 1).await;
    assert!(Arc::ptr_eq(&current, &dashboard.borrow()));
    std::fs::remove_file(dir.path().join("ca.crt")).unwrap();
    std::fs::remove_file(dir.path().join("tls.key")).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(metrics.reloads(CLIENT_CA, "error"), 0);
    assert_eq!(metrics.reloads(SERVING, "error"), 0);
    assert!(!follow.is_finished());
    follow.abort();
}

#[test]
fn metrics_start_at_zero_and_count() {
    let m = TlsMetrics::default();
    assert_eq!(m.streams_ended("expired"), 0);
    m.ended("expired");
    assert_eq!(m.streams_ended("expired"), 1);
    m.expiry(SERVING, 42);
    let mut r = gwhub_common::metrics_http::Registry::default();
    m.register(&mut r);
    let text = gwhub_common::metrics_http::encode(&r);
    assert!(
        text.contains("gwhub_tls_certificate_expiry_timestamp_seconds{certificate=\"serving\"} 42"),
        "{text}"
    );
    assert!(
        text.contains("gwhub_tls_reloads_total{certificate=\"client_ca\",result=\"error\"} 0"),
        "{text}"
    );
}
