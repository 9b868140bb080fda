//! The project's own binaries as child processes: built on demand (a test
//! crate cannot depend on another package's binary), found beside the test
//! executable, and killed when their guard is dropped.

use std::path::PathBuf;
use std::process::Child;

pub use crate::workspace_bin::workspace_binary;

/// The `gwhub-agent` binary (`GWHUB_AGENT_BIN` overrides).
pub fn agent_binary() -> PathBuf {
    workspace_binary("gwhub", "gwhub-agent", "GWHUB_AGENT_BIN")
}

/// The hub's `gwhub` binary (`GWHUB_BIN` overrides).
pub fn gwhub_binary() -> PathBuf {
    workspace_binary("gwhub", "gwhub", "GWHUB_BIN")
}

/// A child process killed (as `kill -9` would) and reaped on drop, so a
/// failing test leaves nothing running.
pub struct Process(pub Child);

impl Process {
    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// SIGTERM, then the exit status (bounded wait).
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.0.id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "process ignored SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Kills the process now (SIGKILL: no clean shutdown) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free loopback port")
}

/// The PEM files `gwhub certs` wrote.
#[derive(Debug, Clone)]
pub struct DevCerts {
    pub ca: PathBuf,
    pub hub_cert: PathBuf,
    pub hub_key: PathBuf,
}

/// Runs `gwhub certs` (the binary, so no test needs the CLI crate): a dev CA,
/// a hub certificate for `hub_sans` and client certificates for `clusters`,
/// written to `out`.
///
/// # Panics
/// If `gwhub certs` fails.
pub fn dev_certs(out: &std::path::Path, clusters: &[&str], hub_sans: &[&str]) -> DevCerts {
    let done = std::process::Command::new(gwhub_binary())
        .args(["certs", "--clusters", &clusters.join(",")])
        .args(["--hub-san", &hub_sans.join(",")])
        .arg("--out")
        .arg(out)
        .output()
        .expect("run gwhub certs");
    assert!(
        done.status.success(),
        "gwhub certs: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    DevCerts {
        ca: out.join("ca.pem"),
        hub_cert: out.join("hub.pem"),
        hub_key: out.join("hub-key.pem"),
    }
}

/// A loopback address free a moment ago (the OS picked it).
pub fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free loopback port")
}

/// An empty directory `gwhub-e2e-<tag>-<pid>` under the system temp dir
/// (emptied first if a previous run left it).
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gwhub-e2e-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The HTTP status of `GET path` on `port` (a gwhub binary's
/// `--metrics-listen`: `/healthz`, `/readyz`), or 0 if nothing answers.
pub async fn http_status(port: u16, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    let head = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
    let mut text = String::new();
    if s.write_all(head.as_bytes()).await.is_err() || s.read_to_string(&mut text).await.is_err() {
        return 0;
    }
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// `GET /metrics` on `port` (a gwhub binary's `--metrics-listen`): every
/// `gwhub*` sample by its name, labels included.
pub async fn scrape(port: u16) -> std::collections::BTreeMap<String, u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text.lines()
        .filter(|l| l.starts_with("gwhub"))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}
