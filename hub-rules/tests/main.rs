//! Every integration test of this package in one binary: one link
//! instead of one per file (CI's disk and time), each file a module.
mod causes;
mod engine;
mod fleet;
mod incremental;
mod inventory;
mod properties;
mod report_memory;
mod support;
