//! Kubernetes' name rules (DNS-1123 labels and subdomains), the checks the
//! API server applies to namespaces and object names.

use std::fmt;

/// The Kubernetes name rules a reported name must follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// At most 63 characters of `[a-z0-9-]`, starting and ending
    /// alphanumeric (namespaces).
    Dns1123Label,
    /// At most 253 characters: DNS-1123 labels (of any length) joined by
    /// dots (most object names, Gateways included).
    Dns1123Subdomain,
}

impl NameRule {
    /// Whether `s` follows the rule (the same checks as Kubernetes'
    /// `IsDNS1123Label` / `IsDNS1123Subdomain`).
    pub fn allows(self, s: &str) -> bool {
        match self {
            NameRule::Dns1123Label => s.len() <= 63 && is_label_pattern(s.as_bytes()),
            NameRule::Dns1123Subdomain => s.len() <= 253 && is_subdomain_pattern(s),
        }
    }
}

impl fmt::Display for NameRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameRule::Dns1123Label => {
                "a DNS-1123 label (at most 63 characters of lower-case letters, digits and '-', starting and ending with a letter or digit)"
            }
            NameRule::Dns1123Subdomain => {
                "a DNS-1123 subdomain (at most 253 characters: lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit)"
            }
        })
    }
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// One label of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, no length limit. Checked on
/// bytes: the pattern is ASCII, so a byte of a multi-byte character matches
/// none of it (the hub checks every report on every re-aggregation).
fn is_label_pattern(s: &[u8]) -> bool {
    match (s.first(), s.last()) {
        (Some(&f), Some(&l)) => {
            lower_alnum(f) && lower_alnum(l) && s.iter().all(|&b| lower_alnum(b) || b == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`: the
/// DNS-1123 subdomain pattern without its length limit (the CRD's
/// SectionName, route group and condition type prefix patterns).
pub fn is_subdomain_pattern(s: &str) -> bool {
    s.as_bytes().split(|&b| b == b'.').all(is_label_pattern)
}
