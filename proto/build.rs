//! Generates the gwhub.v1 messages and services with a vendored protoc, so a
//! fresh machine needs nothing but cargo.
#![forbid(unsafe_code)]

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "gwhub/v1/status.proto",
        "gwhub/v1/ingest.proto",
        "gwhub/v1/dashboard.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-env-changed=PROTOC");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = tonic_prost_build::Config::new();
    // PROTOC from the environment wins (distribution builds); otherwise the
    // vendored binary. Passed to prost directly: setting the variable would
    // need `unsafe` in edition 2024.
    let protoc = match std::env::var_os("PROTOC") {
        Some(p) => PathBuf::from(p),
        None => protoc_bin_vendored::protoc_bin_path()?,
    };
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("gwhub_v1_descriptor.bin"))
        .compile_with_config(config, &protos, &["."])?;
    Ok(())
}
