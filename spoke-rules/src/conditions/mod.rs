//! The conditions the agent computes, as pure functions of the cluster's
//! objects: [`load_balancer`] for the Gateway-level `LoadBalancerReady`,
//! [`dns`] for the listener-level `DNSReady` and the Gateway-level `DNSReady`
//! summing them up, as the OpenShift ingress operator's gateway-status
//! controller computes them (4.22 and later).
//!
//! Results are [`Verdict`]s (type, status, reason, message) without time or
//! generation; [`crate::status`] turns them into conditions and merges them
//! into a Gateway's status with the usual transition-time rules.

use gwhub_model::conditions::{self, Condition};
use jiff::Timestamp;

pub mod dns;
pub mod load_balancer;

/// Gateway-level condition: is the Gateway's cloud load balancer provisioned?
pub const LOAD_BALANCER_READY: &str = "LoadBalancerReady";
/// Listener-level condition: is the listener's DNS record published? Also
/// Gateway-level: are all listeners' records published?
pub const DNS_READY: &str = "DNSReady";
/// A listener condition earlier agents wrote and the design leaves out (to
/// save condition slots): the agent removes the ones it wrote, never writes it.
pub const DNS_MANAGED: &str = "DNSManaged";

/// The condition types the agent writes in `status.conditions`; every other
/// type there belongs to another writer.
pub const GATEWAY_TYPES: &[&str] = &[LOAD_BALANCER_READY, DNS_READY];
/// The condition types the agent writes in `status.listeners[].conditions`.
pub const LISTENER_TYPES: &[&str] = &[DNS_READY];

/// `metav1.Condition.message` `maxLength` in the CRD, in characters.
pub const MAX_MESSAGE_CHARS: usize = gwhub_model::limits::MAX_CONDITION_MESSAGE_LEN;

/// A computed condition before time and generation are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Verdict {
    pub(crate) fn new(
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: gwhub_model::text::truncate(&message.into(), MAX_MESSAGE_CHARS),
        }
    }

    /// The condition with `observedGeneration` and a transition time of `now`
    /// (which the merge replaces with the previous time if the status is unchanged).
    pub fn to_condition(&self, generation: Option<i64>, now: Timestamp) -> Condition {
        conditions::new(
            self.type_,
            self.status,
            self.reason,
            self.message.clone(),
            generation,
            now,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_to_the_crd_limit_in_characters() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let v = Verdict::new(DNS_READY, "False", "R", long);
        assert_eq!(v.message.chars().count(), MAX_MESSAGE_CHARS);
        assert!(v.message.ends_with("..."));
        let short = Verdict::new(DNS_READY, "False", "R", "é".repeat(MAX_MESSAGE_CHARS));
        assert!(!short.message.ends_with("..."));
    }
}
