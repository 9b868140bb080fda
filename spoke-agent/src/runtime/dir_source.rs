//! A cluster made of files: `gwhub-agent run --from-dir DIR` reads DIR's
//! manifests instead of an API server and follows edits to them.
//!
//! Change detection is a poll of names, sizes and modification times (every
//! 200 ms by default): portable, no extra dependency, and well inside the
//! one-second budget for a file change to reach the hub. Only when that
//! fingerprint moves are the files read and evaluated again. A directory that
//! does not parse is logged (file and problem) and otherwise ignored: the last
//! good state stays, so a half-saved file never makes Gateways vanish.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_spoke_rules::manifest::{ManifestError, Object, manifest_files, read_paths};
use tokio_util::sync::CancellationToken;

use super::store::GatewayStore;
use gwhub_spoke_rules::{EngineError, Options, Snapshot, evaluate};
use jiff::Timestamp;

/// Turns a cluster's objects into its in-scope Gateways with the status the
/// agent sees (its own conditions merged into everything else's).
pub type Evaluate = Arc<dyn Fn(&[Object]) -> Result<Vec<Gateway>, EvaluateError> + Send + Sync>;

/// Why a look at the directory yielded no Gateways (logged with the
/// directory; the last good state stays).
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    /// The directory could not be listed.
    #[error(transparent)]
    List(#[from] ListError),
    /// A manifest could not be read or parsed.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The engine refused the objects read.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// The directory could not be listed: the listing's message, kept in the
/// fingerprint so the same failure twice is one change, not two.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ListError(String);

/// Why a directory cannot be followed (checked at start-up).
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}: {error}", dir.display())]
    Unreadable { dir: PathBuf, error: std::io::Error },
}

/// Default time between two looks at the directory.
pub const DEFAULT_POLL: Duration = Duration::from_millis(200);

/// Reads a directory of manifests into a [`GatewayStore`].
#[derive(Clone)]
pub struct DirSource {
    dir: PathBuf,
    poll: Duration,
    evaluate: Evaluate,
    /// The cluster's name, for the reconcile spans ("" when not known).
    cluster: String,
}

impl fmt::Debug for DirSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirSource")
            .field("dir", &self.dir)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

/// Name, size and modification time of every manifest file, or why the
/// directory cannot be listed.
type Fingerprint = Result<Vec<(PathBuf, u64, Option<SystemTime>)>, ListError>;

