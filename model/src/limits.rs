//! The Gateway CRD's limits (gateway-api v1.5.1) and the wire contract's, in
//! one place. Counts match the CRD (a status the API server accepted never
//! breaks them); string lengths match Kubernetes' own validation and are
//! counted in characters, as the API server counts a `maxLength`
//! ([`crate::text::char_len`]). The hub refuses a report that breaks one (the
//! stream ends with a status naming the field, never silent truncation) and
//! never writes a status that breaks one; the agent cuts its own messages to
//! fit.

/// Largest gRPC message the hub decodes (and an agent should send).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Most Gateways one cluster may report (a snapshot's total).
pub const MAX_GATEWAYS: usize = 10_000;
/// Conditions per list (`maxItems: 8`).
pub const MAX_CONDITIONS: usize = 8;
/// `status.addresses` (`maxItems: 16`).
pub const MAX_ADDRESSES: usize = 16;
/// `status.listeners` (`maxItems: 64`).
pub const MAX_LISTENERS: usize = 64;
/// `supportedKinds` per listener (`maxItems: 8`).
pub const MAX_SUPPORTED_KINDS: usize = 8;

/// Namespace, name, listener name (SectionName), address value, route
/// group: DNS subdomain size.
pub const MAX_NAME_LEN: usize = 253;
/// A DNS label (RFC 1123), the form the cluster part of a listener name needs.
pub const MAX_DNS_LABEL_LEN: usize = 63;
/// metadata.uid.
pub const MAX_UID_LEN: usize = 128;
/// Route kind.
pub const MAX_KIND_LEN: usize = 63;
/// Address type (a domain-prefixed string).
pub const MAX_ADDRESS_TYPE_LEN: usize = 253;
/// metav1.Condition.type.
pub const MAX_CONDITION_TYPE_LEN: usize = 316;
/// metav1.Condition.reason.
pub const MAX_REASON_LEN: usize = 1024;
/// metav1.Condition.message.
pub const MAX_CONDITION_MESSAGE_LEN: usize = 32_768;

/// A cluster name ([`crate::cluster`]), from Hello or a client certificate.
pub const MAX_CLUSTER_NAME_LEN: usize = 253;
/// Hello.agent_version.
pub const MAX_AGENT_VERSION_LEN: usize = 256;
/// Hello.capabilities entries, and the length of each.
pub const MAX_CAPABILITIES: usize = 64;
pub const MAX_CAPABILITY_LEN: usize = 128;
