//! Every rule of the Gateway CRD's status schema (gateway-api v1.5.1) that the
//! hub's output must meet, in one place, so the hub never sends a status the
//! API server rejects. Patterns are matched by hand (no regex engine) and
//! checked against the CRD's own regular expressions by the test suite.

use gwhub_model::Condition;

use super::compact::{ReportedCondition, ReportedKind};

// The CRD's limits have one home, gwhub_model::limits; these are the names
// the engine uses for them.
pub use gwhub_model::limits::{
    MAX_ADDRESSES, MAX_CONDITION_MESSAGE_LEN as MAX_MESSAGE,
    MAX_CONDITION_TYPE_LEN as MAX_CONDITION_TYPE, MAX_CONDITIONS,
    MAX_DNS_LABEL_LEN as MAX_DNS_LABEL, MAX_KIND_LEN as MAX_KIND, MAX_LISTENERS,
    MAX_NAME_LEN as MAX_ADDRESS_LEN, MAX_NAME_LEN as MAX_SECTION_NAME, MAX_NAME_LEN as MAX_GROUP,
    MAX_REASON_LEN as MAX_REASON, MAX_SUPPORTED_KINDS,
};

// The patterns below allow ASCII only, so they are checked on bytes: a
// byte of a multi-byte character matches none of them. The engine checks
// every report on every re-aggregation, so this is a hot path.

/// `s` is non-empty, starts with `first`, ends with `last`, and every byte
/// is `inner`.
fn ends_and_all(
    s: &[u8],
    first: impl Fn(u8) -> bool,
    last: impl Fn(u8) -> bool,
    inner: impl Fn(u8) -> bool,
) -> bool {
    match (s.first(), s.last()) {
        (Some(&f), Some(&l)) => first(f) && last(l) && s.iter().all(|&b| inner(b)),
        _ => false,
    }
}

/// The pattern of SectionName, route groups and condition type prefixes:
/// Kubernetes' DNS-1123 subdomain pattern, without its length limit.
pub use gwhub_model::names::is_subdomain_pattern;

/// A cluster name whose listeners can be written: consumers split the listener
/// name at the first `.`, so the cluster part must be one DNS label.
pub use gwhub_model::cluster::is_dns_label;

/// A cluster name that can prefix an address value: consumers split at the
/// first `/`.
pub(crate) fn is_address_prefix(s: &str) -> bool {
    !s.is_empty() && !s.as_bytes().contains(&b'/')
}

/// SectionName: pattern and at most 253 characters.
pub(crate) fn is_section_name(s: &str) -> bool {
    s.len() <= MAX_SECTION_NAME && is_subdomain_pattern(s)
}

/// A domain-prefixed address type (`example.com/Name`), the only kind the hub
/// writes: it matches the CRD's type pattern and none of the core types whose
/// values have extra validation.
pub(crate) fn is_multi_cluster_address_type(s: &str) -> bool {
    const EXTRA: &str = "/-._~%!$&'()*+,;=:";
    let Some((domain, rest)) = s.split_once('/') else {
        return false;
    };
    s.len() <= MAX_ADDRESS_LEN
        && is_subdomain_pattern(domain)
        && !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || EXTRA.contains(c))
}

/// metav1.Condition `type`: optional DNS-subdomain prefix and `/`, then a
/// name; at most 316 characters.
pub(crate) fn is_condition_type(s: &str) -> bool {
    if s.len() > MAX_CONDITION_TYPE {
        return false;
    }
    let bytes = s.as_bytes();
    let name = match bytes.iter().position(|&b| b == b'/') {
        Some(slash) => {
            if !is_subdomain_pattern(&s[..slash]) {
                return false;
            }
            &bytes[slash + 1..]
        }
        None => bytes,
    };
    ends_and_all(
        name,
        |b| b.is_ascii_alphanumeric(),
        |b| b.is_ascii_alphanumeric(),
        |b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'),
    )
}

/// metav1.Condition `reason`: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`,
/// 1 to 1024 characters.
pub(crate) fn is_condition_reason(s: &str) -> bool {
    s.len() <= MAX_REASON
        && ends_and_all(
            s.as_bytes(),
            |b| b.is_ascii_alphabetic(),
            |b| b.is_ascii_alphanumeric() || b == b'_',
            |b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'),
        )
}

/// metav1.Condition `status` enum.
pub(crate) fn is_condition_status(s: &str) -> bool {
    matches!(s, "True" | "False" | "Unknown")
}

pub use gwhub_model::text::{char_len, truncate};

/// Why a condition would be rejected, or `None` when it is valid.
pub(crate) fn condition_problem(c: &Condition) -> Option<String> {
    condition_fields_problem(
        &c.type_,
        &c.status,
        &c.reason,
        &c.message,
        c.observed_generation,
    )
}

/// [`condition_problem`] of a reported condition.
pub(crate) fn reported_condition_problem(c: &ReportedCondition) -> Option<String> {
    condition_fields_problem(
        c.type_(),
        c.status(),
        c.reason(),
        c.message(),
        c.observed_generation,
    )
}

