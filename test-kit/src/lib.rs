#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! Test helpers every suite shares: real etcd and kube-apiserver processes
//! (one API server per simulated cluster, all on one etcd), the upstream
//! CRDs installed into them, clients and scenarios for the tests, the gwhub
//! binaries ([`workspace_bin`], [`procs`]) with a `/metrics` scraper, a raw
//! `Ingest` client ([`raw_agent`]), the benches' latency histogram
//! ([`latency`]), the aggregation benches' fleet ([`bench_fleet`]), a real Prometheus with the shipped
//! alerts ([`prometheus`]), a poll-until helper ([`wait`]), connections from a chosen loopback
//! address for the attack suites ([`loopback`]), a Secret
//! mounted as the kubelet mounts it ([`mounted_secret`]), the custom
//! benches' smoke-test listing ([`smoke`]), and an
//! independent checker of the Gateway CRD's status rules ([`crd_check`]).
//! Nothing here is mocked.
//!
//! It exists so that helpers have one copy instead of one per suite; it
//! depends on the rules crates' types but on neither runtime.

pub mod apiserver;
pub mod bench_fleet;
pub mod crd_check;
pub mod crds;
pub mod dns_server;
pub mod error;
pub mod install;
pub mod kube_objects;
pub mod latency;
pub mod loopback;
pub mod mounted_secret;
pub mod otlp;
pub mod procs;
pub mod prometheus;
pub mod proxy;
pub mod raw_agent;
pub mod recorder;
pub mod scenario;
pub mod smoke;
pub mod wait;
pub mod workspace_bin;

pub use apiserver::Fleet;
pub use error::FleetError;
