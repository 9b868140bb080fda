//! `gwhub aggregate`: the engine over files, so operators can see what the
//! hub would write without running it, and tests can pin the output.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_common::output::{OutputFormat, render_list};
use gwhub_model::time::parse_rfc3339;
use gwhub_spoke_rules::manifest::{ManifestError, Object, for_each_object};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};

use gwhub_hub_rules::aggregate::{Fleet, GatewayKey, HOSTNAME_ADDRESS_TYPE, HubGateway, Options};

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

/// Runs the command and returns what to print.
pub(super) fn run(args: &Args) -> Result<String, String> {
    let now = match &args.now {
        Some(s) => parse_rfc3339(s).map_err(|e| format!("--now: {e}"))?,
        None => jiff::Timestamp::now(),
    };
    let options = Options::with_hostname_address_type(&args.hostname_address_type)
        .map_err(|e| format!("--hostname-address-type: {e}"))?;
    if args.clusters.is_empty() && args.hub.is_empty() {
        return Err("nothing to aggregate: give at least one --cluster NAME=PATH".into());
    }

    let mut fleet = Fleet::new();
    let mut seen_clusters = BTreeSet::new();
    for spec in &args.clusters {
        let Some((name, path)) = spec.split_once('=') else {
            return Err(format!("--cluster {spec:?}: expected NAME=PATH"));
        };
        if name.is_empty() {
            return Err(format!("--cluster {spec:?}: the cluster name is empty"));
        }
        if path.is_empty() {
            return Err(format!("--cluster {spec:?}: the path is empty"));
        }
        if !seen_clusters.insert(name) {
            return Err(format!(
                "--cluster {spec:?}: cluster {name:?} is given twice"
            ));
        }
        let found = read_gateways(Path::new(path)).map_err(|e| format!("--cluster {name}: {e}"))?;
        let mut keys = BTreeSet::new();
        for f in found {
            if !keys.insert(f.key.clone()) {
                return Err(format!(
                    "--cluster {name}: {}: Gateway {} appears twice in this cluster's files",
                    f.object.at, f.key
                ));
            }
            fleet.upsert(name, f.key, f.doc.status.unwrap_or_default());
        }
    }

    let mut items: BTreeMap<GatewayKey, Value> = BTreeMap::new();
    if args.hub.is_empty() {
        let keys: Vec<GatewayKey> = fleet.gateway_keys().cloned().collect();
        for key in keys {
            let hub = HubGateway {
                generation: 1,
                ..HubGateway::default()
            };
            let agg = fleet
                .aggregate(&key, &hub, &options, now)
                .map_err(|e| e.to_string())?;
            let object = json!({
                "apiVersion": GATEWAY_VERSIONS[0],
                "kind": "Gateway",
                "metadata": {"name": key.name, "namespace": key.namespace, "generation": 1},
                "status": to_value(&agg.status)?,
            });
            items.insert(key, object);
        }
    } else {
        let mut found = Vec::new();
        for path in &args.hub {
            found.extend(read_gateways(path).map_err(|e| format!("-f: {e}"))?);
        }
        for f in found {
            if items.contains_key(&f.key) {
                return Err(format!(
                    "-f: {}: hub Gateway {} appears twice",
                    f.object.at, f.key
                ));
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
            let agg = gwhub_hub_rules::aggregate::aggregate(&hub, &reports, &options, now)
                .map_err(|e| e.to_string())?;
            let mut object = f.object.value;
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
            object["status"] = to_value(&agg.status)?;
            items.insert(f.key, object);
        }
    }
    Ok(render_list(items.into_values().collect(), args.output))
}

fn to_value(status: &GatewayStatus) -> Result<Value, String> {
    serde_json::to_value(status).map_err(|e| format!("cannot serialize status: {e}"))
}

/// The Gateways in `path` (file or directory); other kinds are skipped as
/// they are read, so memory follows the Gateways and the largest document.
fn read_gateways(path: &Path) -> Result<Vec<Found>, String> {
    struct Message(String);
    impl From<ManifestError> for Message {
        fn from(e: ManifestError) -> Self {
            Message(e.to_string())
        }
    }
    let mut out = Vec::new();
    for_each_object(&[path], |object| {
        if let Some(found) = gateway_of(object).map_err(Message)? {
            out.push(found);
        }
        Ok::<_, Message>(())
    })
    .map_err(|Message(e)| e)?;
    Ok(out)
}

/// The Gateways among `objects` (other kinds are skipped), checked and
/// typed as the command reads them.
pub fn gateways_from_objects(objects: Vec<Object>) -> Result<Vec<Found>, String> {
    let mut out = Vec::new();
    for object in objects {
        out.extend(gateway_of(object)?);
    }
    Ok(out)
}

/// `object` checked and typed when it is a Gateway.
fn gateway_of(mut object: Object) -> Result<Option<Found>, String> {
    if object.kind != "Gateway" || object.group() != GATEWAY_GROUP {
        return Ok(None);
    }
    object
        .expect_api_version(&GATEWAY_VERSIONS)
        .map_err(|e| e.to_string())?;
    default_listener_conditions(&mut object.value);
    let doc: GatewayDoc = object.parse().map_err(|e| e.to_string())?;
    let Some(name) = doc.metadata.name.clone().filter(|n| !n.is_empty()) else {
        return Err(format!("{}: Gateway has no metadata.name", object.at));
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
