//! What the hub left out of a hub Gateway's status and why. Kept structured
//! for the Dashboard API and rendered into the hub's own condition, so
//! nothing disappears silently.

use std::fmt;

use super::limits::truncate;

/// The kind of entry left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Item {
    Address,
    Listener,
    ListenerCondition,
    SupportedKind,
    /// A Gateway-level condition type (reported by a cluster or aggregated).
    Condition,
    /// A condition another writer put on the hub Gateway.
    ForeignCondition,
}

impl Item {
    /// The Dashboard API's `Omission.item` for this kind (a stable code:
    /// renaming the variant must not change it).
    pub fn code(self) -> &'static str {
        match self {
            Item::Address => "address",
            Item::Listener => "listener",
            Item::ListenerCondition => "listener_condition",
            Item::SupportedKind => "supported_kind",
            Item::Condition => "condition",
            Item::ForeignCondition => "foreign_condition",
        }
    }

    fn noun(self, n: usize) -> &'static str {
        let one = n == 1;
        match self {
            Item::Address if one => "address",
            Item::Address => "addresses",
            Item::Listener if one => "listener",
            Item::Listener => "listeners",
            Item::ListenerCondition if one => "listener condition",
            Item::ListenerCondition => "listener conditions",
            Item::SupportedKind if one => "supported kind",
            Item::SupportedKind => "supported kinds",
            Item::Condition if one => "condition",
            Item::Condition => "conditions",
            Item::ForeignCondition if one => "condition of another writer",
            Item::ForeignCondition => "conditions of other writers",
        }
    }
}

/// The rule an entry broke.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// Address values are `<cluster>/<value>`, split at the first `/`.
    ClusterNameNotAddressPrefix,
    /// Listener names are `<cluster>.<listener>`, split at the first `.`.
    ClusterNameNotDnsLabel,
    /// An address type with no multi-cluster equivalent.
    UnsupportedAddressType(String),
    EmptyAddressValue,
    AddressValueTooLong,
    /// `<cluster>.<listener>` is not a SectionName of at most 253 characters.
    InvalidListenerName,
    DuplicateListenerName,
    /// A condition the CRD would reject; the text says which field.
    InvalidCondition(String),
    DuplicateConditionType,
    /// A supported kind the CRD would reject; the text says which field.
    InvalidSupportedKind(String),
    /// Past a list's `maxItems`.
    TooMany(usize),
    /// Past `maxItems`, with entries chosen round-robin over clusters.
    TooManyRoundRobin(usize),
    /// An aggregated type another writer already sets on the hub Gateway.
    TypeOwnedByOtherWriter,
    /// Another writer's condition of the hub's own type.
    OwnType,
}

impl Rule {
    /// The Dashboard API's `Omission.rule` for this rule (a stable code:
    /// renaming the variant must not change it).
    pub fn code(&self) -> &'static str {
        match self {
            Rule::ClusterNameNotAddressPrefix => "cluster_name_not_address_prefix",
            Rule::ClusterNameNotDnsLabel => "cluster_name_not_dns_label",
            Rule::UnsupportedAddressType(_) => "unsupported_address_type",
            Rule::EmptyAddressValue => "empty_address_value",
            Rule::AddressValueTooLong => "address_value_too_long",
            Rule::InvalidListenerName => "invalid_listener_name",
            Rule::DuplicateListenerName => "duplicate_listener_name",
            Rule::InvalidCondition(_) => "invalid_condition",
            Rule::DuplicateConditionType => "duplicate_condition_type",
            Rule::InvalidSupportedKind(_) => "invalid_supported_kind",
            Rule::TooMany(_) => "too_many",
            Rule::TooManyRoundRobin(_) => "too_many_round_robin",
            Rule::TypeOwnedByOtherWriter => "type_owned_by_other_writer",
            Rule::OwnType => "own_type",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::ClusterNameNotAddressPrefix => {
                f.write_str("cluster name is empty or contains '/', so address values cannot name it")
            }
            Rule::ClusterNameNotDnsLabel => f.write_str(
                "cluster name is not a DNS label (lowercase letters, digits and '-', at most 63 characters), so listener names cannot carry it",
            ),
            Rule::UnsupportedAddressType(t) => {
                write!(f, "address type {:?} has no multi-cluster address type", truncate(t, 64))
            }
            Rule::EmptyAddressValue => f.write_str("address value is empty"),
            Rule::AddressValueTooLong => {
                f.write_str("<cluster>/<value> is longer than 253 characters")
            }
            Rule::InvalidListenerName => f.write_str(
                "<cluster>.<listener> is not a valid SectionName of at most 253 characters",
            ),
            Rule::DuplicateListenerName => f.write_str("duplicate listener name"),
            Rule::InvalidCondition(why) => f.write_str(why),
            Rule::DuplicateConditionType => f.write_str("duplicate condition type"),
            Rule::InvalidSupportedKind(why) => f.write_str(why),
            Rule::TooMany(max) => write!(f, "more than {max} in the list (the CRD's limit)"),
            Rule::TooManyRoundRobin(max) => write!(
                f,
                "more than {max} in the list (the CRD's limit); kept round-robin over clusters"
            ),
            Rule::TypeOwnedByOtherWriter => {
                f.write_str("another writer sets this type on the hub Gateway")
            }
            Rule::OwnType => f.write_str("this type is the hub's own"),
        }
    }
}

