//! The channel to the hub's Dashboard API: the server address, TLS (the
//! hub's CA and a client certificate) and the credentials of [`auth`]
//! on every call. Kept apart from the commands so that each of them gets
//! one ready client and no command deals with transport.
//!
//! [`auth`]: super::auth

use gwhub_proto::v1::dashboard_client::DashboardClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tower::util::BoxService;
use tower::{BoxError, Layer, ServiceExt};

use super::{Cli, CtlError, Result, auth};

/// The calls' transport: the channel, behind kube's layer that adds the
/// `authorization` header when there is a token (boxed: with or without
/// it, one type).
type Transport =
    BoxService<http::Request<tonic::body::Body>, http::Response<tonic::body::Body>, BoxError>;

/// A Dashboard client that presents the reader's credentials.
pub(super) type Client = DashboardClient<Transport>;

/// The largest Dashboard answer gwhubctl reads. gRPC's default (4 MiB) is
/// far too small for a large fleet: 1,000 clusters x 100 Gateways list as
/// ~47 MB, mostly the names of entries the hub left out.
const MAX_ANSWER_BYTES: usize = 1 << 30;

/// Connects to `--server` with the credentials [`auth::credentials`]
/// picks; the client certificate is `--tls-cert`/`--tls-key`, else the
/// kubeconfig's.
pub(super) async fn connect(cli: &Cli) -> Result<Client> {
    let credentials = auth::credentials(cli).await?;
    let server = &cli.server;
    let mut endpoint =
        Channel::from_shared(server.to_owned()).map_err(|source| CtlError::InvalidServer {
            server: server.clone(),
            source,
        })?;
    // The Dashboard shares the hub's server certificate when mTLS is on.
    if let Some(ca) = &cli.ca {
        let mut tls =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("--ca", ca)?));
        let identity = match (&cli.tls_cert, &cli.tls_key) {
            (Some(cert), Some(key)) => Some(Identity::from_pem(
                read("--tls-cert", cert)?,
                read("--tls-key", key)?,
            )),
            _ => credentials
                .identity
                .map(|pem| Identity::from_pem(pem.cert, pem.key)),
        };
        if let Some(identity) = identity {
            tls = tls.identity(identity);
        }
        endpoint = endpoint.tls_config(tls).map_err(CtlError::Tls)?;
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|source| CtlError::Unreachable {
            server: server.clone(),
            source,
        })?
        .map_err(BoxError::from);
    let transport = match credentials.auth {
        Some(layer) => BoxService::new(layer.layer(channel)),
        None => BoxService::new(channel),
    };
    Ok(DashboardClient::new(transport).max_decoding_message_size(MAX_ANSWER_BYTES))
}

/// The contents of the file a flag names.
fn read(flag: &'static str, path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| CtlError::ReadFile {
        flag,
        path: path.to_owned(),
        source,
    })
}
