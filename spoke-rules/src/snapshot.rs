//! Everything the engine needs about one cluster at one moment, typed.
//! The runtime fills a [`Snapshot`] from the API server (or a directory);
//! `gwhub-agent compute` fills it from files via [`Snapshot::from_objects`].

use std::collections::BTreeMap;

use crate::manifest::{Location, ManifestError, Object};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::{Event, EventSeries, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::openshift::{CLUSTER_CONFIG_NAME, DNS, DNSRecord};

/// Namespace of a namespaced object that has none (what `kubectl apply` does).
pub const DEFAULT_NAMESPACE: &str = "default";

/// A cluster's objects as the engine sees them. Order within a list does not
/// change results except where documented (event ties).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub gateways: Vec<Gateway>,
    pub gateway_classes: Vec<GatewayClass>,
    pub services: Vec<Service>,
    pub dns_records: Vec<DNSRecord>,
    /// Core `v1` events; `events.k8s.io/v1` events are converted on load.
    pub events: Vec<Event>,
    /// `dnses.config.openshift.io/cluster`, if present. (The Infrastructure
    /// object is not read: no rule depends on the platform.)
    pub dns: Option<DNS>,
}

/// The kinds the engine reads, told apart by API group and kind (an Istio
/// `networking.istio.io` Gateway or an `operator.openshift.io` DNS is a
/// different resource and is ignored, not an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NeededKind {
    Gateway,
    GatewayClass,
    Service,
    Event,
    EventsV1Event,
    DNSRecord,
    DNS,
}

impl NeededKind {
    /// Which needed kind `obj` is, `None` for kinds the engine ignores, or an
    /// error when the kind is needed but its apiVersion is not supported.
    pub fn of(obj: &Object) -> Result<Option<Self>, ManifestError> {
        let (kind, versions): (Self, &[&str]) = match (obj.group(), obj.kind.as_str()) {
            ("gateway.networking.k8s.io", "Gateway") => (
                Self::Gateway,
                &[
                    "gateway.networking.k8s.io/v1",
                    "gateway.networking.k8s.io/v1beta1",
                ],
            ),
            ("gateway.networking.k8s.io", "GatewayClass") => (
                Self::GatewayClass,
                &[
                    "gateway.networking.k8s.io/v1",
                    "gateway.networking.k8s.io/v1beta1",
                ],
            ),
            ("", "Service") => (Self::Service, &["v1"]),
            ("", "Event") => (Self::Event, &["v1"]),
            ("events.k8s.io", "Event") => (Self::EventsV1Event, &["events.k8s.io/v1"]),
            ("ingress.operator.openshift.io", "DNSRecord") => {
                (Self::DNSRecord, &["ingress.operator.openshift.io/v1"])
            }
            ("config.openshift.io", "DNS") => (Self::DNS, &["config.openshift.io/v1"]),
            _ => return Ok(None),
        };
        obj.expect_api_version(versions)?;
        Ok(Some(kind))
    }

    fn namespaced(self) -> bool {
        !matches!(self, Self::GatewayClass | Self::DNS)
    }
}

/// `namespace/name` (or `name` for cluster-scoped kinds) with the namespace
/// defaulted, as objects are identified in the engine.
pub fn object_key(kind: NeededKind, value: &Value) -> (String, String) {
    let meta = &value["metadata"];
    let name = meta["name"].as_str().unwrap_or_default().to_owned();
    let ns = if kind.namespaced() {
        meta["namespace"]
            .as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or(DEFAULT_NAMESPACE)
            .to_owned()
    } else {
        String::new()
    };
    (ns, name)
}

impl Snapshot {
    /// Types the objects the engine needs and ignores the rest. Fails, naming
    /// file and document, on a needed kind with an unsupported apiVersion, on
    /// an object that does not match its schema (e.g. a Gateway without
    /// `spec.gatewayClassName`), on an object without a name, and on the same
    /// object given twice (which copy is right would be a guess).
    pub fn from_objects(objects: &[Object]) -> Result<Self, ManifestError> {
        let mut loader = Loader::default();
        let mut gateways = Vec::new();
        for obj in objects {
            if let Some(gateway) = loader.add(obj)? {
                gateways.push(gateway);
            }
        }
        let mut snap = loader.finish();
        snap.gateways = gateways;
        Ok(snap)
    }
}

