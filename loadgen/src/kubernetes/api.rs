//! What the run reads from the management API server directly: the
//! stored ClusterReports (the store's size and lag), the largest hub
//! Gateway, and what one status apply costs the API server alone. Apart
//! from the run because each is one API call or loop with no state.

use std::collections::HashMap;
use std::time::Instant;

use crate::error::BenchError;
use crate::probes::cpu_seconds;

/// The largest hub Gateway on the API server: its status's and its whole
/// object's size (managedFields included), in bytes of JSON, and the
/// object. What each status write carries and the API server decodes,
/// merges and stores.
pub(crate) async fn largest_hub_gateway(
    client: &kube::Client,
) -> Result<
    (
        usize,
        usize,
        Option<gateway_api::apis::standard::gateways::Gateway>,
    ),
    BenchError,
> {
    let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
        kube::Api::all(client.clone());
    let list = api
        .list(&Default::default())
        .await
        .map_err(BenchError::kube("list hub Gateways"))?;
    let len = |v: serde_json::Result<Vec<u8>>| v.map_or(0, |b| b.len());
    let largest = list
        .items
        .into_iter()
        .max_by_key(|gw| len(serde_json::to_vec(&gw.status)));
    Ok(match largest {
        Some(gw) => (
            len(serde_json::to_vec(&gw.status)),
            len(serde_json::to_vec(&gw)),
            Some(gw),
        ),
        None => (0, 0, None),
    })
}

/// What one hub Gateway status apply costs the API server alone (the hub
/// stopped, nothing else writing): `APPLIES` server-side applies of
/// `gw`'s status as the hub's field manager, one at a time, each with a
/// condition message changed. Returns (API server CPU ms, wall ms) per
/// apply.
pub(crate) async fn status_apply_cost(
    client: &kube::Client,
    api_pid: Option<u32>,
    gw: &gateway_api::apis::standard::gateways::Gateway,
) -> Result<(f64, f64), BenchError> {
    const APPLIES: u32 = 40;
    let ns = gw.metadata.namespace.clone().unwrap_or_default();
    let name = gw.metadata.name.clone().unwrap_or_default();
    let api: kube::Api<gateway_api::apis::standard::gateways::Gateway> =
        kube::Api::namespaced(client.clone(), &ns);
    let mut status = serde_json::to_value(&gw.status).map_err(BenchError::Json)?;
    let cpu0 = api_pid.map_or(0.0, cpu_seconds);
    let t0 = Instant::now();
    for i in 0..APPLIES {
        if let Some(c) = status.pointer_mut("/conditions/0/message") {
            *c = serde_json::Value::String(format!("cost probe {i}"));
        }
        let body = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": ns},
            "status": status,
        });
        api.patch_status(
            &name,
            &kube::api::PatchParams::apply("gwhub").force(),
            &kube::api::Patch::Apply(&body),
        )
        .await
        .map_err(BenchError::kube("status apply probe"))?;
    }
    let wall_ms = t0.elapsed().as_secs_f64() * 1000.0 / f64::from(APPLIES);
    let cpu_ms = (api_pid.map_or(0.0, cpu_seconds) - cpu0) * 1000.0 / f64::from(APPLIES);
    Ok((cpu_ms, wall_ms))
}

/// Per cluster, the newest `lastReportTime` over its ClusterReports (ms)
/// and how many bytes its objects take.
pub(crate) async fn stored_reports(
    client: &kube::Client,
) -> Result<(HashMap<String, u64>, HashMap<String, u64>, usize), BenchError> {
    let api: kube::Api<gwhub_hub_rules::report::ClusterReport> =
        kube::Api::namespaced(client.clone(), "gwhub-system");
    let list = api
        .list(&Default::default())
        .await
        .map_err(BenchError::kube("list ClusterReports"))?;
    let mut newest: HashMap<String, u64> = HashMap::new();
    let mut bytes: HashMap<String, u64> = HashMap::new();
    for r in &list.items {
        let t = r
            .spec
            .last_report_time
            .as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map_or(0, |t| t.as_millisecond() as u64);
        let e = newest.entry(r.spec.cluster.clone()).or_default();
        *e = (*e).max(t);
        *bytes.entry(r.spec.cluster.clone()).or_default() +=
            serde_json::to_vec(r).map_or(0, |b| b.len() as u64);
    }
    Ok((newest, bytes, list.items.len()))
}
