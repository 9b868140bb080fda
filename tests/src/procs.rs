//! The project's own binaries as child processes: built on demand (a test
//! crate cannot depend on another package's binary), found beside the test
//! executable, and killed when their guard is dropped.

use std::path::{Path, PathBuf};
use std::process::Child;

/// Builds `bin` of package `package` with the cargo running the tests (in
/// the same profile) and returns `target/<profile>/<bin>`. The environment
/// variable `env` names a prebuilt binary instead, and `GWHUB_BIN_DIR` a
/// directory of prebuilt binaries.
pub fn workspace_binary(package: &str, bin: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    if let Some(dir) = std::env::var_os("GWHUB_BIN_DIR") {
        return PathBuf::from(dir).join(bin);
    }
    let workspace = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/<profile>/deps/<test>-<hash> (tests, benches) or
    // target/<profile>/<bin> (the soak binary).
    let dirs: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(Path::to_path_buf)
        .collect();
    let mut build = std::process::Command::new(cargo);
    build
        .current_dir(&workspace)
        .args(["build", "-q", "-p", package, "--bin", bin]);
    if dirs.iter().any(|d| d.ends_with("release")) {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo build");
    assert!(
        status.success(),
        "cargo build -p {package} --bin {bin} failed"
    );
    dirs.iter()
        .map(|d| d.join(bin))
        .find(|p| p.exists())
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
