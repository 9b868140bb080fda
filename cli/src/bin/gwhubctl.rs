#![forbid(unsafe_code)]
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gwhub::ctl::Cli::parse();
    match gwhub::ctl::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
