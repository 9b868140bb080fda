//! Finding this workspace's binaries from its tests and benches: a test crate
//! cannot depend on another package's binary, so it builds it on demand with
//! the cargo running the tests, unless the caller names prebuilt ones.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `bin` of package `package` in the profile of the running test (or
/// bench) executable and returns `target/<profile>/<bin>`. The environment
/// variable `env` names a prebuilt binary instead, and `GWHUB_BIN_DIR` a
/// directory of prebuilt binaries (the test script sets it: `cargo test`
/// has already built them, so no test builds anything).
///
/// # Panics
/// If the build fails or the binary is not where cargo puts it: a test
/// cannot go on without it.
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
    // target/<profile>/<bin> (a binary such as the soak harness).
    let dirs: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(Path::to_path_buf)
        .collect();
    let mut build = Command::new(cargo);
    build
        .current_dir(&workspace)
        .args(["build", "-q", "-p", package, "--bin", bin]);
    // Cargo sets these for the running test; build scripts that watch them
    // (ring's does) would otherwise see a change and rebuild half the tree,
    // here and again in the next `cargo test`.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_")
            || matches!(
                &*key,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
            )
        {
            build.env_remove(&*key);
        }
    }
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

/// Runs `gwhubctl --server http://<dashboard> <args>` as a user would and
/// returns its standard output.
///
/// # Panics
/// If it cannot run or exits non-zero (naming the arguments and its
/// standard error), or prints what is not UTF-8.
pub async fn gwhubctl(dashboard: std::net::SocketAddr, args: &[&str]) -> String {
    let out = tokio::process::Command::new(workspace_binary("gwhub", "gwhubctl", "GWHUB_CTL_BIN"))
        .arg("--server")
        .arg(format!("http://{dashboard}"))
        .args(args)
        .output()
        .await
        .expect("run gwhubctl");
    assert!(
        out.status.success(),
        "gwhubctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("gwhubctl prints UTF-8")
}
