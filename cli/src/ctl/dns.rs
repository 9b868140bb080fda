//! `get dns` and `dns plan`: what the hub publishes for fleet DNS and what
//! it would write now, read from the Dashboard only (spec section 8).

use gwhub_api::web::dns::millis_rfc3339;
use gwhub_common::render_list;
use gwhub_proto::v1;
use serde_json::{Value, json};

use super::connect::Client;
use super::format::{format_of, printable, table};
use super::{CtlError, Output, Result};

/// The fleet DNS names, or why the hub has none to tell (off, or this
/// replica does not lead).
async fn dns_names(client: &mut Client, namespace: Option<&str>) -> Result<Vec<v1::DnsName>> {
    let r = client
        .list_dns_names(v1::ListDnsNamesRequest {
            namespace: namespace.unwrap_or_default().to_owned(),
        })
        .await?
        .into_inner();
    if !r.enabled || !r.leading {
        return Err(CtlError::NoDns(r.message));
    }
    Ok(r.names)
}

/// A name's sets as `A=1.2.3.4,5.6.7.8 AAAA=...`; `-` if none.
pub fn sets_cell(sets: &[v1::DnsRecordSet]) -> String {
    if sets.is_empty() {
        return "-".into();
    }
    sets.iter()
        .map(|s| format!("{}={}", s.r#type, s.targets.join(",")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn dns_item(n: &v1::DnsName) -> Value {
    let mut v = gwhub_api::web::dns::dns_name_json(n);
    if let Some(o) = v.as_object_mut() {
        let mut item = serde_json::Map::new();
        item.insert("kind".into(), json!("DnsName"));
        item.append(o);
        return Value::Object(item);
    }
    v
}

/// `get dns`: a row per name (published sets, state, last write).
pub(super) async fn get_dns(
    client: &mut Client,
    namespace: Option<&str>,
    output: Option<Output>,
) -> Result<String> {
    let names = dns_names(client, namespace).await?;
    if let Some(f) = format_of(output) {
        return Ok(render_list(names.iter().map(dns_item).collect(), f));
    }
    let wide = output == Some(Output::Wide);
    let mut header = vec![
        "HOSTNAME",
        "GATEWAY",
        "PUBLISHED",
        "ELIGIBLE",
        "STATE",
        "LAST-WRITE",
    ];
    if wide {
        header.extend(["ZONE", "DESIRED", "MESSAGE"]);
    }
    let rows: Vec<_> = names
        .iter()
        .map(|n| {
            let eligible = n.clusters.iter().filter(|c| c.eligible).count();
            let mut row = vec![
                n.hostname.clone(),
                gwhub_api::web::dns::owner(n),
                sets_cell(&n.published),
                format!("{eligible}/{}", n.clusters.len()),
                n.state.clone(),
                n.last_write
                    .as_ref()
                    .map(|w| format!("{} {}", w.result, millis_rfc3339(w.time_millis)))
                    .unwrap_or_else(|| "-".into()),
            ];
            if wide {
                row.push(n.zone.clone());
                row.push(sets_cell(&n.desired));
                row.push(n.state_message.clone());
            }
            row
        })
        .collect();
    Ok(table(&header, &rows))
}

/// `dns plan`: per name, desired against published and each cluster's
/// reason.
pub(super) async fn dns_plan(
    client: &mut Client,
    namespace: Option<&str>,
    output: Option<Output>,
) -> Result<String> {
    let names = dns_names(client, namespace).await?;
    match output {
        None => {}
        Some(Output::Wide) => return Err(CtlError::NoTable("dns plan")),
        Some(o) => {
            let f = format_of(Some(o)).unwrap_or_default();
            return Ok(render_list(names.iter().map(dns_item).collect(), f));
        }
    }
    if names.is_empty() {
        return Ok("No fleet DNS names.\n".into());
    }
    Ok(names.iter().map(plan_text).collect::<Vec<_>>().join("\n"))
}

/// One name of `dns plan` as text.
pub fn plan_text(n: &v1::DnsName) -> String {
    let mut out = format!(
        "{} (hub Gateway {}, zone {}): {}",
        printable(&n.hostname),
        printable(&gwhub_api::web::dns::owner(n)),
        printable(&n.zone),
        printable(&n.state)
    );
    if !n.state_message.is_empty() {
        out.push_str(&format!(" ({})", printable(&n.state_message)));
    }
    out.push('\n');
    out.push_str(&format!("  published: {}\n", sets_cell(&n.published)));
    out.push_str(&format!("  desired:   {}\n", sets_cell(&n.desired)));
    let plan = gwhub_api::web::dns::plan(n);
    if plan.is_empty() {
        out.push_str("  would write: nothing (the published sets are the desired ones)\n");
    } else {
        for (t, (add, remove)) in plan {
            let mut parts: Vec<String> = add.iter().map(|a| format!("+{a}")).collect();
            parts.extend(remove.iter().map(|r| format!("-{r}")));
            out.push_str(&format!(
                "  would write {t}: {}\n",
                printable(&parts.join(" "))
            ));
        }
    }
    for r in &n.reasons {
        out.push_str(&format!("  {}\n", printable(r)));
    }
    let rows: Vec<Vec<String>> = n
        .clusters
        .iter()
        .map(|c| {
            if c.eligible {
                vec![c.cluster.clone(), "eligible".into(), String::new()]
            } else {
                vec![
                    c.cluster.clone(),
                    format!("rule {}: {}", c.rule, c.reason),
                    c.message.clone(),
                ]
            }
        })
        .collect();
    for line in table(&["CLUSTER", "ELIGIBILITY", "WHY"], &rows).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}
