#![forbid(unsafe_code)]
//! `gwhub-agent`: parses the command line and hands over to the library;
//! errors become `error: <message>` on stderr and exit code 1.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use gwhub::agent::compute;
use gwhub::agent::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compute(args) => compute::run(&args).map(|out| {
            for w in &out.warnings {
                eprintln!("warning: {w}");
            }
            out.text
        }),
        // Long-running; logs go to stderr and nothing is printed on success.
        Command::Run(args) => {
            return match gwhub::agent::run::run(&args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            };
        }
    };
    match result {
        Ok(text) => {
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
