//! What stops a bench run, one variant per step that can fail, so the one
//! `error:` line the bench prints names the hub, cluster or object it
//! stopped at, and the cause travels with it.

use std::path::PathBuf;
use std::sync::Arc;

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// Flags that do not go together (the words say which).
    #[error("{0}")]
    Usage(&'static str),
    #[error("no scenario {name:?}; the scenarios are {known}")]
    NoScenario { name: String, known: String },
    #[error("cannot start {}: {source}", bin.display())]
    Spawn {
        bin: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: no stderr pipe", .0.display())]
    NoStderr(PathBuf),
    #[error("{} did not report its addresses", .0.display())]
    NoAddresses(PathBuf),
    #[error("cannot start a runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Channel(#[from] gwhub_test_kit::raw_agent::AgentError),
    /// A Dashboard call (its name) failed.
    #[error("{call}: {source}")]
    Dashboard {
        call: &'static str,
        #[source]
        source: Box<tonic::Status>,
    },
    #[error("a snapshot message does not decode: {0}")]
    Decode(#[source] prost::DecodeError),
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    #[error("{0}")]
    Http(#[source] http::Error),
    /// The API server of the run (starting it, namespaces).
    #[error("{what}: {source}")]
    Fleet {
        what: &'static str,
        #[source]
        source: Box<gwhub_test_kit::FleetError>,
    },
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(transparent)]
    Agent(#[from] Arc<AgentFailure>),
    #[error("a task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("the watcher panicked")]
    WatcherPanicked,
    /// Something the run waits for did not happen in time.
    #[error("{0}")]
    Timeout(&'static str),
    #[error("only {persisted} of {clusters} clusters persisted")]
    NotPersisted { persisted: usize, clusters: usize },
    #[error(
        "watcher ended before the fleet was complete: {why}; the hub logged {count} warnings/errors: {lines:?}"
    )]
    WatcherEnded {
        why: Box<BenchError>,
        count: usize,
        lines: Vec<String>,
    },
    #[error("the hub ended the Dashboard watch")]
    WatchEnded,
}

impl BenchError {
    /// A Kubernetes call that failed, named by `what`.
    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Kube {
            what,
            source: Box::new(source),
        }
    }

    /// A step of the run's API server that failed, named by `what`.
    pub(crate) fn fleet(
        what: &'static str,
    ) -> impl FnOnce(gwhub_test_kit::FleetError) -> BenchError {
        move |source| BenchError::Fleet {
            what,
            source: Box::new(source),
        }
    }

    /// A Dashboard call that failed.
    pub(crate) fn dashboard(call: &'static str) -> impl FnOnce(tonic::Status) -> BenchError {
        move |source| BenchError::Dashboard {
            call,
            source: Box::new(source),
        }
    }
}

/// Why a simulated agent stopped; shared, since the first one to stop ends
/// the run and is also what its task returns.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AgentFailure {
    #[error("{0}: opening: {1}")]
    Opening(String, #[source] tokio::sync::AcquireError),
    #[error("{cluster}: {source}")]
    Stream {
        cluster: String,
        #[source]
        source: gwhub_test_kit::raw_agent::AgentError,
    },
    #[error("{0}: go: {1}")]
    Go(String, #[source] tokio::sync::watch::error::RecvError),
    #[error("{0}: send: stream closed")]
    SendClosed(String),
    #[error("{cluster}: waiting for acks: {acked}/{seq}")]
    AcksLate {
        cluster: String,
        acked: u64,
        seq: u64,
    },
}