fn condition_fields_problem(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) -> Option<String> {
    if !is_condition_type(type_) {
        return Some(format!(
            "type does not match the condition type pattern or is longer than {MAX_CONDITION_TYPE} characters"
        ));
    }
    if !is_condition_status(status) {
        return Some(format!("status {status:?} is not True, False or Unknown"));
    }
    if !is_condition_reason(reason) {
        return Some(format!(
            "reason {:?} does not match the reason pattern or is not 1 to {MAX_REASON} characters",
            truncate(reason, 64)
        ));
    }
    if char_len(message) > MAX_MESSAGE {
        return Some(format!("message is longer than {MAX_MESSAGE} characters"));
    }
    if observed_generation.is_some_and(|g| g < 0) {
        return Some("observedGeneration is negative".to_owned());
    }
    None
}

/// Why a supported kind would be rejected, or `None` when it is valid.
pub(crate) fn supported_kind_problem(k: &ReportedKind) -> Option<String> {
    if let Some(group) = k.group.as_deref()
        && !(group.is_empty() || (group.len() <= MAX_GROUP && is_subdomain_pattern(group)))
    {
        return Some(format!(
            "group does not match the group pattern or is longer than {MAX_GROUP} characters"
        ));
    }
    let kind = &*k.kind;
    let ok = kind.len() <= MAX_KIND
        && kind.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && kind
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !ok {
        return Some(format!(
            "kind does not match the kind pattern or is not 1 to {MAX_KIND} characters"
        ));
    }
    None
}

/// Chooses at most `limit` entries from per-cluster lists, round-robin: every
/// cluster's first entry before any cluster's second, so each cluster keeps
/// one while there is room. Returns, per cluster, how many of its leading
/// entries are kept (entries keep their order within a cluster).
pub(crate) fn round_robin(lens: &[usize], limit: usize) -> Vec<usize> {
    let mut kept = vec![0; lens.len()];
    let mut left = limit;
    let mut round = 0;
    while left > 0 {
        let mut progressed = false;
        for (i, &len) in lens.iter().enumerate() {
            if left == 0 {
                break;
            }
            if len > round {
                kept[i] += 1;
                left -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
        round += 1;
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // The CRD's own patterns (metav1.Condition, SectionName), to pin the
    // byte-wise matchers against.
    const TYPE: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
    const REASON: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";
    const SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

    proptest! {
        #[test]
        fn matchers_agree_with_the_crd_patterns(s in "[aZ0_./,: é-]{0,12}") {
            let m = |p: &str| regex::Regex::new(p).unwrap().is_match(&s);
            prop_assert_eq!(is_condition_type(&s), m(TYPE));
            prop_assert_eq!(is_condition_reason(&s), m(REASON));
            prop_assert_eq!(is_subdomain_pattern(&s), m(SUBDOMAIN));
            prop_assert_eq!(char_len(&s), s.chars().count());
        }
    }

    #[test]
    fn names() {
        assert!(is_dns_label("east-1"));
        for bad in ["", "cluster_1", "UPPER", "a.b", "-a", "a-", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        assert!(is_section_name("east.http"));
        assert!(is_section_name("east.a.b-c"));
        assert!(!is_section_name("east..http"));
        assert!(!is_section_name(&format!("a.{}", "b".repeat(252))));
        assert!(is_address_prefix("cluster_1"));
        assert!(!is_address_prefix("a/b"));
        assert!(!is_address_prefix(""));
    }

    #[test]
    fn condition_fields() {
        assert!(is_condition_type("Accepted"));
        assert!(is_condition_type("kuadrant.io/MultiClusterAggregated"));
        assert!(is_condition_type("a_b.c-d"));
        for bad in ["", "bad type", "Foo/", "/Foo", "UP.io/Foo", "x/y/z", "_a"] {
            assert!(!is_condition_type(bad), "{bad}");
        }
        assert!(!is_condition_type(&"A".repeat(317)));
        assert!(is_condition_reason("A"));
        assert!(is_condition_reason("Not_True,In:All_"));
        for bad in ["", "1A", "A:", "A B", "A-B"] {
            assert!(!is_condition_reason(bad), "{bad}");
        }
        assert!(!is_condition_reason(&"A".repeat(1025)));
        assert!(is_multi_cluster_address_type(
            "kuadrant.io/MultiClusterHostname"
        ));
        assert!(!is_multi_cluster_address_type("IPAddress"));
        assert!(!is_multi_cluster_address_type("Hostname"));
        assert!(!is_multi_cluster_address_type("Kuadrant.io/X"));
        assert!(!is_multi_cluster_address_type("kuadrant.io/"));
    }

    #[test]
    fn round_robin_takes_firsts_first() {
        assert_eq!(round_robin(&[3, 1, 2], 10), vec![3, 1, 2]);
        assert_eq!(round_robin(&[3, 1, 2], 4), vec![2, 1, 1]);
        assert_eq!(round_robin(&[3, 1, 2], 2), vec![1, 1, 0]);
        assert_eq!(round_robin(&[5, 0, 5], 3), vec![2, 0, 1]);
        assert_eq!(round_robin(&[], 3), Vec::<usize>::new());
    }
}
