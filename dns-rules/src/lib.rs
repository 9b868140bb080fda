#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! Fleet DNS's rules (spec section 8), pure: which names the hub publishes
//! and which hub Gateway owns each ([`fleet_names`]), whether a cluster may
//! answer for a name ([`assess`]), the record sets of a name ([`build`]),
//! when a cluster enters and leaves a published set ([`Publisher`]), and
//! the ownership records and RFC 2136 updates as data ([`plan`],
//! [`classify`]).
//!
//! It exists apart from the hub so the compiler keeps these rules free of
//! I/O: no async runtime, no DNS or Kubernetes client
//! (`scripts/check-deps.sh`), no clock (time comes in as milliseconds).
//! The hub fills its inputs from the clusters' reports, never from the hub
//! Gateway's status (capped at 16 addresses).

mod eligibility;
mod names;
mod ownership;
mod publish;
mod records;

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
    Change, DnsType, Found, HERITAGE, MAX_OWNER_ID_LEN, MAX_TXT_STRING, Owner, Ownership,
    OwnershipError, PlanError, Prerequisite, Rdata, ReadBack, Update, UpdatePlan, classify,
    ownership_name, parse_owner, plan, rdata, repair, txt_strings,
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
