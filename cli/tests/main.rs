//! Every integration test of this package in one binary: one link
//! instead of one per file (CI's disk and time), each file a module.
mod agent_cli;
mod agent_run;
mod browser;
mod demo;
mod dns_dry_run;
mod golden;
mod gwhubctl;
mod hub_cli;
mod prometheus;
mod tracing;
