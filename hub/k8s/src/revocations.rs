//! Removed clusters (spec section 7, leave): `gwhubctl cluster remove
//! CLUSTER` records the cluster in ConfigMap `gwhub-revoked` in the hub's
//! namespace (cluster -> RFC 3339 time); so does the leader when a
//! cluster's ClusterProfile is deleted ([`record`], the one writer of
//! both). Every replica follows it, so a
//! removed cluster's certificates issued until then are refused and its
//! streams end on every replica and after a restart; a certificate from a
//! later join (a new token) is not covered. Once every certificate a
//! removal covers has expired (`--agent-cert-lifetime` after it, see
//! [`expired`]), the leader drops the entry, so the ConfigMap does not
//! grow with every cluster that ever left.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The ConfigMap of removed clusters.
pub const REVOKED_CONFIGMAP: &str = "gwhub-revoked";

/// What goes wrong reading or writing ConfigMap `gwhub-revoked`.
#[derive(Debug, thiserror::Error)]
pub enum RevocationsError {
    #[error("cannot read ConfigMap {REVOKED_CONFIGMAP}: {0}")]
    Read(kube::Error),
    #[error("cannot record the removal in ConfigMap {REVOKED_CONFIGMAP}: {0}")]
    Record(EditError),
}

/// A read-modify-write of the ConfigMap that failed.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("cannot read it: {0}")]
    Read(kube::Error),
    #[error("{0}")]
    Write(kube::Error),
}

/// Cluster -> removal time (Unix seconds); unreadable entries are skipped
/// (and logged).
pub fn parse(cm: &ConfigMap) -> BTreeMap<String, i64> {
    cm.data
        .iter()
        .flatten()
        .filter_map(|(cluster, at)| match entry_time(at) {
            Ok(t) => Some((cluster.clone(), t)),
            Err(e) => {
                tracing::warn!(cluster, value = at, error = %e, "ConfigMap {REVOKED_CONFIGMAP}: not an RFC 3339 time; entry ignored");
                None
            }
        })
        .collect()
}

/// An entry's removal time (Unix seconds): the value is RFC 3339, written
/// by [`record`] (the hub and gwhubctl) or by hand.
fn entry_time(value: &str) -> Result<i64, jiff::Error> {
    Ok(value.trim().parse::<jiff::Timestamp>()?.as_second())
}

/// Whether a removal made at `at` (Unix seconds) is covered by the entry
/// `recorded`: recorded at the same second or later (the ConfigMap's
/// resolution). A later entry revokes everything an earlier one does.
pub(crate) fn covered(at: i64, recorded: Option<i64>) -> bool {
    recorded.is_some_and(|r| r >= at)
}

/// The removed clusters now.
pub async fn read(api: &Api<ConfigMap>) -> Result<BTreeMap<String, i64>, RevocationsError> {
    api.get_opt(REVOKED_CONFIGMAP)
        .await
        .map(|cm| cm.as_ref().map(parse).unwrap_or_default())
        .map_err(RevocationsError::Read)
}

/// A removal's time: now, in whole seconds (the ConfigMap's resolution; a
/// certificate issued in the same second is covered).
pub fn now() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// How often [`record`] retries a write that lost to another writer.
const RECORD_ATTEMPTS: u32 = 5;

/// Records `cluster` as removed at `at` in the ConfigMap (made when
/// absent); a write that conflicts with another (gwhubctl and the hub, two
/// removals at once) is read again and retried, so every removal lands.
/// An entry already as late as `at` stays as it is: a removal recorded
/// late (retried, or by a replica that just took the lead) never moves a
/// newer one back, which would un-revoke the certificates between them.
pub async fn record(
    api: &Api<ConfigMap>,
    cluster: &str,
    at: jiff::Timestamp,
) -> Result<(), RevocationsError> {
    edit(api, REVOKED_CONFIGMAP, true, |data| {
        let recorded = data.get(cluster).and_then(|t| entry_time(t).ok());
        let later = covered(at.as_second(), recorded);
        if !later {
            data.insert(cluster.to_owned(), at.to_string());
        }
        !later
    })
    .await
    .map_err(RevocationsError::Record)
}

/// How long past the certificate lifetime an entry is kept (clocks differ).
const FORGET_MARGIN_SECONDS: i64 = 60;

