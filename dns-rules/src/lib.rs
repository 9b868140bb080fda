#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! Fleet DNS's rules (spec section 8), pure: which names the hub publishes
//! and which hub Gateway owns each ([`fleet_names`]), whether a cluster may
//! answer for a name ([`assess`]), the record sets of a name ([`build`]),
//! when a cluster enters and leaves a published set ([`Publisher`]), the
//! ownership records and RFC 2136 updates as data ([`plan`],
//! [`classify`]), and the `gwhub.io/DNSPublished` condition
//! ([`dns_published`]).
//!
//! It exists apart from the hub so the compiler keeps these rules free of
//! I/O: no async runtime, no DNS or Kubernetes client
//! (`scripts/check-deps.sh`), no clock (time comes in as milliseconds).
//! The hub fills its inputs from the clusters' reports, never from the hub
//! Gateway's status (capped at 16 addresses).
//!
//! One name, one round, as the hub is meant to run it:
//! 1. [`fleet_names`] (or [`names_from_reports`] without Kubernetes): the
//!    names, their owners, the conflicts and the invalid ones.
//! 2. Per name and cluster, [`assess`] -> the cluster's [`Usable`]
//!    addresses or the rule it fails; [`build`] on the eligible ones -> the
//!    desired [`RecordSets`] (what the Dashboard shows as desired).
//! 3. Per record type, a [`Publisher`]: each cluster [`Seen::Eligible`]
//!    when [`Usable::check`] passes for the type, [`Seen::Gone`] when it
//!    is revoked or its ClusterProfile deleted, else [`Seen::Ineligible`];
//!    `other_types_served` when the desired sets have another type. Its
//!    published clusters, with their addresses [`Usable::restricted`] to
//!    the types each is published in, go through [`build`] again: the sets
//!    to write.
//! 4. Per output: the sets as they are (`dnsendpoint`), or, for
//!    `rfc2136`, [`name_changes`] from what was written or [`classify`]'d
//!    on a read-back (one [`Change`] per type), and one [`plan`] per
//!    name: one UPDATE message, all or nothing.
//! 5. The names' states -> [`dns_published`].
//!
//! After a hub start or leader change, the read-back seeds the
//! [`Publisher`]s ([`Publisher::after_start`]): the `dnsendpoint` output
//! stores the published clusters in an annotation; for `rfc2136`,
//! [`published_clusters`] maps the records read back to the clusters whose
//! reports have those addresses.

mod condition;
mod eligibility;
mod names;
mod ownership;
mod publish;
mod records;

pub use condition::{
    CONDITION_TYPE, DnsCondition, NameState, NameStatus, REASON_CONFLICT, REASON_INVALID,
    REASON_NONE_ELIGIBLE, REASON_PUBLISHED, REASON_WRITE_FAILED, dns_published,
};
pub use eligibility::{
    Address, AddressType, ClusterView, ConditionStatus, IgnoredAddress, Ineligible,
    ListenerProblem, ListenerView, Usable, assess, eligible_for, usable,
};
pub use names::{
    Conflict, Disagreement, FleetName, FleetNames, Hostname, HostnameError, HubGateway,
    HubListener, InvalidName, ReportedGateway, fleet_names, in_zone, names_from_reports,
    parse_zone, zone_of,
};
pub use ownership::{
    Change, DnsType, Found, HERITAGE, Held, Known, MAX_OWNER_ID_LEN, MAX_TXT_STRING, Owner,
    Ownership, OwnershipError, PlanError, Prerequisite, Rdata, ReadBack, Update, UpdatePlan,
    classify, name_changes, ownership_name, parse_owner, plan, published_clusters, rdata, repair,
    txt_strings,
};
pub use publish::{
    Action, COALESCE_MILLIS, DEFAULT_RISE_MILLIS, DEFAULT_STALE_AFTER_MILLIS, Decision, Input,
    Observation, PublishConfig, Publisher, Reason, Seen, WhenNone,
};
pub use records::{
    CnameRouting, DEFAULT_MAX_TARGETS, DEFAULT_TTL_SECONDS, LeftOut, LeftOutReason, RecordData,
    RecordOptions, RecordSet, RecordSets, RecordType, WEIGHT_PROPERTY, WeightedTarget, build,
    ranked, rendezvous_score,
};
