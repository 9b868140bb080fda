//! Dashboard listing rules: which hub Gateways a filter keeps, how a list
//! is cut into pages with opaque tokens, and the one-word health of one
//! cluster's report (the web page's cell colour). Pure: no I/O, no clock,
//! so `ListGateways`, `WatchGateways` and the web page agree by
//! construction.

use std::fmt::Write as _;

use crate::aggregate::GatewayKey;

/// Most Gateways one `ListGateways` page carries; a larger `page_size` is
/// lowered to it. At about 47 KB per Gateway of a 1,000-cluster fleet a
/// page stays under 50 MB.
pub const MAX_PAGE_SIZE: usize = 1000;

/// Which hub Gateways a list or watch returns: every set part must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only Gateways this cluster reports.
    pub cluster: Option<String>,
    /// Only Gateways with an aggregated condition that is not True.
    pub not_ready: bool,
}

/// What a filter looks at of one hub Gateway.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub namespace: &'a str,
    /// The clusters that report it.
    pub clusters: &'a [String],
    /// The expected clusters that do not (`gwhub.io/expected-clusters`,
    /// `gwhub.io/placement`): a cluster filter finds them too.
    pub missing: &'a [String],
    /// Some aggregated condition is not True (see [`not_ready`]).
    pub not_ready: bool,
}

impl Filter {
    /// From the wire's fields, where empty means "any".
    pub fn new(namespace: &str, cluster: &str, not_ready: bool) -> Self {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Filter {
            namespace: some(namespace),
            cluster: some(cluster),
            not_ready,
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    pub fn matches(&self, g: Facts<'_>) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == g.namespace)
            && self
                .cluster
                .as_deref()
                .is_none_or(|c| g.clusters.iter().chain(g.missing).any(|x| x == c))
            && (!self.not_ready || g.not_ready)
    }
}

/// Whether a Gateway with conditions of these statuses is "not ready":
/// some condition is not `True` (False, Unknown, or anything else).
pub fn not_ready<'a>(statuses: impl IntoIterator<Item = &'a str>) -> bool {
    statuses.into_iter().any(|s| s != "True")
}

/// One cluster's report of a Gateway in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Health {
    /// Every Gateway condition True.
    Ready,
    /// Some condition False.
    NotReady,
    /// Some condition Unknown (none False), or no condition at all.
    Unknown,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Ready => "ready",
            Health::NotReady => "not-ready",
            Health::Unknown => "unknown",
        }
    }
}

/// The health of a report whose Gateway conditions have these statuses.
pub fn health<'a>(statuses: impl IntoIterator<Item = &'a str>) -> Health {
    let mut any = false;
    let mut unknown = false;
    for s in statuses {
        any = true;
        match s {
            "False" => return Health::NotReady,
            "True" => {}
            _ => unknown = true,
        }
    }
    match (any, unknown) {
        (true, false) => Health::Ready,
        _ => Health::Unknown,
    }
}

/// How many Gateways a page holds: `None` for all (a `page_size` of 0,
/// what clients that predate paging send), else at most [`MAX_PAGE_SIZE`].
pub fn page_size(requested: u32) -> Option<usize> {
    match requested {
        0 => None,
        n => Some(
            usize::try_from(n)
                .unwrap_or(MAX_PAGE_SIZE)
                .min(MAX_PAGE_SIZE),
        ),
    }
}

const TOKEN_PREFIX: &str = "gw1.";

/// The token of the page after `last` (the last Gateway of a page): the key
/// in hex behind a version prefix. Opaque to clients; the next page starts
/// after this key, so adds and removes between calls shift nothing.
pub fn encode_token(last: &GatewayKey) -> String {
    let mut out = String::from(TOKEN_PREFIX);
    for (i, part) in [&last.namespace, &last.name].into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        for b in part.bytes() {
            let _ = write!(out, "{b:02x}");
        }
    }
    out
}

/// A `page_token` this hub did not make.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid page_token {token}: {why}; pass the next_page_token of the previous answer, or none for the first page"
)]
pub struct BadToken {
    /// The token as given, quoted as an error echoes client input
    /// ([`gwhub_model::text::quote_client_input`]).
    pub token: String,
    pub why: &'static str,
}

