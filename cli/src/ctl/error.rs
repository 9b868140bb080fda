//! What can go wrong in `gwhubctl`, one variant per problem, so that each
//! message names the flag, file or server it concerns and callers can tell
//! the problems apart without reading strings.

use std::path::PathBuf;

use super::format::printable;

/// An error of a `gwhubctl` command.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// `join` and `cluster` (on the management cluster's API).
    #[error(transparent)]
    Management(#[from] crate::join::ManagementError),
    #[error("{flag} {}: {source}", path.display())]
    ReadFile {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{from}: the token is empty")]
    EmptyToken { from: String },
    #[error("{from}: the token is not printable ASCII")]
    TokenNotAscii { from: String },
    #[error("{from}: {source}")]
    Kubeconfig {
        from: String,
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },
    #[error("{from}: tokenFile {}: {source}", path.display())]
    KubeconfigTokenFile {
        from: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{from}: cannot get the current context's credentials: {}", gwhub_model::error_chain(.source.as_ref()))]
    Credentials {
        from: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "{from}: the exec plugin gave no token (gwhubctl sends only a token from an exec plugin)"
    )]
    ExecWithoutToken { from: String },
    #[error(
        "{from}: the current context's user has no token, tokenFile, exec plugin or client certificate (use --token-file)"
    )]
    NoCredentials { from: String },
    #[error("{from}: the client certificate: {problem}")]
    ClientCertificate {
        from: String,
        problem: ClientPemError,
    },
    #[error("{from}: the client certificate needs an https:// --server and --ca")]
    CertificateWithoutTls { from: String },
    #[error("invalid --server {server:?}: {source}")]
    InvalidServer {
        server: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("--ca/--tls-cert/--tls-key: {}", gwhub_model::error_chain(.0))]
    Tls(#[source] tonic::transport::Error),
    #[error("cannot reach the hub at {server}: {}", gwhub_model::error_chain(.source))]
    Unreachable {
        server: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// The Dashboard refused or failed a call.
    #[error("{:?}: {}", .0.code(), printable(.0.message()))]
    Status(Box<tonic::Status>),
    /// Fleet DNS is off, or this replica does not lead (the hub's words).
    #[error("{}", printable(.0))]
    NoDns(String),
    #[error("{0:?} is not NAMESPACE/NAME")]
    NotNamespaced(String),
    #[error("{0} prints no table: use -o yaml or -o json")]
    NoTable(&'static str),
}

/// What is wrong with a kubeconfig user's client certificate or key.
#[derive(Debug, thiserror::Error)]
pub enum ClientPemError {
    #[error("{field}-data is not base64: {source}")]
    NotBase64 {
        field: &'static str,
        #[source]
        source: base64::DecodeError,
    },
    #[error("{field} {file}: {source}")]
    Read {
        field: &'static str,
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("client-certificate without client-key")]
    CertWithoutKey,
    #[error("client-key without client-certificate")]
    KeyWithoutCert,
}

impl From<tonic::Status> for CtlError {
    fn from(s: tonic::Status) -> Self {
        Self::Status(Box::new(s))
    }
}

/// `gwhubctl`'s result.
pub type Result<T, E = CtlError> = std::result::Result<T, E>;
