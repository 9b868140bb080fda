//! `--dashboard-auth=kubernetes`: who is reading, and which namespaces
//! they may read, asked of the management cluster's API server as
//! kube-rbac-proxy does in front of operator endpoints.
//!
//! The questions go out through the [`Reviews`] port: this crate decides
//! when to ask, how often and what an answer means; the runtime asks the
//! API server (`gwhub_k8s::reviews`). So identity names no
//! Kubernetes client.
//!
//! A reader presents a Kubernetes bearer token (`authorization: Bearer`
//! on gRPC; the header or the page's token cookie on the web page). A
//! `TokenReview` (authentication.k8s.io/v1) says whose it is; a
//! `SubjectAccessReview` (authorization.k8s.io/v1) per namespace says
//! whether that user may `get` `gateways.gateway.networking.k8s.io` there,
//! and one with no namespace whether they may cluster-wide (then they read
//! everything, `ListClusters` and the page's cluster list included). The
//! answers are cached for [`read_access::DECISION_TTL`] (failures for
//! [`read_access::FAILURE_TTL`]), bounded, keyed by a keyed 128-bit hash
//! of the token, never the token.
//!
//! TokenReviews are bounded per replica (spec §5), so made-up tokens
//! cannot be amplified into API server load: at most
//! [`TOKEN_REVIEWS_PER_SECOND`] a second after a burst of
//! [`TOKEN_REVIEW_BURST`] (one [`PriorityBucket`]), at most
//! [`TOKEN_REVIEWS_IN_FLIGHT`] at once, and a token found invalid is
//! remembered for [`REJECTED_TOKEN_TTL`]. A reader over the limit is
//! refused with `RESOURCE_EXHAUSTED` (the page: 429) after waiting at most
//! [`MAX_REVIEW_WAIT`], never queued longer. Over `T` seconds the API
//! server sees at most `50 + 10·(T + 1)` TokenReviews from one replica
//! (the burst, the rate, and reservations at most 1 s ahead), however
//! many tokens arrive. A token that authenticated before (remembered for
//! [`KNOWN_READER_TTL`]) is re-reviewed ahead of unknown ones (the
//! bucket's `High` class, and one in-flight slot kept for it), so readers
//! already reviewed keep answering through a flood of bogus tokens.
//!
//! A watch (gRPC or the page's event stream) decides its namespaces as
//! Gateways of them appear, and re-checks everything (the token too) every
//! `DECISION_TTL`: a namespace whose access was revoked is sent as deleted,
//! one granted appears, and a token no longer valid ends the watch with
//! `UNAUTHENTICATED`.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gwhub_common::bucket::{Class, PriorityBucket};

use gwhub_hub_rules::read_access::{self, Cache, MAX_CACHED, Outcome, Visibility};
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

mod counters;
pub mod reviews;

pub use counters::{ReviewCounters, ReviewLimitLabel, ReviewResult};
pub use reviews::{Reviews, User};

/// TokenReviews a second one replica sends at most, after a burst of
/// [`TOKEN_REVIEW_BURST`] (spec §5).
pub const TOKEN_REVIEWS_PER_SECOND: f64 = 10.0;
/// TokenReviews one replica may send at once after a quiet spell.
pub const TOKEN_REVIEW_BURST: u32 = 50;
/// TokenReviews in flight at once; one of them only for a token that
/// authenticated before.
pub const TOKEN_REVIEWS_IN_FLIGHT: usize = 4;
/// The longest a reader waits for a review's turn: past it, refused.
pub const MAX_REVIEW_WAIT: Duration = Duration::from_secs(1);
/// How long a token the API server said is not valid is remembered: each
/// made-up token costs at most one review a minute.
pub const REJECTED_TOKEN_TTL: Duration = Duration::from_secs(60);
/// How long a token that authenticated is remembered as a known reader,
/// whose re-reviews go ahead of unknown tokens'.
pub const KNOWN_READER_TTL: Duration = Duration::from_secs(3600);
/// The share of the review rate kept for unknown tokens while known
/// readers' re-reviews take the rest: 10/s · 0.5 = 5 a second.
const UNKNOWN_TOKEN_SHARE: f64 = 0.5;

/// A hash of a token: the caches' key.
type TokenKey = u128;

/// A token's user (`None`: not a valid token), or why it is not known.
type UserAnswer = Result<Option<Arc<User>>, Unreviewed>;

