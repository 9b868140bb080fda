//! What an update or a read can come to, other than success: one enum the
//! caller can act on (a conflict is shown, a bad key is reported, a timeout
//! is retried later) and count ([`Error::label`]). Retries and backoff are
//! the caller's: nothing here tries twice.

use std::net::SocketAddr;
use std::time::Duration;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request was not sent: a name, value or zone that cannot be
    /// written (not a DNS name, too long, outside the zone, no values).
    #[error("invalid: {0}")]
    Invalid(String),

    /// A prerequisite failed: the name is held by another owner (or by
    /// records made by hand), or the ownership record is not ours. Nothing
    /// was changed.
    #[error("{name}: {detail} (the server answered {rcode}; nothing was changed)")]
    Conflict {
        /// The record set's name.
        name: String,
        /// The response code: YXRRSET, NXRRSET, YXDOMAIN or NXDOMAIN.
        rcode: &'static str,
        /// Which prerequisite that means, in words.
        detail: String,
    },

    /// REFUSED: the server does not let this key update this zone (its
    /// `allow-update` / `acl` says no) or refuses updates at all.
    #[error(
        "{server} refused the update of zone {zone} signed with TSIG key {key} (REFUSED): the server's update policy does not allow it"
    )]
    Refused {
        /// The server.
        server: SocketAddr,
        /// The zone.
        zone: String,
        /// The key's name.
        key: String,
    },

    /// The server did not accept the TSIG key: unknown name or algorithm
    /// (BADKEY), another secret (BADSIG), clocks too far apart (BADTIME),
    /// or an unsigned NOTAUTH.
    #[error("{server} did not accept TSIG key {key} ({algorithm}): {reason}")]
    BadKey {
        /// The server.
        server: SocketAddr,
        /// The key's name.
        key: String,
        /// The key's algorithm.
        algorithm: String,
        /// What the server said.
        reason: String,
    },

    /// No connection to the server (refused, no route), or it broke
    /// before the answer came (then whether an update took effect is
    /// unknown).
    #[error("DNS server {server} unreachable: {reason}")]
    Unreachable {
        /// The server.
        server: SocketAddr,
        /// What the connection attempt said.
        reason: String,
    },

    /// No answer within the timeout.
    #[error("no answer from DNS server {server} within {timeout:?}")]
    Timeout {
        /// The server.
        server: SocketAddr,
        /// The timeout.
        timeout: Duration,
    },

    /// An answer that is not one: not a DNS message, not the answer to this
    /// request, or a success whose TSIG does not verify. Whether an update
    /// took effect is then unknown (read it back).
    #[error("bad answer from DNS server {server}: {reason}")]
    BadAnswer {
        /// The server.
        server: SocketAddr,
        /// What is wrong with it.
        reason: String,
    },

    /// Any other failure code (SERVFAIL, FORMERR, NOTIMP, NOTZONE, a
    /// signed NOTAUTH: the server is not authoritative for the zone).
    #[error("DNS server {server} answered {rcode}: {reason}")]
    Rejected {
        /// The server.
        server: SocketAddr,
        /// The response code.
        rcode: String,
        /// What it means here.
        reason: String,
    },
}

impl Error {
    /// A short fixed label for metrics: `invalid`, `conflict`, `refused`,
    /// `bad_key`, `unreachable`, `timeout`, `bad_answer` or `rejected`.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "invalid",
            Error::Conflict { .. } => "conflict",
            Error::Refused { .. } => "refused",
            Error::BadKey { .. } => "bad_key",
            Error::Unreachable { .. } => "unreachable",
            Error::Timeout { .. } => "timeout",
            Error::BadAnswer { .. } => "bad_answer",
            Error::Rejected { .. } => "rejected",
        }
    }

    /// Whether the name is held by someone else (or not by us).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }
}
