//! Who `gwhubctl` says it is to the Dashboard: the bearer token and the
//! client certificate, chosen in the documented order (`--token`,
//! `--token-file` or `GWHUB_TOKEN_FILE`, `--kubeconfig`, then for an
//! `https://` server `KUBECONFIG` or `~/.kube/config`).
//!
//! Kubeconfigs are read and merged, their current context resolved and
//! their user's credentials obtained (`token`, `tokenFile`, exec plugins,
//! auth providers) by `kube::config`, as for the Kubernetes API, so a
//! login helper that works with kubectl works here; this module picks the
//! source, names it in errors, and turns every token into kube's
//! `authorization` layer.

use std::path::Path;

use base64::Engine;
use kube::client::ConfigExt;
use kube::client::middleware::AuthLayer;
use kube::config::{AuthInfo, Config, KubeConfigOptions, Kubeconfig};
use secrecy::{ExposeSecret, SecretString};

use super::{Cli, ClientPemError, CtlError, Result};

/// What the calls present.
pub(super) struct Credentials {
    /// Adds `authorization: Bearer ...` to each call (none: no header).
    pub(super) auth: Option<AuthLayer>,
    /// The kubeconfig user's client certificate, if it has one.
    pub(super) identity: Option<ClientPem>,
}

/// A client certificate (chain) and its private key, PEM.
pub(super) struct ClientPem {
    pub(super) cert: Vec<u8>,
    pub(super) key: Vec<u8>,
}

impl Credentials {
    fn none() -> Self {
        Self {
            auth: None,
            identity: None,
        }
    }
}

/// The credentials of `cli`'s flags, else of the default kubeconfig for an
/// https:// server (one that is missing, unreadable or without credentials
/// sends none: not every hub wants a token, and one that does says so).
pub(super) async fn credentials(cli: &Cli) -> Result<Credentials> {
    if let Some(t) = &cli.token {
        return static_token(t.trim(), "--token".to_owned());
    }
    if let Some(path) = &cli.token_file {
        let text = std::fs::read_to_string(path).map_err(|source| CtlError::ReadFile {
            flag: "--token-file",
            path: path.clone(),
            source,
        })?;
        return static_token(text.trim(), format!("--token-file {}", path.display()));
    }
    if let Some(path) = &cli.kubeconfig {
        let from = format!("--kubeconfig {}", path.display());
        let kubeconfig = Kubeconfig::read_from(path).map_err(|e| CtlError::Kubeconfig {
            from: from.clone(),
            source: Box::new(e),
        })?;
        let credentials = from_kubeconfig(kubeconfig, &from).await?;
        return match (&credentials.auth, &credentials.identity) {
            (None, None) => Err(CtlError::NoCredentials { from }),
            (None, Some(_)) if cli.ca.is_none() => Err(CtlError::CertificateWithoutTls { from }),
            _ => Ok(credentials),
        };
    }
    if cli.server.starts_with("https://") {
        let Ok(kubeconfig) = Kubeconfig::read() else {
            return Ok(Credentials::none());
        };
        return Ok(from_kubeconfig(kubeconfig, "the kubeconfig")
            .await
            .unwrap_or_else(|_| Credentials::none()));
    }
    Ok(Credentials::none())
}

/// A token given as it is (`--token`, `--token-file`).
fn static_token(token: &str, from: String) -> Result<Credentials> {
    check_token(token, &from)?;
    let mut config = Config::new(http::Uri::default());
    config.auth_info.token = Some(SecretString::from(token));
    Ok(Credentials {
        auth: auth_layer(&config, &from)?,
        identity: None,
    })
}

/// The credentials of the kubeconfig's current context's user. A
/// `tokenFile` is read here and trimmed as `--token-file` is (kube would
/// send its final newline, which no header may carry).
async fn from_kubeconfig(kubeconfig: Kubeconfig, from: &str) -> Result<Credentials> {
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| CtlError::Kubeconfig {
            from: from.to_owned(),
            source: Box::new(e),
        })?;
    let user = &mut config.auth_info;
    if user.token.is_none()
        && let Some(file) = user.token_file.take()
    {
        let text =
            std::fs::read_to_string(&file).map_err(|source| CtlError::KubeconfigTokenFile {
                from: from.to_owned(),
                path: file.into(),
                source,
            })?;
        user.token = Some(SecretString::from(text.trim()));
    }
    if let Some(token) = &user.token {
        let token = token.expose_secret().trim().to_owned();
        check_token(&token, from)?;
        user.token = Some(SecretString::from(token));
    }
    let identity = client_pem(user).map_err(|problem| CtlError::ClientCertificate {
        from: from.to_owned(),
        problem,
    })?;
    let auth = auth_layer(&config, from)?;
    if auth.is_none() && identity.is_none() && config.auth_info.exec.is_some() {
        return Err(CtlError::ExecWithoutToken {
            from: from.to_owned(),
        });
    }
    Ok(Credentials { auth, identity })
}

/// kube's `authorization` layer for `config`'s user; for an exec plugin
/// this runs it (and runs it again when its token expires).
fn auth_layer(config: &Config, from: &str) -> Result<Option<AuthLayer>> {
    config.auth_layer().map_err(|e| CtlError::Credentials {
        from: from.to_owned(),
        source: Box::new(e),
    })
}

/// A token must be one header value (kube's layer would not take it).
fn check_token(token: &str, from: &str) -> Result<()> {
    if token.is_empty() {
        return Err(CtlError::EmptyToken {
            from: from.to_owned(),
        });
    }
    http::HeaderValue::try_from(format!("Bearer {token}"))
        .map(|_| ())
        .map_err(|_| CtlError::TokenNotAscii {
            from: from.to_owned(),
        })
}