/// Builds a [`Snapshot`] one object at a time, with the checks of
/// [`Snapshot::from_objects`]; Gateways are checked, typed and handed back
/// rather than kept, so a caller can keep what it needs of them (`compute`
/// keeps their names and where they are, then reads them one at a time).
#[derive(Debug, Default)]
pub struct Loader {
    snapshot: Snapshot,
    seen: BTreeMap<(NeededKind, String, String), Location>,
}

impl Loader {
    /// Checks and types `obj`: a Gateway is returned (namespace defaulted),
    /// any other needed kind is kept, other kinds are ignored.
    pub fn add(&mut self, obj: &Object) -> Result<Option<Gateway>, ManifestError> {
        let Some(kind) = NeededKind::of(obj)? else {
            return Ok(None);
        };
        let invalid = |problem: String| ManifestError::Invalid {
            at: Box::new(obj.at.clone()),
            kind: obj.kind.clone(),
            name: obj.name(),
            problem,
        };
        let (ns, name) = object_key(kind, &obj.value);
        if name.is_empty() {
            return Err(invalid("metadata.name is missing".into()));
        }
        let ident = match kind {
            NeededKind::EventsV1Event => NeededKind::Event,
            k => k,
        };
        if let Some(first) = self
            .seen
            .insert((ident, ns.clone(), name.clone()), obj.at.clone())
        {
            return Err(invalid(format!("given twice (first at {first})")));
        }
        let snap = &mut self.snapshot;
        match kind {
            NeededKind::Gateway => return gateway_of(obj).map(Some),
            NeededKind::GatewayClass => snap.gateway_classes.push(obj.parse()?),
            NeededKind::Service => {
                snap.services
                    .push(with_ns(obj.parse()?, &ns, |s: &mut Service| {
                        &mut s.metadata
                    }))
            }
            NeededKind::DNSRecord => {
                snap.dns_records
                    .push(with_ns(obj.parse()?, &ns, |r: &mut DNSRecord| {
                        &mut r.metadata
                    }))
            }
            NeededKind::Event => snap
                .events
                .push(with_ns(obj.parse()?, &ns, |e: &mut Event| &mut e.metadata)),
            NeededKind::EventsV1Event => {
                let e: k8s_openapi::api::events::v1::Event = obj.parse()?;
                snap.events
                    .push(with_ns(from_events_v1(e), &ns, |e: &mut Event| {
                        &mut e.metadata
                    }));
            }
            NeededKind::DNS if name == CLUSTER_CONFIG_NAME => {
                snap.dns = Some(with_spec(obj).parse()?);
            }
            NeededKind::DNS => {}
        }
        Ok(None)
    }

    /// Everything kept but the Gateways (which were handed back).
    pub fn finish(self) -> Snapshot {
        self.snapshot
    }
}

/// `obj`, a Gateway, typed with its namespace defaulted as the engine
/// reads it.
pub fn gateway_of(obj: &Object) -> Result<Gateway, ManifestError> {
    let (ns, _) = object_key(NeededKind::Gateway, &obj.value);
    Ok(with_ns(obj.parse()?, &ns, |g: &mut Gateway| {
        &mut g.metadata
    }))
}

fn with_ns<T>(mut obj: T, ns: &str, meta: impl Fn(&mut T) -> &mut ObjectMeta) -> T {
    let m = meta(&mut obj);
    if m.namespace.as_deref().is_none_or(str::is_empty) {
        m.namespace = Some(ns.to_owned());
    }
    obj
}

/// Cluster config objects written by hand often omit `spec`; the engine does
/// not need it, so an empty one is assumed.
fn with_spec(obj: &Object) -> Object {
    let mut obj = obj.clone();
    if let Value::Object(map) = &mut obj.value {
        map.entry("spec")
            .or_insert_with(|| Value::Object(Default::default()));
    }
    obj
}

/// An `events.k8s.io/v1` Event in the core `v1` shape the engine reads.
pub fn from_events_v1(e: k8s_openapi::api::events::v1::Event) -> Event {
    Event {
        metadata: e.metadata,
        involved_object: e.regarding.unwrap_or_default(),
        reason: e.reason,
        message: e.note,
        source: e.deprecated_source,
        reporting_component: e.reporting_controller,
        reporting_instance: e.reporting_instance,
        event_time: e.event_time,
        first_timestamp: e.deprecated_first_timestamp,
        last_timestamp: e.deprecated_last_timestamp,
        count: e.deprecated_count,
        series: e.series.map(|s| EventSeries {
            count: Some(s.count),
            last_observed_time: Some(s.last_observed_time),
        }),
        type_: e.type_,
        action: e.action,
        related: e.related,
    }
}
