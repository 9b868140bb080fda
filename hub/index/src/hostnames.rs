//! The listener hostnames each cluster reports per Gateway (the report's
//! optional field, spec section 8): kept beside the fleet of reports, for
//! fleet DNS's eligibility rule 3 ("where C reports L's hostname, it
//! equals H"). Older agents send none; a Gateway without an entry reports
//! none. Not persisted: an agent resends them with its next snapshot, and
//! a hostname not reported passes the rule.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::Index;
use gwhub_hub_rules::aggregate::GatewayKey;

/// `(listener, hostname)` pairs of one cluster's Gateway, in report order.
pub type ListenerHostnames = Arc<[(String, String)]>;

/// Per cluster, per Gateway, its listener hostnames (taken alone).
#[derive(Default)]
pub(super) struct Hostnames(Mutex<BTreeMap<String, BTreeMap<GatewayKey, ListenerHostnames>>>);

impl Index {
    /// Replaces everything `cluster` reports of hostnames (a snapshot):
    /// Gateways left out of `all`, or with no hostname, have none.
    pub fn replace_listener_hostnames(
        &self,
        cluster: &str,
        all: BTreeMap<GatewayKey, Vec<(String, String)>>,
    ) {
        let all: BTreeMap<GatewayKey, ListenerHostnames> = all
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k, v.into()))
            .collect();
        let mut map = self.inner.hostnames.0.lock();
        if all.is_empty() {
            map.remove(cluster);
        } else {
            map.insert(cluster.to_owned(), all);
        }
    }

    /// Sets (a delta's upsert) or forgets (`None`: its delete) the
    /// hostnames `cluster` reports for `key`.
    pub fn set_listener_hostnames(
        &self,
        cluster: &str,
        key: &GatewayKey,
        hostnames: Option<Vec<(String, String)>>,
    ) {
        let mut map = self.inner.hostnames.0.lock();
        match hostnames.filter(|h| !h.is_empty()) {
            Some(h) => {
                map.entry(cluster.to_owned())
                    .or_default()
                    .insert(key.clone(), h.into());
            }
            None => {
                if let Some(c) = map.get_mut(cluster) {
                    c.remove(key);
                    if c.is_empty() {
                        map.remove(cluster);
                    }
                }
            }
        }
    }

    /// The hostnames `cluster` reports for `key`'s listeners (empty: none).
    pub fn listener_hostnames(&self, cluster: &str, key: &GatewayKey) -> ListenerHostnames {
        self.inner
            .hostnames
            .0
            .lock()
            .get(cluster)
            .and_then(|c| c.get(key))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::IndexConfig;
    use gwhub_hub_rules::aggregate::Options;

    #[test]
    fn snapshots_replace_and_deltas_patch() {
        let index = Index::new(IndexConfig::new(
            Options::default(),
            Duration::from_secs(60),
        ));
        let k = |n: &str| GatewayKey::new("ns", n);
        let h = |l: &str, h: &str| vec![(l.to_owned(), h.to_owned())];
        index.replace_listener_hostnames(
            "east",
            BTreeMap::from([
                (k("a"), h("http", "a.example")),
                (k("b"), h("http", "b.example")),
            ]),
        );
        assert_eq!(
            &*index.listener_hostnames("east", &k("a")),
            &h("http", "a.example")[..]
        );
        index.set_listener_hostnames("east", &k("a"), None);
        assert!(index.listener_hostnames("east", &k("a")).is_empty());
        index.set_listener_hostnames("east", &k("c"), Some(h("web", "c.example")));
        index.replace_listener_hostnames("east", BTreeMap::from([(k("b"), Vec::new())]));
        assert!(index.listener_hostnames("east", &k("b")).is_empty());
        assert!(index.listener_hostnames("east", &k("c")).is_empty());
        assert!(index.listener_hostnames("west", &k("b")).is_empty());
    }
}
