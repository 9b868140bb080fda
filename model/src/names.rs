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
        let label = |l: &str| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        };
        match self {
            NameRule::Dns1123Label => s.len() <= 63 && label(s),
            NameRule::Dns1123Subdomain => s.len() <= 253 && s.split('.').all(label),
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