/// The key a token from [`encode_token`] names.
pub fn decode_token(token: &str) -> Result<GatewayKey, BadToken> {
    let bad = |why| BadToken {
        token: gwhub_model::text::quote_client_input(token),
        why,
    };
    let body = token
        .strip_prefix(TOKEN_PREFIX)
        .ok_or_else(|| bad("not a token of this API version"))?;
    let (ns, name) = body
        .split_once('.')
        .ok_or_else(|| bad("not a namespace/name pair"))?;
    let hex = |s: &str| -> Result<String, BadToken> {
        if s.is_empty() || !s.len().is_multiple_of(2) || s.len() > 2 * 253 {
            return Err(bad("a part has the wrong length"));
        }
        if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("not hexadecimal"));
        }
        let bytes = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(s.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| bad("not hexadecimal"))?;
        String::from_utf8(bytes).map_err(|_| bad("not UTF-8"))
    };
    Ok(GatewayKey::new(hex(ns)?, hex(name)?))
}

/// One page of a list.
#[derive(Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The token of the next page; `None` on the last page.
    pub next: Option<String>,
    /// How many items matched in all pages.
    pub total: usize,
}

/// The page of `items` (in key order, already filtered) that starts after
/// `after` and holds at most `size` (all with `None`).
pub fn page<'k, T>(
    items: impl IntoIterator<Item = (&'k GatewayKey, T)>,
    after: Option<&GatewayKey>,
    size: Option<usize>,
) -> Page<T> {
    let mut out = Vec::new();
    let mut total = 0;
    let mut last: Option<&GatewayKey> = None;
    let mut more = false;
    for (key, item) in items {
        total += 1;
        if after.is_some_and(|a| key <= a) {
            continue;
        }
        if size.is_some_and(|s| out.len() >= s) {
            more = true;
            continue;
        }
        last = Some(key);
        out.push(item);
    }
    Page {
        items: out,
        next: more.then(|| last.map(encode_token)).flatten(),
        total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(ns: &str, n: &str) -> GatewayKey {
        GatewayKey::new(ns, n)
    }

    #[test]
    fn filters() {
        let east_west = ["east".to_owned(), "west".to_owned()];
        let west = ["west".to_owned()];
        let g = |namespace, clusters: &'static [String], not_ready| Facts {
            namespace,
            clusters,
            missing: &[],
            not_ready,
        };
        let east_west: &'static [String] = Box::leak(Box::new(east_west));
        let west: &'static [String] = Box::leak(Box::new(west));
        let cases: &[(Filter, Facts<'static>, bool)] = &[
            (Filter::default(), g("a", west, false), true),
            (Filter::new("", "", false), g("a", west, true), true),
            (Filter::new("a", "", false), g("a", west, false), true),
            (Filter::new("a", "", false), g("b", west, false), false),
            (
                Filter::new("", "east", false),
                g("a", east_west, false),
                true,
            ),
            (Filter::new("", "east", false), g("a", west, false), false),
            (Filter::new("", "", true), g("a", west, false), false),
            (Filter::new("", "", true), g("a", west, true), true),
            (
                Filter::new("a", "west", true),
                g("a", east_west, true),
                true,
            ),
            (
                Filter::new("a", "west", true),
                g("a", east_west, false),
                false,
            ),
            (
                Filter::new("a", "west", true),
                g("b", east_west, true),
                false,
            ),
            // Exact matches only: no prefixes, no case folding.
            (
                Filter::new("", "eas", false),
                g("a", east_west, false),
                false,
            ),
            (Filter::new("A", "", false), g("a", west, false), false),
        ];
        for (i, (f, facts, want)) in cases.iter().enumerate() {
            assert_eq!(f.matches(*facts), *want, "case {i}: {f:?} {facts:?}");
        }
        assert!(Filter::new("", "", false).is_empty());
        assert!(!Filter::new("", "", true).is_empty());
        // An expected cluster that does not report it finds it too.
        let north = ["north".to_owned()];
        let missing_north = Facts {
            namespace: "a",
            clusters: west,
            missing: &north,
            not_ready: true,
        };
        assert!(Filter::new("", "north", false).matches(missing_north));
        assert!(Filter::new("", "west", true).matches(missing_north));
        assert!(!Filter::new("", "east", false).matches(missing_north));
    }

    #[test]
    fn readiness_and_health() {
        let cases: &[(&[&str], bool, Health)] = &[
            (&[], false, Health::Unknown),
            (&["True"], false, Health::Ready),
            (&["True", "True"], false, Health::Ready),
            (&["True", "False"], true, Health::NotReady),
            (&["Unknown", "True"], true, Health::Unknown),
            (&["Unknown", "False"], true, Health::NotReady),
            (&["bogus"], true, Health::Unknown),
        ];
        for (statuses, nr, h) in cases {
            assert_eq!(not_ready(statuses.iter().copied()), *nr, "{statuses:?}");
            assert_eq!(health(statuses.iter().copied()), *h, "{statuses:?}");
        }
    }

    #[test]
    fn page_sizes() {
        for (req, want) in [
            (0, None),
            (1, Some(1)),
            (1000, Some(1000)),
            (1001, Some(MAX_PAGE_SIZE)),
            (u32::MAX, Some(MAX_PAGE_SIZE)),
        ] {
            assert_eq!(page_size(req), want, "{req}");
        }
    }

    #[test]
    fn tokens_round_trip_and_bad_ones_are_named() {
        for key in [
            k("openshift-ingress", "default-gateway"),
            k("a", "b"),
            k("ns.with.dots", "näme"),
        ] {
            let t = encode_token(&key);
            assert!(t.starts_with("gw1."), "{t}");
            assert_eq!(decode_token(&t), Ok(key));
        }
        for (token, why) in [
            ("", "not a token of this API version"),
            ("xyz", "not a token of this API version"),
            ("gw1.", "not a namespace/name pair"),
            ("gw1.61", "not a namespace/name pair"),
            ("gw1.6.62", "a part has the wrong length"),
            ("gw1..62", "a part has the wrong length"),
            ("gw1.zz.62", "not hexadecimal"),
            ("gw1.ff.62", "not UTF-8"),
            ("gw1.+1.62", "not hexadecimal"),
        ] {
            let e = decode_token(token).unwrap_err();
            assert_eq!(e.why, why, "{token:?}");
            assert!(e.to_string().contains(&format!("{token:?}")), "{e}");
        }
        let long = "x".repeat(500);
        let e = decode_token(&long).unwrap_err();
        assert_eq!(e.token, format!("\"{}\"...", "x".repeat(64)));
    }

    #[test]
    fn pages_follow_key_order_and_survive_changes() {
        let keys: Vec<GatewayKey> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| k("ns", n))
            .collect();
        let all = |ks: &[GatewayKey]| -> Vec<(GatewayKey, String)> {
            ks.iter().map(|k| (k.clone(), k.name.clone())).collect()
        };
        let list = all(&keys);
        let names = |p: &Page<String>| p.items.join(",");
        let walk = |list: &[(GatewayKey, String)], after: Option<&GatewayKey>, size| {
            page(list.iter().map(|(k, v)| (k, v.clone())), after, size)
        };
        // (page size, after, the page, the key the next token names)
        type Case<'a> = (Option<usize>, Option<&'a str>, &'a str, Option<&'a str>);
        let cases: &[Case<'_>] = &[
            (None, None, "a,b,c,d,e", None),
            (Some(2), None, "a,b", Some("b")),
            (Some(2), Some("b"), "c,d", Some("d")),
            (Some(2), Some("d"), "e", None),
            (Some(5), None, "a,b,c,d,e", None),
            (Some(10), None, "a,b,c,d,e", None),
            // A key that is gone still places the page.
            (Some(2), Some("bb"), "c,d", Some("d")),
            (Some(2), Some("z"), "", None),
        ];
        for (size, after, want, next) in cases {
            let after = after.map(|a| k("ns", a));
            let p = walk(&list, after.as_ref(), *size);
            assert_eq!(names(&p), *want, "{size:?} {after:?}");
            assert_eq!(p.total, 5);
            assert_eq!(
                p.next.as_deref().map(|t| decode_token(t).unwrap().name),
                next.map(str::to_owned),
                "{size:?} {after:?}"
            );
        }
        // Removing "b" and adding "bb" between pages 1 and 2: page 2 is
        // what follows page 1's last key now, nothing is served twice.
        let p1 = walk(&list, None, Some(2));
        let mut changed: Vec<GatewayKey> = keys.clone();
        changed.retain(|k| k.name != "b");
        changed.push(k("ns", "bb"));
        changed.sort();
        let token = decode_token(p1.next.as_deref().unwrap()).unwrap();
        let p2 = walk(&all(&changed), Some(&token), Some(2));
        assert_eq!(names(&p2), "bb,c");
    }
}
