//! `get gateways` and `get clusters`: the hub Gateways, every page of
//! them, and the fleet's clusters, as a table or as objects.

use gwhub_common::render_list;
use gwhub_proto::v1;
use serde_json::json;

use super::connect::Client;
use super::format::{
    GATEWAY_HEADER, GATEWAY_WIDE, format_of, gateway_json, gateway_row, rfc3339, table,
};
use super::{FilterArgs, Output, Result, What};

/// Every hub Gateway matching `filter`, fetched `page_size` at a time.
async fn list_all(
    client: &mut Client,
    filter: &FilterArgs,
    page_size: u32,
) -> Result<Vec<v1::AggregatedGateway>> {
    let mut gateways = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_gateways(v1::ListGatewaysRequest {
                page_size,
                page_token,
                filter: filter.to_proto(),
            })
            .await?
            .into_inner();
        gateways.extend(page.gateways);
        if page.next_page_token.is_empty() {
            return Ok(gateways);
        }
        page_token = page.next_page_token;
    }
}

pub(super) async fn get(
    client: &mut Client,
    what: What,
    output: Option<Output>,
    filter: &FilterArgs,
    page_size: u32,
) -> Result<String> {
    let wide = output == Some(Output::Wide);
    match what {
        What::Gateways => {
            let gateways = list_all(client, filter, page_size).await?;
            if let Some(f) = format_of(output) {
                return Ok(render_list(gateways.iter().map(gateway_json).collect(), f));
            }
            let mut header = GATEWAY_HEADER.to_vec();
            if wide {
                header.extend(GATEWAY_WIDE);
            }
            let rows: Vec<_> = gateways.iter().map(|g| gateway_row(g, wide)).collect();
            Ok(table(&header, &rows))
        }
        What::Clusters => {
            let clusters = client
                .list_clusters(v1::ListClustersRequest {})
                .await?
                .into_inner()
                .clusters;
            // Only a hub with a fleet inventory says where each cluster
            // stands with it (an inventory lists at least one cluster).
            let inventory = clusters
                .iter()
                .any(|c| c.in_inventory || c.outside_inventory);
            if let Some(f) = format_of(output) {
                let items = clusters
                    .iter()
                    .map(|c| {
                        let mut item = json!({
                            "kind": "Cluster",
                            "name": c.name,
                            "connected": c.connected,
                            "stale": c.stale,
                            "gatewayCount": c.gateway_count,
                            "lastReportTime": (c.last_report_time > 0).then(|| rfc3339(c.last_report_time)),
                            "lastSeenTime": (c.last_seen_time > 0).then(|| rfc3339(c.last_seen_time)),
                            "agentVersion": c.agent_version,
                        });
                        if inventory {
                            item["inventory"] = json!(inventory_state(c));
                        }
                        item
                    })
                    .collect();
                return Ok(render_list(items, f));
            }
            let mut header = vec!["NAME", "CONNECTED", "STALE", "GATEWAYS", "LAST-REPORT"];
            if inventory {
                header.push("INVENTORY");
            }
            if wide {
                header.extend(["LAST-SEEN", "AGENT"]);
            }
            let rows: Vec<_> = clusters
                .iter()
                .map(|c| {
                    let mut row = vec![
                        c.name.clone(),
                        c.connected.to_string(),
                        c.stale.to_string(),
                        c.gateway_count.to_string(),
                        rfc3339(c.last_report_time),
                    ];
                    if inventory {
                        row.push(inventory_state(c).to_owned());
                    }
                    if wide {
                        row.push(rfc3339(c.last_seen_time));
                        row.push(c.agent_version.clone());
                    }
                    row
                })
                .collect();
            Ok(table(&header, &rows))
        }
        What::Dns => super::dns::get_dns(client, filter.namespace.as_deref(), output).await,
    }
}

/// Where a cluster stands with the hub's fleet inventory, in one word.
fn inventory_state(c: &v1::ClusterInfo) -> &'static str {
    if c.never_connected {
        "never-connected"
    } else if c.in_inventory {
        "member"
    } else if c.outside_inventory {
        "outside"
    } else {
        "-"
    }
}