/// The reviews and their caches; one per hub, shared by every reader.
pub struct KubeReaders {
    /// Asks the API server.
    reviews: Arc<dyn Reviews>,
    /// Two independent random SipHash keys: a 128-bit hash no reader can
    /// aim a collision at.
    hash: (
        std::collections::hash_map::RandomState,
        std::collections::hash_map::RandomState,
    ),
    users: Mutex<Cache<TokenKey, UserAnswer>>,
    /// Tokens that authenticated within [`KNOWN_READER_TTL`].
    known: Mutex<Cache<TokenKey, ()>>,
    /// Per token and namespace ("" for cluster-wide).
    decisions: Mutex<Cache<(TokenKey, String), Result<bool, Unreviewed>>>,
    /// The TokenReview budget.
    gate: ReviewGate,
    /// The hub's counters, once it serves ([`Self::count_in`]).
    counters: std::sync::OnceLock<Arc<ReviewCounters>>,
}

/// Why a token was not reviewed: a limit of spec §5 (the message names
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReviewLimit {
    #[error(
        "the hub sends at most {TOKEN_REVIEWS_PER_SECOND} TokenReviews a second (burst {TOKEN_REVIEW_BURST}) and this token is not reviewed yet; retry later"
    )]
    Rate,
    #[error("the hub has {TOKEN_REVIEWS_IN_FLIGHT} TokenReviews in flight, its limit; retry later")]
    InFlight,
}

impl ReviewLimit {
    /// The metric's label.
    fn label(self) -> &'static str {
        match self {
            ReviewLimit::Rate => "rate",
            ReviewLimit::InFlight => "in_flight",
        }
    }
}

/// The rate ([`PriorityBucket`]) and in-flight bounds of TokenReviews.
struct ReviewGate {
    bucket: Mutex<PriorityBucket>,
    /// [`TOKEN_REVIEWS_IN_FLIGHT`] slots.
    all: Arc<Semaphore>,
    /// `TOKEN_REVIEWS_IN_FLIGHT - 1` slots unknown tokens must also hold.
    unknown: Arc<Semaphore>,
}

/// A review's turn: its in-flight slots, given back on drop.
struct ReviewTurn {
    _all: OwnedSemaphorePermit,
    _unknown: Option<OwnedSemaphorePermit>,
}

impl ReviewGate {
    fn new() -> Self {
        ReviewGate {
            bucket: Mutex::new(PriorityBucket::new(
                TOKEN_REVIEWS_PER_SECOND,
                TOKEN_REVIEW_BURST,
                UNKNOWN_TOKEN_SHARE,
                Instant::now(),
            )),
            all: Arc::new(Semaphore::new(TOKEN_REVIEWS_IN_FLIGHT)),
            unknown: Arc::new(Semaphore::new(TOKEN_REVIEWS_IN_FLIGHT - 1)),
        }
    }

    /// The bucket's answer for a review of `class` at `now`: how long it
    /// waits for its token (at most [`MAX_REVIEW_WAIT`]), or refused
    /// naming the rate (a reservation further ahead is given back).
    fn reserve(&self, class: Class, now: Instant) -> Result<Duration, ReviewLimit> {
        // Bound first: the lock is let go before a refund takes it again.
        let taken = self.bucket.lock().take(class, now);
        match taken {
            Ok(wait) if wait <= MAX_REVIEW_WAIT => Ok(wait),
            Ok(_) => {
                self.bucket.lock().refund();
                Err(ReviewLimit::Rate)
            }
            Err(_) => Err(ReviewLimit::Rate),
        }
    }

    /// Waits (at most [`MAX_REVIEW_WAIT`]) for a review's turn: a token of
    /// the bucket, then an in-flight slot. `known`: the token authenticated
    /// before (the bucket's `High` class, all four slots).
    async fn turn(&self, known: bool) -> Result<ReviewTurn, ReviewLimit> {
        let class = if known { Class::High } else { Class::Low };
        let wait = self.reserve(class, Instant::now())?;
        let deadline = tokio::time::Instant::now() + MAX_REVIEW_WAIT;
        tokio::time::sleep(wait).await;
        let slots = async {
            let unknown = match known {
                true => None,
                false => Some(self.unknown.clone().acquire_owned().await.ok()?),
            };
            let all = self.all.clone().acquire_owned().await.ok()?;
            Some(ReviewTurn {
                _all: all,
                _unknown: unknown,
            })
        };
        match tokio::time::timeout_at(deadline, slots).await {
            Ok(Some(turn)) => Ok(turn),
            _ => {
                // Nothing was sent: the token goes back.
                self.bucket.lock().refund();
                Err(ReviewLimit::InFlight)
            }
        }
    }
}