/// One group of entries left out for the same rule: the cluster they came
/// from (`None` for the hub Gateway's own lists), their names and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Omission {
    pub cluster: Option<String>,
    pub item: Item,
    /// The offending names (address values, listener names, condition types
    /// or `listener:type` / `listener:kind` for entries of a listener).
    pub names: Vec<String>,
    pub rule: Rule,
}

impl Omission {
    /// How many entries this group left out.
    pub fn count(&self) -> usize {
        self.names.len()
    }
}

impl fmt::Display for Omission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = &self.cluster {
            write!(f, "cluster {c}: ")?;
        }
        let n = self.names.len();
        let shown: Vec<String> = self.names.iter().take(8).map(|s| truncate(s, 80)).collect();
        let more = if n > 8 {
            format!(", and {} more", n - 8)
        } else {
            String::new()
        };
        write!(
            f,
            "{n} {} ({}{more}) left out: {}",
            self.item.noun(n),
            shown.join(", "),
            self.rule
        )
    }
}

/// Collects omissions, merging entries of the same cluster, item and rule.
#[derive(Debug, Default)]
pub struct Omissions(pub Vec<Omission>);

impl Omissions {
    pub fn push(&mut self, cluster: Option<&str>, item: Item, name: String, rule: Rule) {
        let same_cluster = |o: &Omission| o.cluster.as_deref() == cluster;
        for o in self.0.iter_mut().rev() {
            if !same_cluster(o) {
                break;
            }
            if o.item == item && o.rule == rule {
                o.names.push(name);
                return;
            }
        }
        self.0.push(Omission {
            cluster: cluster.map(str::to_owned),
            item,
            names: vec![name],
            rule,
        });
    }

    /// The fragments of the hub's own condition message: one per omission,
    /// except that the entries left out past a limit are counted once per
    /// list (they come from many clusters).
    pub(crate) fn fragments(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut limit_counts: Vec<(Item, usize, usize)> = Vec::new();
        for o in &self.0 {
            match o.rule {
                Rule::TooManyRoundRobin(max)
                    if matches!(o.item, Item::Address | Item::Listener) =>
                {
                    match limit_counts.iter_mut().find(|(i, _, _)| *i == o.item) {
                        Some((_, _, n)) => *n += o.count(),
                        None => limit_counts.push((o.item, max, o.count())),
                    }
                }
                _ => out.push(o.to_string()),
            }
        }
        for (item, max, n) in limit_counts {
            out.push(limit_fragment(item, max, n));
        }
        out
    }
}

/// The own condition's one fragment for the `n` entries of a list left out
/// past its limit `max` (round-robin over clusters).
pub(crate) fn limit_fragment(item: Item, max: usize, n: usize) -> String {
    format!(
        "{n} {} left out: more than {max} {} (the CRD's limit); kept round-robin over clusters",
        item.noun(n),
        item.noun(2)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes are the Dashboard API's: every one pinned, so renaming a
    /// variant cannot change what clients see.
    #[test]
    fn dashboard_codes_are_pinned() {
        let items = [
            (Item::Address, "address"),
            (Item::Listener, "listener"),
            (Item::ListenerCondition, "listener_condition"),
            (Item::SupportedKind, "supported_kind"),
            (Item::Condition, "condition"),
            (Item::ForeignCondition, "foreign_condition"),
        ];
        for (item, code) in items {
            assert_eq!(item.code(), code);
        }
        let s = String::new;
        let rules = [
            (
                Rule::ClusterNameNotAddressPrefix,
                "cluster_name_not_address_prefix",
            ),
            (Rule::ClusterNameNotDnsLabel, "cluster_name_not_dns_label"),
            (
                Rule::UnsupportedAddressType(s()),
                "unsupported_address_type",
            ),
            (Rule::EmptyAddressValue, "empty_address_value"),
            (Rule::AddressValueTooLong, "address_value_too_long"),
            (Rule::InvalidListenerName, "invalid_listener_name"),
            (Rule::DuplicateListenerName, "duplicate_listener_name"),
            (Rule::InvalidCondition(s()), "invalid_condition"),
            (Rule::DuplicateConditionType, "duplicate_condition_type"),
            (Rule::InvalidSupportedKind(s()), "invalid_supported_kind"),
            (Rule::TooMany(8), "too_many"),
            (Rule::TooManyRoundRobin(16), "too_many_round_robin"),
            (Rule::TypeOwnedByOtherWriter, "type_owned_by_other_writer"),
            (Rule::OwnType, "own_type"),
        ];
        for (rule, code) in &rules {
            assert_eq!(rule.code(), *code, "{rule:?}");
        }
        let mut codes: Vec<_> = rules.iter().map(|(r, _)| r.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), rules.len(), "codes are distinct");
    }
}
