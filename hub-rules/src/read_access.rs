//! Who reads what under `gwhub serve --dashboard-auth=kubernetes`: the
//! pure half of the hub's reader authorization (the TokenReview and
//! SubjectAccessReview calls are the runtime's, `gwhub_identity::authz`).
//!
//! A reader may read a hub Gateway when Kubernetes RBAC lets them `get`
//! `gateways.gateway.networking.k8s.io` in its namespace on the management
//! cluster; a reader allowed that cluster-wide (a SubjectAccessReview with
//! no namespace) reads every namespace and the fleet-wide cluster list.
//! [`Visibility`] holds one reader's decisions; [`Cache`] keeps decisions
//! briefly, bounded, so a page of readers does not cost an API call per
//! request; [`ttl`] says for how long.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How long an answer of the API server (a token's user, an allow or a
/// deny) is trusted: an RBAC change or a revoked token takes effect on
/// every reader, watches included, within this.
pub const DECISION_TTL: Duration = Duration::from_secs(10);

/// How long a failed review (the API server unreachable or refusing the
/// hub) is remembered: short, so readers recover as soon as it answers,
/// but long enough that a burst of readers is not a burst of calls.
pub const FAILURE_TTL: Duration = Duration::from_secs(1);

/// Entries a [`Cache`] holds at most (about 100 bytes each).
pub const MAX_CACHED: usize = 4096;

/// The verb, API group and resource a reader needs on hub Gateways.
pub const VERB: &str = "get";
pub const GROUP: &str = "gateway.networking.k8s.io";
pub const RESOURCE: &str = "gateways";

/// What the API server answered, for [`ttl`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An answer (authenticated or not, allowed or not).
    Answered,
    /// No answer: an error reaching or asking the API server.
    Failed,
}

/// How long an outcome is cached.
pub fn ttl(outcome: Outcome) -> Duration {
    match outcome {
        Outcome::Answered => DECISION_TTL,
        Outcome::Failed => FAILURE_TTL,
    }
}

/// A bounded map whose entries expire. The clock is the caller's (`now`),
/// so the policy is tested without waiting. Keys are what the runtime
/// chooses: never a token itself, a hash of it.
#[derive(Debug)]
pub struct Cache<K, V> {
    entries: HashMap<K, (V, Instant)>,
    max: usize,
}

impl<K: Eq + Hash + Clone, V> Cache<K, V> {
    pub fn new(max: usize) -> Self {
        Cache {
            entries: HashMap::new(),
            max: max.max(1),
        }
    }

    /// The value of `key` unless it expired by `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<&V> {
        self.entries
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(v, _)| v)
    }

    /// Keeps `value` until `now + ttl`. When full, expired entries go
    /// first, then the ones expiring soonest: the size never exceeds the
    /// bound, whatever the number of distinct readers.
    pub fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.max {
            self.entries.retain(|_, (_, until)| now < *until);
            while self.entries.len() >= self.max {
                let Some(soonest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What one reader may see: everything (cluster-wide, or no
/// authorization configured), or the namespaces decided readable so far.
/// A namespace not decided yet is not readable: a Gateway appearing in a
/// new namespace is held back until its review answers, never shown first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Visibility {
    cluster_wide: bool,
    namespaces: BTreeMap<String, bool>,
}

impl Visibility {
    /// Sees every namespace and the cluster list.
    pub fn everything() -> Self {
        Visibility {
            cluster_wide: true,
            namespaces: BTreeMap::new(),
        }
    }

    /// Sees the namespaces that will be decided readable ([`Self::decide`]).
    pub fn namespaced() -> Self {
        Visibility::default()
    }

    /// Sees every namespace and the fleet-wide lists (`ListClusters`, the
    /// page's cluster list).
    pub fn is_cluster_wide(&self) -> bool {
        self.cluster_wide
    }

    /// Whether Gateways of `namespace` may be shown.
    pub fn sees(&self, namespace: &str) -> bool {
        self.cluster_wide || self.namespaces.get(namespace).copied().unwrap_or(false)
    }

    /// Records the review of `namespace`.
    pub fn decide(&mut self, namespace: &str, readable: bool) {
        if !self.cluster_wide {
            self.namespaces.insert(namespace.to_owned(), readable);
        }
    }

    /// The distinct namespaces among `namespaces` not decided yet (none
    /// for a cluster-wide reader), in order.
    pub fn undecided<'a>(&self, namespaces: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        if self.cluster_wide {
            return Vec::new();
        }
        let set: BTreeSet<&str> = namespaces
            .into_iter()
            .filter(|n| !self.namespaces.contains_key(*n))
            .collect();
        set.into_iter().map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_cache_stays_bounded() {
        let t0 = Instant::now();
        let mut c: Cache<u32, bool> = Cache::new(3);
        c.insert(1, true, ttl(Outcome::Answered), t0);
        c.insert(2, false, ttl(Outcome::Failed), t0);
        assert_eq!(c.get(&1, t0), Some(&true));
        assert_eq!(c.get(&2, t0), Some(&false));
        // A failure is forgotten long before an answer.
        let later = t0 + Duration::from_secs(2);
        assert_eq!(c.get(&2, later), None);
        assert_eq!(c.get(&1, later), Some(&true));
        assert_eq!(c.get(&1, t0 + DECISION_TTL), None);
        // Full: the expired entry goes first, then the soonest to expire.
        c.insert(3, true, Duration::from_secs(5), t0);
        c.insert(4, true, Duration::from_secs(7), later);
        assert_eq!(c.len(), 3);
        assert!(c.get(&2, t0).is_none() && c.get(&1, later).is_some());
        c.insert(5, true, Duration::from_secs(7), later);
        assert_eq!(c.len(), 3);
        assert!(c.get(&3, later).is_none(), "3 expired soonest");
        for k in 100..200 {
            c.insert(k, true, DECISION_TTL, later);
            assert!(c.len() <= 3);
        }
        // Replacing a key never evicts another.
        let mut c: Cache<u32, bool> = Cache::new(2);
        c.insert(1, true, DECISION_TTL, t0);
        c.insert(2, true, DECISION_TTL, t0);
        c.insert(2, false, DECISION_TTL, t0);
        assert_eq!((c.get(&1, t0), c.get(&2, t0)), (Some(&true), Some(&false)));
    }

    #[test]
    fn a_reader_sees_only_namespaces_decided_readable() {
        let mut v = Visibility::namespaced();
        assert!(!v.is_cluster_wide());
        assert!(!v.sees("team-a"), "undecided is not readable");
        assert_eq!(
            v.undecided(["team-b", "team-a", "team-b"]),
            vec!["team-a".to_owned(), "team-b".to_owned()]
        );
        v.decide("team-a", true);
        v.decide("team-b", false);
        assert!(v.sees("team-a") && !v.sees("team-b") && !v.sees("team-c"));
        assert_eq!(v.undecided(["team-a", "team-b", "team-c"]), vec!["team-c"]);

        let mut all = Visibility::everything();
        all.decide("team-b", false);
        assert!(all.is_cluster_wide() && all.sees("team-b") && all.sees("x"));
        assert!(all.undecided(["x"]).is_empty());
    }
}
