//! The fleet the aggregation benches share (`hub-rules/benches/aggregate.rs`,
//! `hub/index/benches/index_change.rs`): one hub Gateway reported by `n`
//! clusters, and the clusters that take turns changing. One copy, so the
//! engine's and the index's figures are over the same reports.

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_model::conditions::new;
use jiff::Timestamp;

/// Which clusters of the fleet are not Programmed (and not
/// LoadBalancerReady): what the two not-True summaries name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotReady {
    /// Every tenth cluster: the summaries grow with the fleet (until their
    /// messages reach the 32,768-character cap, ~900 clusters each).
    EveryTenth,
    /// This many clusters spread over the fleet, whatever its size: the
    /// output is the same size at every fleet size.
    Fixed(usize),
}

impl NotReady {
    /// Whether cluster `i` of `n` is not ready.
    pub fn of(self, i: usize, n: usize) -> bool {
        match self {
            NotReady::EveryTenth => i.is_multiple_of(10),
            NotReady::Fixed(k) => {
                k > 0 && i.is_multiple_of((n / k).max(1)) && i / (n / k).max(1) < k
            }
        }
    }

    /// A short name for a bench id.
    pub fn label(self) -> String {
        match self {
            NotReady::EveryTenth => "growing".to_owned(),
            NotReady::Fixed(k) => format!("fixed{k}"),
        }
    }
}

/// Cluster `i`'s name.
pub fn cluster_name(i: usize) -> String {
    format!("cluster-{i:05}")
}

/// A cluster's report: two addresses, three conditions (Programmed and
/// LoadBalancerReady `False` when `not_ready`), four listeners.
pub fn cluster_status(i: usize, not_ready: bool, now: Timestamp) -> GatewayStatus {
    let c = |t: &str, s: &str, m: &str| new(t, s, "Reason", m, Some(1), now);
    let ready = if not_ready { "False" } else { "True" };
    GatewayStatus {
        addresses: Some(
            (0..2)
                .map(|j| GatewayStatusAddresses {
                    r#type: Some("IPAddress".into()),
                    value: format!("10.{}.{}.{j}", i / 256, i % 256),
                })
                .collect(),
        ),
        attached_listener_sets: None,
        conditions: Some(vec![
            c("Accepted", "True", "Resource accepted"),
            c("Programmed", ready, "Resource programmed"),
            c(
                "LoadBalancerReady",
                ready,
                "The LoadBalancer service is pending",
            ),
        ]),
        listeners: Some(
            ["http", "https", "grpc", "admin"]
                .iter()
                .map(|l| GatewayStatusListeners {
                    attached_routes: 2,
                    conditions: vec![c("Programmed", "True", ""), c("DNSReady", "True", "ok")],
                    name: (*l).into(),
                    supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                        group: Some("gateway.networking.k8s.io".into()),
                        kind: "HTTPRoute".into(),
                    }]),
                })
                .collect(),
        ),
    }
}

/// `status` with its Programmed condition flipped.
pub fn flipped(mut status: GatewayStatus) -> GatewayStatus {
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == "Programmed" {
            c.status = if c.status == "True" { "False" } else { "True" }.into();
        }
    }
    status
}

/// The 16 clusters, spread over a fleet of `n`, that take turns changing.
pub fn changing(n: usize) -> impl Iterator<Item = usize> {
    (0..16).map(move |j| j * n / 16 + 1)
}

/// The fleet of `n` clusters: each one's index, name and report.
pub fn fleet(
    n: usize,
    not_ready: NotReady,
    now: Timestamp,
) -> impl Iterator<Item = (usize, String, GatewayStatus)> {
    (0..n).map(move |i| {
        (
            i,
            cluster_name(i),
            cluster_status(i, not_ready.of(i, n), now),
        )
    })
}

/// The two reports a changing cluster alternates between (its own, then
/// with Programmed flipped).
pub fn variants(i: usize, n: usize, not_ready: NotReady, now: Timestamp) -> [GatewayStatus; 2] {
    let a = cluster_status(i, not_ready.of(i, n), now);
    let b = flipped(a.clone());
    [a, b]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed number of not-ready clusters at every size, none of them a
    /// changing one; every tenth otherwise.
    #[test]
    fn not_ready_clusters() {
        for n in [100, 1000, 3500, 10_000] {
            let count = |r: NotReady| (0..n).filter(|&i| r.of(i, n)).count();
            assert_eq!(count(NotReady::Fixed(20)), 20, "{n}");
            assert_eq!(count(NotReady::EveryTenth), n / 10, "{n}");
            assert!(changing(n).all(|i| i < n && !NotReady::Fixed(20).of(i, n)));
        }
    }
}
