//! The project's own binaries as child processes: built on demand (a test
//! crate cannot depend on another package's binary), found beside the test
//! executable, and killed when their guard is dropped.

use std::path::PathBuf;
use std::process::Child;

/// Builds `bin` of package `package` with the cargo running the tests and
/// returns `target/<profile>/<bin>`; the environment variable `env`, when
/// set, names a prebuilt binary instead.
pub fn workspace_binary(package: &str, bin: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let workspace = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .current_dir(&workspace)
        .args(["build", "-q", "-p", package, "--bin", bin])
        .status()
        .expect("run cargo build");
    assert!(
        status.success(),
        "cargo build -p {package} --bin {bin} failed"
    );
    // target/debug/deps/<test>-<hash> -> target/debug/<bin>
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(|d| d.parent())
        .map(|d| d.join(bin))
        .filter(|p| p.exists())
        .unwrap_or_else(|| panic!("{bin} not found beside {}", exe.display()))
}

/// The `gwhub-agent` binary (`GWHUB_AGENT_BIN` overrides).
pub fn agent_binary() -> PathBuf {
    workspace_binary("gwhub-agent", "gwhub-agent", "GWHUB_AGENT_BIN")
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
