//! The read side shared by the gRPC Dashboard ([`crate::grpc::dashboard`])
//! and the web page ([`crate::web`]): what a reader's connection may hold,
//! which namespaces a read must decide first, the diff a watcher or an event
//! stream is sent, and the DNS and history answers in the wire's types.
//!
//! It lives apart from both because both serve the same reads under the same
//! rules: the page filters, pages and authorizes exactly as `WatchGateways`
//! does, and neither front end names the other.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use gwhub_proto::v1;

use crate::authz::Reader;
use crate::index::{DnsView, GatewayView, ReadPort, Views};
use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_hub_rules::history;
use gwhub_hub_rules::listing::Filter;
use gwhub_hub_rules::read_access::Visibility;

/// Default of `--max-dashboard-calls-per-connection`.
pub const DEFAULT_MAX_CALLS_PER_CONNECTION: usize = 16;
/// Default of `--watch-send-timeout`.
pub const DEFAULT_WATCH_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// What one reader's connection may hold, for the Dashboard and the web
/// page alike: its calls at once and how long a message may wait to be
/// taken.
#[derive(Clone, Copy, Debug)]
pub struct ReaderLimits {
    /// Calls (or event streams) open at once on one connection
    /// (`--max-dashboard-calls-per-connection`).
    pub max_calls_per_connection: usize,
    /// A watcher or answer not taken within this is dropped with its
    /// connection (`--watch-send-timeout`).
    pub watch_send_timeout: Duration,
}

impl Default for ReaderLimits {
    fn default() -> Self {
        ReaderLimits {
            max_calls_per_connection: DEFAULT_MAX_CALLS_PER_CONNECTION,
            watch_send_timeout: DEFAULT_WATCH_SEND_TIMEOUT,
        }
    }
}

/// The namespaces of `views` matching `filter` that `visibility` has not
/// decided yet (none for a reader who sees everything).
pub(crate) fn undecided(views: &Views, filter: &Filter, visibility: &Visibility) -> Vec<String> {
    if visibility.is_cluster_wide() {
        return Vec::new();
    }
    match &filter.namespace {
        Some(ns) => visibility.undecided([ns.as_str()]),
        None => visibility.undecided(views.gateways.keys().map(|k| k.namespace.as_str())),
    }
}

/// Decides the namespaces a read of `filter` needs, then: a filter
/// naming a namespace the reader may not read is `PERMISSION_DENIED`.
pub(crate) async fn authorize_listing(
    reader: &mut Reader,
    index: &ReadPort,
    filter: &Filter,
) -> Result<(), crate::authz::ReadError> {
    if let Some(ns) = &filter.namespace {
        return reader.check(ns).await;
    }
    let missing = undecided(&index.subscribe().borrow(), filter, reader.visibility());
    reader.decide(missing.iter().map(String::as_str)).await
}

/// What a watcher was last sent of one Gateway: its revision and its
/// omissions' revision.
pub(crate) type Sent = HashMap<GatewayKey, (u64, u64)>;

/// The next watch message: everything whose revision differs from what the
/// client last got, and what disappeared (or is no longer visible to the
/// reader). With `lean`, a Gateway whose omissions the client already has
/// goes without them (`omissions_unchanged`). `sent` is updated for the
/// deletions; the upserts are recorded as they are sent
/// ([`Diff::take_page`]).
///
/// Only `Arc`s are taken while `views` is borrowed (the watch channel's
/// lock); the messages are cloned by [`Diff::into_response`] after it.
pub(crate) fn diff(
    views: &Views,
    sent: &mut Sent,
    lean: bool,
    filter: &Filter,
    visibility: &Visibility,
) -> Diff {
    let mut upserted = Vec::new();
    let matching = |v: &GatewayView| filter.matches(v.facts()) && visibility.sees(&v.key.namespace);
    for (key, view) in &views.gateways {
        if !matching(view) {
            continue;
        }
        let last = sent.get(key).copied();
        if last.map(|(r, _)| r) == Some(view.revision()) {
            continue;
        }
        let unchanged = matches!(last, Some((_, o)) if lean && o == view.omissions_revision);
        upserted.push((view.clone(), unchanged));
    }
    let mut deleted = Vec::new();
    if sent.len() > views.gateways.len() || !filter.is_empty() || !visibility.is_cluster_wide() {
        sent.retain(|key, _| {
            let keep = views.gateways.get(key).is_some_and(|v| matching(v));
            if !keep {
                deleted.push(v1::GatewayRef {
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                });
            }
            keep
        });
        deleted.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    }
    Diff { upserted, deleted }
}

/// A watch message before it is paged ([`Diff::take_page`]).
pub(crate) struct Diff {
    /// Each view, and whether to send it without its omissions.
    pub(crate) upserted: Vec<(Arc<GatewayView>, bool)>,
    pub(crate) deleted: Vec<v1::GatewayRef>,
}

impl Diff {
    pub(crate) fn is_empty(&self) -> bool {
        self.upserted.is_empty() && self.deleted.is_empty()
    }

