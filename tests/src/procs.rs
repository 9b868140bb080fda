//! The project's own binaries as child processes: built on demand (a test
//! crate cannot depend on another package's binary), found beside the test
//! executable, and killed when their guard is dropped.

use std::path::PathBuf;
use std::process::Child;

pub use gwhub_common::workspace_bin::workspace_binary;

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
