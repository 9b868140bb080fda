//! Every integration test of this package in one binary: one link
//! instead of one per file (CI's disk and time), each file a module.
mod agent_kube;
mod attacks_join;
mod cluster_lifecycle;
mod crd_pin;
mod dashboard_authz;
mod faults;
mod fleet_dns;
mod fleet_e2e;
mod harness;
mod hub_dashboard_status;
mod hub_liveness;
mod hub_manifests;
mod hub_propagation;
mod hub_restart;
mod hub_status_accepted;
mod hub_status_shards;
mod hub_status_writer;
mod hub_store;
mod hub_store_layout;
mod hub_tls_secrets;
mod inventory;
mod monitoring;
mod mtls;
mod rbac;
mod support;