impl std::fmt::Debug for KubeReaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeReaders").finish_non_exhaustive()
    }
}

/// Why a reader is not served.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Unavailable(#[from] Unreviewed),
    #[error("{0}")]
    Limited(#[from] ReviewLimit),
}

/// A review the API server did not answer; cached (briefly) like an
/// answer, so it is `Clone`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unreviewed {
    #[error("the hub cannot review the token with the Kubernetes API server: {0}")]
    Token(ReviewError),
    #[error("the hub cannot ask the Kubernetes API server what the reader may read: {0}")]
    Access(ReviewError),
}

/// Why a review has no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    #[error("{}", gwhub_model::error_chain(.0.as_ref()))]
    Failed(Arc<dyn std::error::Error + Send + Sync>),
    #[error("no answer within {REVIEW_TIMEOUT:?}")]
    Timeout,
}

impl From<ReadError> for Status {
    fn from(e: ReadError) -> Status {
        match e {
            ReadError::Unauthenticated(m) => Status::unauthenticated(m),
            ReadError::Forbidden(m) => Status::permission_denied(m),
            ReadError::Unavailable(m) => Status::unavailable(m.to_string()),
            ReadError::Limited(m) => Status::resource_exhausted(m.to_string()),
        }
    }
}

impl KubeReaders {
    /// The readers' reviews, asked through `reviews`.
    pub fn new(reviews: Arc<dyn Reviews>) -> Self {
        KubeReaders {
            reviews,
            hash: Default::default(),
            users: Mutex::new(Cache::new(MAX_CACHED)),
            known: Mutex::new(Cache::new(MAX_CACHED)),
            decisions: Mutex::new(Cache::new(MAX_CACHED)),
            gate: ReviewGate::new(),
            counters: std::sync::OnceLock::new(),
        }
    }

    /// Whether `token` authenticated within [`KNOWN_READER_TTL`].
    pub fn known(&self, token: &str) -> bool {
        let key = self.key(token);
        self.known.lock().get(&key, Instant::now()).is_some()
    }

    /// Counts reviews and refusals in `counters` (the hub's, on
    /// `/metrics`); the first call wins.
    pub fn count_in(&self, counters: Arc<ReviewCounters>) {
        let _ = self.counters.set(counters);
    }

    fn count_review(&self, result: &'static str) {
        if let Some(c) = self.counters.get() {
            c.token_reviews
                .get_or_create(&ReviewResult { result })
                .inc();
        }
    }

    fn count_refusal(&self, limit: ReviewLimit) {
        if let Some(c) = self.counters.get() {
            c.token_reviews_refused
                .get_or_create(&ReviewLimitLabel {
                    limit: limit.label(),
                })
                .inc();
        }
    }

    fn key(&self, token: &str) -> TokenKey {
        let half = |s: &std::collections::hash_map::RandomState| {
            let mut h = s.build_hasher();
            h.write(token.as_bytes());
            h.finish()
        };
        (u128::from(half(&self.hash.0)) << 64) | u128::from(half(&self.hash.1))
    }

    /// The token's user (`None`: not a valid token), cached.
    async fn user(&self, key: TokenKey, token: &str) -> Result<Option<Arc<User>>, ReadError> {
        if let Some(r) = self.users.lock().get(&key, Instant::now()).cloned() {
            return r.map_err(ReadError::Unavailable);
        }
        let known = self.known.lock().get(&key, Instant::now()).is_some();
        let _turn = match self.gate.turn(known).await {
            Ok(t) => t,
            Err(limit) => {
                self.count_refusal(limit);
                return Err(limit.into());
            }
        };
        // Another call with the same token may have been answered while
        // this one waited its turn.
        if let Some(r) = self.users.lock().get(&key, Instant::now()).cloned() {
            self.gate.bucket.lock().refund();
            return r.map_err(ReadError::Unavailable);
        }
        let answer = reviewed(self.reviews.token(token)).await;
        let (result, ttl) = match answer {
            Ok(user) => match user {
                Some(u) => {
                    self.count_review("authenticated");
                    self.known
                        .lock()
                        .insert(key, (), KNOWN_READER_TTL, Instant::now());
                    (Ok(Some(Arc::new(u))), read_access::ttl(Outcome::Answered))
                }
                None => {
                    self.count_review("unauthenticated");
                    (Ok(None), REJECTED_TOKEN_TTL)
                }
            },
            Err(e) => {
                self.count_review("error");
                tracing::warn!(error = %e, "TokenReview failed");
                (Err(Unreviewed::Token(e)), read_access::ttl(Outcome::Failed))
            }
        };
        self.users
            .lock()
            .insert(key, result.clone(), ttl, Instant::now());
        result.map_err(ReadError::Unavailable)
    }

