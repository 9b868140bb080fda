//! The field tests' real authoritative servers (BIND 9 and Knot DNS on
//! loopback, answers read with `dig`): test-kit's, one copy for this crate's
//! tests and the hub's.

pub use gwhub_test_kit::dns_server::*;
