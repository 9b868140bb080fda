//! `history NS/NAME`: the last status transitions of one hub Gateway, as
//! the hub saw them since it started.

use gwhub_api::web::dns::millis_rfc3339;
use gwhub_common::render_list;
use gwhub_proto::v1;
use serde_json::{Value, json};

use super::connect::Client;
use super::format::{format_of, table};
use super::{CtlError, Output, Result};

/// `ConditionStatus` as a word, `-` for none.
fn status_name(s: i32) -> &'static str {
    gwhub_proto::convert::status_word(s).unwrap_or("-")
}

/// `history -o yaml|json`: one object per transition, as the web page
/// gives it but with an RFC 3339 `time`.
pub fn history_json(t: &v1::GatewayTransition) -> Value {
    gwhub_api::web::transition_json(t, "time", json!(millis_rfc3339(t.time_millis)))
}

pub(super) async fn history(
    client: &mut Client,
    name: &str,
    limit: u32,
    output: Option<Output>,
) -> Result<String> {
    let Some((namespace, gw)) = name.split_once('/') else {
        return Err(CtlError::NotNamespaced(name.to_owned()));
    };
    let r = client
        .get_gateway_history(v1::GetGatewayHistoryRequest {
            namespace: namespace.into(),
            name: gw.into(),
            limit,
        })
        .await?
        .into_inner();
    if let Some(f) = format_of(output) {
        return Ok(render_list(
            r.transitions.iter().map(history_json).collect(),
            f,
        ));
    }
    let rows: Vec<_> = r
        .transitions
        .iter()
        .map(|t| {
            vec![
                millis_rfc3339(t.time_millis),
                if t.cluster.is_empty() {
                    "(hub)".into()
                } else {
                    t.cluster.clone()
                },
                t.condition_type.clone(),
                format!(
                    "{} -> {}",
                    status_name(t.previous_status),
                    status_name(t.status)
                ),
                if t.reason.is_empty() {
                    "-".into()
                } else {
                    t.reason.clone()
                },
                t.message.clone(),
            ]
        })
        .collect();
    Ok(table(
        &[
            "TIME",
            "CLUSTER",
            "CONDITION",
            "STATUS",
            "REASON",
            "MESSAGE",
        ],
        &rows,
    ))
}
