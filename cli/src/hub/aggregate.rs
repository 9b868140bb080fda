//! `gwhub aggregate`: the engine over files, so operators can see what the
//! hub would write without running it, and tests can pin the output.
//!
//! Streamed, so memory follows what the aggregation needs, not the input.
//! Files are read one document at a time; each cluster Gateway's status
//! goes into a [`Fleet`] as it is read (the compact form the hub keeps,
//! its strings shared) and the document is dropped. Without `-f` each hub
//! Gateway is aggregated in key order and written at once. With `-f` each
//! hub Gateway is aggregated as it is read and its result waits, as
//! compact JSON, in an unnamed temporary file (`$TMPDIR`) until all are
//! read, then goes out in key order one at a time. Peak memory is about
//!
//! ```text
//! P × (~1 KB at 4 listeners) + H × (~40 B + key) + a few × the largest document
//! ```
//!
//! for P (cluster, Gateway) reports and H hub Gateways: the fleet is what
//! aggregation needs per Gateway (every cluster's report of it), the rest
//! is one document and one result at a time.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::output::{ListWriter, OutputFormat};
use gwhub_model::time::parse_rfc3339;
use gwhub_spoke_rules::manifest::{ManifestError, Object, for_each_object};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};

use gwhub_hub_rules::aggregate::{
    AggregateError, Fleet, GatewayKey, HOSTNAME_ADDRESS_TYPE, HubGateway, Options,
};

use crate::spool::{Spool, SpoolError};
// Short for this command's error inside the module.
use AggregateCmdError as Failure;

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
const GATEWAY_VERSIONS: [&str; 2] = [
    "gateway.networking.k8s.io/v1",
    "gateway.networking.k8s.io/v1beta1",
];

/// Flags of `gwhub aggregate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Cluster files hold that cluster's Gateways: `gwhub-agent compute` output or \
`kubectl get gateways -o yaml|json` (a List, multi-document YAML or JSON); other \
kinds are ignored. A Gateway without status reports no conditions, addresses or \
listeners. A Gateway without namespace is in `default`.

Without -f, one hub Gateway (generation 1) is printed per reported namespace/name. \
With -f, the hub Gateways of HUB.yaml are printed (other reported Gateways are \
ignored); their existing conditions of a type that is neither the hub's own nor \
reported by a cluster, and whose reason is not one the aggregation writes \
(TrueInAllClusters, NotTrueInSomeClusters), are treated as other writers' \
conditions and kept.")]
pub struct Args {
    /// A cluster and the file or directory of its Gateways (repeatable).
    #[arg(long = "cluster", value_name = "NAME=PATH")]
    pub clusters: Vec<String>,
    /// Hub Gateways to aggregate onto (their generation and existing status).
    #[arg(short = 'f', long = "filename", value_name = "HUB.yaml")]
    pub hub: Vec<PathBuf>,
    /// Output format: yaml or json.
    #[arg(short = 'o', long = "output", default_value = "yaml")]
    pub output: OutputFormat,
    /// Fix the clock (RFC 3339) for reproducible output.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Address type written for cluster Hostname addresses.
    #[arg(long, value_name = "TYPE", default_value = HOSTNAME_ADDRESS_TYPE)]
    pub hostname_address_type: String,
}

/// A Gateway as far as aggregation needs it; `spec` is not required, so
/// status-only files work too.
#[derive(Debug, Deserialize)]
pub struct GatewayDoc {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<GatewayStatus>,
}

/// A Gateway read from the files, as the command uses it.
#[derive(Debug)]
pub struct Found {
    pub object: Object,
    pub key: GatewayKey,
    pub doc: GatewayDoc,
}

