//! `watch`: the hub Gateways, then a line (or a watch event) per change,
//! as `kubectl get -w` prints them; runs until the hub ends the stream or
//! the output is closed.

use std::io::Write;

use gwhub_common::{OutputFormat, render_object};
use gwhub_proto::v1;
use serde_json::{Value, json};
use tokio_stream::StreamExt;

use super::connect::Client;
use super::format::{GATEWAY_HEADER, GATEWAY_WIDE, format_of, gateway_json, gateway_row, table};
use super::{FilterArgs, Output, Result};

/// `watch -o yaml|json`: one watch event per upserted or deleted Gateway
/// (`ADDED` for the first snapshot, however many messages carry it:
/// `in_snapshot` when the last one had `snapshot_incomplete`; then
/// `MODIFIED`/`DELETED`).
pub fn watch_events(msg: &v1::WatchGatewaysResponse, in_snapshot: bool) -> Vec<Value> {
    let kind = if msg.snapshot || in_snapshot {
        "ADDED"
    } else {
        "MODIFIED"
    };
    let mut events: Vec<Value> = msg
        .upserted
        .iter()
        .map(|g| json!({"type": kind, "object": gateway_json(g)}))
        .collect();
    events.extend(msg.deleted.iter().map(|d| {
        json!({"type": "DELETED", "object": {
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"namespace": d.namespace, "name": d.name}}})
    }));
    events
}

pub(super) async fn watch(
    client: &mut Client,
    output: Option<Output>,
    filter: &FilterArgs,
    out: &mut impl Write,
) -> Result<()> {
    let mut stream = client
        .watch_gateways(v1::WatchGatewaysRequest {
            filter: filter.to_proto(),
            ..Default::default()
        })
        .await?
        .into_inner();
    // The snapshot may come as several messages (`snapshot_incomplete`).
    let mut in_snapshot = false;
    if let Some(f) = format_of(output) {
        while let Some(msg) = stream.next().await {
            let msg = msg?;
            let events = watch_events(&msg, in_snapshot);
            in_snapshot = msg.snapshot_incomplete;
            for event in events {
                let mut text = render_object(&event, f);
                if f == OutputFormat::Yaml {
                    text = format!("---\n{text}");
                }
                if out
                    .write_all(text.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return Ok(());
                }
            }
        }
        return Ok(());
    }
    let wide = output == Some(Output::Wide);
    let mut header = vec!["EVENT"];
    header.extend(GATEWAY_HEADER);
    if wide {
        header.extend(GATEWAY_WIDE);
    }
    let mut printed_header = false;
    while let Some(msg) = stream.next().await {
        let msg = msg?;
        let event = if msg.snapshot || in_snapshot {
            ""
        } else {
            "MODIFIED"
        };
        in_snapshot = msg.snapshot_incomplete;
        let mut rows: Vec<Vec<String>> = msg
            .upserted
            .iter()
            .map(|g| {
                let mut row = vec![event.to_owned()];
                row.extend(gateway_row(g, wide));
                row
            })
            .collect();
        rows.extend(msg.deleted.iter().map(|d| {
            let mut row = vec![
                "DELETED".into(),
                d.namespace.clone(),
                d.name.clone(),
                "0".into(),
            ];
            row.resize(header.len(), "-".into());
            row
        }));
        let text = table(&header, &rows);
        let text = if printed_header {
            text.split_once('\n')
                .map(|(_, rest)| rest)
                .unwrap_or_default()
        } else {
            &text
        };
        printed_header = true;
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot sent as several messages is ADDED throughout; what
    /// follows it is MODIFIED.
    #[test]
    fn a_paged_snapshot_is_added_throughout() {
        let gw = |name: &str| v1::AggregatedGateway {
            namespace: "ns".into(),
            name: name.into(),
            ..Default::default()
        };
        let first = v1::WatchGatewaysResponse {
            snapshot: true,
            snapshot_incomplete: true,
            upserted: vec![gw("a")],
            ..Default::default()
        };
        let rest = v1::WatchGatewaysResponse {
            upserted: vec![gw("b")],
            ..Default::default()
        };
        let kind = |events: Vec<Value>| events[0]["type"].as_str().unwrap().to_owned();
        assert_eq!(kind(watch_events(&first, false)), "ADDED");
        assert_eq!(
            kind(watch_events(&rest, first.snapshot_incomplete)),
            "ADDED"
        );
        assert_eq!(
            kind(watch_events(&rest, rest.snapshot_incomplete)),
            "MODIFIED"
        );
    }
}
