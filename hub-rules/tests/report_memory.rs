//! The hub's report state per (cluster, Gateway): the live heap bytes a
//! fleet index (`Fleet::with_incremental`, as the hub keeps it) holds for
//! N clusters x 10 Gateways of the load generator's shape (3 conditions,
//! 2 addresses, 4 listeners of 2 conditions and one route kind each),
//! counted by a global allocator (requested bytes, no allocator overhead).
//! One test in this binary, so nothing else allocates meanwhile.
//!
//! `cargo test -p gwhub-hub-rules --test integration report_memory:: -- --nocapture`
//! (1,000 clusters; `GWHUB_MEMORY_CLUSTERS=10000` for 10,000).

use std::alloc::System;

use cap::Cap;

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub_rules::aggregate::{Fleet, GatewayKey, Options};
use gwhub_model::Condition;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Counts the bytes requested and not yet freed (the `cap` crate wraps
/// the system allocator; no limit is set).
#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

const GATEWAYS: usize = 10;
const LISTENERS: usize = 4;

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: Some(1),
        last_transition_time: Time(Timestamp::from_second(1_746_100_800).unwrap()),
    }
}

/// The load generator's report (loadgen/src/scenario.rs `report`).
fn report(c: usize, g: usize) -> GatewayStatus {
    const NAMES: [&str; 4] = ["http", "https", "grpc", "admin"];
    GatewayStatus {
        conditions: Some(vec![
            condition("Accepted", "True", "Accepted", "Resource accepted"),
            condition("Programmed", "True", "Programmed", "Resource programmed"),
            condition(
                "LoadBalancerReady",
                "True",
                "Ready",
                "The LoadBalancer service is ready",
            ),
        ]),
        addresses: Some(
            (0..2)
                .map(|j| GatewayStatusAddresses {
                    r#type: Some("IPAddress".to_owned()),
                    value: format!("10.{}.{}.{}", c / 256, c % 256, (g * 2 + j) % 256),
                })
                .collect(),
        ),
        listeners: Some(
            (0..LISTENERS)
                .map(|l| GatewayStatusListeners {
                    name: NAMES[l].to_owned(),
                    attached_routes: 2,
                    supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
                        group: Some("gateway.networking.k8s.io".to_owned()),
                        kind: "HTTPRoute".to_owned(),
                    }]),
                    conditions: vec![
                        condition("Accepted", "True", "Accepted", ""),
                        condition("Programmed", "True", "Programmed", ""),
                    ],
                })
                .collect(),
        ),
        attached_listener_sets: None,
    }
}

fn live() -> isize {
    ALLOC.allocated() as isize
}

#[test]
fn report_state_per_pair_fits_4_kib() {
    let clusters: usize = std::env::var("GWHUB_MEMORY_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let names: Vec<String> = (0..clusters).map(|c| format!("c{c:04}")).collect();
    let keys: Vec<GatewayKey> = (0..GATEWAYS)
        .map(|g| GatewayKey::new(format!("ns-{}", g % 10), format!("gw-{g:04}")))
        .collect();
    let pairs = (clusters * GATEWAYS) as isize;
    let fill = |mut fleet: Fleet| {
        for (c, name) in names.iter().enumerate() {
            for (g, key) in keys.iter().enumerate() {
                fleet.upsert(name, key.clone(), report(c, g));
            }
        }
        fleet
    };
    // The reports and the index alone, then as the hub keeps them (with
    // each Gateway's incremental aggregate).
    let before = live();
    let plain = fill(Fleet::new());
    let index_only = (live() - before) / pairs;
    drop(plain);
    let before = live();
    let fleet = fill(Fleet::with_incremental(Options::default()));
    let held = live() - before;
    let per_pair = held / pairs;
    println!(
        "report state: {clusters} clusters x {GATEWAYS} Gateways x {LISTENERS} listeners: \
         {held} bytes live, {per_pair} bytes per (cluster, Gateway) \
         ({index_only} without the incremental aggregates)"
    );
    assert!(
        per_pair <= 4096,
        "{per_pair} bytes of report state per (cluster, Gateway)"
    );
    // Sanity: the fleet holds what was reported.
    assert_eq!(fleet.clusters().count(), clusters);
    assert_eq!(fleet.reports(&keys[0]).len(), clusters);
    drop(fleet);
}
