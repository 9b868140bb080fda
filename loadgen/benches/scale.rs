#![forbid(unsafe_code)]
//! The scale bench: `cargo bench -p gwhub-loadgen --bench scale -- [flags]`.
//! Everything lives in the `gwhub-loadgen` library; see its docs.

fn main() -> std::process::ExitCode {
    gwhub_loadgen::main()
}
