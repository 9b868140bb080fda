//! The one entry point the runtime and `compute` share: a [`Snapshot`] in,
//! every in-scope Gateway's merged status out. Pure: no client, no clock
//! (the caller passes `now`), no I/O.

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use jiff::Timestamp;
use serde_json::Value;

use crate::conditions::{Verdict, dns, load_balancer};

/// The field manager of the agent's status applies and the reporting
/// controller of its Events.
pub const FIELD_MANAGER: &str = "gwhub-agent";
use crate::openshift::{DNS, DNSRecord};
use crate::ownership::{self, Ownership, Plan, WriteMode};
use crate::scope::{self, Options, namespace_of};
use crate::snapshot::Snapshot;
use crate::status::{self, Desired, Problem};

/// Why nothing could be computed; the runtime logs it, raises an Event and a
/// metric, and retries. The engine never guesses a missing cluster config.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error(
        "missing {DNS_CONFIG}: the agent needs the cluster's DNS config to compute DNS conditions and does not guess it"
    )]
    MissingDnsConfig,
}

/// `dnses.config.openshift.io/cluster` as named in errors.
pub const DNS_CONFIG: &str = "dnses.config.openshift.io/cluster";

/// One in-scope Gateway's result.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// The Gateway as given (its status is the current one).
    pub gateway: Gateway,
    /// The status the agent would write: ours merged into the current one.
    pub status: GatewayStatus,
    /// What could not be written or had to be decided.
    pub problems: Vec<Problem>,
    /// Which of our condition types the agent computes and writes here.
    pub plan: Plan,
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
        status::apply_patch(&self.gateway, &self.status, &self.plan)
    }

    /// The Gateway with the merged status, as the cluster will see it.
    pub fn merged_gateway(&self) -> Gateway {
        Gateway {
            status: Some(self.status.clone()),
            ..self.gateway.clone()
        }
    }
}

/// Evaluates every in-scope Gateway of `snapshot`, ordered by namespace/name,
/// computing every condition type of ours ([`Plan::everything`]: what
/// `compute` shows and `--write-local-status=true` writes). With no in-scope
/// Gateway there is nothing to compute and no config is needed; otherwise a
/// missing DNS config is an error.
pub fn evaluate(
    snapshot: &Snapshot,
    opts: &Options,
    now: Timestamp,
) -> Result<Vec<Evaluation>, EngineError> {
    evaluate_with(snapshot, opts, WriteMode::Always, now)
}

/// [`evaluate`] with the `--write-local-status` mode, decided per Gateway
/// from its managedFields ([`ownership::plan`]).
pub fn evaluate_with(
    snapshot: &Snapshot,
    opts: &Options,
    mode: WriteMode,
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
    let dns_config = snapshot.dns.as_ref().ok_or(EngineError::MissingDnsConfig)?;
    Ok(gateways
        .into_iter()
        .map(|gw| {
            let own = Ownership::of(
                gw.metadata.managed_fields.as_deref().unwrap_or_default(),
                FIELD_MANAGER,
            );
            evaluate_gateway(gw, snapshot, dns_config, &ownership::plan(mode, &own), now)
        })
        .collect())
}

/// Evaluates one in-scope Gateway with every condition type of ours, as
/// [`evaluate`] does each; `snapshot`'s own Gateways are not read, so a
/// caller can hold one Gateway at a time. The caller decides the scope
/// ([`scope::in_scope`]).
pub fn evaluate_one(
    gateway: &Gateway,
    snapshot: &Snapshot,
    now: Timestamp,
) -> Result<Evaluation, EngineError> {
    let dns_config = snapshot.dns.as_ref().ok_or(EngineError::MissingDnsConfig)?;
    let own = Ownership::of(
        gateway
            .metadata
            .managed_fields
            .as_deref()
            .unwrap_or_default(),
        FIELD_MANAGER,
    );
    let plan = ownership::plan(WriteMode::Always, &own);
    Ok(evaluate_gateway(gateway, snapshot, dns_config, &plan, now))
}

/// Evaluates one Gateway against the cluster's objects and config.
pub(crate) fn evaluate_gateway(
    gateway: &Gateway,
    snapshot: &Snapshot,
    dns_config: &DNS,
    plan: &Plan,
    now: Timestamp,
) -> Evaluation {
    let (desired, mut problems) = desired_for(gateway, snapshot, dns_config);
    let (status, merge_problems) = status::merge(gateway.status.as_ref(), &desired, plan, now);
    problems.extend(merge_problems);
    Evaluation {
        gateway: gateway.clone(),
        status,
        problems,
        plan: plan.clone(),
    }
}

/// The agent's conditions for `gateway`, before merging: `LoadBalancerReady`;
/// `DNSReady` for each listener that has a status entry and a spec hostname.
/// The Gateway-level `DNSReady` is left to [`status::merge`], which sums up
/// the listener `DNSReady`s that were actually written.
pub fn desired_for(
    gateway: &Gateway,
    snapshot: &Snapshot,
    dns_config: &DNS,
) -> (Desired, Vec<Problem>) {
    let mut problems = Vec::new();
    let service = scope::service_for(gateway, &snapshot.services);
    let lb = load_balancer::load_balancer_ready(service, &snapshot.events);
    let records = scope::dns_records_for(gateway, &snapshot.dns_records);
    let mut reported = Vec::new();
    let entries = gateway
        .status
        .as_ref()
        .and_then(|s| s.listeners.as_deref())
        .unwrap_or_default();
    let listeners: Vec<(String, Vec<Verdict>)> = entries
        .iter()
        .map(|entry| {
            let hostname = gateway
                .spec
                .listeners
                .iter()
                .find(|l| l.name == entry.name)
                .and_then(|l| l.hostname.as_deref())
                .filter(|h| !h.is_empty());
            let verdicts = match hostname {
                None => Vec::new(),
                Some(h) => {
                    let matching = scope::records_for_hostname(h, &records);
                    let key = dns::normalize_hostname(h).to_owned();
                    if let Some((used, ignored)) = matching.split_last()
                        && !ignored.is_empty()
                        && !reported.contains(&key)
                    {
                        problems.push(Problem::DuplicateDNSRecords {
                            hostname: key.clone(),
                            used: name_of(used),
                            ignored: ignored.iter().map(|r| name_of(r)).collect(),
                        });
                        reported.push(key);
                    }
                    vec![dns::dns_ready(dns_config, matching.last().copied())]
                }
            };
            (entry.name.clone(), verdicts)
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
