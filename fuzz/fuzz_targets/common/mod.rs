//! Shared by the targets: small text pickers for structured inputs and the
//! test kit's independent CRD checker.
#![allow(dead_code)]

use arbitrary::Arbitrary;

#[path = "../../../test-kit/src/crd_check.rs"]
pub mod crd;

/// A string that is usually one of `table` (so the fuzzer reaches deep
/// branches quickly) and sometimes anything.
#[derive(Arbitrary, Debug, Clone)]
pub enum Text {
    Known(u8),
    Raw(String),
    Long(u8, u16),
}

impl Text {
    pub fn pick(&self, table: &[&str]) -> String {
        match self {
            Text::Known(i) => table[usize::from(*i) % table.len()].to_owned(),
            Text::Raw(s) => s.clone(),
            Text::Long(i, n) => {
                let base = table[usize::from(*i) % table.len()];
                let c = base.chars().next().unwrap_or('x');
                std::iter::repeat_n(c, usize::from(*n) % 40_000).collect()
            }
        }
    }
}

pub const CONDITION_TYPES: &[&str] = &[
    "Accepted",
    "Programmed",
    "LoadBalancerReady",
    "DNSManaged",
    "DNSReady",
    "ResolvedRefs",
    "example.com/Custom",
    "kuadrant.io/MultiClusterAggregated",
    "Ready",
    "bad type",
    "",
];
pub const STATUSES: &[&str] = &["True", "False", "Unknown", "Maybe", ""];
pub const REASONS: &[&str] = &["Ok", "NotOk", "Pending", "1bad", "", "A:b,c_d"];
pub const MESSAGES: &[&str] = &["", "fine", "the load balancer is pending", "m"];
