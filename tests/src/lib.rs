#![forbid(unsafe_code)]
//! End-to-end test support: real etcd and kube-apiserver processes (one API
//! server per simulated cluster, all on one etcd), the upstream CRDs installed
//! into them, and clients for the tests. Nothing here is mocked.

pub mod apiserver;
pub mod crds;
pub mod install;
pub mod kube_objects;
pub mod procs;
pub mod proxy;
pub mod recorder;
pub mod scenario;

pub use apiserver::{Fleet, FleetError};
