#![forbid(unsafe_code)]
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

/// The hub allocates and frees a decoded status per report; mimalloc keeps
/// that cheaper and its memory less fragmented than the system allocator
/// (see the scale figures in the README). Built without its transparent
/// huge pages (`no_thp` in Cargo.toml): they cost more memory than the hub's
/// state per agent connection.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = gwhub::hub::Cli::parse();
    match gwhub::hub::run(cli) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (e.g. `| head`) is not an error worth a panic.
            let _ = stdout
                .write_all(out.as_bytes())
                .and_then(|_| stdout.flush());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
