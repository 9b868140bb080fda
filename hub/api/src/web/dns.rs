//! A fleet DNS name as JSON, one shape for the web page's DNS section and
//! `gwhubctl get dns` / `dns plan -o json|yaml`: the `ListDnsNames`
//! answer's fields, record sets keyed by type, and per type what a write
//! would change (`plan`: desired against published).

use std::collections::{BTreeMap, BTreeSet};

use gwhub_proto::v1;
use serde_json::{Value, json};

/// Per record type, the targets of `sets`.
fn by_type(sets: &[v1::DnsRecordSet]) -> BTreeMap<&str, &[String]> {
    sets.iter()
        .map(|s| (s.r#type.as_str(), s.targets.as_slice()))
        .collect()
}

/// What publishing the desired sets would change, per record type: the
/// targets added and removed (types with no change left out).
pub fn plan(n: &v1::DnsName) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let published = by_type(&n.published);
    let desired = by_type(&n.desired);
    let types: BTreeSet<&str> = published.keys().chain(desired.keys()).copied().collect();
    let mut out = BTreeMap::new();
    for t in types {
        let old: BTreeSet<&String> = published
            .get(t)
            .copied()
            .unwrap_or_default()
            .iter()
            .collect();
        let new: BTreeSet<&String> = desired.get(t).copied().unwrap_or_default().iter().collect();
        let add: Vec<String> = new.difference(&old).map(|s| (*s).clone()).collect();
        let remove: Vec<String> = old.difference(&new).map(|s| (*s).clone()).collect();
        if !add.is_empty() || !remove.is_empty() {
            out.insert(t.to_owned(), (add, remove));
        }
    }
    out
}

/// `ns/name` of the owning hub Gateway, `-` if none.
pub fn owner(n: &v1::DnsName) -> String {
    n.owner
        .as_ref()
        .map(|o| format!("{}/{}", o.namespace, o.name))
        .unwrap_or_else(|| "-".to_owned())
}

/// Unix milliseconds as RFC 3339.
pub fn millis_rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// A whole `ListDnsNames` answer, for the page.
pub fn answer_json(r: &v1::ListDnsNamesResponse) -> Value {
    json!({
        "enabled": r.enabled,
        "leading": r.leading,
        "dryRun": r.dry_run,
        "outputs": r.outputs,
        "message": r.message,
        "names": r.names.iter().map(dns_name_json).collect::<Vec<_>>(),
    })
}

/// One name (see the module docs).
pub fn dns_name_json(n: &v1::DnsName) -> Value {
    let sets = |s: &[v1::DnsRecordSet]| -> Value {
        by_type(s)
            .into_iter()
            .map(|(t, targets)| (t.to_owned(), json!(targets)))
            .collect::<serde_json::Map<String, Value>>()
            .into()
    };
    let clusters: Vec<Value> = n
        .clusters
        .iter()
        .map(|c| {
            if c.eligible {
                json!({"cluster": c.cluster, "eligible": true})
            } else {
                json!({"cluster": c.cluster, "eligible": false, "rule": c.rule,
                       "reason": c.reason, "message": c.message})
            }
        })
        .collect();
    let plan: serde_json::Map<String, Value> = plan(n)
        .into_iter()
        .map(|(t, (add, remove))| (t, json!({"add": add, "remove": remove})))
        .collect();
    let mut v = json!({
        "hostname": n.hostname,
        "zone": n.zone,
        "gateway": owner(n),
        "state": n.state,
        "published": sets(&n.published),
        "desired": sets(&n.desired),
        "plan": plan,
        "clusters": clusters,
        "reasons": n.reasons,
    });
    if !n.state_message.is_empty() {
        v["stateMessage"] = json!(n.state_message);
    }
    if let Some(w) = &n.last_write {
        let mut lw = json!({"time": millis_rfc3339(w.time_millis), "result": w.result});
        if !w.message.is_empty() {
            lw["message"] = json!(w.message);
        }
        v["lastWrite"] = lw;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(t: &str, targets: &[&str]) -> v1::DnsRecordSet {
        v1::DnsRecordSet {
            r#type: t.into(),
            targets: targets.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// The plan is desired against published per type; the JSON carries
    /// the sets by type, each cluster's verdict and the last write.
    #[test]
    fn a_name_with_its_plan() {
        let n = v1::DnsName {
            hostname: "app.fleet.test".into(),
            zone: "fleet.test".into(),
            owner: Some(v1::GatewayRef {
                namespace: "default".into(),
                name: "web".into(),
            }),
            published: vec![
                set("A", &["192.0.2.1", "192.0.2.2"]),
                set("AAAA", &["2001:db8::1"]),
            ],
            desired: vec![
                set("A", &["192.0.2.1", "192.0.2.3"]),
                set("AAAA", &["2001:db8::1"]),
            ],
            clusters: vec![
                v1::DnsClusterEligibility {
                    cluster: "c1".into(),
                    eligible: true,
                    ..Default::default()
                },
                v1::DnsClusterEligibility {
                    cluster: "c2".into(),
                    eligible: false,
                    rule: 2,
                    reason: "LoadBalancerNotReady".into(),
                    message: "LoadBalancerReady is False".into(),
                },
            ],
            state: "Published".into(),
            last_write: Some(v1::DnsWrite {
                time_millis: 0,
                result: "ok".into(),
                message: String::new(),
            }),
            ..Default::default()
        };
        let p = plan(&n);
        assert_eq!(
            p,
            BTreeMap::from([(
                "A".to_owned(),
                (vec!["192.0.2.3".to_owned()], vec!["192.0.2.2".to_owned()])
            )])
        );
        let v = dns_name_json(&n);
        assert_eq!(v["gateway"], "default/web");
        assert_eq!(v["published"]["A"], json!(["192.0.2.1", "192.0.2.2"]));
        assert_eq!(
            v["plan"]["A"],
            json!({"add": ["192.0.2.3"], "remove": ["192.0.2.2"]})
        );
        assert!(v["plan"].get("AAAA").is_none());
        assert_eq!(v["clusters"][0], json!({"cluster": "c1", "eligible": true}));
        assert_eq!(v["clusters"][1]["rule"], 2);
        assert_eq!(
            v["lastWrite"],
            json!({"time": "1970-01-01T00:00:00Z", "result": "ok"})
        );
        assert!(v.get("stateMessage").is_none());
    }
}
