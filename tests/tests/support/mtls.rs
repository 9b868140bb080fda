//! What the mTLS suites share: a temporary directory, the hub started
//! with TLS over loopback and a client channel to it, a stream's first
//! answer or its refusal at the handshake, and a test PKI issuing odd
//! certificates `gwhub certs` would not.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_identity::tls::HubTls;
// The test kit's process guard, binaries and free address, under the
// names this suite used.
use gwhub_proto::v1::{self, agent_message, hub_message, ingest_client::IngestClient};
use gwhub_test_kit::raw_agent;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

pub(crate) use gwhub_test_kit::wait::WAIT;

pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
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

pub(crate) fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

pub(crate) async fn start(tls: HubTls) -> Hub {
    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.insecure = false;
    Hub::start_with_tls(config, Some(tls)).await.unwrap()
}

pub(crate) async fn channel(addr: SocketAddr, tls: ClientTlsConfig) -> Result<Channel, String> {
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
pub(crate) fn hello(cluster: &str) -> v1::AgentMessage {
    raw_agent::msg(agent_message::Message::Hello(raw_agent::hello(cluster)))
}

/// Opens a stream with a Hello and returns the hub's first answer (or the
/// error the call or stream ended with). The sender is kept alive.
pub(crate) async fn first_answer(
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

pub(crate) fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spoke-agent/examples/aws-healthy")
}

/// The handshake (or the first exchange, as TLS 1.3 reports a rejected
/// client certificate after the client's Finished) fails below gRPC.
pub(crate) async fn assert_refused_by_tls(hub: &Hub, tls: ClientTlsConfig) {
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

/// A CA made here (so leaves can be shaped freely) with a hub certificate.
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) ca: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    pub(crate) fn new() -> Self {
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
    pub(crate) fn leaf(&self, cn: Option<&str>, sans: Vec<rcgen::SanType>) -> (String, String) {
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

    pub(crate) fn hub(&self) -> HubTls {
        let ip = rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap());
        let (c, k) = self.leaf(Some("hub"), vec![ip]);
        HubTls::from_pem(c.as_bytes(), k.as_bytes(), self.ca_pem.as_bytes())
    }

    pub(crate) fn client(&self, leaf: &(String, String)) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(Identity::from_pem(&leaf.0, &leaf.1))
    }
}

pub(crate) fn uri(s: &str) -> rcgen::SanType {
    rcgen::SanType::URI(s.try_into().unwrap())
}
