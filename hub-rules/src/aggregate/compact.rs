//! The compact form of a cluster's reported Gateway status: what the hub
//! keeps per (cluster, Gateway) and what the engine reads. A decoded
//! `GatewayStatus` is ~60 small heap strings and vectors per report (2.6 KB
//! at 4 listeners); across a fleet nearly all of them repeat (condition
//! types, reasons, messages, listener names, route kinds), so here they are
//! shared `Arc<str>` from an [`Interner`], a condition's text is shared
//! whole, times are epoch seconds (what Kubernetes writes) and lists are
//! boxed slices. The full form is built only where it is needed (the store,
//! the Dashboard, `gwhubctl`), never per aggregation.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_model::Condition;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A condition's `status`: the three the CRD allows, or what was reported
/// (kept so the engine can name it when it leaves the condition out).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
    Other(Arc<str>),
}

impl ConditionStatus {
    pub fn as_str(&self) -> &str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
            ConditionStatus::Other(s) => s,
        }
    }
}

/// What clusters repeat of a condition: everything but its generation and
/// time, shared whole across listeners and clusters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConditionText {
    pub type_: Arc<str>,
    pub status: ConditionStatus,
    pub reason: Arc<str>,
    pub message: Arc<str>,
}

/// A reported condition (32 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedCondition {
    pub text: Arc<ConditionText>,
    pub observed_generation: Option<i64>,
    /// `lastTransitionTime` in seconds since the epoch.
    pub last_transition_time: i64,
}

impl ReportedCondition {
    pub fn type_(&self) -> &str {
        &self.text.type_
    }
    pub fn status(&self) -> &str {
        self.text.status.as_str()
    }
    pub fn reason(&self) -> &str {
        &self.text.reason
    }
    pub fn message(&self) -> &str {
        &self.text.message
    }

    /// The full form.
    pub fn to_condition(&self) -> Condition {
        Condition {
            type_: self.type_().to_owned(),
            status: self.status().to_owned(),
            reason: self.reason().to_owned(),
            message: self.message().to_owned(),
            observed_generation: self.observed_generation,
            // Seconds taken from a valid Timestamp are always in range.
            last_transition_time: Time(
                Timestamp::from_second(self.last_transition_time).unwrap_or(Timestamp::UNIX_EPOCH),
            ),
        }
    }
}

/// A reported address; its value is usually the cluster's own, so it is
/// not interned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedAddress {
    pub r#type: Option<Arc<str>>,
    pub value: Box<str>,
}

impl ReportedAddress {
    pub fn to_address(&self) -> GatewayStatusAddresses {
        GatewayStatusAddresses {
            r#type: self.r#type.as_deref().map(str::to_owned),
            value: self.value.to_string(),
        }
    }
}

/// A listener's supported route kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedKind {
    pub group: Option<Arc<str>>,
    pub kind: Arc<str>,
}

impl ReportedKind {
    pub fn to_kind(&self) -> GatewayStatusListenersSupportedKinds {
        GatewayStatusListenersSupportedKinds {
            group: self.group.as_deref().map(str::to_owned),
            kind: self.kind.to_string(),
        }
    }
}

/// A reported listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedListener {
    pub name: Arc<str>,
    pub attached_routes: i32,
    pub conditions: Box<[ReportedCondition]>,
    pub supported_kinds: Option<Box<[ReportedKind]>>,
}

impl ReportedListener {
    pub fn supported_kinds(&self) -> &[ReportedKind] {
        self.supported_kinds.as_deref().unwrap_or_default()
    }

    pub fn to_listener(&self) -> GatewayStatusListeners {
        GatewayStatusListeners {
            attached_routes: self.attached_routes,
            conditions: self
                .conditions
                .iter()
                .map(ReportedCondition::to_condition)
                .collect(),
            name: self.name.to_string(),
            supported_kinds: self
                .supported_kinds
                .as_ref()
                .map(|k| k.iter().map(ReportedKind::to_kind).collect()),
        }
    }
}

/// A cluster's status of one Gateway, compact (see the module doc). A list
/// absent from the report stays `None`, so [`ReportedStatus::to_status`]
/// gives back exactly what was reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportedStatus {
    pub addresses: Option<Box<[ReportedAddress]>>,
    pub attached_listener_sets: Option<i32>,
    pub conditions: Option<Box<[ReportedCondition]>>,
    pub listeners: Option<Box<[ReportedListener]>>,
}

impl ReportedStatus {
    /// `status` compact, with strings shared only within it (tests, the
    /// CLI); the hub shares them fleet-wide through one [`Interner`].
    pub fn from_status(status: &GatewayStatus) -> Self {
        Interner::default().status(status)
    }

