//! The conditions the agent computes, as pure functions of the cluster's
//! objects: [`load_balancer`] for the Gateway-level `LoadBalancerReady`,
//! [`dns`] for the listener-level `DNSManaged` and `DNSReady`.
//!
//! Results are [`Verdict`]s (type, status, reason, message) without time or
//! generation; [`crate::status`] turns them into conditions and merges them
//! into a Gateway's status with the usual transition-time rules.

use gwhub_common::conditions::{self, Condition};
use jiff::Timestamp;

pub mod dns;
pub mod load_balancer;

/// Gateway-level condition: is the Gateway's cloud load balancer provisioned?
pub const LOAD_BALANCER_READY: &str = "LoadBalancerReady";
/// Listener-level condition: can DNS be managed for the listener's hostname?
pub const DNS_MANAGED: &str = "DNSManaged";
/// Listener-level condition: is the listener's DNS record published?
pub const DNS_READY: &str = "DNSReady";

/// The condition types the agent writes in `status.conditions`; every other
/// type there belongs to another writer.
pub const GATEWAY_TYPES: &[&str] = &[LOAD_BALANCER_READY];
/// The condition types the agent writes in `status.listeners[].conditions`.
pub const LISTENER_TYPES: &[&str] = &[DNS_MANAGED, DNS_READY];

/// `metav1.Condition.message` is limited to this many bytes by the CRD.
pub const MAX_MESSAGE_BYTES: usize = 32768;

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
            message: truncate(message.into(), MAX_MESSAGE_BYTES),
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

/// Cuts `s` to at most `max` bytes on a character boundary, so provider and
/// event messages can never make the API server reject the status.
pub(crate) fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo".into(), 2), "h");
        assert_eq!(truncate("hello".into(), 10), "hello");
        let long = "x".repeat(MAX_MESSAGE_BYTES + 10);
        assert_eq!(
            Verdict::new(DNS_READY, "False", "R", long).message.len(),
            MAX_MESSAGE_BYTES
        );
    }
}
