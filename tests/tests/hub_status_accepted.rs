//! Every status the aggregation engine produces for hard fleets is
//! accepted by a real API server serving the upstream Gateway API v1.5.1 CRD,
//! and reads back exactly as written.

use gateway_api::apis::standard::gateways::{
    Gateway, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gwhub_hub_rules::aggregate::{
    ClusterReport, Freshness, HubGateway, Options, ReportedStatus, aggregate,
};
use gwhub_model::conditions::{Condition, new};
use gwhub_test_kit::apiserver::{Fleet, require_assets};
use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const NS: &str = "default";

fn now() -> Timestamp {
    "2026-11-23T10:00:00Z".parse().unwrap()
}

fn cond(t: &str, status: &str, reason: &str, message: &str) -> Condition {
    new(t, status, reason, message, Some(1), now())
}

fn listener(name: &str, routes: i32, conditions: Vec<Condition>) -> GatewayStatusListeners {
    GatewayStatusListeners {
        name: name.to_owned(),
        attached_routes: routes,
        conditions,
        supported_kinds: Some(vec![GatewayStatusListenersSupportedKinds {
            group: Some("gateway.networking.k8s.io".into()),
            kind: "HTTPRoute".into(),
        }]),
    }
}

fn address(t: Option<&str>, v: &str) -> GatewayStatusAddresses {
    GatewayStatusAddresses {
        r#type: t.map(str::to_owned),
        value: v.to_owned(),
    }
}

/// A small deterministic generator so failures reproduce (no clock, no OS RNG).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Hard fleets: invalid cluster names, more than 16 addresses, more than 64
/// listeners, more than 8 condition types, giant messages, bad types.
fn hard_cases() -> Vec<(String, Vec<(String, GatewayStatus)>)> {
    let mut cases = Vec::new();

    // The design document's example: names that are not DNS labels.
    let design = vec![
        (
            "cluster_1".to_owned(),
            GatewayStatus {
                addresses: Some(vec![
                    address(Some("IPAddress"), "172.32.200.0"),
                    address(Some("IPAddress"), "172.32.201.0"),
                ]),
                listeners: Some(vec![listener("api", 0, vec![]), listener("web", 1, vec![])]),
                ..Default::default()
            },
        ),
        (
            "cluster_2".to_owned(),
            GatewayStatus {
                addresses: Some(vec![
                    address(Some("IPAddress"), "172.32.202.0"),
                    address(Some("IPAddress"), "172.32.203.0"),
                ]),
                listeners: Some(vec![listener("api", 1, vec![]), listener("web", 1, vec![])]),
                ..Default::default()
            },
        ),
    ];
    cases.push(("design-doc".to_owned(), design));

    // 30 clusters, 3 addresses and 4 listeners each, 10 condition types,
    // messages long enough to need the 32768 cap, hostnames and odd types.
    let mut big = Vec::new();
    let long_msg = "x".repeat(3000);
    for i in 0..30 {
        let mut conds = vec![
            cond("Accepted", "True", "Accepted", ""),
            cond(
                "Programmed",
                if i % 3 == 0 { "False" } else { "True" },
                "Pending",
                &long_msg,
            ),
        ];
        for t in 0..8 {
            conds.push(cond(&format!("Extra{t}"), "Unknown", "Because", ""));
        }
        conds.push(cond("not a valid type!", "True", "R", ""));
        big.push((
            format!("cluster-{i:02}"),
            GatewayStatus {
                addresses: Some(vec![
                    address(None, &format!("10.0.{i}.1")),
                    address(Some("Hostname"), &format!("lb-{i}.example.com")),
                    address(Some("NamedAddress"), "named"),
                ]),
                conditions: Some(conds),
                listeners: Some(
                    (0..4)
                        .map(|l| {
                            listener(
                                &format!("listener-{l}"),
                                l,
                                vec![cond("Accepted", "True", "Accepted", "")],
                            )
                        })
                        .collect(),
                ),
                ..Default::default()
            },
        ));
    }
    cases.push(("thirty-clusters".to_owned(), big));

    // Names at the edges: 63-character label, listener names near 253, a
    // value longer than 253, upper case, dots.
    let label63 = "a".repeat(63);
    let edge = vec![
        (
            label63.clone(),
            GatewayStatus {
                addresses: Some(vec![address(None, &"1".repeat(250))]),
                listeners: Some(vec![
                    listener(&"b".repeat(189), 0, vec![]),
                    listener(&"c".repeat(190), 0, vec![]),
                ]),
                ..Default::default()
            },
        ),
        (
            "UPPER".to_owned(),
            GatewayStatus {
                addresses: Some(vec![address(None, "192.0.2.1")]),
                listeners: Some(vec![listener("http", 0, vec![])]),
                ..Default::default()
            },
        ),
        (
            "with.dot".to_owned(),
            GatewayStatus {
                addresses: Some(vec![address(None, "192.0.2.2")]),
                listeners: Some(vec![listener("http", 0, vec![])]),
                ..Default::default()
            },
        ),
    ];
    cases.push(("edges".to_owned(), edge));

    // Seeded random fleets.
    let mut rng = Lcg(0x5eed);
    for case in 0..6 {
        let n = 1 + rng.below(80) as usize;
        let mut fleet = Vec::new();
        for c in 0..n {
            let name = match rng.below(10) {
                0 => format!("cluster_{c}"),
                1 => format!("C{c}"),
                _ => format!("c{c}-{}", "z".repeat(rng.below(60) as usize)),
            };
            let addrs = (0..rng.below(4))
                .map(|a| {
                    address(
                        if a % 2 == 0 { None } else { Some("Hostname") },
                        &format!("h{a}.example.com"),
                    )
                })
                .collect();
            let listeners = (0..rng.below(6))
                .map(|l| listener(&format!("l{l}"), rng.below(5) as i32, vec![]))
                .collect();
            let conds = (0..rng.below(10))
                .map(|t| {
                    let s = ["True", "False", "Unknown"][rng.below(3) as usize];
                    cond(
                        &format!("Type{t}"),
                        s,
                        "Reason",
                        &"m".repeat(rng.below(2000) as usize),
                    )
                })
                .collect();
            fleet.push((
                name,
                GatewayStatus {
                    addresses: Some(addrs),
                    listeners: Some(listeners),
                    conditions: Some(conds),
                    ..Default::default()
                },
            ));
        }
        cases.push((format!("random-{case}"), fleet));
    }
    cases
}

async fn create_hub_gateway(api: &Api<Gateway>, name: &str) -> Gateway {
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "gatewayClassName": "kuadrant-multi-cluster-gateway-instance-per-cluster",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &gw).await.unwrap();
    // Read it back: defaults (Accepted/Programmed Unknown) show on reads.
    api.get(name).await.unwrap()
}

