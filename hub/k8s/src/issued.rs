//! Issued identities (spec section 7, "Hardening"): ConfigMap
//! `gwhub-issued` in the hub's namespace records, per cluster, the last
//! agent certificate the hub issued (join or renewal): when, until when,
//! and the fleet inventory namespace configured then. It is what lets the
//! hub refuse a tokenless request for a cluster that already holds a live
//! identity (without it, anyone could ask for `east`'s name and an operator
//! could approve it), and, with an inventory, revoke at start a cluster
//! whose ClusterProfile was deleted while no hub ran. The CSR objects
//! cannot serve: the hub deletes them once issued.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde::{Deserialize, Serialize};

use super::revocations::{EditError, edit};

/// The ConfigMap of issued identities.
pub const ISSUED_CONFIGMAP: &str = "gwhub-issued";

/// One cluster's last issued certificate (JSON in the ConfigMap's value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issued {
    /// Unix seconds: the certificate's notBefore.
    pub issued: i64,
    /// Unix seconds: its notAfter.
    pub not_after: i64,
    /// `--inventory-namespace` when it was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<String>,
}

impl Issued {
    /// Whether this identity is live at `now` (Unix seconds) given the
    /// cluster's removal time: unexpired and not covered by the removal (a
    /// removal at `t` covers certificates issued up to and including `t`,
    /// as [`gwhub_identity::reload::revoked_reason`] judges them).
    pub fn live(&self, now: i64, removed_at: Option<i64>) -> bool {
        self.not_after > now && removed_at.is_none_or(|r| r < self.issued)
    }
}

/// What goes wrong with ConfigMap `gwhub-issued`.
#[derive(Debug, thiserror::Error)]
pub enum IssuedError {
    #[error("cannot read ConfigMap {ISSUED_CONFIGMAP}: {0}")]
    Read(kube::Error),
    #[error("cannot record the issued certificate in ConfigMap {ISSUED_CONFIGMAP}: {0}")]
    Record(EditError),
    #[error("cannot encode the issued certificate: {0}")]
    Encode(serde_json::Error),
}

/// Cluster -> last issued identity; unreadable entries are skipped (and
/// logged: an unreadable entry must not block the hub).
pub fn parse(cm: &ConfigMap) -> BTreeMap<String, Issued> {
    cm.data
        .iter()
        .flatten()
        .filter_map(|(cluster, v)| match serde_json::from_str(v) {
            Ok(i) => Some((cluster.clone(), i)),
            Err(e) => {
                tracing::warn!(cluster, error = %e, "ConfigMap {ISSUED_CONFIGMAP}: unreadable entry ignored");
                None
            }
        })
        .collect()
}

/// Every recorded identity now.
pub async fn read(api: &Api<ConfigMap>) -> Result<BTreeMap<String, Issued>, IssuedError> {
    api.get_opt(ISSUED_CONFIGMAP)
        .await
        .map(|cm| cm.as_ref().map(parse).unwrap_or_default())
        .map_err(IssuedError::Read)
}

/// Records `issued` as `cluster`'s identity (the ConfigMap made when
/// absent, conflicts retried).
pub async fn record(
    api: &Api<ConfigMap>,
    cluster: &str,
    issued: &Issued,
) -> Result<(), IssuedError> {
    let value = serde_json::to_string(issued).map_err(IssuedError::Encode)?;
    edit(api, ISSUED_CONFIGMAP, true, |data| {
        data.insert(cluster.to_owned(), value.clone());
        true
    })
    .await
    .map_err(IssuedError::Record)
}

/// The clusters to revoke at start (spec: "a cluster with an identity
/// issued while the inventory was configured and no ClusterProfile at
/// start is revoked as if its ClusterProfile had been deleted"): a live
/// identity issued under `inventory` by the time of `started` (this hub's
/// start, Unix seconds), whose cluster is not in `profiles`.
///
/// Only identities from before the start (its second included: a hub
/// restarted within the second of a join must still catch a deletion):
/// the check is for deletions no watch saw. One issued later was issued
/// by a running hub, whose watch sees its ClusterProfile's deletion;
/// counting it would let a check that runs late (leadership won late, a
/// slow API server) revoke a cluster that just joined or renewed.
pub fn orphaned<'a>(
    issued: &'a BTreeMap<String, Issued>,
    removed: &BTreeMap<String, i64>,
    inventory: &str,
    profiles: &std::collections::BTreeSet<String>,
    started: i64,
    now: i64,
) -> Vec<&'a str> {
    issued
        .iter()
        .filter(|(cluster, i)| {
            i.inventory.as_deref() == Some(inventory)
                && i.issued <= started
                && !profiles.contains(*cluster)
                && i.live(now, removed.get(*cluster).copied())
        })
        .map(|(c, _)| c.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_live_until_it_expires_or_a_removal_covers_it() {
        let i = Issued {
            issued: 100,
            not_after: 200,
            inventory: None,
        };
        assert!(i.live(150, None));
        assert!(!i.live(200, None));
        // A removal in the same second covers it; an earlier one does not.
        assert!(!i.live(150, Some(100)));
        assert!(i.live(150, Some(99)));
    }

    #[test]
    fn only_live_identities_of_this_inventory_without_a_profile_are_orphaned() {
        let e = |inv: Option<&str>, not_after| Issued {
            issued: 100,
            not_after,
            inventory: inv.map(str::to_owned),
        };
        let issued: BTreeMap<String, Issued> = [
            ("gone".to_owned(), e(Some("fleet"), 500)),
            ("here".to_owned(), e(Some("fleet"), 500)),
            ("expired".to_owned(), e(Some("fleet"), 120)),
            ("other".to_owned(), e(Some("elsewhere"), 500)),
            ("none".to_owned(), e(None, 500)),
            ("removed".to_owned(), e(Some("fleet"), 500)),
        ]
        .into();
        let removed = [("removed".to_owned(), 110)].into();
        let profiles = ["here".to_owned()].into();
        assert_eq!(
            orphaned(&issued, &removed, "fleet", &profiles, 100, 150),
            vec!["gone"]
        );
        // Issued after this hub's start: its watch sees a deletion, so a
        // late check revokes nothing it issued.
        assert!(orphaned(&issued, &removed, "fleet", &profiles, 99, 150).is_empty());
    }
}
