//! Fleet DNS's `rfc2136` output (spec section 8): TSIG-signed dynamic
//! UPDATEs (RFC 2136) to one authoritative server, each change of a record
//! set one atomic message whose prerequisites guard the ownership record
//! ([`Client::publish`], [`Client::delete`]), or all the changes of one
//! name in one message from its plan ([`Client::apply`], the plan made by
//! `gwhub_dns_rules::plan`), and the records read back. The caller (the hub) decides what to publish,
//! computes the ownership record's name and value, and retries; this crate
//! only speaks DNS and says precisely what came of it ([`Error`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use gwhub_dns_rfc2136::{Client, Expect, KeySource, Owner, RType, RecordSet};
//! let key = KeySource::file("/etc/gwhub/tsig/secret", Some("gwhub"), None)?;
//! let client = Client::new("127.0.0.1:53".parse()?, key, std::time::Duration::from_secs(5));
//! let set = RecordSet { name: "app.fleet.test".into(), rtype: RType::A, ttl: 30,
//!     values: vec!["192.0.2.1".into()] };
//! let owner = Owner { txt_name: "_gwhub-a.app.fleet.test".into(),
//!     txt_value: "heritage=gwhub,owner=gwhub-system,gateway=ns/gw".into() };
//! client.publish("fleet.test", &set, &owner, Expect::Create).await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod client;
mod error;
mod key;
mod message;
mod transport;

pub use client::{Client, ReadBack};
pub use error::Error;
pub use key::{Algorithm, ClauseError, KeyError, KeySource, TsigKey};
pub use message::{Expect, Owner, RType, RecordSet};
