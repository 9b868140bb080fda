//! The custom benches (`harness = false`: the load generator's `scale`, the
//! `propagation` bench) run as one quick smoke test under `cargo test
//! --all-targets` and cargo-nextest. Neither brings a test harness, so this
//! answers the one question a runner asks before running them: which tests
//! the binary holds.

/// The smoke test's name, as a runner lists and then runs it.
pub const SMOKE_TEST: &str = "smoke";

/// Answers cargo-nextest's listing (`--list --format terse`, asked once
/// more with `--ignored`): prints the one smoke test (none of them ignored)
/// and returns true when `args` ask for a listing; the bench's `main` then
/// exits. Run as `smoke --exact`, the bench sees no `--bench` flag and runs
/// its smoke configuration, as under `cargo test`.
pub fn answered_listing(args: &[String]) -> bool {
    if !args.iter().any(|a| a == "--list") {
        return false;
    }
    if !args.iter().any(|a| a == "--ignored") {
        println!("{SMOKE_TEST}: test");
    }
    true
}
