#![forbid(unsafe_code)]
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gwhub::cli::Cli::parse();
    match gwhub::cli::run(cli) {
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
