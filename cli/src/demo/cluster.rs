//! One simulated cluster of `gwhub demo`: a directory of manifests rendered
//! from the templates shipped in `cli/demo/`, read by a real agent
//! (`run_dir_agent`). Faults are injected by rewriting those files the way
//! the cloud, the ingress operator and Istio would, so every change travels
//! the real path: engine, store, gRPC, hub, aggregation, Dashboard.

use std::path::{Path, PathBuf};

use gwhub_common::{OutputFormat, render_list};
use gwhub_spoke_rules::manifest::parse_str;

use super::DemoError;
use jiff::Timestamp;
use serde_json::{Value, json};

/// Namespace of the demo's Gateways (the agent's default scope).
pub(crate) const NAMESPACE: &str = "openshift-ingress";
/// Runs on every simulated cluster; the faults hit this one.
pub(crate) const DEFAULT_GATEWAY: &str = "default-gateway";
/// Runs on the first [`INTERNAL_CLUSTERS`] clusters only, so the table shows
/// a Gateway that is not everywhere.
pub(crate) const INTERNAL_GATEWAY: &str = "internal";
pub(crate) const INTERNAL_CLUSTERS: usize = 2;
/// Listener whose attached routes come and go.
pub(crate) const ROUTES_LISTENER: &str = "apps-http";
const BASE_ROUTES: u32 = 2;
/// The public zone of every cluster's DNS config (the one that fails).
const PUBLIC_ZONE: &str = "demo-public";
const WILDCARD: &str = "*.gwapi.apps.demo.example.com";

/// The shipped manifests, embedded so `gwhub demo` runs from anywhere.
const TEMPLATES: [(&str, &str); 5] = [
    (
        "gatewayclass.yaml",
        include_str!("../../demo/gatewayclass.yaml"),
    ),
    (
        "cluster-config.yaml",
        include_str!("../../demo/cluster-config.yaml"),
    ),
    ("gateways.yaml", include_str!("../../demo/gateways.yaml")),
    ("services.yaml", include_str!("../../demo/services.yaml")),
    (
        "dnsrecords.yaml",
        include_str!("../../demo/dnsrecords.yaml"),
    ),
];

/// `east`, `west`, `central`, then `cluster-4`, `cluster-5`, ...
pub(crate) fn cluster_name(index: usize) -> String {
    match index {
        0 => "east".into(),
        1 => "west".into(),
        2 => "central".into(),
        i => format!("cluster-{}", i + 1),
    }
}

/// The kind of trouble a cluster goes through, by its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The cloud load balancer loses its address (SyncLoadBalancerFailed).
    LoadBalancer,
    /// The public DNS zone fails to publish the wildcard record.
    Dns,
    /// An HTTPRoute attaches to (then detaches from) a listener.
    Routes,
}

/// A cluster's state and where its manifests live.
#[derive(Debug)]
pub struct SimCluster {
    pub name: String,
    index: usize,
    dir: PathBuf,
    /// Whether the fault is in effect, and since when.
    faulty: Option<Timestamp>,
}