/// The removals (cluster, time) whose certificates have all expired: made
/// more than `lifetime` (the longest an agent certificate lives) and a
/// margin before `now` (Unix seconds).
pub fn expired(
    removed: &BTreeMap<String, i64>,
    now: i64,
    lifetime: std::time::Duration,
) -> Vec<(String, i64)> {
    let lifetime = i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX);
    removed
        .iter()
        .filter(|(_, at)| {
            at.saturating_add(lifetime)
                .saturating_add(FORGET_MARGIN_SECONDS)
                < now
        })
        .map(|(c, at)| (c.clone(), *at))
        .collect()
}

/// Drops the `expired` entries, each only if it still holds the same time
/// (a cluster removed again meanwhile keeps its newer entry).
async fn forget(api: &Api<ConfigMap>, expired: &[(String, i64)]) -> Result<(), EditError> {
    edit(api, REVOKED_CONFIGMAP, false, |data| {
        let before = data.len();
        data.retain(|cluster, at| {
            let at = entry_time(at).ok();
            !expired.iter().any(|(c, t)| c == cluster && at == Some(*t))
        });
        data.len() != before
    })
    .await
}

/// Applies `change` to the data of ConfigMap `name` and writes it when it
/// says it changed something (made when absent only if `create`), retrying
/// on conflict (also used for `gwhub-issued`, see [`super::issued`]).
pub(crate) async fn edit(
    api: &Api<ConfigMap>,
    name: &str,
    create: bool,
    change: impl Fn(&mut BTreeMap<String, String>) -> bool,
) -> Result<(), EditError> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let current = api.get_opt(name).await.map_err(EditError::Read)?;
        let result = match current {
            Some(mut cm) => {
                if !change(cm.data.get_or_insert_with(Default::default)) {
                    return Ok(());
                }
                api.replace(name, &PostParams::default(), &cm)
                    .await
                    .map(drop)
            }
            None if create => {
                let mut data = BTreeMap::new();
                if !change(&mut data) {
                    return Ok(());
                }
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        ..ObjectMeta::default()
                    },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                api.create(&PostParams::default(), &cm).await.map(drop)
            }
            None => return Ok(()),
        };
        match result {
            Ok(()) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempts < RECORD_ATTEMPTS => continue,
            Err(e) => return Err(EditError::Write(e)),
        }
    }
}

/// How long the leader waits after a removal before deleting the
/// cluster's reports: every replica has ended its stream by then, so the
/// deletion deregisters it instead of being written back.
const DELETE_AFTER: std::time::Duration = std::time::Duration::from_secs(2);
/// The longest wait before a failed deletion of a removed cluster's
/// reports is tried again.
const DELETE_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// Drops the entries of `removed` whose certificates (at most `lifetime`
/// long) have all expired (the leader's sweep).
async fn drop_expired(
    api: &Api<ConfigMap>,
    removed: &BTreeMap<String, i64>,
    lifetime: std::time::Duration,
) {
    let old = expired(removed, jiff::Timestamp::now().as_second(), lifetime);
    if old.is_empty() {
        return;
    }
    match forget(api, &old).await {
        Ok(()) => tracing::info!(
            clusters = ?old.iter().map(|(c, _)| c).collect::<Vec<_>>(),
            "dropped removals whose certificates have all expired"
        ),
        Err(e) => tracing::warn!(
            error = %e,
            "cannot drop expired removals from ConfigMap {REVOKED_CONFIGMAP}"
        ),
    }
}

