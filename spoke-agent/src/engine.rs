//! The one entry point the runtime and `compute` share: a [`Snapshot`] in,
//! every in-scope Gateway's merged status out. Pure: no client, no clock
//! (the caller passes `now`), no I/O.

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use jiff::Timestamp;
use serde_json::Value;

use crate::conditions::{dns, load_balancer};
use crate::openshift::{DNS, DNSRecord};
use crate::scope::{self, Options, namespace_of};
use crate::snapshot::Snapshot;
use crate::status::{self, Desired, Problem};

/// Why nothing could be computed; the runtime logs it, raises an Event and a
/// metric, and retries. The engine never guesses a missing cluster config.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("{}", missing_message(.0))]
    MissingClusterConfig(Vec<&'static str>),
    #[error(
        "infrastructures.config.openshift.io/cluster has neither status.platformStatus.type nor status.platform: the platform decides whether DNS can be managed"
    )]
    NoPlatform,
}

fn missing_message(what: &[&str]) -> String {
    format!(
        "missing {}: the agent needs the cluster's DNS config and Infrastructure to compute DNS conditions and does not guess them",
        what.join(" and ")
    )
}

/// `dnses.config.openshift.io/cluster` as named in errors.
pub const DNS_CONFIG: &str = "dnses.config.openshift.io/cluster";
/// `infrastructures.config.openshift.io/cluster` as named in errors.
pub const INFRASTRUCTURE_CONFIG: &str = "infrastructures.config.openshift.io/cluster";

/// One in-scope Gateway's result.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// The Gateway as given (its status is the current one).
    pub gateway: Gateway,
    /// The status the agent would write: ours merged into the current one.
    pub status: GatewayStatus,
    /// What could not be written or had to be decided.
    pub problems: Vec<Problem>,
}

impl Evaluation {
    pub fn namespace(&self) -> &str {
        namespace_of(&self.gateway.metadata)
    }

    pub fn name(&self) -> &str {
        self.gateway.metadata.name.as_deref().unwrap_or_default()
    }

    /// Whether an API write is needed (anything but transition times changed).
    pub fn needs_write(&self) -> bool {
        let current = self.gateway.status.clone().unwrap_or_default();
        status::needs_write(&current, &self.status)
    }

    /// The server-side apply body for this Gateway (see [`status::apply_patch`]).
    pub fn apply_patch(&self) -> Value {
        status::apply_patch(&self.gateway, &self.status)
    }

    /// The Gateway with the merged status, as the cluster will see it.
    pub fn merged_gateway(&self) -> Gateway {
        Gateway {
            status: Some(self.status.clone()),
            ..self.gateway.clone()
        }
    }
}

/// Evaluates every in-scope Gateway of `snapshot`, ordered by namespace/name.
/// With no in-scope Gateway there is nothing to compute and no config is
/// needed; otherwise a missing DNS config or Infrastructure is an error.
pub fn evaluate(
    snapshot: &Snapshot,
    opts: &Options,
    now: Timestamp,
) -> Result<Vec<Evaluation>, EngineError> {
    let mut gateways: Vec<&Gateway> = snapshot
        .gateways
        .iter()
        .filter(|g| scope::in_scope(g, &snapshot.gateway_classes, opts))
        .collect();
    if gateways.is_empty() {
        return Ok(Vec::new());
    }
    gateways.sort_by(|a, b| {
        (namespace_of(&a.metadata), &a.metadata.name)
            .cmp(&(namespace_of(&b.metadata), &b.metadata.name))
    });
    let mut missing = Vec::new();
    if snapshot.dns.is_none() {
        missing.push(DNS_CONFIG);
    }
    if snapshot.infrastructure.is_none() {
        missing.push(INFRASTRUCTURE_CONFIG);
    }
    let (Some(dns_config), Some(infra)) = (&snapshot.dns, &snapshot.infrastructure) else {
        return Err(EngineError::MissingClusterConfig(missing));
    };
    let platform = infra.platform_type().ok_or(EngineError::NoPlatform)?;
    Ok(gateways
        .into_iter()
        .map(|gw| evaluate_gateway(gw, snapshot, platform, dns_config, now))
        .collect())
}

/// Evaluates one Gateway against the cluster's objects and config.
pub fn evaluate_gateway(
    gateway: &Gateway,
    snapshot: &Snapshot,
    platform: &str,
    dns_config: &DNS,
    now: Timestamp,
) -> Evaluation {
    let (desired, mut problems) = desired_for(gateway, snapshot, platform, dns_config);
    let (status, merge_problems) = status::merge(gateway.status.as_ref(), &desired, now);
    problems.extend(merge_problems);
    Evaluation {
        gateway: gateway.clone(),
        status,
        problems,
    }
}

/// The agent's conditions for `gateway`, before merging.
pub fn desired_for(
    gateway: &Gateway,
    snapshot: &Snapshot,
    platform: &str,
    dns_config: &DNS,
) -> (Desired, Vec<Problem>) {
    let mut problems = Vec::new();
    let service = scope::service_for(gateway, &snapshot.services);
    let lb = load_balancer::load_balancer_ready(service, &snapshot.events);
    let records = scope::dns_records_for(gateway, &snapshot.dns_records);
    let mut reported = Vec::new();
    let listeners = gateway
        .spec
        .listeners
        .iter()
        .map(|l| {
            let hostname = l.hostname.as_deref().filter(|h| !h.is_empty());
            let verdicts = match hostname {
                None => Vec::new(),
                Some(h) => {
                    let matching = scope::records_for_hostname(h, &records);
                    let record: Option<&DNSRecord> = matching.first().copied();
                    let key = dns::normalize_hostname(h).to_owned();
                    if matching.len() > 1 && !reported.contains(&key) {
                        problems.push(Problem::DuplicateDNSRecords {
                            hostname: key.clone(),
                            used: name_of(matching[0]),
                            ignored: matching[1..].iter().map(|r| name_of(r)).collect(),
                        });
                        reported.push(key);
                    }
                    vec![
                        dns::dns_managed(platform, dns_config),
                        dns::dns_ready(platform, dns_config, record),
                    ]
                }
            };
            (l.name.clone(), verdicts)
        })
        .collect();
    (
        Desired {
            generation: gateway.metadata.generation,
            gateway: vec![lb],
            listeners,
        },
        problems,
    )
}

fn name_of(r: &DNSRecord) -> String {
    r.metadata.name.clone().unwrap_or_default()
}
