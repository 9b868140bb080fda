#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! gwhub's wire contract, package `gwhub.v1`: the agent -> hub stream
//! (`Ingest`) and the read-only `Dashboard` API, generated from the
//! `.proto` files in `proto/gwhub/v1/` (they carry the versioning rules).
//!
//! [`convert`] maps the wire types to the Gateway API types and validates
//! them against [`gwhub_model::limits`], so agent and hub agree on what is acceptable.

pub mod client;
pub mod convert;

/// Generated messages, clients and servers of package `gwhub.v1`.
pub mod v1 {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("gwhub.v1");

    /// Encoded `FileDescriptorSet` of every gwhub.v1 file, for server
    /// reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("gwhub_v1_descriptor");
}