async fn apply_status(
    api: &Api<Gateway>,
    name: &str,
    status: &GatewayStatus,
) -> kube::Result<Gateway> {
    let patch = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply("gwhub").force(),
        &Patch::Apply(&patch),
    )
    .await
}

#[tokio::test]
async fn aggregated_statuses_are_accepted_by_the_api_server() {
    if !require_assets("aggregated_statuses_are_accepted_by_the_api_server") {
        return;
    }
    let fleet = Fleet::start(&["hub"]).await.expect("start API server");
    let client: Client = fleet.cluster("hub").client().await.unwrap();
    let api: Api<Gateway> = Api::namespaced(client, NS);

    for (case, reports) in hard_cases() {
        let gw = create_hub_gateway(&api, &case).await;
        let generation = gw.metadata.generation.unwrap_or(1);
        let compact: Vec<ReportedStatus> = reports
            .iter()
            .map(|(_, s)| ReportedStatus::from(s))
            .collect();
        let borrowed: Vec<ClusterReport<'_>> = reports
            .iter()
            .zip(&compact)
            .enumerate()
            .map(|(i, ((cluster, _), status))| ClusterReport {
                cluster,
                status,
                freshness: if i % 7 == 3 {
                    Freshness::Stale { last_report: now() }
                } else {
                    Freshness::Fresh
                },
            })
            .collect();
        // The CRD defaults Accepted/Programmed to Unknown on creation: other
        // writers' conditions that count toward the 8, as on a real hub.
        let existing = gw.status.and_then(|s| s.conditions).unwrap_or_default();
        let hub = HubGateway::from_existing(generation, &existing, &borrowed);
        let agg = aggregate(&hub, &borrowed, &Options::default(), now()).unwrap();
        let written = apply_status(&api, &case, &agg.status)
            .await
            .unwrap_or_else(|e| {
                panic!("{case}: the API server rejected the aggregated status: {e}")
            });
        let back = written.status.unwrap_or_default();
        assert_eq!(
            back.addresses, agg.status.addresses,
            "{case}: addresses read back"
        );
        assert_eq!(
            back.listeners, agg.status.listeners,
            "{case}: listeners read back"
        );
        // Server-side apply merges by type, so compare as sets.
        let types = |s: &GatewayStatus| -> std::collections::BTreeSet<String> {
            s.conditions
                .iter()
                .flatten()
                .map(|c| c.type_.clone())
                .collect()
        };
        assert_eq!(
            types(&back),
            types(&agg.status),
            "{case}: conditions read back"
        );
        // Every hard case above leaves something out, and says so.
        if !agg.omissions.is_empty() {
            let own = back
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "kuadrant.io/MultiClusterAggregated")
                .expect("own condition written");
            assert_eq!(own.status, "False", "{case}");
            assert_eq!(own.reason, "ValidationFailed", "{case}");
        }
    }
}

/// The control: the CRD limits are really enforced by this API server, so the
/// test above proves something.
#[tokio::test]
async fn api_server_enforces_the_limits_the_engine_respects() {
    if !require_assets("api_server_enforces_the_limits_the_engine_respects") {
        return;
    }
    let fleet = Fleet::start(&["hub"]).await.expect("start API server");
    let client: Client = fleet.cluster("hub").client().await.unwrap();
    let api: Api<Gateway> = Api::namespaced(client, NS);
    create_hub_gateway(&api, "control").await;

    let seventeen = GatewayStatus {
        addresses: Some(
            (0..17)
                .map(|i| address(None, &format!("c/10.0.0.{i}")))
                .collect(),
        ),
        ..Default::default()
    };
    assert!(
        apply_status(&api, "control", &seventeen).await.is_err(),
        "17 addresses accepted"
    );

    let bad_listener = GatewayStatus {
        listeners: Some(vec![listener("cluster_1.api", 0, vec![])]),
        ..Default::default()
    };
    assert!(
        apply_status(&api, "control", &bad_listener).await.is_err(),
        "cluster_1.api accepted"
    );

    let nine = GatewayStatus {
        conditions: Some(
            (0..9)
                .map(|i| cond(&format!("T{i}"), "True", "R", ""))
                .collect(),
        ),
        ..Default::default()
    };
    assert!(
        apply_status(&api, "control", &nine).await.is_err(),
        "9 conditions accepted"
    );

    let long = GatewayStatus {
        conditions: Some(vec![cond("T", "False", "R", &"m".repeat(32769))]),
        ..Default::default()
    };
    assert!(
        apply_status(&api, "control", &long).await.is_err(),
        "32769-char message accepted"
    );
}