/// The user's client certificate and key: `client-certificate-data` /
/// `client-key-data` (base64), else the files `client-certificate` /
/// `client-key` (relative to the kubeconfig, as kube resolves them).
fn client_pem(user: &AuthInfo) -> std::result::Result<Option<ClientPem>, ClientPemError> {
    let cert = pem(
        "client-certificate",
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_deref(),
    )?;
    let key = pem(
        "client-key",
        user.client_key_data.as_ref().map(|k| k.expose_secret()),
        user.client_key.as_deref(),
    )?;
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(ClientPem { cert, key })),
        (Some(_), None) => Err(ClientPemError::CertWithoutKey),
        (None, Some(_)) => Err(ClientPemError::KeyWithoutCert),
    }
}

/// One PEM field of a kubeconfig user: its `-data` form, else its file.
fn pem(
    field: &'static str,
    data: Option<&str>,
    file: Option<&str>,
) -> std::result::Result<Option<Vec<u8>>, ClientPemError> {
    if let Some(data) = data {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|source| ClientPemError::NotBase64 { field, source });
    }
    match file {
        Some(file) => {
            std::fs::read(Path::new(file))
                .map(Some)
                .map_err(|source| ClientPemError::Read {
                    field,
                    file: file.to_owned(),
                    source,
                })
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\n\
             contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
             clusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:1\"}}}}]\n\
             users: [{{name: u, user: {user}}}]\n"
        ))
        .unwrap()
    }

    /// The header kube's layer adds to a call.
    async fn header(credentials: &Credentials) -> Option<String> {
        use tower::{Layer, ServiceExt};
        let echo = tower::service_fn(|req: http::Request<tonic::body::Body>| async move {
            Ok::<_, tower::BoxError>(http::Response::new(
                req.headers()
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_owned()),
            ))
        });
        let layer = credentials.auth.as_ref()?;
        layer
            .layer(echo)
            .oneshot(http::Request::new(tonic::body::Body::empty()))
            .await
            .unwrap()
            .into_body()
    }

    #[tokio::test]
    async fn a_token_file_is_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let tf = dir.path().join("t");
        std::fs::write(&tf, "from-file\n").unwrap();
        let c = from_kubeconfig(kubeconfig(&format!("{{tokenFile: {}}}", tf.display())), "k")
            .await
            .unwrap();
        assert_eq!(header(&c).await.as_deref(), Some("Bearer from-file"));
        // A tokenFile that cannot be read: an error naming it.
        let e = from_kubeconfig(kubeconfig("{tokenFile: /nonexistent/t}"), "k")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("k: tokenFile /nonexistent/t:"), "{e}");
    }

    /// A login helper as kubectl runs it: kube runs the plugin and sends
    /// its token; one that gives none is an error saying so.
    #[tokio::test]
    async fn an_exec_plugins_token_is_sent() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plugin = |name: &str, status: &str| {
            let path = dir.path().join(name);
            std::fs::write(
                &path,
                format!(
                    "#!/bin/sh\necho '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
                     \"kind\":\"ExecCredential\",\"status\":{status}}}'\n"
                ),
            )
            .unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            format!(
                "{{exec: {{apiVersion: client.authentication.k8s.io/v1, command: {}, \
                 interactiveMode: Never}}}}",
                path.display()
            )
        };
        let user = plugin("login", r#"{"token":"from-exec"}"#);
        let c = from_kubeconfig(kubeconfig(&user), "k").await.unwrap();
        assert_eq!(header(&c).await.as_deref(), Some("Bearer from-exec"));
        let user = plugin("none", "{}");
        let e = from_kubeconfig(kubeconfig(&user), "k").await.err().unwrap();
        assert!(matches!(e, CtlError::ExecWithoutToken { .. }), "{e}");
    }

    #[tokio::test]
    async fn no_credentials_and_bad_tokens_are_named() {
        let c = from_kubeconfig(kubeconfig("{}"), "k").await.unwrap();
        assert!(c.auth.is_none() && c.identity.is_none());
        let e = from_kubeconfig(kubeconfig("{token: \"a\\u0007b\"}"), "k")
            .await
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "k: the token is not printable ASCII");
        let e = static_token("", "--token".into()).err().unwrap();
        assert_eq!(e.to_string(), "--token: the token is empty");
        // The current context names a user no file defines: kube's error.
        let e = from_kubeconfig(
            Kubeconfig::from_yaml("current-context: gone\ncontexts: []\n").unwrap(),
            "k",
        )
        .await
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("gone"), "{e}");
    }

    #[tokio::test]
    async fn a_client_certificate_is_read_from_data_or_files() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, "CERT").unwrap();
        let data = base64::engine::general_purpose::STANDARD.encode("KEY");
        let c = from_kubeconfig(
            kubeconfig(&format!(
                "{{client-certificate: {}, client-key-data: {data}}}",
                cert.display()
            )),
            "k",
        )
        .await
        .unwrap();
        let pem = c.identity.unwrap();
        assert_eq!(
            (pem.cert.as_slice(), pem.key.as_slice()),
            (&b"CERT"[..], &b"KEY"[..])
        );
        assert!(c.auth.is_none());
        let e = from_kubeconfig(kubeconfig("{client-key-data: S0VZ}"), "k")
            .await
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "k: the client certificate: client-key without client-certificate"
        );
    }
}
