//! The `dnsendpoint` output (spec section 8): one external-dns
//! `DNSEndpoint` per (hub Gateway, hostname) in the hub Gateway's
//! namespace, owned by it (ownerReference: deleted with it), labelled
//! `gwhub.io/dns=managed`, server-side applied with the hub's field
//! manager through the API budget the status writes use. The clusters
//! published per record type are kept in an annotation, so a new leader
//! reads them back ([`read_back`]) and seeds its publishers.
//!
//! Decided here: the object's name is the hostname (`*` written
//! `wildcard`), cut to 52 characters, then `-` and 8 hex digits of the
//! FNV-1a hash of `ns/name/hostname`: a valid, stable name per (hub
//! Gateway, hostname) that never collides in practice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gwhub_dns_rules::{RecordData, RecordSet, RecordType};
use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_hub_rules::dnsendpoint::{
    DNSEndpoint, DNSEndpointSpec, Endpoint, HOSTNAME_ANNOTATION, MANAGED_LABEL,
    PUBLISHED_ANNOTATION, ProviderSpecificProperty,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

use super::names::{Job, Outcome};
use gwhub_k8s::FIELD_MANAGER;
use gwhub_k8s::budget::ApiBudget;

/// Per hostname and record type, the clusters read back.
pub(super) type Seeds = BTreeMap<String, BTreeMap<RecordType, BTreeSet<String>>>;

/// How long an object name's hostname part may be.
const NAME_HOST_LEN: usize = 52;

/// The object name for `host` of hub Gateway `owner`.
pub fn object_name(owner: &GatewayKey, host: &str) -> String {
    let hash = gwhub_model::cluster::fnv(format!("{owner}/{host}").into_bytes()) as u32;
    let mut base: String = host
        .replace('*', "wildcard")
        .chars()
        .take(NAME_HOST_LEN)
        .collect();
    while base.ends_with('.') || base.ends_with('-') {
        base.pop();
    }
    format!("{base}-{hash:08x}")
}

fn endpoints(sets: &BTreeMap<RecordType, RecordSet>) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for set in sets.values() {
        let base = Endpoint {
            dns_name: Some(set.host.to_string()),
            record_ttl: Some(i64::from(set.ttl_seconds)),
            record_type: Some(set.record_type().as_str().to_owned()),
            ..Endpoint::default()
        };
        match &set.data {
            RecordData::WeightedCname(targets) => {
                for t in targets {
                    out.push(Endpoint {
                        set_identifier: Some(t.set_identifier.clone()),
                        targets: Some(vec![t.target.to_string()]),
                        provider_specific: Some(
                            t.provider_specific
                                .iter()
                                .map(|(n, v)| ProviderSpecificProperty {
                                    name: Some(n.clone()),
                                    value: Some(v.clone()),
                                })
                                .collect(),
                        ),
                        ..base.clone()
                    });
                }
            }
            _ => out.push(Endpoint {
                targets: Some(set.targets()),
                ..base
            }),
        }
    }
    out
}

/// The object `job` publishes, owned by hub Gateway `uid`.
pub(super) fn object(job: &Job, uid: &str) -> DNSEndpoint {
    let published: BTreeMap<&str, &BTreeSet<String>> =
        job.clusters.iter().map(|(t, c)| (t.as_str(), c)).collect();
    DNSEndpoint {
        metadata: ObjectMeta {
            name: Some(object_name(&job.owner, &job.host)),
            namespace: Some(job.owner.namespace.clone()),
            labels: Some(BTreeMap::from([(
                MANAGED_LABEL.0.to_owned(),
                MANAGED_LABEL.1.to_owned(),
            )])),
            annotations: Some(BTreeMap::from([
                (HOSTNAME_ANNOTATION.to_owned(), job.host.clone()),
                (
                    PUBLISHED_ANNOTATION.to_owned(),
                    serde_json::to_string(&published).unwrap_or_default(),
                ),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "gateway.networking.k8s.io/v1".to_owned(),
                kind: "Gateway".to_owned(),
                name: job.owner.name.clone(),
                uid: uid.to_owned(),
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]),
            ..ObjectMeta::default()
        },
        spec: DNSEndpointSpec {
            endpoints: Some(endpoints(&job.sets)),
        },
        status: None,
    }
}

/// Writes DNSEndpoints.
pub(super) struct EndpointOutput {
    pub client: Client,
    pub budget: Arc<ApiBudget>,
    /// `--gateway-namespace`: the only namespace with hub Gateways.
    pub namespace: Option<String>,
}

impl EndpointOutput {
    fn api(&self, ns: &str) -> Api<DNSEndpoint> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// The published clusters of every object the hub wrote.
    #[tracing::instrument(skip_all)]
    pub(super) async fn read_back(&self) -> Result<Seeds, kube::Error> {
        let api: Api<DNSEndpoint> = match &self.namespace {
            Some(ns) => self.api(ns),
            None => Api::all(self.client.clone()),
        };
        let selector = format!("{}={}", MANAGED_LABEL.0, MANAGED_LABEL.1);
        let list = api.list(&ListParams::default().labels(&selector)).await?;
        let mut seeds = Seeds::new();
        for o in list.items {
            let annotations = o.annotations();
            let Some(host) = annotations.get(HOSTNAME_ANNOTATION) else {
                continue;
            };
            let published: BTreeMap<String, BTreeSet<String>> = annotations
                .get(PUBLISHED_ANNOTATION)
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or_default();
            let entry = seeds.entry(host.clone()).or_default();
            for (t, clusters) in published {
                if let Some(t) = RecordType::ALL.into_iter().find(|r| r.as_str() == t) {
                    entry.entry(t).or_default().extend(clusters);
                }
            }
        }
        Ok(seeds)
    }

    /// Applies (or, with no sets, deletes) the object of `job`; `uid`: the
    /// hub Gateway's (`None`: gone, the object goes with it anyway).
    #[tracing::instrument(skip_all, fields(host = %job.host, owner = %job.owner))]
    pub(super) async fn write(&self, job: &Job, uid: Option<&str>) -> Outcome {
        let api = self.api(&job.owner.namespace);
        let name = object_name(&job.owner, &job.host);
        self.budget.acquire().await;
        let result = match (job.sets.is_empty(), uid) {
            (false, Some(uid)) => {
                let params = PatchParams::apply(FIELD_MANAGER).force();
                api.patch(&name, &params, &Patch::Apply(&object(job, uid)))
                    .await
                    .map(drop)
            }
            _ => match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e),
            },
        };
        match result {
            Ok(()) => Outcome::Written,
            Err(e) => {
                tracing::warn!(error = %e, "DNSEndpoint write failed; retrying with backoff");
                Outcome::Failed(format!("DNSEndpoint {}/{name}: {e}", job.owner.namespace))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_valid_and_stable() {
        let owner = GatewayKey::new("ns", "gw");
        let n = object_name(&owner, "*.apps.fleet.test");
        assert!(n.starts_with("wildcard.apps.fleet.test-"), "{n}");
        assert_eq!(n, object_name(&owner, "*.apps.fleet.test"));
        assert_ne!(
            n,
            object_name(&GatewayKey::new("ns", "other"), "*.apps.fleet.test")
        );
        let long = format!("{}.fleet.test", "a".repeat(60));
        assert!(object_name(&owner, &long).len() <= 61);
    }
}
