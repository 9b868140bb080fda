//! The hub under test: `gwhub serve --insecure` as a child process, its
//! addresses read back from its log, its warnings and errors counted, and
//! the process killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::BenchError;

/// The hub child process; killed on drop.
pub(crate) struct HubProcess {
    pub(crate) child: Child,
    pub(crate) ingest: String,
    pub(crate) dashboard: String,
    pub(crate) problems: Arc<Mutex<(usize, Vec<String>)>>,
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn field(line: &str, name: &str) -> Option<String> {
    let at = line.find(name)? + name.len();
    Some(line[at..].split_whitespace().next()?.to_owned())
}

/// Starts `gwhub serve` on loopback ports the OS picks, read back from its log.
pub(crate) fn start_hub(bin: &Path) -> Result<HubProcess, BenchError> {
    start_hub_with(
        bin,
        &[
            "--no-kube",
            "--listen",
            "127.0.0.1:0",
            "--dashboard-listen",
            "127.0.0.1:0",
            "--stale-after",
            "1h",
        ],
    )
}

/// `gwhub serve --insecure` with `extra` flags.
pub(crate) fn start_hub_with(bin: &Path, extra: &[&str]) -> Result<HubProcess, BenchError> {
    start_hub_env(bin, extra, &[])
}

/// `gwhub serve --insecure` with `extra` flags and `env` set (e.g. a
/// replica's `POD_NAME`, its Lease identity).
pub(crate) fn start_hub_env(
    bin: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Result<HubProcess, BenchError> {
    let mut child = Command::new(bin)
        .args(["serve", "--insecure"])
        .args(extra)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BenchError::Spawn {
            bin: bin.to_owned(),
            source,
        })?;
    let Some(stderr) = child.stderr.take() else {
        let _ = child.kill();
        return Err(BenchError::NoStderr(bin.to_owned()));
    };
    let problems = Arc::new(Mutex::new((0usize, Vec::new())));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let p = problems.clone();
    // `GWHUB_LOADGEN_HUB_LOG=FILE` appends every hub's log to FILE, to
    // read what a run's hubs did after the bench removed its directory.
    let mut keep = std::env::var_os("GWHUB_LOADGEN_HUB_LOG").and_then(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
    });
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(f) = keep.as_mut() {
                use std::io::Write;
                let _ = writeln!(f, "{line}");
            }
            if line.contains("hub serving") {
                let _ = addr_tx.send((
                    field(&line, "ingest_addr="),
                    field(&line, "dashboard_addr="),
                ));
            } else if (line.contains("WARN") || line.contains("ERROR"))
                && !line.contains("--insecure:")
                && !line.contains("Server cert bypassed")
            {
                let mut p = p.lock();
                p.0 += 1;
                if p.1.len() < 5 {
                    p.1.push(line);
                }
            }
        }
    });
    let mut hub = HubProcess {
        child,
        ingest: String::new(),
        dashboard: String::new(),
        problems,
    };
    match addr_rx.recv_timeout(Duration::from_secs(30)) {
        Ok((Some(i), Some(d))) => {
            hub.ingest = format!("http://{i}");
            hub.dashboard = format!("http://{d}");
            Ok(hub)
        }
        _ => Err(BenchError::NoAddresses(bin.to_owned())),
    }
}