impl DirSource {
    /// A source for `dir`, evaluated with `evaluate`. Fails if `dir` is not
    /// a readable directory, so a typo in a flag is caught at start-up.
    pub fn new(dir: impl Into<PathBuf>, evaluate: Evaluate) -> Result<Self, DirError> {
        let dir = dir.into();
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(DirError::NotADirectory(dir)),
            Err(error) => return Err(DirError::Unreadable { dir, error }),
        }
        Ok(Self {
            dir,
            poll: DEFAULT_POLL,
            evaluate,
            cluster: String::new(),
        })
    }

    /// Names the cluster in the reconcile spans.
    pub fn for_cluster(mut self, cluster: impl Into<String>) -> Self {
        self.cluster = cluster.into();
        self
    }

    /// Sets the time between two looks at the directory.
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(10));
        self
    }

    /// The directory read.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn fingerprint(&self) -> Fingerprint {
        let files = manifest_files(&self.dir).map_err(|e| ListError(e.to_string()))?;
        Ok(files
            .into_iter()
            .map(|p| {
                let meta = std::fs::metadata(&p).ok();
                let size = meta.as_ref().map_or(0, |m| m.len());
                let mtime = meta.and_then(|m| m.modified().ok());
                (p, size, mtime)
            })
            .collect())
    }

    /// Reads and evaluates the directory once.
    pub fn load(&self) -> Result<Vec<Gateway>, EvaluateError> {
        let files = manifest_files(&self.dir)?;
        let objects = read_paths(&files)?;
        (self.evaluate)(&objects)
    }

    /// Follows the directory into `store` until `shutdown`. Marks the store
    /// ready after the first good read, so the hub never gets a snapshot of a
    /// directory that did not parse.
    pub async fn run(self, store: Arc<GatewayStore>, shutdown: CancellationToken) {
        let mut last: Option<Fingerprint> = None;
        let mut ticker = tokio::time::interval(self.poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let this = self.clone();
            let prev = last.clone();
            // File IO and evaluation are blocking; keep them off the runtime.
            let scanned = tokio::task::spawn_blocking(move || this.scan(prev.as_ref())).await;
            let (fp, result) = match scanned {
                Ok(Some(r)) => r,
                Ok(None) => continue, // nothing moved
                Err(e) => {
                    tracing::error!(error = %e, "directory scan panicked");
                    continue;
                }
            };
            last = Some(fp);
            match result {
                Ok(gateways) => {
                    let n = gateways.len();
                    // A trace per reconcile (exported with --otlp-endpoint);
                    // the report of its changes continues it.
                    let span = tracing::info_span!(
                        parent: None,
                        "reconcile",
                        cluster = %self.cluster,
                        gateway = tracing::field::Empty,
                        gateways = n,
                    );
                    let diff = span.in_scope(|| store.replace_all(gateways));
                    store.mark_ready();
                    if !diff.is_empty() {
                        tracing::info!(
                            dir = %self.dir.display(),
                            gateways = n,
                            upserts = diff.upserts,
                            deletes = diff.deletes,
                            "directory changed"
                        );
                    }
                }
                Err(e) => tracing::error!(
                    dir = %self.dir.display(),
                    error = %e,
                    "cannot use the directory; keeping the last good state"
                ),
            }
        }
    }

    /// `None` when the fingerprint equals `prev`; otherwise the new
    /// fingerprint and the evaluation.
    #[allow(clippy::type_complexity)]
    fn scan(
        &self,
        prev: Option<&Fingerprint>,
    ) -> Option<(Fingerprint, Result<Vec<Gateway>, EvaluateError>)> {
        let fp = self.fingerprint();
        if prev == Some(&fp) {
            return None;
        }
        let result = match &fp {
            Ok(_) => self.load(),
            Err(e) => Err(e.clone().into()),
        };
        Some((fp, result))
    }
}

/// The condition engine as a directory source uses it: the same
/// [`evaluate`] `compute` runs, at the current time, yielding each in-scope
/// Gateway with its merged status.
pub fn engine_evaluate(options: Options) -> Evaluate {
    Arc::new(move |objects| {
        let snapshot = Snapshot::from_objects(objects)?;
        let evaluations = evaluate(&snapshot, &options, Timestamp::now())?;
        Ok(evaluations
            .iter()
            .map(|e| {
                for p in &e.problems {
                    tracing::warn!(gateway = %format!("{}/{}", e.namespace(), e.name()), "{p}");
                }
                e.merged_gateway()
            })
            .collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_only() -> Evaluate {
        Arc::new(|objs: &[Object]| {
            objs.iter()
                .filter(|o| o.kind == "Gateway")
                .map(|o| o.parse::<Gateway>().map_err(EvaluateError::from))
                .collect()
        })
    }

    const GW: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
        metadata: {name: NAME, namespace: openshift-ingress}\n\
        spec: {gatewayClassName: c, listeners: []}\n";

    #[tokio::test]
    async fn follows_changes_and_keeps_last_good_state() {
        let dir = tempdir();
        std::fs::write(dir.join("a.yaml"), GW.replace("NAME", "a")).unwrap();
        let src = DirSource::new(&dir, names_only())
            .unwrap()
            .poll_interval(Duration::from_millis(20));
        let store = Arc::new(GatewayStore::default());
        let stop = CancellationToken::new();
        let task = tokio::spawn(src.run(store.clone(), stop.clone()));
        wait_for(|| store.len() == 1 && store.is_ready()).await;

        std::fs::write(dir.join("b.yaml"), GW.replace("NAME", "b")).unwrap();
        wait_for(|| store.len() == 2).await;

        std::fs::write(dir.join("b.yaml"), "kind: [broken").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(store.len(), 2, "a broken file keeps the last good state");

        std::fs::remove_file(dir.join("b.yaml")).unwrap();
        wait_for(|| store.len() == 1).await;
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .unwrap()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_a_missing_directory() {
        let e = DirSource::new("/nonexistent/gwhub", names_only()).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/gwhub: "), "{e}");
    }

    fn tempdir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "gwhub-dir-source-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    async fn wait_for(mut cond: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !cond() {
            assert!(tokio::time::Instant::now() < deadline, "timed out");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
