//! Random inputs for the property tests: cluster names, conditions,
//! addresses and listeners, valid or not, to reach every rule.

use gateway_api::apis::standard::gateways::{
    GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_model::Condition;
use proptest::prelude::*;

pub fn cluster_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z][a-z0-9-]{0,8}[a-z0-9]",
        1 => "cluster_[0-9]{1,3}",
        1 => "[A-Z]{2,6}",
        1 => "[a-z]{1,3}\\.[a-z]{1,3}",
        1 => "[a-z]{1,3}/[a-z]{1,3}",
        1 => "[a-z]{60,70}",
        1 => Just(String::new()),
    ]
}

pub fn text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[ -~]{0,40}",
        1 => (0..max).prop_map(|n| "m".repeat(n)),
    ]
}

pub fn condition() -> impl Strategy<Value = Condition> {
    let type_ = prop_oneof![
        Just("Accepted".to_owned()),
        Just("Programmed".to_owned()),
        Just("LoadBalancerReady".to_owned()),
        Just("example.com/Custom".to_owned()),
        "[A-Z][a-zA-Z]{0,8}",
        Just("bad type".to_owned()),
        Just("x".repeat(317)),
    ];
    let status = prop_oneof![
        4 => Just("True"),
        2 => Just("False"),
        1 => Just("Unknown"),
        1 => Just("Maybe"),
    ];
    let reason = prop_oneof![4 => "[A-Z][a-zA-Z]{0,10}", 1 => Just("1bad".to_owned()), 1 => Just(String::new())];
    let generation =
        prop_oneof![4 => (0i64..10).prop_map(Some), 1 => Just(None), 1 => Just(Some(-1))];
    (
        type_,
        status,
        reason,
        text(40_000),
        generation,
        0i64..2_000_000_000,
    )
        .prop_map(|(t, s, r, m, g, secs)| Condition {
            type_: t,
            status: s.to_owned(),
            reason: r,
            message: m,
            observed_generation: g,
            last_transition_time: gwhub_model::time::k8s_time(
                jiff::Timestamp::from_second(secs).unwrap(),
            ),
        })
}

pub fn address() -> impl Strategy<Value = GatewayStatusAddresses> {
    let type_ = prop_oneof![
        Just(None),
        Just(Some("IPAddress".to_owned())),
        Just(Some("Hostname".to_owned())),
        Just(Some("NamedAddress".to_owned())),
        Just(Some("example.com/Custom".to_owned())),
    ];
    let value = prop_oneof![
        6 => "10\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        2 => "[a-z]{1,10}\\.example\\.com",
        1 => (240usize..260).prop_map(|n| "h".repeat(n)),
        1 => Just(String::new()),
    ];
    (type_, value).prop_map(|(t, v)| GatewayStatusAddresses {
        r#type: t,
        value: v,
    })
}

pub fn listener() -> impl Strategy<Value = GatewayStatusListeners> {
    let name = prop_oneof![
        6 => "[a-z][a-z0-9-]{0,6}[a-z0-9]",
        1 => Just("Bad_Name".to_owned()),
        1 => (180usize..260).prop_map(|n| "l".repeat(n)),
        1 => Just("http".to_owned()),
    ];
    let kind = (
        prop_oneof![
            Just(None),
            Just(Some("gateway.networking.k8s.io".to_owned())),
            Just(Some("Bad_Group".to_owned())),
            Just(Some(String::new()))
        ],
        prop_oneof![
            "[A-Z][a-zA-Z]{0,10}",
            Just("9Bad".to_owned()),
            Just("K".repeat(64))
        ],
    )
        .prop_map(|(group, kind)| GatewayStatusListenersSupportedKinds { group, kind });
    (
        name,
        any::<i32>(),
        prop::collection::vec(condition(), 0..10),
        prop::option::of(prop::collection::vec(kind, 0..10)),
    )
        .prop_map(|(name, attached_routes, conditions, supported_kinds)| {
            GatewayStatusListeners {
                attached_routes,
                conditions,
                name,
                supported_kinds,
            }
        })
}

pub fn gateway_status() -> impl Strategy<Value = GatewayStatus> {
    gateway_status_sized(4, 4)
}

/// A status with up to `addresses` addresses and `listeners` listeners.
pub fn gateway_status_sized(
    addresses: usize,
    listeners: usize,
) -> impl Strategy<Value = GatewayStatus> {
    (
        prop::option::of(prop::collection::vec(condition(), 0..6)),
        prop::option::of(prop::collection::vec(address(), 0..addresses)),
        prop::option::of(prop::collection::vec(listener(), 0..listeners)),
    )
        .prop_map(|(conditions, addresses, listeners)| GatewayStatus {
            addresses,
            attached_listener_sets: None,
            conditions,
            listeners,
        })
}