/// Deletes the ClusterReport head of each removal in `pending`, noting in
/// `handled` the ones done (or already gone); whether all were.
async fn delete_reports(
    reports: &Api<gwhub_hub_rules::report::ClusterReport>,
    pending: Vec<(String, i64)>,
    handled: &mut BTreeMap<String, i64>,
) -> bool {
    let mut all = true;
    for (cluster, at) in pending {
        let name = gwhub_model::cluster::object_name(&cluster);
        match reports
            .delete(&name, &kube::api::DeleteParams::default())
            .await
        {
            Ok(_) => {
                tracing::info!(cluster, "deleted the removed cluster's reports");
                handled.insert(cluster, at);
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {
                handled.insert(cluster, at);
            }
            Err(e) => {
                all = false;
                tracing::warn!(cluster, error = %e, "cannot delete the removed cluster's reports; retrying")
            }
        }
    }
    all
}

/// Keeps `slot` equal to the ConfigMap's content until `shutdown`; the
/// leader deletes each removed cluster's ClusterReport head, the operator's
/// deregistration path (every replica forgets the cluster, its other parts
/// are deleted with it), and drops the entries whose certificates (at most
/// `lifetime` long) have all expired.
pub async fn follow(
    api: Api<ConfigMap>,
    slot: watch::Sender<Arc<BTreeMap<String, i64>>>,
    reports: Api<gwhub_hub_rules::report::ClusterReport>,
    mut leader: watch::Receiver<bool>,
    lifetime: std::time::Duration,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={REVOKED_CONFIGMAP}"));
    let mut events = std::pin::pin!(watcher::watcher(api.clone(), config).default_backoff());
    let mut sweep = tokio::time::interval((lifetime / 10).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(3600),
    ));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The removals whose reports this replica deleted while leading: each
    // once, so a cluster that joined again is not deleted at every later
    // removal of another cluster (a new leader deletes each once more).
    let mut handled: BTreeMap<String, i64> = BTreeMap::new();
    // A deletion that failed is tried again after this backoff; one due
    // while this replica did not lead is done when it leads (found under
    // load: a Lease renewal lost at the removal left the reports behind).
    let mut backoff = gwhub_common::backoff::Exponential::new(DELETE_AFTER, DELETE_RETRY_MAX);
    let mut retry: Option<std::time::Duration> = None;
    let mut election = true;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = sweep.tick() => {
                let removed = slot.borrow().clone();
                if *leader.borrow() {
                    drop_expired(&api, &removed, lifetime).await;
                }
                continue;
            }
            changed = leader.changed(), if election => {
                // Without an election (the sender gone) only events count.
                election = changed.is_ok();
            }
            _ = tokio::time::sleep(retry.unwrap_or_default()), if retry.is_some() => {}
            e = events.next() => {
                let now = match e {
                    None => return,
                    Some(Ok(Event::Apply(cm) | Event::InitApply(cm))) => parse(&cm),
                    Some(Ok(Event::Delete(_))) => BTreeMap::new(),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "watching ConfigMap {REVOKED_CONFIGMAP} failed; retrying");
                        continue;
                    }
                };
                slot.send_if_modified(|cur| {
                    let changed = **cur != now;
                    if changed {
                        tracing::info!(removed = ?now.keys().collect::<Vec<_>>(), "removed clusters changed");
                        *cur = Arc::new(now.clone());
                    }
                    changed
                });
            }
        }
        retry = None;
        if !*leader.borrow_and_update() {
            handled.clear();
            continue;
        }
        let now = slot.borrow().clone();
        let pending: Vec<(String, i64)> = now
            .iter()
            .filter(|(cluster, at)| handled.get(*cluster) != Some(*at))
            .map(|(cluster, at)| (cluster.clone(), *at))
            .collect();
        if pending.is_empty() {
            continue;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(DELETE_AFTER) => {}
        }
        if !delete_reports(&reports, pending, &mut handled).await {
            retry = Some(backoff.failed());
        } else {
            backoff.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_is_covered_by_an_entry_as_late_as_it() {
        let cases = [
            (100, None, false),
            (100, Some(99), false),
            (100, Some(100), true),
            (100, Some(101), true),
        ];
        for (at, recorded, want) in cases {
            assert_eq!(covered(at, recorded), want, "{at} {recorded:?}");
        }
    }

    #[test]
    fn an_entry_is_an_rfc3339_time_in_seconds() {
        assert_eq!(entry_time(" 1970-01-01T00:01:40Z\n").ok(), Some(100));
        assert_eq!(entry_time("1970-01-01T00:01:40.9Z").ok(), Some(100));
        assert!(entry_time("yesterday").is_err());
    }

    #[test]
    fn a_removal_expires_once_every_certificate_it_covers_has() {
        let day = std::time::Duration::from_secs(86_400);
        let removed: BTreeMap<String, i64> =
            [("old".to_owned(), 1_000), ("recent".to_owned(), 50_000)].into();
        // 1,000 + a day + the margin has passed; 50,000 + a day has not.
        let now = 1_000 + 86_400 + FORGET_MARGIN_SECONDS + 1;
        assert_eq!(expired(&removed, now, day), vec![("old".to_owned(), 1_000)]);
        assert!(expired(&removed, now - 2, day).is_empty());
        // A lifetime beyond what i64 holds never expires anything.
        assert!(expired(&removed, i64::MAX, std::time::Duration::MAX).is_empty());
    }
}