/// Runs the command, writing the List to `out` as it is computed. Errors
/// in the files are found before anything is written.
pub(super) fn run(args: &Args, out: impl Write) -> Result<(), AggregateCmdError> {
    let now = match &args.now {
        Some(s) => parse_rfc3339(s).map_err(Failure::Now)?,
        None => jiff::Timestamp::now(),
    };
    let options = Options::with_hostname_address_type(&args.hostname_address_type)
        .map_err(Failure::HostnameAddressType)?;
    if args.clusters.is_empty() && args.hub.is_empty() {
        return Err(Failure::Nothing);
    }

    let fleet = read_clusters(&args.clusters)?;

    let mut list = ListWriter::new(out, args.output);
    let written = if args.hub.is_empty() {
        // The fleet's keys are in order: each result is written at once.
        fleet.gateway_keys().try_for_each(|key| {
            let hub = HubGateway {
                generation: 1,
                ..HubGateway::default()
            };
            let agg = fleet.aggregate(key, &hub, &options, now)?;
            let object = json!({
                "apiVersion": GATEWAY_VERSIONS[0],
                "kind": "Gateway",
                "metadata": {"name": key.name, "namespace": key.namespace, "generation": 1},
                "status": to_value(&agg.status)?,
            });
            list.item(&object).map_err(Failure::Output)
        })
    } else {
        // Hub Gateways come in file order and go out in key order: each
        // result waits in the spool, not in memory.
        let mut spool = Spool::temporary()?;
        let mut keys = BTreeSet::new();
        for path in &args.hub {
            for_each_gateway(path, |f| {
                if !keys.insert(f.key.clone()) {
                    return Err(Failure::HubGatewayTwice {
                        at: f.object.at.to_string(),
                        key: f.key,
                    });
                }
                let generation = f.doc.metadata.generation.unwrap_or(1);
                let existing = f
                    .doc
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default();
                let reports = fleet.reports(&f.key);
                let hub = HubGateway::from_existing(generation, &existing, &reports);
                let agg = gwhub_hub_rules::aggregate::aggregate(&hub, &reports, &options, now)?;
                let mut object = f.object.value;
                if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("managedFields");
                }
                object["status"] = to_value(&agg.status)?;
                spool.push(f.key, (), &object)?;
                Ok(())
            })
            .map_err(|e| Failure::InHub(Box::new(e)))?;
        }
        spool.drain_sorted(|_, (), object| list.item(&object).map_err(Failure::Output))
    };
    match written.and_then(|()| list.finish().map(drop).map_err(Failure::Output)) {
        Ok(()) => Ok(()),
        // A closed pipe (`| head`) is not an error worth a message.
        Err(Failure::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads each `NAME=PATH` of `--cluster` into the fleet, refusing a
/// malformed spec, a cluster named twice, and a Gateway twice in one
/// cluster.
fn read_clusters(clusters: &[String]) -> Result<Fleet, Failure> {
    let mut fleet = Fleet::new();
    let mut seen_clusters = BTreeSet::new();
    for spec in clusters {
        let bad = |problem| Failure::ClusterSpec {
            spec: spec.clone(),
            problem,
        };
        let Some((name, path)) = spec.split_once('=') else {
            return Err(bad("expected NAME=PATH"));
        };
        if name.is_empty() {
            return Err(bad("the cluster name is empty"));
        }
        if path.is_empty() {
            return Err(bad("the path is empty"));
        }
        if !seen_clusters.insert(name) {
            return Err(Failure::ClusterTwice {
                spec: spec.clone(),
                name: name.to_owned(),
            });
        }
        // Each Gateway's status goes into the fleet as it is read.
        for_each_gateway(Path::new(path), |f| {
            if fleet
                .cluster_gateways(name)
                .is_some_and(|keys| keys.contains(&f.key))
            {
                return Err(Failure::GatewayTwice {
                    at: f.object.at.to_string(),
                    key: f.key,
                });
            }
            fleet.upsert(name, f.key, f.doc.status.unwrap_or_default());
            Ok(())
        })
        .map_err(|e| Failure::InCluster {
            name: name.to_owned(),
            source: Box::new(e),
        })?;
    }
    Ok(fleet)
}

/// Why `gwhub aggregate` stopped, as printed: each names the flag, file
/// or object it concerns.
#[derive(Debug, thiserror::Error)]
pub enum AggregateCmdError {
    #[error("--now: {0}")]
    Now(#[source] gwhub_model::time::TimeFlagError),
    #[error("--hostname-address-type: {0}")]
    HostnameAddressType(#[source] AggregateError),
    #[error("nothing to aggregate: give at least one --cluster NAME=PATH")]
    Nothing,
    #[error("--cluster {spec:?}: {problem}")]
    ClusterSpec { spec: String, problem: &'static str },
    #[error("--cluster {spec:?}: cluster {name:?} is given twice")]
    ClusterTwice { spec: String, name: String },
    /// A problem in the files of `--cluster NAME=PATH`.
    #[error("--cluster {name}: {source}")]
    InCluster {
        name: String,
        #[source]
        source: Box<AggregateCmdError>,
    },
    /// A problem in the files of `-f`.
    #[error("-f: {0}")]
    InHub(#[source] Box<AggregateCmdError>),
    #[error("{at}: Gateway {key} appears twice in this cluster's files")]
    GatewayTwice { at: String, key: GatewayKey },
    #[error("{at}: hub Gateway {key} appears twice")]
    HubGatewayTwice { at: String, key: GatewayKey },
    #[error("{at}: Gateway has no metadata.name")]
    NoName { at: String },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Aggregate(#[from] AggregateError),
    #[error(transparent)]
    Spool(#[from] SpoolError),
    #[error("cannot serialize status: {0}")]
    Serialize(#[source] serde_json::Error),
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
}

fn to_value(status: &GatewayStatus) -> Result<Value, Failure> {
    serde_json::to_value(status).map_err(Failure::Serialize)
}

/// Hands each Gateway in `path` (file or directory) to `each` as it is
/// read; other kinds are skipped.
fn for_each_gateway(
    path: &Path,
    mut each: impl FnMut(Found) -> Result<(), Failure>,
) -> Result<(), Failure> {
    for_each_object(&[path], |object| match gateway_of(object)? {
        Some(found) => each(found),
        None => Ok(()),
    })
}

/// The Gateways among `objects` (other kinds are skipped), checked and
/// typed as the command reads them.
pub fn gateways_from_objects(objects: Vec<Object>) -> Result<Vec<Found>, AggregateCmdError> {
    let mut out = Vec::new();
    for object in objects {
        out.extend(gateway_of(object)?);
    }
    Ok(out)
}

/// `object` checked and typed when it is a Gateway.
fn gateway_of(mut object: Object) -> Result<Option<Found>, Failure> {
    if object.kind != "Gateway" || object.group() != GATEWAY_GROUP {
        return Ok(None);
    }
    object.expect_api_version(&GATEWAY_VERSIONS)?;
    default_listener_conditions(&mut object.value);
    let doc: GatewayDoc = object.parse()?;
    let Some(name) = doc.metadata.name.clone().filter(|n| !n.is_empty()) else {
        return Err(Failure::NoName {
            at: object.at.to_string(),
        });
    };
    let namespace = doc
        .metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    Ok(Some(Found {
        object,
        key: GatewayKey::new(namespace, name),
        doc,
    }))
}

/// Hand-written status (like the aggregation proposal's example) often leaves
/// a listener's `conditions` empty; read that as no conditions.
fn default_listener_conditions(value: &mut Value) {
    let Some(listeners) = value
        .get_mut("status")
        .and_then(|s| s.get_mut("listeners"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for l in listeners {
        if let Some(map) = l.as_object_mut() {
            let missing = map.get("conditions").is_none_or(Value::is_null);
            if missing {
                map.insert("conditions".into(), Value::Array(Vec::new()));
            }
        }
    }
}
