//! Every integration test of this package in one binary: one link
//! instead of one per file (CI's disk and time), each file a module.
mod merge;
mod operator_reference;
mod rules;
mod support;
