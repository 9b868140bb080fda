//! Fleet DNS's `rfc2136` output (spec section 8): TSIG-signed dynamic
//! UPDATEs (RFC 2136) to one authoritative server, each change of a record
//! set one atomic message whose prerequisites guard the ownership record,
//! and the records read back. The caller (the hub) decides what to publish,
//! computes the ownership record's name and value, and retries; this crate
//! only speaks DNS and says precisely what came of it ([`Error`]).

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod error;
mod key;
mod message;

pub use error::Error;
pub use key::{Algorithm, KeyError, KeySource, TsigKey};
pub use message::{Expect, Owner, RType, RecordSet};
