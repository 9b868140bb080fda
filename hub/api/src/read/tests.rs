//! Unit tests of `read`, in their own file so the module itself reads in
//! one sitting.

use super::*;

fn views(keys: &[(&str, &str)], revision: u64) -> Views {
    let mut v = Views::default();
    for (ns, name) in keys {
        let key = GatewayKey::new(*ns, *name);
        let mut view = crate::index::testing::keyed(key.clone(), Vec::new());
        crate::index::testing::set_revision(&mut view, revision);
        v.gateways.insert(key, Arc::new(view));
    }
    v.revision = revision;
    v
}

/// The diff, every upsert taken (as one page).
fn taken(v: &Views, sent: &mut Sent, f: &Filter, seen: &Visibility) -> Diff {
    let mut d = diff(v, sent, false, f, seen);
    d.upserted = d.take_page(sent, usize::MAX, |_, _| 0);
    d
}

fn names(d: &Diff) -> Vec<String> {
    d.upserted.iter().map(|(v, _)| v.key.to_string()).collect()
}

/// ListDnsNames keeps the names of the namespaces the reader sees
/// (and the one asked for), and says why it has none when fleet DNS
/// is off or this replica does not lead.
#[test]
fn dns_names_follow_what_the_reader_sees() {
    use crate::index::{ClusterVerdict, NameView, Verdict};
    let name = |ns: &str| NameView {
        zone: "fleet.test".into(),
        owner: Some(GatewayKey::new(ns, "web")),
        clusters: vec![
            ClusterVerdict {
                cluster: "c1".into(),
                ineligible: None,
            },
            ClusterVerdict {
                cluster: "c2".into(),
                ineligible: Some(Verdict {
                    rule: 2,
                    code: "LoadBalancerNotReady".into(),
                    message: "LoadBalancerReady is False".into(),
                }),
            },
        ],
        state: "Published".into(),
        ..Default::default()
    };
    let mut view = DnsView {
        names: [("a.fleet.test", "a"), ("b.fleet.test", "b")]
            .into_iter()
            .map(|(h, ns)| (h.to_owned(), name(ns)))
            .collect(),
        enabled: true,
        outputs: vec!["dnsendpoint".into()],
        writing: true,
        dry_run: false,
    };
    let hosts = |r: &v1::ListDnsNamesResponse| {
        r.names
            .iter()
            .map(|n| n.hostname.clone())
            .collect::<Vec<_>>()
    };
    let all = Visibility::everything();
    let r = dns_names(&view, "", &all);
    assert_eq!(hosts(&r), ["a.fleet.test", "b.fleet.test"]);
    assert!(r.leading && r.message.is_empty());
    let c2 = &r.names[0].clusters[1];
    assert_eq!(
        (c2.eligible, c2.rule, c2.reason.as_str()),
        (false, 2, "LoadBalancerNotReady")
    );
    assert!(r.names[0].clusters[0].eligible);
    assert_eq!(hosts(&dns_names(&view, "b", &all)), ["b.fleet.test"]);
    let mut seen = Visibility::namespaced();
    seen.decide("a", true);
    seen.decide("b", false);
    assert_eq!(hosts(&dns_names(&view, "", &seen)), ["a.fleet.test"]);
    view.writing = false;
    let r = dns_names(&view, "", &all);
    assert!(r.names.is_empty() && !r.leading && r.message.contains("does not lead"));
    let r = dns_names(&DnsView::default(), "", &all);
    assert!(!r.enabled && r.message.contains("off"));
}

/// A watcher is sent only the namespaces its reader sees, is told
/// Gateways of a namespace it stops seeing are gone, and gets those
/// of one it starts seeing; an undecided namespace is held back.
#[test]
fn a_watch_follows_what_its_reader_sees() {
    let v = views(&[("a", "x"), ("b", "y"), ("c", "z")], 1);
    let filter = Filter::default();
    let mut seen = Visibility::namespaced();
    assert_eq!(undecided(&v, &filter, &seen), ["a", "b", "c"]);
    seen.decide("a", true);
    seen.decide("b", false);
    let mut sent = Sent::new();
    let d = taken(&v, &mut sent, &filter, &seen);
    assert_eq!(names(&d), ["a/x"], "c is not decided yet");
    assert_eq!(undecided(&v, &filter, &seen), ["c"]);
    // Access changes: a revoked, b granted.
    let mut seen = Visibility::namespaced();
    seen.decide("a", false);
    seen.decide("b", true);
    seen.decide("c", false);
    let d = taken(&v, &mut sent, &filter, &seen);
    assert_eq!(names(&d), ["b/y"]);
    let gone: Vec<_> = d
        .deleted
        .iter()
        .map(|r| (r.namespace.as_str(), r.name.as_str()))
        .collect();
    assert_eq!(gone, [("a", "x")]);
    // Cluster-wide: everything, nothing left to decide.
    let all = Visibility::everything();
    assert!(undecided(&v, &filter, &all).is_empty());
    let d = taken(&v, &mut sent, &filter, &all);
    assert_eq!(names(&d), ["a/x", "c/z"]);
    // A filter naming a namespace decides only that one.
    let only_b = Filter::new("b", "", false);
    assert_eq!(undecided(&v, &only_b, &Visibility::namespaced()), ["b"]);
}
