//! Waiting in tests for what the system does in its own time: one poll
//! loop (probe, check, give up after a bound naming the last value seen)
//! instead of one hand-written per test.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

/// The one bound for anything the system does "at once" or in its own
/// short time: only how long a failing run takes to say so, never a
/// performance target. 10 s failed passing runs at load 15-20 on two cores
/// (four suites at once beside a stress run); a passing run never waits it.
pub const WAIT: Duration = Duration::from_secs(30);

/// Polls `probe` every 50 ms until `check` holds and returns the value
/// that held; panics after `within`, showing the last value seen (so let
/// the probe return what explains a failure, not a bare `bool`).
pub async fn until<T: Debug, F: Future<Output = T>>(
    within: Duration,
    probe: impl FnMut() -> F,
    check: impl Fn(&T) -> bool,
) -> T {
    poll(None, within, probe, check).await
}

/// [`until`], whose panic says `what` never happened (e.g. "east marked
/// stale"), then the last value seen.
pub async fn until_named<T: Debug, F: Future<Output = T>>(
    what: &str,
    within: Duration,
    probe: impl FnMut() -> F,
    check: impl Fn(&T) -> bool,
) -> T {
    poll(Some(what), within, probe, check).await
}

async fn poll<T: Debug, F: Future<Output = T>>(
    what: Option<&str>,
    within: Duration,
    mut probe: impl FnMut() -> F,
    check: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let v = probe().await;
        if check(&v) {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            match what {
                Some(what) => panic!("{what}: not within {within:?}; last {v:?}"),
                None => panic!("never held within {within:?}; last {v:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `sample` reads the same twice `quiet` apart (the writes a
/// change set off have landed) and returns that reading, for a "nothing
/// more is written" check to start from: a fixed sleep before it races a
/// loaded machine's late writes. Panics after `within` naming `what`.
pub async fn settled<T: Debug + PartialEq, F: Future<Output = T>>(
    what: &str,
    quiet: Duration,
    within: Duration,
    mut sample: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    let mut last = sample().await;
    loop {
        tokio::time::sleep(quiet).await;
        let now = sample().await;
        if now == last {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: never still for {quiet:?} within {within:?}; last {now:?}"
        );
        last = now;
    }
}
