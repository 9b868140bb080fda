//! `describe gateway`: one hub Gateway with each cluster's report and what
//! the hub left out, as text or as the object `get -o` prints plus the
//! reports.

use gwhub_common::render_object;
use gwhub_proto::{convert, v1};
use serde_json::{Value, json};

use super::connect::Client;
use super::format::{format_of, gateway_json, printable, rfc3339, status_word, table};
use super::{CtlError, Output, Result};

fn conditions_table(indent: &str, list: &[v1::Condition]) -> String {
    let rows: Vec<_> = list
        .iter()
        .map(|c| {
            vec![
                c.r#type.clone(),
                status_word(Some(c)),
                c.reason.clone(),
                c.message.clone(),
            ]
        })
        .collect();
    table(&["TYPE", "STATUS", "REASON", "MESSAGE"], &rows)
        .lines()
        .map(|l| format!("{indent}{l}\n"))
        .collect()
}

fn status_text(indent: &str, s: &v1::GatewayStatus) -> String {
    let mut out = format!("{indent}Conditions:\n");
    out.push_str(&conditions_table(&format!("{indent}  "), &s.conditions));
    out.push_str(&format!("{indent}Addresses:\n"));
    for a in &s.addresses {
        out.push_str(&format!(
            "{indent}  {} {}\n",
            printable(a.r#type.as_deref().unwrap_or("IPAddress")),
            printable(&a.value)
        ));
    }
    out.push_str(&format!("{indent}Listeners:\n"));
    for l in &s.listeners {
        out.push_str(&format!(
            "{indent}  {} (attachedRoutes: {})\n",
            printable(&l.name),
            l.attached_routes
        ));
        out.push_str(&conditions_table(&format!("{indent}    "), &l.conditions));
    }
    out
}

pub(super) async fn describe(
    client: &mut Client,
    name: &str,
    output: Option<Output>,
) -> Result<String> {
    let Some((namespace, gw)) = name.split_once('/') else {
        return Err(CtlError::NotNamespaced(name.to_owned()));
    };
    let r = client
        .get_gateway(v1::GetGatewayRequest {
            namespace: namespace.into(),
            name: gw.into(),
        })
        .await?
        .into_inner();
    let g = r.gateway.clone().unwrap_or_default();
    match output {
        None => {}
        Some(Output::Wide) => return Err(CtlError::NoTable("describe")),
        Some(o) => {
            let f = format_of(Some(o)).unwrap_or_default();
            return Ok(render_object(&describe_json(&r), f));
        }
    }
    let mut out = format!(
        "Name:       {}\nNamespace:  {}\nClusters:   {}\nRevision:   {}\nAggregated status:\n",
        printable(&g.name),
        printable(&g.namespace),
        printable(&g.clusters.join(", ")),
        g.revision
    );
    if !g.missing_clusters.is_empty() {
        let missing: Vec<String> = g
            .missing_clusters
            .iter()
            .map(|m| {
                let why = match m.never_reported {
                    true => "never reported",
                    false => "does not report this Gateway",
                };
                format!("{} ({why})", printable(&m.cluster))
            })
            .collect();
        out.push_str(&format!("Missing:    {}\n", missing.join(", ")));
    }
    if !g.unexpected_clusters.is_empty() {
        out.push_str(&format!(
            "Unexpected: {}\n",
            printable(&g.unexpected_clusters.join(", "))
        ));
    }
    out.push_str(&status_text("  ", &g.status.clone().unwrap_or_default()));
    out.push_str("Left out:\n");
    if g.omissions.is_empty() {
        out.push_str("  (nothing)\n");
    }
    for o in &g.omissions {
        out.push_str(&format!("  {}\n", printable(&o.message)));
    }
    out.push_str("Per cluster:\n");
    for c in &r.clusters {
        let fresh = if c.stale { "stale" } else { "fresh" };
        out.push_str(&format!(
            "  {} ({fresh}, last report {}):\n",
            printable(&c.cluster),
            rfc3339(c.last_report_time)
        ));
        out.push_str(&status_text("    ", &c.status.clone().unwrap_or_default()));
    }
    Ok(out)
}

/// `describe -o yaml|json`: the hub Gateway as `get -o` prints it, plus
/// each cluster's report under `gwhub.reports`.
pub fn describe_json(r: &v1::GetGatewayResponse) -> Value {
    let mut v = gateway_json(&r.gateway.clone().unwrap_or_default());
    v["gwhub"]["reports"] = r
        .clusters
        .iter()
        .map(|c| {
            let status = c
                .status
                .clone()
                .and_then(|s| convert::status_from_proto(s).ok())
                .unwrap_or_default();
            json!({
                "cluster": c.cluster,
                "stale": c.stale,
                "lastReportTime": (c.last_report_time > 0).then(|| rfc3339(c.last_report_time)),
                "status": status,
            })
        })
        .collect();
    v
}