impl SimCluster {
    /// A healthy cluster whose manifests go to `dir` (created on [`Self::write`]).
    pub fn new(index: usize, dir: &Path) -> Self {
        let name = cluster_name(index);
        SimCluster {
            dir: dir.join(&name),
            name,
            index,
            faulty: None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn fault(&self) -> Fault {
        match self.index % 3 {
            0 => Fault::LoadBalancer,
            1 => Fault::Dns,
            _ => Fault::Routes,
        }
    }

    /// The Gateways this cluster runs.
    pub fn gateways(&self) -> Vec<&'static str> {
        if self.index < INTERNAL_CLUSTERS {
            vec![DEFAULT_GATEWAY, INTERNAL_GATEWAY]
        } else {
            vec![DEFAULT_GATEWAY]
        }
    }

    /// Documentation ranges (RFC 5737), one address per cluster.
    fn lb_ip(&self) -> String {
        format!("203.0.113.{}", 10 + self.index % 240)
    }

    fn internal_ip(&self) -> String {
        format!("198.51.100.{}", 10 + self.index % 240)
    }

    /// Starts or ends this cluster's fault and says what happened, as a
    /// person watching the cluster would put it.
    pub fn toggle(&mut self) -> String {
        self.faulty = match self.faulty {
            Some(_) => None,
            None => Some(Timestamp::now()),
        };
        let broken = self.faulty.is_some();
        let what = match (self.fault(), broken) {
            (Fault::LoadBalancer, true) => format!(
                "load balancer lost its address {} (service-controller: SyncLoadBalancerFailed)",
                self.lb_ip()
            ),
            (Fault::LoadBalancer, false) => {
                format!("load balancer got its address {} back", self.lb_ip())
            }
            (Fault::Dns, true) => {
                format!("DNS zone {PUBLIC_ZONE} failed to publish {WILDCARD}")
            }
            (Fault::Dns, false) => format!("DNS zone {PUBLIC_ZONE} published {WILDCARD} again"),
            (Fault::Routes, true) => format!(
                "an HTTPRoute attached to listener {ROUTES_LISTENER} ({} routes)",
                BASE_ROUTES + 1
            ),
            (Fault::Routes, false) => format!(
                "an HTTPRoute detached from listener {ROUTES_LISTENER} ({BASE_ROUTES} routes)"
            ),
        };
        format!("{}: {what}", self.name)
    }

    /// Writes the cluster's manifests. Each file is written aside and
    /// renamed into place, so the agent never reads half a file.
    pub fn write(&self) -> Result<(), DemoError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| DemoError::Write {
            path: self.dir.clone(),
            source,
        })?;
        for (file, items) in self.render()? {
            let text = render_list(items, OutputFormat::Yaml);
            let path = self.dir.join(file);
            let aside = self.dir.join(format!(".{file}.tmp"));
            std::fs::write(&aside, text)
                .and_then(|_| std::fs::rename(&aside, &path))
                .map_err(|source| DemoError::Write { path, source })?;
        }
        Ok(())
    }

    /// The manifests as they are now, file by file.
    pub fn render(&self) -> Result<Vec<(&'static str, Vec<Value>)>, DemoError> {
        let hosts_internal = self.index < INTERNAL_CLUSTERS;
        let mut files = Vec::new();
        for (file, template) in TEMPLATES {
            let text = template
                .replace("__CLUSTER__", &self.name)
                .replace("__INTERNAL_LB_IP__", &self.internal_ip())
                .replace("__LB_IP__", &self.lb_ip());
            let objects = parse_str(file, &text)?;
            let mut items = Vec::new();
            for object in objects {
                let mut value = object.value;
                if !hosts_internal && gateway_of(&value) == Some(INTERNAL_GATEWAY) {
                    continue;
                }
                if let Some(event) = self.apply_fault(&object.kind, &mut value) {
                    items.push(value);
                    items.push(event);
                } else {
                    items.push(value);
                }
            }
            files.push((file, items));
        }
        Ok(files)
    }

    /// Rewrites one object for the current fault; returns an Event to add
    /// next to it, if any.
    fn apply_fault(&self, kind: &str, value: &mut Value) -> Option<Value> {
        let since = self.faulty?;
        if gateway_of(value) != Some(DEFAULT_GATEWAY) {
            return None;
        }
        let at = since.to_string();
        match (self.fault(), kind) {
            (Fault::LoadBalancer, "Service") => {
                value["status"] = json!({"loadBalancer": {}});
                Some(sync_failed_event(value, &at))
            }
            (Fault::LoadBalancer, "Gateway") => {
                // What Istio writes while the Service has no address.
                value["status"]["addresses"] = json!([]);
                if let Some(conds) = value["status"]["conditions"].as_array_mut() {
                    for c in conds.iter_mut().filter(|c| c["type"] == "Programmed") {
                        *c = json!({
                            "type": "Programmed",
                            "status": "False",
                            "reason": "AddressNotAssigned",
                            "message": "Failed to assign to any requested addresses: address pending for hostname \"default-gateway-openshift-default.openshift-ingress.svc.cluster.local\"",
                            "observedGeneration": 1,
                            "lastTransitionTime": at,
                        });
                    }
                }
                None
            }
            (Fault::Dns, "DNSRecord") => {
                if let Some(zones) = value["status"]["zones"].as_array_mut() {
                    for z in zones
                        .iter_mut()
                        .filter(|z| z["dnsZone"]["id"] == PUBLIC_ZONE)
                    {
                        z["conditions"] = json!([{
                            "type": "Published",
                            "status": "False",
                            "reason": "ProviderError",
                            "message": "The DNS provider failed to ensure the record: googleapi: Error 503: Backend Error, backendError",
                            "lastTransitionTime": at,
                        }]);
                    }
                }
                None
            }
            (Fault::Routes, "Gateway") => {
                if let Some(listeners) = value["status"]["listeners"].as_array_mut() {
                    for l in listeners
                        .iter_mut()
                        .filter(|l| l["name"] == ROUTES_LISTENER)
                    {
                        l["attachedRoutes"] = json!(BASE_ROUTES + 1);
                    }
                }
                None
            }
            _ => None,
        }
    }
}

