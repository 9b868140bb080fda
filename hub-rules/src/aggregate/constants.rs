//! Strings pinned by the spec (section 4). Users, Kuadrant's DNSPolicy and
//! tests depend on them byte for byte.

/// Type of the hub's own condition on every hub Gateway it manages.
pub const OWN_CONDITION: &str = "kuadrant.io/MultiClusterAggregated";
/// Own condition reason: no cluster reports the Gateway.
pub const REASON_NO_CLUSTERS: &str = "NoClusters";
/// Own condition reason: something was left out.
pub const REASON_VALIDATION_FAILED: &str = "ValidationFailed";
/// Own condition reason: everything was aggregated.
pub const REASON_AGGREGATED: &str = "Aggregated";

/// Aggregated condition reason when the type is True in every cluster.
pub const REASON_TRUE_IN_ALL: &str = "TrueInAllClusters";
/// Aggregated condition reason otherwise.
pub const REASON_NOT_TRUE_IN_SOME: &str = "NotTrueInSomeClusters";

/// Address type for cluster addresses of type `IPAddress` (or no type).
pub const IP_ADDRESS_TYPE: &str = "kuadrant.io/MultiClusterIPAddress";
/// Address type for cluster `Hostname` addresses: what DNSPolicy reads.
pub const HOSTNAME_ADDRESS_TYPE: &str = "kuadrant.io/MultiClusterHostnameAddress";
/// The aggregation proposal's draft spelling, selectable by flag.
pub const HOSTNAME_ADDRESS_TYPE_DRAFT: &str = "kuadrant.io/MultiClusterHostname";

/// Separator of message fragments.
pub const FRAGMENT_SEPARATOR: &str = "; ";
/// Unit named in the suffix of a capped aggregated condition message.
pub const MORE_CLUSTERS: &str = "clusters";
/// Unit named in the suffix of a capped own condition message.
pub const MORE_PROBLEMS: &str = "problems";

/// Condition types kept first (after the hub's own) when more than 8 compete.
pub const PRIORITY_TYPES: [&str; 2] = ["Accepted", "Programmed"];
