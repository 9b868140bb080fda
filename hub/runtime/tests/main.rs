//! Every integration test of this package in one binary: one link
//! instead of one per file (CI's disk and time), each file a module.
mod adversarial;
mod attacks_read;
mod grpc;
mod python_client;
