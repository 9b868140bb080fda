//! Following a change from the agent to the status write in Kubernetes
//! mode: `gwhub_propagation_seconds` measures from the agent's stamp to
//! the accepted write, and a delta's W3C trace continues through the
//! apply, the aggregation and the write (`--otlp-endpoint`).

use std::time::Duration;

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_hub::kube_hub::KubeHub;
use gwhub_test_kit::install::management;
use gwhub_test_kit::wait::until_named;
use jiff::Timestamp;
use kube::api::Api;

use crate::support::hub_agent::Agent;
use crate::support::hub_fixtures::{NS, cluster_status, create_hub_gateway, wait_status};
use crate::support::kube_hub::kube_hub;

/// `gwhub_propagation_seconds`: a delta stamped 3 s ago (the agent's
/// clock) is observed once, when the status write carrying it is accepted;
/// snapshots and unstamped deltas are not.
#[tokio::test]
async fn propagation_is_measured_from_the_agents_stamp_to_the_write() {
    let Some((_fleet, client, as_hub)) =
        management("propagation_is_measured_from_the_agents_stamp_to_the_write").await
    else {
        return;
    };
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "web").await;
    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let propagation = |hub: &KubeHub| {
        let text = gwhub_hub::metrics::render(&[], 0, Some(hub.metrics.as_ref()));
        let samples = gwhub_common::metrics_http::samples(&text);
        (
            samples["gwhub_propagation_seconds_count"],
            samples["gwhub_propagation_seconds_sum"],
        )
    };
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "web", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "web", "east's address", |s| {
        s.addresses.as_ref().is_some_and(|a| a.len() == 1)
    })
    .await;
    east.delta(NS, "web", &cluster_status(&["10.0.0.2"], true), 0)
        .await;
    wait_status(&gateways, "web", "an unstamped change", |s| {
        s.addresses
            .as_ref()
            .is_some_and(|a| a.iter().any(|a| a.value == "east/10.0.0.2"))
    })
    .await;
    assert_eq!(propagation(&hub).0, 0.0, "snapshots and unstamped deltas");

    // The stamped change, sent at once: the last write's echo (its answer,
    // the watch) may still be in flight, and the stamp outlives it (see
    // the index's `a_stamp_given_back_while_its_delta_lands_is_kept`).
    let observed = Timestamp::now().as_millisecond() - 3_000;
    east.delta(NS, "web", &cluster_status(&["10.0.0.3"], true), observed)
        .await;
    wait_status(&gateways, "web", "the stamped change", |s| {
        s.addresses
            .as_ref()
            .is_some_and(|a| a.iter().any(|a| a.value == "east/10.0.0.3"))
    })
    .await;
    let (count, sum) = until_named(
        "the stamped change's propagation was never observed",
        Duration::from_secs(10),
        || async { propagation(&hub) },
        |(count, _)| *count >= 1.0,
    )
    .await;
    assert_eq!(count, 1.0, "the stamped change was observed more than once");
    assert!((3.0..60.0).contains(&sum), "{sum}");
    hub.shutdown().await.unwrap();
}

/// `--otlp-endpoint` in Kubernetes mode: a delta carrying a W3C
/// `traceparent` is applied, aggregated and written to the hub Gateway in
/// spans of that trace, each the child of the one before, naming the
/// Gateway (the export is this test process's: the hub runs in it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_delta_is_followed_to_the_status_write() {
    let Some((_fleet, client, as_hub)) =
        management("a_traced_delta_is_followed_to_the_status_write").await
    else {
        return;
    };
    let (receiver, otlp) = gwhub_test_kit::otlp::Receiver::start().await;
    // The default batch delay (5 s) is well within the wait below.
    let _export = gwhub_common::logging::init_with_otlp("info", "gwhub", Some(&otlp)).unwrap();
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "traced").await;
    let hub = kube_hub(&as_hub).identity("hub-1").start().await;
    let mut east = Agent::connect(hub.hub.ingest_addr, "east").await;
    east.snapshot(&[(NS, "traced", cluster_status(&["10.0.0.1"], true))])
        .await;
    wait_status(&gateways, "traced", "east's address", |s| {
        s.addresses.as_ref().is_some_and(|a| a.len() == 1)
    })
    .await;

    let (trace, parent) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    east.traced_delta(
        NS,
        "traced",
        &cluster_status(&["10.0.0.2"], true),
        0,
        &format!("00-{trace}-{parent}-01"),
    )
    .await;
    let key = format!("{NS}/traced");
    let spans = receiver
        .wait_for_in_trace(trace, "status_write", &key, Duration::from_secs(30))
        .await;
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    // Every write has a status_write span; this change's are in its trace.
    let find = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name && s.attribute("gateway") == Some(&key) && s.trace() == trace)
            .unwrap_or_else(|| panic!("no span {name} for {key} in trace {trace}: {spans:#?}"))
    };
    let (apply, aggregate, write) = (find("apply_delta"), find("aggregate"), find("status_write"));
    for s in [apply, aggregate, write] {
        assert_eq!(s.service, "gwhub", "{s:?}");
    }
    assert_eq!(hex(&apply.parent_span_id), parent);
    assert_eq!(apply.attribute("cluster"), Some("east"));
    assert_eq!(aggregate.parent_span_id, apply.span_id);
    assert_eq!(write.parent_span_id, aggregate.span_id);
    hub.shutdown().await.unwrap();
}