    /// Takes the upserts of one message of at most `limit` bytes as
    /// `weight` counts them (at least one, however large), recording them
    /// in `sent`; the rest stay in `self.upserted`.
    pub(crate) fn take_page(
        &mut self,
        sent: &mut Sent,
        limit: usize,
        weight: impl Fn(&GatewayView, bool) -> usize,
    ) -> Vec<(Arc<GatewayView>, bool)> {
        let mut bytes = 0usize;
        let mut n = 0;
        for (view, lean) in &self.upserted {
            let w = weight(view, *lean);
            if n > 0 && bytes.saturating_add(w) > limit {
                break;
            }
            bytes = bytes.saturating_add(w);
            n += 1;
        }
        let rest = self.upserted.split_off(n);
        let page = std::mem::replace(&mut self.upserted, rest);
        for (view, _) in &page {
            sent.insert(view.key.clone(), (view.revision(), view.omissions_revision));
        }
        page
    }
}

/// `ListDnsNames`' answer (and the web page's `/api/dns`) for `reader`:
/// the owners' namespaces decided as a listing's are, a `namespace` the
/// reader may not read refused.
pub(crate) async fn authorized_dns_names(
    reader: &mut Reader,
    view: &DnsView,
    namespace: &str,
) -> Result<v1::ListDnsNamesResponse, crate::authz::ReadError> {
    if namespace.is_empty() {
        let missing = reader.visibility().undecided(
            view.names
                .values()
                .filter_map(|n| n.owner.as_ref().map(|o| o.namespace.as_str())),
        );
        reader.decide(missing.iter().map(String::as_str)).await?;
    } else {
        reader.check(namespace).await?;
    }
    Ok(dns_names(view, namespace, reader.visibility()))
}

/// `ListDnsNames`' answer from `view`: the names whose owner is in
/// `namespace` (any, if empty) and visible to the reader; none, with a
/// message, when fleet DNS is off or this replica does not lead.
pub fn dns_names(
    view: &DnsView,
    namespace: &str,
    visibility: &Visibility,
) -> v1::ListDnsNamesResponse {
    let mut out = v1::ListDnsNamesResponse {
        enabled: view.enabled,
        leading: view.writing,
        dry_run: view.dry_run,
        outputs: view.outputs.clone(),
        ..Default::default()
    };
    if !view.enabled {
        out.message = "fleet DNS is off on this hub (no --dns-zone)".to_owned();
        return out;
    }
    if !view.writing {
        out.message = "this hub replica does not lead (or, just elected, still waits for the clusters it took over to report), so it decides no fleet DNS now: ask the leader (the holder of the hub's Lease)".to_owned();
        return out;
    }
    let sets = |m: &std::collections::BTreeMap<String, Vec<String>>| {
        m.iter()
            .map(|(t, targets)| v1::DnsRecordSet {
                r#type: t.clone(),
                targets: targets.clone(),
            })
            .collect()
    };
    out.names = view
        .names
        .iter()
        .filter(|(_, n)| {
            n.owner.as_ref().is_some_and(|o| {
                (namespace.is_empty() || o.namespace == namespace) && visibility.sees(&o.namespace)
            })
        })
        .map(|(host, n)| v1::DnsName {
            hostname: host.clone(),
            zone: n.zone.clone(),
            owner: n.owner.as_ref().map(|o| v1::GatewayRef {
                namespace: o.namespace.clone(),
                name: o.name.clone(),
            }),
            published: sets(&n.published),
            desired: sets(&n.desired),
            clusters: n
                .clusters
                .iter()
                .map(|c| match &c.ineligible {
                    None => v1::DnsClusterEligibility {
                        cluster: c.cluster.clone(),
                        eligible: true,
                        ..Default::default()
                    },
                    Some(v) => v1::DnsClusterEligibility {
                        cluster: c.cluster.clone(),
                        eligible: false,
                        rule: u32::from(v.rule),
                        reason: v.code.clone(),
                        message: v.message.clone(),
                    },
                })
                .collect(),
            reasons: n.reasons.clone(),
            state: n.state.clone(),
            state_message: n.state_message.clone(),
            last_write: n.last_write.as_ref().map(|w| v1::DnsWrite {
                time_millis: w.at_millis,
                result: w.result.clone(),
                message: w.message.clone(),
            }),
        })
        .collect();
    out
}

/// `True`/`False`/`Unknown` as the wire's enum.
fn status_to_proto(s: &str) -> i32 {
    match s {
        "True" => v1::ConditionStatus::True as i32,
        "False" => v1::ConditionStatus::False as i32,
        "Unknown" => v1::ConditionStatus::Unknown as i32,
        _ => v1::ConditionStatus::Unspecified as i32,
    }
}

/// A history entry as `GetGatewayHistory` sends it.
pub fn transition_to_proto(t: history::Transition) -> v1::GatewayTransition {
    let (status, reason, message) = match t.now {
        Some(s) => (status_to_proto(&s.status), s.reason, s.message),
        None => (
            v1::ConditionStatus::Unspecified as i32,
            String::new(),
            String::new(),
        ),
    };
    let (previous_status, previous_reason) = match t.before {
        Some((s, r)) => (status_to_proto(&s), r),
        None => (v1::ConditionStatus::Unspecified as i32, String::new()),
    };
    v1::GatewayTransition {
        time_millis: t.time_millis,
        cluster: t.cluster,
        condition_type: t.condition_type,
        status,
        reason,
        message,
        previous_status,
        previous_reason,
    }
}

#[cfg(test)]
mod tests;
