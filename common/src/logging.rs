//! Log set-up shared by `gwhub` and `gwhub-agent`: text on stderr by default,
//! one JSON object per line with `GWHUB_LOG_FORMAT=json` (for log pipelines);
//! `RUST_LOG` picks the level.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call (tests) is a no-op.
pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if std::env::var("GWHUB_LOG_FORMAT").is_ok_and(|v| v == "json") {
        builder.json().try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
}
