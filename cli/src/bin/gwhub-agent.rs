#![forbid(unsafe_code)]
//! `gwhub-agent`: parses the command line and hands over to the library;
//! errors become `error: <message>` on stderr and exit code 1.

use std::process::ExitCode;

use clap::Parser;
use gwhub::agent::compute;
use gwhub::agent::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        // The List is written as it is computed, warnings as they are found.
        Command::Compute(args) => {
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            match compute::run(&args, out, |w| eprintln!("warning: {w}")) {
                Ok(()) => ExitCode::SUCCESS,
                // A closed pipe (`| head`) is not an error worth a message.
                Err(e) if e.is_closed_output() => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        // Long-running; logs go to stderr and nothing is printed on success.
        Command::Run(args) => match gwhub::agent::run::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
    }
}
