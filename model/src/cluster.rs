//! A cluster's name: one rule for every way a name enters (the `--insecure`
//! Hello, an mTLS certificate, `gwhub certs`), and the two views the hub
//! needs of it.
//!
//! Rule: 1 to 253 characters of lowercase ASCII letters, digits, `.`, `_` and
//! `-`, and not `.` or `..`, so a name is safe in logs, labels, file names,
//! paths and URIs. Lowercase only, like the Kubernetes object names of the
//! inventory's ClusterProfiles that name clusters: two clusters never differ
//! only by case (`EAST` is refused rather than folded, so a name is shown
//! exactly as its certificate or Hello gave it). That is wider than a DNS
//! label on purpose: the spec accepts a cluster such as `cluster_1` and only
//! leaves out its listeners (their names are `<cluster>.<listener>` and
//! consumers split at the first `.`, so that part must be a DNS label, see
//! [`ClusterName::dns_label`]). Objects named after a cluster use
//! [`object_name`].

use std::fmt;

use crate::limits::{MAX_CLUSTER_NAME_LEN, MAX_DNS_LABEL_LEN};
use crate::names::NameRule;

/// A validated cluster name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterName(String);

/// Why a string is not a cluster name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterNameError {
    #[error("must not be empty")]
    Empty,
    #[error("{len} characters long, the limit is {MAX_CLUSTER_NAME_LEN}")]
    TooLong { len: usize },
    #[error(
        "{} has characters other than lowercase letters, digits, '.', '_' and '-'",
        crate::text::quote_client_input(.0)
    )]
    BadCharacters(String),
    #[error(
        "{} has uppercase letters: cluster names are lowercase (like the ClusterProfile that names a cluster), so two never differ only by case",
        crate::text::quote_client_input(.0)
    )]
    Uppercase(String),
    #[error("{0:?} is not a cluster name: it names a directory")]
    Dots(&'static str),
}

impl ClusterName {
    /// Checks `name` against the rule (see the module docs).
    pub fn parse(name: &str) -> Result<Self, ClusterNameError> {
        validate(name)?;
        Ok(ClusterName(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// The name as the first part of a listener name `<cluster>.<listener>`,
    /// when it can be one (a DNS label).
    pub fn dns_label(&self) -> Option<&str> {
        is_dns_label(&self.0).then_some(self.0.as_str())
    }

    /// The name of an object that stands for this cluster.
    pub fn object_name(&self) -> String {
        object_name(&self.0)
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The cluster-name rule (see the module docs).
pub fn validate(name: &str) -> Result<(), ClusterNameError> {
    if name.is_empty() {
        return Err(ClusterNameError::Empty);
    }
    let len = name.chars().count();
    if len > MAX_CLUSTER_NAME_LEN {
        return Err(ClusterNameError::TooLong { len });
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
    {
        return Err(ClusterNameError::BadCharacters(name.to_owned()));
    }
    if name.bytes().any(|c| c.is_ascii_uppercase()) {
        return Err(ClusterNameError::Uppercase(name.to_owned()));
    }
    match name {
        "." => Err(ClusterNameError::Dots(".")),
        ".." => Err(ClusterNameError::Dots("..")),
        _ => Ok(()),
    }
}

/// Whether `s` is a DNS label (RFC 1123: at most 63 characters of
/// `[a-z0-9-]`, starting and ending alphanumeric), the form the cluster part
/// of a listener name needs. Takes a `&str`: the hub's engine also sees names
/// from files (`gwhub aggregate`).
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= MAX_DNS_LABEL_LEN && NameRule::Dns1123Label.allows(s)
}

/// The object name for `cluster`: the name itself when it is a valid object
/// name (a DNS-1123 subdomain), else a sanitised form plus a hash of the
/// original, so two clusters never share an object.
pub fn object_name(cluster: &str) -> String {
    if NameRule::Dns1123Subdomain.allows(cluster) {
        return cluster.to_owned();
    }
    let mut base = dns_safe(cluster, 200);
    if base.is_empty() {
        base.push_str("cluster");
    }
    format!("{base}-{:08x}", fnv(cluster.bytes()) as u32)
}

/// The first `max` characters of `s` made DNS-label safe: lowercase ASCII
/// letters and digits kept, anything else `-`, no `-` at either end (may
/// be empty). Callers add a hash of the original, so two inputs that
/// clean to the same text still get distinct names.
pub fn dns_safe(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(max)
        .collect();
    clean.trim_matches('-').to_owned()
}

/// FNV-1a: a hash stable across builds and platforms (unlike std's
/// hasher), for names derived from a cluster's and for the store's layout.
pub fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_entry() {
        for ok in [
            "east",
            "cluster_1",
            "east.1",
            "a-b",
            "...",
            ".a",
            "a..b",
            &"a".repeat(253),
        ] {
            assert!(ClusterName::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(ClusterName::parse(""), Err(ClusterNameError::Empty));
        assert_eq!(
            ClusterName::parse(&"a".repeat(254))
                .unwrap_err()
                .to_string(),
            "254 characters long, the limit is 253"
        );
        for bad in ["east west", "a/b", "é", "a\nb", "a:b"] {
            assert!(
                matches!(
                    ClusterName::parse(bad),
                    Err(ClusterNameError::BadCharacters(_))
                ),
                "{bad}"
            );
        }
    }

    /// Two clusters never differ only by case: uppercase is refused (not
    /// folded), and `.`/`..` never name a cluster (they name directories).
    #[test]
    fn no_case_twins_and_no_dot_names() {
        let cases: &[(&str, &str)] = &[
            (
                "EAST",
                "\"EAST\" has uppercase letters: cluster names are lowercase (like the ClusterProfile that names a cluster), so two never differ only by case",
            ),
            ("East.1", "has uppercase letters"),
            ("cluster_A", "has uppercase letters"),
            (".", "\".\" is not a cluster name: it names a directory"),
            ("..", "\"..\" is not a cluster name: it names a directory"),
            (
                "a\u{1b}b",
                "\"a\\u{1b}b\" has characters other than lowercase letters",
            ),
        ];
        for (name, want) in cases {
            let e = ClusterName::parse(name).unwrap_err().to_string();
            assert!(e.contains(want), "{name}: {e}");
        }
        // A long bad name is echoed as a short prefix only.
        let long = format!("{}\u{202e}", "É".repeat(200));
        assert!(ClusterName::parse(&long).unwrap_err().to_string().len() < 300);
    }

    #[test]
    fn dns_label_view() {
        let name = |s| ClusterName::parse(s).unwrap();
        assert_eq!(name("east-1").dns_label(), Some("east-1"));
        for not_label in ["cluster_1", "a.b", "-a", "a-", &"a".repeat(64)] {
            assert_eq!(name(not_label).dns_label(), None, "{not_label}");
        }
    }

    #[test]
    fn object_names_are_valid_and_distinct() {
        assert_eq!(object_name("gateway-1"), "gateway-1");
        let a = object_name("cluster_1");
        let b = object_name("cluster-1");
        assert_ne!(a, b);
        assert!(a.starts_with("cluster-1-"), "{a}");
        for name in [
            "Cluster_1",
            "_x_",
            "",
            &"x".repeat(300),
            "a.b",
            "-a",
            "a..b",
        ] {
            let n = object_name(name);
            assert!(NameRule::Dns1123Subdomain.allows(&n), "{n}");
        }
    }
}