    pub fn addresses(&self) -> &[ReportedAddress] {
        self.addresses.as_deref().unwrap_or_default()
    }
    pub fn conditions(&self) -> &[ReportedCondition] {
        self.conditions.as_deref().unwrap_or_default()
    }
    pub fn listeners(&self) -> &[ReportedListener] {
        self.listeners.as_deref().unwrap_or_default()
    }

    /// The full form, exactly as reported (times in whole seconds).
    pub fn to_status(&self) -> GatewayStatus {
        GatewayStatus {
            addresses: self
                .addresses
                .as_ref()
                .map(|a| a.iter().map(ReportedAddress::to_address).collect()),
            attached_listener_sets: self.attached_listener_sets,
            conditions: self
                .conditions
                .as_ref()
                .map(|c| c.iter().map(ReportedCondition::to_condition).collect()),
            listeners: self
                .listeners
                .as_ref()
                .map(|l| l.iter().map(ReportedListener::to_listener).collect()),
        }
    }
}

impl From<&GatewayStatus> for ReportedStatus {
    fn from(status: &GatewayStatus) -> Self {
        Self::from_status(status)
    }
}

impl From<GatewayStatus> for ReportedStatus {
    fn from(status: GatewayStatus) -> Self {
        Self::from_status(&status)
    }
}

impl From<&ReportedStatus> for GatewayStatus {
    fn from(status: &ReportedStatus) -> Self {
        status.to_status()
    }
}

/// A pool sweeps when it has grown to this many values, or to twice what
/// it held after its last sweep.
const MIN_SWEEP: usize = 1024;

/// Shared values: one `Arc` per distinct value. A value only the pool holds
/// (nobody reports it any more) is dropped at the next sweep, which runs
/// when the pool has doubled since the last one, so the pool holds at most
/// as many unreported values as reported ones (plus `MIN_SWEEP`).
#[derive(Debug)]
pub struct Pool<T: ?Sized + Hash + Eq> {
    set: HashSet<Arc<T>>,
    sweep_at: usize,
}

impl<T: ?Sized + Hash + Eq> Clone for Pool<T> {
    fn clone(&self) -> Self {
        Pool {
            set: self.set.clone(),
            sweep_at: self.sweep_at,
        }
    }
}

impl<T: ?Sized + Hash + Eq> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            set: HashSet::new(),
            sweep_at: MIN_SWEEP,
        }
    }
}

impl<T: ?Sized + Hash + Eq> Pool<T> {
    fn get_or_insert<Q>(&mut self, key: &Q, make: impl FnOnce(&Q) -> Arc<T>) -> Arc<T>
    where
        Q: ?Sized + Hash + Eq,
        Arc<T>: Borrow<Q>,
    {
        if let Some(v) = self.set.get(key) {
            return v.clone();
        }
        if self.set.len() >= self.sweep_at {
            self.sweep();
        }
        let v = make(key);
        self.set.insert(v.clone());
        v
    }

    /// Drops the values nobody but the pool holds.
    pub fn sweep(&mut self) {
        self.set.retain(|v| Arc::strong_count(v) > 1);
        self.set.shrink_to_fit();
        self.sweep_at = (2 * self.set.len()).max(MIN_SWEEP);
    }

    /// Distinct values held.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// Makes [`ReportedStatus`]es whose repeated strings and condition texts
/// are shared with every other status it made.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    strings: Pool<str>,
    texts: Pool<ConditionText>,
}

impl Interner {
    /// The shared copy of `s`.
    pub fn str(&mut self, s: &str) -> Arc<str> {
        self.strings.get_or_insert(s, |s: &str| Arc::from(s))
    }

    fn condition(&mut self, c: &Condition) -> ReportedCondition {
        let status = match c.status.as_str() {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            "Unknown" => ConditionStatus::Unknown,
            other => ConditionStatus::Other(self.str(other)),
        };
        let text = ConditionText {
            type_: self.str(&c.type_),
            status,
            reason: self.str(&c.reason),
            message: self.str(&c.message),
        };
        ReportedCondition {
            text: self.texts.get_or_insert(&text, |t| Arc::new(t.clone())),
            observed_generation: c.observed_generation,
            last_transition_time: c.last_transition_time.0.as_second(),
        }
    }

    fn conditions(&mut self, c: &[Condition]) -> Box<[ReportedCondition]> {
        c.iter().map(|c| self.condition(c)).collect()
    }

    fn listener(&mut self, l: &GatewayStatusListeners) -> ReportedListener {
        ReportedListener {
            name: self.str(&l.name),
            attached_routes: l.attached_routes,
            conditions: self.conditions(&l.conditions),
            supported_kinds: l.supported_kinds.as_ref().map(|k| {
                k.iter()
                    .map(|k| ReportedKind {
                        group: k.group.as_deref().map(|g| self.str(g)),
                        kind: self.str(&k.kind),
                    })
                    .collect()
            }),
        }
    }

