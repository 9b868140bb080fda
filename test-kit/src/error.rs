//! The harness's error: why a fleet of API servers could not be started or
//! prepared. Its own module so that the modules returning it (`apiserver`,
//! `crds`, `install`) import it from here rather than from each other,
//! which made an import circle.

/// Why a fleet could not be started.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(
        "kube-apiserver/etcd not found in {0}: run scripts/kube-assets.sh (or set GWHUB_KUBE_ASSETS)"
    )]
    NoAssets(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Start(String),
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
}
