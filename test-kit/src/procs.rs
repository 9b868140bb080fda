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

/// A loopback port nothing listens on right now, for a process that binds
/// it later (see [`try_free_port`]).
pub fn free_port() -> u16 {
    try_free_port().expect("bind a free loopback port")
}

/// A loopback port nothing listens on right now, picked *below* the
/// kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`):
/// a port the kernel hands out (`:0`) is free again once the probe closes,
/// and on a busy machine an outgoing connection or another test's `:0`
/// listener could take it before the process we start binds it (an etcd
/// or API server then never comes up). Ports below the range are only
/// ever taken by explicit binds. Each pick in this process moves on from
/// a random start, so picks do not repeat, and is `reserve`d against the
/// other test processes; where there is no room below the range, the
/// kernel's choice.
pub fn try_free_port() -> std::io::Result<u16> {
    try_free_port_where(|port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
}

/// [`try_free_port`] for a port `usable` accepts (probing the protocols
/// the caller's server binds).
pub fn try_free_port_where(usable: impl Fn(u16) -> bool) -> std::io::Result<u16> {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU32, Ordering};
    const FLOOR: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let ceiling = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(0);
    if ceiling < FLOOR + 1_000 {
        // The kernel's choice, still one `usable` accepts (a name server
        // needs UDP free too): a bounded number of tries.
        for _ in 0..100 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            if usable(port) {
                return Ok(port);
            }
        }
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "no port the kernel handed out was usable",
        ));
    }
    let span = ceiling - FLOOR;
    let seed = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        (h.finish() % u64::from(span)) as u32
    };
    let _ = NEXT.compare_exchange(u32::MAX, seed(), Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        let Ok(port) = u16::try_from(FLOOR + n) else {
            continue;
        };
        if reserve(port) && usable(port) {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("every loopback port from {FLOOR} to {ceiling} is in use"),
    ))
}

/// Reserves `port` for this process against the other test processes
/// that run at once (nextest runs each test as a process of its own): an
/// advisory lock on a file named after the port, held until this process
/// ends (the kernel drops it then, also when the process is killed).
/// Without it two processes could pick the same free port before either
/// bound it; the second server then failed to listen and its test talked
/// to the first test's API server (a stress run with two suites at once
/// saw "gw already exists" and a stale cluster never shown). `false`: a
/// live process holds it. The files stay (unlinking a held one would let
/// a second process lock a new file of the same name): at most one empty
/// file per port below the range, in `$TMPDIR/gwhub-test-ports`. Where no
/// lock file can be made, every port is taken as reserved (the probe
/// alone decides, as before).
fn reserve(port: u16) -> bool {
    static HELD: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    let dir = std::env::temp_dir().join("gwhub-test-ports");
    let file = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
    });
    let Ok(file) = file else {
        return true;
    };
    match file.try_lock() {
        Ok(()) => {
            HELD.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(file);
            true
        }
        Err(std::fs::TryLockError::WouldBlock) => false,
        Err(std::fs::TryLockError::Error(_)) => true,
    }
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

/// A loopback address nothing listens on right now ([`free_port`]).
pub fn free_addr() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], free_port()))
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

#[cfg(test)]
mod port_tests {
    use super::{reserve, try_free_port};

    /// A port another process (here: another open of its lock file, which
    /// `flock` treats alike) reserved is not handed out again while it
    /// holds it; a pick is reserved by the process that made it.
    #[test]
    fn a_reserved_port_is_skipped() {
        let port = try_free_port().unwrap();
        assert!(!reserve(port), "{port} was handed out unreserved");
        let other = try_free_port().unwrap();
        assert_ne!(port, other);
    }

    #[test]
    fn picks_are_free_distinct_and_below_the_ephemeral_range() {
        let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok());
        let picks: Vec<u16> = (0..50).map(|_| try_free_port().unwrap()).collect();
        let distinct: std::collections::BTreeSet<_> = picks.iter().collect();
        assert_eq!(distinct.len(), picks.len(), "{picks:?}");
        for p in &picks {
            if let Some(low) = low.filter(|l| *l >= 11_000) {
                assert!(*p >= 10_000 && *p < low, "{p} not below {low}");
            }
            std::net::TcpListener::bind(("127.0.0.1", *p)).unwrap();
        }
    }
}
