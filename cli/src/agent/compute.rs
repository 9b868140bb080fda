//! `gwhub-agent compute`: files in, the in-scope Gateways with the status the
//! agent would write out, as a `v1` List.

use std::collections::HashMap;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::output::{OutputFormat, render_list};
use gwhub_spoke_rules::manifest::{ManifestError, Object, for_each_object};
use jiff::Timestamp;
use serde_json::Value;

use crate::agent::ComputeArgs;
use gwhub_spoke_rules::engine::{EngineError, Evaluation, evaluate};
use gwhub_spoke_rules::scope::Options;
use gwhub_spoke_rules::snapshot::{NeededKind, Snapshot, object_key};

/// Why `compute` produced no output.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{0} (not found in the given files)")]
    Engine(#[from] EngineError),
}

/// The rendered List and one warning per reported problem.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComputeOutput {
    pub text: String,
    pub warnings: Vec<String>,
}

/// Runs the command: reads the files, evaluates at `--now` (or the current
/// time), renders.
pub fn run(args: &ComputeArgs) -> Result<ComputeOutput, ComputeError> {
    // Only the kinds the engine reads are kept, as they are read: memory
    // follows those objects and the largest document, not the files.
    let mut objects = Vec::new();
    for_each_object(&args.files, |o| {
        if NeededKind::of(&o)?.is_some() {
            objects.push(o);
        }
        Ok::<_, ManifestError>(())
    })?;
    let now = args.now.unwrap_or_else(Timestamp::now);
    compute(&objects, &args.scope.options(), now, args.output)
}

/// The pure part of [`run`], over already-read objects.
pub fn compute(
    objects: &[Object],
    opts: &Options,
    now: Timestamp,
    format: OutputFormat,
) -> Result<ComputeOutput, ComputeError> {
    let snapshot = Snapshot::from_objects(objects)?;
    let evaluations = evaluate(&snapshot, opts, now)?;
    let raw: HashMap<(String, String), &Value> = objects
        .iter()
        .filter(|o| matches!(NeededKind::of(o), Ok(Some(NeededKind::Gateway))))
        .map(|o| (object_key(NeededKind::Gateway, &o.value), &o.value))
        .collect();
    let mut warnings = Vec::new();
    let items = evaluations
        .iter()
        .map(|e| {
            for p in &e.problems {
                warnings.push(format!("Gateway {}/{}: {p}", e.namespace(), e.name()));
            }
            output_object(
                e,
                raw.get(&(e.namespace().to_owned(), e.name().to_owned()))
                    .copied(),
            )
        })
        .collect();
    Ok(ComputeOutput {
        text: render_list(items, format),
        warnings,
    })
}

/// The Gateway as given (so fields this build's types do not know survive),
/// `metadata.managedFields` stripped, with the merged status laid over it.
fn output_object(e: &Evaluation, raw: Option<&Value>) -> Value {
    let mut obj = raw
        .cloned()
        .unwrap_or_else(|| serde_json::to_value(&e.gateway).unwrap_or(Value::Null));
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    let status = overlay_status(obj.get("status"), &e.status);
    if let Value::Object(map) = &mut obj {
        map.insert("status".into(), status);
    }
    obj
}

/// `raw` with `conditions` and `listeners` replaced by the merged ones; a
/// listener entry that existed keeps its other fields as written.
fn overlay_status(raw: Option<&Value>, merged: &GatewayStatus) -> Value {
    let mut out = match raw {
        Some(Value::Object(m)) => m.clone(),
        _ => serde_json::Map::new(),
    };
    let merged_json = serde_json::to_value(merged).unwrap_or(Value::Null);
    match merged_json.get("conditions") {
        Some(c) => out.insert("conditions".into(), c.clone()),
        None => out.remove("conditions"),
    };
    let raw_listeners: Vec<Value> = out
        .get("listeners")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match merged_json.get("listeners").and_then(Value::as_array) {
        Some(listeners) => {
            let items = listeners
                .iter()
                .map(|l| {
                    let existing = raw_listeners
                        .iter()
                        .find(|r| r.get("name").is_some() && r.get("name") == l.get("name"));
                    match existing {
                        Some(Value::Object(r)) => {
                            let mut r = r.clone();
                            r.insert("conditions".into(), l["conditions"].clone());
                            Value::Object(r)
                        }
                        _ => l.clone(),
                    }
                })
                .collect();
            out.insert("listeners".into(), Value::Array(items));
        }
        None => {
            out.remove("listeners");
        }
    }
    Value::Object(out)
}
