//! `gwhub-agent compute`: files in, the in-scope Gateways with the status the
//! agent would write out, as a `v1` List.
//!
//! Streamed, so memory follows the largest document, not the input. The
//! files are read once, one document at a time: the objects the engine
//! reads beside Gateways (GatewayClasses, Services, Events, DNSRecords, the
//! DNS config) are kept typed, and each Gateway is checked, written as it
//! was given to a temporary file (`$TMPDIR`, unnamed, gone at exit) and
//! only its name, class and place are kept. Then the in-scope Gateways are
//! read back one at a time in namespace/name order, evaluated, and each
//! result is written out at once ([`ListWriter`]). Peak memory is about
//!
//! ```text
//! cluster objects (typed) + G × (~150 B + name + file path) + a few × the largest Gateway
//! ```
//!
//! for G Gateways; the output and the temporary file (the Gateways'
//! compact JSON) are on disk, not in memory.

use std::io::{self, Cursor, Read, Seek, Write};

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::output::{ListWriter, OutputFormat};
use gwhub_spoke_rules::manifest::{Location, ManifestError, Object, for_each_object};
use jiff::Timestamp;
use serde_json::Value;

use crate::agent::ComputeArgs;
use crate::spool::{Spool, SpoolError};
use gwhub_spoke_rules::engine::{EngineError, Evaluation, evaluate_one};
use gwhub_spoke_rules::scope::{Options, in_scope_by_class};
use gwhub_spoke_rules::snapshot::{Loader, NeededKind, gateway_of, object_key};

/// Why `compute` produced no (or no complete) output.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{0} (not found in the given files)")]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Spool(#[from] SpoolError),
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
}

impl ComputeError {
    /// Whether the reader of the output went away (`| head`): not worth
    /// an error message.
    pub fn is_closed_output(&self) -> bool {
        matches!(self, Self::Output(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// The rendered List and one warning per reported problem.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComputeOutput {
    pub text: String,
    pub warnings: Vec<String>,
}

/// What is kept of a Gateway while the files are read.
struct Kept {
    class: String,
    at: Location,
}

/// Runs the command: reads the files, evaluates at `--now` (or the current
/// time), writes the List to `out` as it is computed and hands each
/// warning to `warn` as it is found. Errors in the files are found before
/// anything is written.
pub fn run(
    args: &ComputeArgs,
    out: impl Write,
    mut warn: impl FnMut(&str),
) -> Result<(), ComputeError> {
    let now = args.now.unwrap_or_else(Timestamp::now);
    let spool = Spool::temporary()?;
    let gather = |each: &mut dyn FnMut(Object) -> Result<(), ComputeError>| {
        for_each_object(&args.files, each)
    };
    stream(
        gather,
        spool,
        &args.scope.options(),
        now,
        ListWriter::new(out, args.output),
        &mut warn,
    )
}

/// The pure form of [`run`], over already-read objects (the fuzz target's).
pub fn compute(
    objects: &[Object],
    opts: &Options,
    now: Timestamp,
    format: OutputFormat,
) -> Result<ComputeOutput, ComputeError> {
    let mut warnings = Vec::new();
    let mut text = Vec::new();
    let gather = |each: &mut dyn FnMut(Object) -> Result<(), ComputeError>| {
        objects.iter().cloned().try_for_each(each)
    };
    stream(
        gather,
        Spool::new(Cursor::new(Vec::new())),
        opts,
        now,
        ListWriter::new(&mut text, format),
        &mut |w| warnings.push(w.to_owned()),
    )?;
    Ok(ComputeOutput {
        text: String::from_utf8_lossy(&text).into_owned(),
        warnings,
    })
}

/// Reads every object `gather` hands on, then writes the in-scope
/// Gateways' results by namespace/name.
fn stream<F: Read + Write + Seek, W: Write>(
    gather: impl FnOnce(&mut dyn FnMut(Object) -> Result<(), ComputeError>) -> Result<(), ComputeError>,
    mut spool: Spool<(String, String), Kept, F>,
    opts: &Options,
    now: Timestamp,
    mut out: ListWriter<W>,
    warn: &mut dyn FnMut(&str),
) -> Result<(), ComputeError> {
    let mut loader = Loader::default();
    gather(&mut |o: Object| {
        if let Some(gateway) = loader.add(&o)? {
            let key = object_key(NeededKind::Gateway, &o.value);
            let kept = Kept {
                class: gateway.spec.gateway_class_name,
                at: o.at,
            };
            spool.push(key, kept, &o.value)?;
        }
        Ok(())
    })?;
    let cluster = loader.finish();
    spool
        .retain(|(ns, _), kept| in_scope_by_class(ns, &kept.class, &cluster.gateway_classes, opts));
    // With nothing in scope no config is needed; otherwise its absence is
    // found before anything is written.
    if spool.entries().next().is_some() && cluster.dns.is_none() {
        return Err(EngineError::MissingDnsConfig.into());
    }
    spool.drain_sorted(|_, kept, value| {
        let field = |f: &str| value[f].as_str().unwrap_or_default().to_owned();
        let object = Object {
            at: kept.at,
            api_version: field("apiVersion"),
            kind: field("kind"),
            value,
        };
        let gateway = gateway_of(&object)?;
        let e = evaluate_one(&gateway, &cluster, now)?;
        for p in &e.problems {
            warn(&format!("Gateway {}/{}: {p}", e.namespace(), e.name()));
        }
        out.item(&output_object(&e, object.value))
            .map_err(ComputeError::Output)
    })?;
    out.finish().map_err(ComputeError::Output)?;
    Ok(())
}

/// The Gateway as given (so fields this build's types do not know survive),
/// `metadata.managedFields` stripped, with the merged status laid over it.
fn output_object(e: &Evaluation, mut obj: Value) -> Value {
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