    /// Whether `user` may get hub Gateways in `namespace` ("": all), cached.
    async fn allowed(
        &self,
        key: TokenKey,
        user: &User,
        namespace: &str,
    ) -> Result<bool, ReadError> {
        let cache_key = (key, namespace.to_owned());
        if let Some(r) = self
            .decisions
            .lock()
            .get(&cache_key, Instant::now())
            .cloned()
        {
            return r.map_err(ReadError::Unavailable);
        }
        let answer = reviewed(self.reviews.access(user, namespace)).await;
        let (result, outcome) = match answer {
            Ok(allowed) => (Ok(allowed), Outcome::Answered),
            Err(e) => {
                tracing::warn!(error = %e, namespace, "SubjectAccessReview failed");
                (Err(Unreviewed::Access(e)), Outcome::Failed)
            }
        };
        self.decisions.lock().insert(
            cache_key,
            result.clone(),
            read_access::ttl(outcome),
            Instant::now(),
        );
        result.map_err(ReadError::Unavailable)
    }
}

/// How long a review may take: a reader waiting holds a Dashboard call
/// slot, so a slow API server costs readers a refusal, not the budget.
const REVIEW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A review's answer, or a timeout as an error.
async fn reviewed<T>(
    call: impl Future<Output = Result<T, reviews::Failure>>,
) -> Result<T, ReviewError> {
    match tokio::time::timeout(REVIEW_TIMEOUT, call).await {
        Ok(r) => r.map_err(|e| ReviewError::Failed(Arc::from(e))),
        Err(_) => Err(ReviewError::Timeout),
    }
}

/// One reader of the Dashboard or the page: what they may see. Without
/// `--dashboard-auth=kubernetes` everyone sees everything (the token and
/// client-certificate gates admit or refuse before).
pub struct Reader {
    visibility: Visibility,
    kube: Option<KubeReader>,
}

struct KubeReader {
    readers: Arc<KubeReaders>,
    /// Kept for the re-checks of a long watch; never logged.
    token: String,
    key: TokenKey,
    user: Arc<User>,
    decided_at: Instant,
}

/// SubjectAccessReviews one reader has in flight at most.
const REVIEWS_AT_ONCE: usize = 8;

const NO_TOKEN: &str = "the hub authorizes readers with Kubernetes (--dashboard-auth=kubernetes): \
     send `authorization: Bearer <token>` with your Kubernetes token (gwhubctl: --kubeconfig, \
     --token or --token-file; over https:// it sends the kubeconfig's token by itself)";

impl Reader {
    /// A reader who sees everything.
    pub fn anyone() -> Reader {
        Reader {
            visibility: Visibility::everything(),
            kube: None,
        }
    }