/// The Gateway an object belongs to: its name for a Gateway, its
/// `gateway-name` label otherwise.
fn gateway_of(value: &Value) -> Option<&str> {
    if value["kind"] == "Gateway" {
        return value["metadata"]["name"].as_str();
    }
    value["metadata"]["labels"]["gateway.networking.k8s.io/gateway-name"].as_str()
}

/// The event the service controller records when the cloud refuses.
fn sync_failed_event(service: &Value, at: &str) -> Value {
    let meta = &service["metadata"];
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{}.demo", meta["name"].as_str().unwrap_or_default()),
            "namespace": meta["namespace"],
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Service",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "reason": "SyncLoadBalancerFailed",
        "message": "Error syncing load balancer: failed to ensure load balancer: googleapi: Error 403: QUOTA_EXCEEDED - Quota 'IN_USE_ADDRESSES' exceeded. Limit: 8.0 in region us-east1.",
        "source": {"component": "service-controller"},
        "type": "Warning",
        "count": 1,
        "firstTimestamp": at,
        "lastTimestamp": at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(files: &'a [(&str, Vec<Value>)], kind: &str, name: &str) -> Vec<&'a Value> {
        files
            .iter()
            .flat_map(|(_, items)| items)
            .filter(|v| v["kind"] == kind && gateway_of(v) == Some(name))
            .collect()
    }

    #[test]
    fn names() {
        let names: Vec<_> = (0..5).map(cluster_name).collect();
        assert_eq!(names, ["east", "west", "central", "cluster-4", "cluster-5"]);
    }

    #[test]
    fn internal_gateway_only_on_the_first_clusters() {
        let dir = Path::new("/nonexistent");
        let east = SimCluster::new(0, dir).render().unwrap();
        assert_eq!(find(&east, "Gateway", INTERNAL_GATEWAY).len(), 1);
        let central = SimCluster::new(2, dir).render().unwrap();
        assert!(find(&central, "Gateway", INTERNAL_GATEWAY).is_empty());
        assert!(find(&central, "Service", INTERNAL_GATEWAY).is_empty());
        assert!(find(&central, "DNSRecord", INTERNAL_GATEWAY).is_empty());
        assert_eq!(find(&central, "Gateway", DEFAULT_GATEWAY).len(), 1);
    }

    #[test]
    fn load_balancer_fault_and_recovery() {
        let mut east = SimCluster::new(0, Path::new("/nonexistent"));
        assert!(east.toggle().starts_with("east: load balancer lost"));
        let files = east.render().unwrap();
        let svc = find(&files, "Service", DEFAULT_GATEWAY)[0];
        assert_eq!(svc["status"], json!({"loadBalancer": {}}));
        let events: Vec<_> = files
            .iter()
            .flat_map(|(_, i)| i)
            .filter(|v| v["kind"] == "Event")
            .collect();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["involvedObject"]["uid"], svc["metadata"]["uid"]);
        let gw = find(&files, "Gateway", DEFAULT_GATEWAY)[0];
        assert_eq!(gw["status"]["addresses"], json!([]));
        assert!(east.toggle().contains("back"));
        let files = east.render().unwrap();
        let svc = find(&files, "Service", DEFAULT_GATEWAY)[0];
        assert_eq!(
            svc["status"]["loadBalancer"]["ingress"][0]["ip"],
            "203.0.113.10"
        );
    }

    #[test]
    fn dns_and_routes_faults() {
        let dir = Path::new("/nonexistent");
        let mut west = SimCluster::new(1, dir);
        west.toggle();
        let files = west.render().unwrap();
        let rec = find(&files, "DNSRecord", DEFAULT_GATEWAY)[0];
        assert_eq!(
            rec["status"]["zones"][0]["conditions"][0]["status"],
            "False"
        );
        let internal = find(&files, "DNSRecord", INTERNAL_GATEWAY)[0];
        assert_eq!(
            internal["status"]["zones"][0]["conditions"][0]["status"],
            "True"
        );

        let mut central = SimCluster::new(2, dir);
        central.toggle();
        let files = central.render().unwrap();
        let gw = find(&files, "Gateway", DEFAULT_GATEWAY)[0];
        assert_eq!(gw["status"]["listeners"][0]["attachedRoutes"], 3);
    }
}