    /// `status` in the compact form.
    pub fn status(&mut self, status: &GatewayStatus) -> ReportedStatus {
        ReportedStatus {
            addresses: status.addresses.as_ref().map(|a| {
                a.iter()
                    .map(|a| ReportedAddress {
                        r#type: a.r#type.as_deref().map(|t| self.str(t)),
                        value: a.value.as_str().into(),
                    })
                    .collect()
            }),
            attached_listener_sets: status.attached_listener_sets,
            conditions: status.conditions.as_deref().map(|c| self.conditions(c)),
            listeners: status
                .listeners
                .as_ref()
                .map(|l| l.iter().map(|l| self.listener(l)).collect()),
        }
    }

    /// Drops what nobody reports any more (also done as the pools grow).
    pub fn sweep(&mut self) {
        // Texts first: a dropped text lets go of its strings.
        self.texts.sweep();
        self.strings.sweep();
    }

    /// Distinct strings and condition texts held.
    pub fn len(&self) -> (usize, usize) {
        (self.strings.len(), self.texts.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gwhub_model::conditions::new as condition;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn status(cluster: usize, message: &str) -> GatewayStatus {
        GatewayStatus {
            addresses: Some(vec![
                GatewayStatusAddresses {
                    r#type: Some("IPAddress".into()),
                    value: format!("10.0.0.{cluster}"),
                },
                GatewayStatusAddresses {
                    r#type: None,
                    value: "lb.example.com".into(),
                },
            ]),
            attached_listener_sets: Some(2),
            conditions: Some(vec![
                condition("Accepted", "True", "Accepted", "", Some(1), at(100)),
                condition("Programmed", "Maybe", "Odd", message, None, at(-5)),
            ]),
            listeners: Some(vec![
                GatewayStatusListeners {
                    attached_routes: 3,
                    conditions: vec![condition(
                        "Accepted",
                        "True",
                        "Accepted",
                        "",
                        Some(1),
                        at(cluster as i64),
                    )],
                    name: "http".into(),
                    supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                        group: Some("gateway.networking.k8s.io".into()),
                        kind: "HTTPRoute".into(),
                    }]),
                },
                GatewayStatusListeners {
                    attached_routes: 0,
                    conditions: vec![],
                    name: "grpc".into(),
                    supported_kinds: None,
                },
            ]),
        }
    }

    #[test]
    fn round_trips_exactly() {
        let mut pool = Interner::default();
        for s in [
            status(1, "a message"),
            GatewayStatus::default(),
            GatewayStatus {
                addresses: Some(vec![]),
                conditions: Some(vec![]),
                listeners: Some(vec![]),
                ..GatewayStatus::default()
            },
        ] {
            let compact = pool.status(&s);
            assert_eq!(compact.to_status(), s);
            assert_eq!(GatewayStatus::from(&ReportedStatus::from(&s)), s);
        }
        let c = pool.status(&status(1, "m"));
        assert_eq!(c.conditions()[1].status(), "Maybe");
        assert_eq!(c.conditions()[0].text.status, ConditionStatus::True);
    }

    #[test]
    fn shares_what_clusters_repeat() {
        let mut pool = Interner::default();
        let a = pool.status(&status(1, "same"));
        let b = pool.status(&status(2, "same"));
        assert!(Arc::ptr_eq(
            &a.conditions()[1].text,
            &b.conditions()[1].text
        ));
        assert!(Arc::ptr_eq(&a.listeners()[0].name, &b.listeners()[0].name));
        // The listener's condition differs only in its time: one text.
        assert!(Arc::ptr_eq(
            &a.listeners()[0].conditions[0].text,
            &b.listeners()[0].conditions[0].text
        ));
        assert_ne!(a.addresses()[0], b.addresses()[0]);
    }

    #[test]
    fn a_sweep_drops_only_what_nobody_reports() {
        let mut pool = Interner::default();
        let kept = pool.status(&status(1, "kept"));
        let before = pool.len();
        drop(pool.status(&status(2, "gone")));
        assert!(pool.len().0 > before.0);
        pool.sweep();
        assert_eq!(pool.len(), before);
        assert_eq!(kept.to_status(), status(1, "kept"));
        // Interning again after the sweep shares with what is still held.
        let again = pool.status(&status(1, "kept"));
        assert!(Arc::ptr_eq(
            &kept.conditions()[1].text,
            &again.conditions()[1].text
        ));
    }

    #[test]
    fn a_pool_sweeps_as_it_grows() {
        let mut pool = Interner::default();
        for i in 0..10 * MIN_SWEEP {
            pool.str(&format!("s{i}"));
        }
        // Nothing was held: every sweep emptied the pool.
        assert!(pool.len().0 <= MIN_SWEEP);
    }

    #[test]
    fn a_condition_is_32_bytes() {
        assert_eq!(std::mem::size_of::<ReportedCondition>(), 32);
    }
}