    /// Authenticates `token` and decides whether its user reads
    /// cluster-wide; `Unauthenticated` without a valid token.
    pub async fn kubernetes(
        readers: Arc<KubeReaders>,
        token: Option<&str>,
    ) -> Result<Reader, ReadError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(ReadError::Unauthenticated(NO_TOKEN.to_owned()));
        };
        let key = readers.key(token);
        let mut reader = Reader {
            visibility: Visibility::namespaced(),
            kube: Some(KubeReader {
                readers,
                token: token.to_owned(),
                key,
                user: Arc::new(User::default()),
                decided_at: Instant::now(),
            }),
        };
        reader.recheck().await?;
        Ok(reader)
    }

    /// Reviews the token again and forgets the namespace decisions, so
    /// they are made again (from the cache when still fresh).
    pub async fn recheck(&mut self) -> Result<(), ReadError> {
        let Some(k) = self.kube.as_mut() else {
            return Ok(());
        };
        let Some(user) = k.readers.user(k.key, &k.token).await? else {
            return Err(ReadError::Unauthenticated(
                "the bearer token is not a valid Kubernetes token (TokenReview)".to_owned(),
            ));
        };
        let cluster_wide = k.readers.allowed(k.key, &user, "").await?;
        k.user = user;
        k.decided_at = Instant::now();
        self.visibility = match cluster_wide {
            true => Visibility::everything(),
            false => Visibility::namespaced(),
        };
        Ok(())
    }

    /// When a long watch must [`Self::recheck`] (never, without Kubernetes).
    pub fn recheck_at(&self) -> Option<Instant> {
        self.kube
            .as_ref()
            .map(|k| k.decided_at + read_access::DECISION_TTL)
    }

    /// Decides each of `namespaces` not decided yet, a few reviews at a
    /// time (a reader's first look at a hub of many namespaces).
    pub async fn decide<'a>(
        &mut self,
        namespaces: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ReadError> {
        let Some(k) = self.kube.as_ref() else {
            return Ok(());
        };
        let undecided = self.visibility.undecided(namespaces);
        if undecided.is_empty() {
            return Ok(());
        }
        let answers: Vec<(String, Result<bool, ReadError>)> = futures::stream::iter(undecided)
            .map(|ns| async move {
                let ok = k.readers.allowed(k.key, &k.user, &ns).await;
                (ns, ok)
            })
            .buffer_unordered(REVIEWS_AT_ONCE)
            .collect()
            .await;
        for (ns, ok) in answers {
            self.visibility.decide(&ns, ok?);
        }
        Ok(())
    }

    /// `Forbidden` unless the reader may read hub Gateways of `namespace`.
    pub async fn check(&mut self, namespace: &str) -> Result<(), ReadError> {
        self.decide([namespace]).await?;
        if self.visibility.sees(namespace) {
            return Ok(());
        }
        Err(ReadError::Forbidden(self.refusal(&format!(
            "get gateways.{} in namespace {}",
            read_access::GROUP,
            gwhub_model::text::quote_client_input(namespace)
        ))))
    }

    /// `Forbidden` unless the reader reads cluster-wide.
    pub fn check_cluster_wide(&self, what: &str) -> Result<(), ReadError> {
        if self.visibility.is_cluster_wide() {
            return Ok(());
        }
        Err(ReadError::Forbidden(self.refusal(&format!(
            "get gateways.{} cluster-wide (needed for {what})",
            read_access::GROUP
        ))))
    }

    fn refusal(&self, what: &str) -> String {
        let user = self
            .kube
            .as_ref()
            .and_then(|k| k.user.username.clone())
            .unwrap_or_default();
        format!(
            "{} may not {what}",
            gwhub_model::text::quote_client_input(&user)
        )
    }

    pub fn visibility(&self) -> &Visibility {
        &self.visibility
    }
}

/// Sleeps until `at`, forever without one.
pub async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known readers' re-reviews: the burst of 50 at once, then the rate
    /// (10/s) reserved up to 1 s ahead, the rest refused at once naming
    /// the rate; unknown tokens then get their floor's one reservation and
    /// are refused without queueing. At fixed instants, so the answer is
    /// the same at any machine load (on real time, a starved run let more
    /// tokens accrue between the 70 calls, or woke the reserved ones late).
    #[test]
    fn the_gate_reserves_a_burst_then_a_second_of_the_rate() {
        let gate = ReviewGate::new();
        let now = Instant::now();
        let answers: Vec<_> = (0..70).map(|_| gate.reserve(Class::High, now)).collect();
        let waits: Vec<Duration> = answers.iter().filter_map(|r| r.ok()).collect();
        assert_eq!(waits.len(), 60, "{answers:?}");
        assert_eq!(
            waits.iter().filter(|w| w.is_zero()).count(),
            50,
            "{waits:?}"
        );
        assert!(waits.iter().all(|w| *w <= MAX_REVIEW_WAIT), "{waits:?}");
        let rate = answers
            .iter()
            .filter(|r| **r == Err(ReviewLimit::Rate))
            .count();
        assert_eq!(rate, 10);
        // Unknown tokens, once that second has passed: one reservation of
        // their floor (5/s), then refused at once.
        let later = now + MAX_REVIEW_WAIT;
        let a = gate.reserve(Class::Low, later);
        let b = gate.reserve(Class::Low, later);
        assert!(a.is_ok(), "{a:?}");
        assert_eq!(b, Err(ReviewLimit::Rate));
    }

    /// A turn reserved ahead is granted once its wait is over, and holds
    /// an in-flight slot until dropped.
    #[tokio::test]
    async fn a_reserved_turn_is_granted_and_holds_a_slot() {
        let gate = ReviewGate::new();
        let Ok(turn) = gate.turn(true).await else {
            panic!("a fresh gate refused a known reader");
        };
        assert_eq!(gate.all.available_permits(), TOKEN_REVIEWS_IN_FLIGHT - 1);
        drop(turn);
        assert_eq!(gate.all.available_permits(), TOKEN_REVIEWS_IN_FLIGHT);
    }
}
