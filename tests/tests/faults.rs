//! Faults: the real `gwhub serve` (Kubernetes mode) and real
//! `gwhub-agent run` processes against real API servers, with connections
//! cut and stalled through a TCP proxy, processes and API servers killed
//! with SIGKILL and restarted, two agents for one cluster, skewed clocks in
//! reports, and foreign writers racing the hub and the agent.
//!
//! After each fault the hub Gateway must show the truth again, and a watch
//! that recorded every status the management API server held must show no
//! wrong status (summary conditions that differ from the truth and do not
//! say a report is stale) for longer than `--stale-after` plus the
//! staleness sweep period (`stale-after / 4`) and one status write (500 ms):
//! a cluster that goes silent is marked stale at the first sweep after
//! `stale-after` has passed, and until then the hub rightly still trusts its
//! last report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use gwhub_model::conditions::new as condition;
use gwhub_proto::convert::status_to_proto;
use gwhub_proto::v1::{self, agent_message, hub_message};
use gwhub_test_kit::apiserver::require_assets;
use gwhub_test_kit::proxy::{Mode, Proxy};
use gwhub_test_kit::raw_agent::Agent as RawAgent;
use gwhub_test_kit::recorder::{Judgement, Recorder, Verdict};
use gwhub_test_kit::scenario::{
    GW, HUB_NS, LEASE, NS, OWN, Proc, Scenario, count_lines, free_port, summary, verdict,
    wait_listening,
};
use gwhub_test_kit::wait::until_named;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

const STALE: Duration = Duration::from_secs(3);
/// Bound on every wait for the fleet to converge.
const CONVERGE: Duration = Duration::from_secs(45);

/// Asserts the hub Gateway was never wrong but late: every status of
/// every wrong spell showed each cluster as it was at some earlier moment
/// (the hub lagged a change; it never claimed a state no cluster had,
/// `scenario::earlier`). How late is the machine's business (a loaded one
/// is later; the spells' lengths are printed, and measured by the soak
/// benchmark, `docs/benchmarks.md`); that each wrong spell ends is the
/// test's `converge` after each step.
fn assert_only_late(test: &str, j: &Judgement) {
    eprintln!(
        "{test}: {} statuses recorded, {} honestly stale, {} wrong spell(s), longest {:?}, total {:?}",
        j.statuses,
        j.stale,
        j.spells.len(),
        j.longest(),
        j.total()
    );
    for s in &j.spells {
        assert!(
            s.only_late(),
            "{test}: the hub Gateway showed what was not true ({:?} spell):\n{}\nall of the spell:\n{}",
            s.duration(),
            s.unexplained
                .iter()
                .map(summary)
                .collect::<Vec<_>>()
                .join("\n"),
            s.statuses
                .iter()
                .map(summary)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

struct Running {
    sc: Scenario,
    hub: Proc,
    hub_port: u16,
}

/// A fleet with one hub (no election: a single replica) and nothing else.
async fn fleet(workloads: &[&str]) -> Running {
    let sc = Scenario::start(workloads, STALE).await;
    let hub_port = free_port();
    let hub = sc.hub("hub", hub_port, None);
    assert!(
        wait_listening(hub_port, Duration::from_secs(30)).await,
        "hub not listening:\n{}",
        hub.log()
    );
    Running { sc, hub, hub_port }
}

fn hub_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

async fn converge(r: &Running, what: &str) -> GatewayStatus {
    match r.sc.wait_truth(CONVERGE).await {
        Ok(s) => s,
        Err(e) => panic!("{what}: {e}\nhub log tail:\n{}", tail(&r.hub.log())),
    }
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

async fn recorder(r: &Running) -> (Recorder, Instant) {
    let rec = Recorder::start(r.sc.hub_gateways(), GW);
    assert!(
        rec.wait_first(Duration::from_secs(10)).await,
        "no watch event"
    );
    (rec, Instant::now())
}

/// An agent's connection is cut mid-stream (it reconnects and resyncs),
/// then stalled (the hub marks the cluster stale, not wrong) and released.
#[tokio::test]
async fn agent_connection_cut_and_stalled() {
    if !require_assets("agent_connection_cut_and_stalled") {
        return;
    }
    let mut r = fleet(&["east", "west"]).await;
    let target = format!("127.0.0.1:{}", r.hub_port).parse().unwrap();
    let east_proxy = Proxy::start(target).await.unwrap();
    let west_proxy = Proxy::start(target).await.unwrap();
    let _east = r.sc.agent("agent-east", "east", &east_proxy.url());
    let _west = r.sc.agent("agent-west", "west", &west_proxy.url());
    converge(&r, "start").await;
    let (rec, since) = recorder(&r).await;

    // Cut: the connection drops as the change happens.
    let before = east_proxy.accepted();
    east_proxy.cut();
    r.sc.set_programmed("east", false).await.unwrap();
    converge(&r, "after the cut").await;
    assert!(east_proxy.accepted() > before, "the agent reconnected");

    // Cut again, twice in a row, with changes in between.
    east_proxy.cut();
    r.sc.set_programmed("east", true).await.unwrap();
    east_proxy.cut();
    r.sc.set_programmed("west", false).await.unwrap();
    converge(&r, "after two cuts").await;

    // Stall: nothing moves, the change cannot reach the hub; the hub must
    // say east is stale rather than keep claiming its old report.
    east_proxy.set_mode(Mode::Stall);
    r.sc.set_programmed("east", false).await.unwrap();
    // Marked stale once --stale-after has passed (how soon is the judge's
    // business below): waited for, not assumed after a fixed time.
    let api = r.sc.hub_gateways();
    until_named(
        "the stalled east was never marked stale on the hub Gateway",
        STALE + CONVERGE,
        || async {
            let s = api.get(GW).await.unwrap().status.unwrap_or_default();
            (verdict(&s, r.sc.truth()), summary(&s))
        },
        |(v, _)| *v == Verdict::Stale,
    )
    .await;
    east_proxy.set_mode(Mode::Pass);
    converge(&r, "after the stall").await;

    // Stalled, then cut while stalled: the agent's next connection works.
    east_proxy.set_mode(Mode::Stall);
    r.sc.set_programmed("east", true).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    east_proxy.cut();
    east_proxy.set_mode(Mode::Pass);
    r.sc.set_programmed("west", true).await.unwrap();
    converge(&r, "after stall and cut").await;

    let j = r.sc.judge(&rec, since);
    assert!(j.stale >= 1, "the stall was shown as stale");
    assert_only_late("cut_and_stall", &j);
    let log = r.hub.log();
    assert_eq!(
        count_lines(&log, "status apply failed"),
        0,
        "{}",
        tail(&log)
    );
    r.hub.kill9();
}

/// kill -9 of an agent (restarted), then of the hub (restarted on the same
/// address; the agents find it again and it restores from its store).
#[tokio::test]
async fn agent_and_hub_killed_and_restarted() {
    if !require_assets("agent_and_hub_killed_and_restarted") {
        return;
    }
    let mut r = fleet(&["east", "west"]).await;
    let url = hub_url(r.hub_port);
    let mut east = r.sc.agent("agent-east", "east", &url);
    let _west = r.sc.agent("agent-west", "west", &url);
    converge(&r, "start").await;
    let (rec, since) = recorder(&r).await;

    // The agent dies; its cluster changes meanwhile; a new agent starts.
    east.kill9();
    r.sc.set_programmed("east", false).await.unwrap();
    tokio::time::sleep(STALE + Duration::from_secs(1)).await;
    east.start();
    converge(&r, "after the agent restart").await;

    // The hub dies with nothing changing: the restarted hub restores from
    // its ClusterReports and must not show anything else on the way.
    r.hub.kill9();
    tokio::time::sleep(Duration::from_secs(1)).await;
    r.hub.start();
    assert!(wait_listening(r.hub_port, Duration::from_secs(30)).await);
    tokio::time::sleep(STALE + Duration::from_secs(1)).await;
    converge(&r, "after the hub restart").await;

    // The hub dies and a cluster changes while nobody can write: the
    // record is judged up to the kill, and again from the moment the hub
    // is back (it then has the window to catch up).
    let j = r.sc.judge(&rec, since);
    assert_only_late("agent_and_hub_kill", &j);
    r.hub.kill9();
    r.sc.set_programmed("west", false).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    r.hub.start();
    let back = Instant::now();
    assert!(wait_listening(r.hub_port, Duration::from_secs(30)).await);
    converge(&r, "after the second hub restart").await;
    r.sc.set_programmed("east", true).await.unwrap();
    r.sc.set_programmed("west", true).await.unwrap();
    converge(&r, "after changes on the restarted hub").await;

    let j = r.sc.judge(&rec, back);
    assert_only_late("agent_and_hub_kill (after the restart)", &j);
    r.hub.kill9();
}

/// A workload API server is killed with SIGKILL and restarted. While its
/// watches fail the agent stops vouching for the cluster (no heartbeats, no
/// snapshot), so the hub marks the report stale instead of showing it as
/// fresh; once the watches recover the next change reaches the hub.
#[tokio::test]
async fn workload_api_server_killed_and_restarted() {
    if !require_assets("workload_api_server_killed_and_restarted") {
        return;
    }
    let mut r = fleet(&["east"]).await;
    let _east = r.sc.agent("agent-east", "east", &hub_url(r.hub_port));
    converge(&r, "start").await;
    let (rec, since) = recorder(&r).await;

    r.sc.fleet.kill_apiserver("east");
    // The agent cannot see its cluster: its report goes stale at the hub
    // (waited for, with a bound only for reporting a failure).
    until_named(
        "the hub never marked the unreadable cluster stale",
        STALE + CONVERGE,
        || async {
            rec.seen()
                .last()
                .map(|s| (verdict(&s.status, r.sc.truth()), summary(&s.status)))
        },
        |last| last.as_ref().is_some_and(|(v, _)| *v == Verdict::Stale),
    )
    .await;
    r.sc.fleet.start_apiserver("east").await.unwrap();
    r.sc.set_programmed("east", false).await.unwrap();
    converge(&r, "a change after the API server restart").await;
    r.sc.set_programmed("east", true).await.unwrap();
    converge(&r, "and back").await;

    let j = r.sc.judge(&rec, since);
    assert!(j.stale > 0, "the outage showed as stale: {j:?}");
    assert_only_late("apiserver_kill", &j);
    r.hub.kill9();
}

/// Two agent processes for one cluster. Defined behaviour: the newest
/// stream is the cluster's; an older one is ended with ABORTED ("a newer
/// stream ... took over") at its next report, reconnects, and becomes the
/// newest in turn. Both read the same cluster, so the hub follows the
/// truth throughout; the connections take turns.
#[tokio::test]
async fn duplicate_agents_for_one_cluster() {
    if !require_assets("duplicate_agents_for_one_cluster") {
        return;
    }
    let mut r = fleet(&["east"]).await;
    let url = hub_url(r.hub_port);
    let _a = r.sc.agent("agent-east-a", "east", &url);
    converge(&r, "start").await;
    let _b = r.sc.agent("agent-east-b", "east", &url);
    let (rec, since) = recorder(&r).await;
    // The second agent connected and took over the first's stream (the
    // agents then keep superseding each other as they reconnect).
    until_named(
        "the second agent never took over east's stream",
        CONVERGE,
        || async { count_lines(&r.hub.log(), "took over") },
        |n| *n >= 1,
    )
    .await;
    for programmed in [false, true, false, true] {
        r.sc.set_programmed("east", programmed).await.unwrap();
        converge(&r, &format!("programmed {programmed}")).await;
    }
    let j = r.sc.judge(&rec, since);
    assert_only_late("duplicate_agents", &j);
    // The superseded agent reconnects in its own time (its back-off).
    let connected = until_named(
        "the superseded agent never reconnected (fewer than 3 connections)",
        CONVERGE,
        || async { count_lines(&r.hub.log(), "agent connected") },
        |n| *n >= 3,
    )
    .await;
    let took_over = count_lines(&r.hub.log(), "took over");
    eprintln!("duplicate_agents: {connected} connections, {took_over} streams superseded");
    r.hub.kill9();
}

/// A foreign controller (its own field manager) keeps applying its own
/// condition to the hub Gateway's status, and another to the workload
/// Gateway's, while the hub and the agent write theirs: everybody's
/// conditions survive.
#[tokio::test]
async fn foreign_writers_race_the_hub_and_the_agent() {
    if !require_assets("foreign_writers_race_the_hub_and_the_agent") {
        return;
    }
    let mut r = fleet(&["east"]).await;
    let _east = r.sc.agent("agent-east", "east", &hub_url(r.hub_port));
    converge(&r, "start").await;
    let (rec, since) = recorder(&r).await;

    let writer = |api: Api<Gateway>, manager: &'static str, type_: &'static str| {
        tokio::spawn(async move {
            let mut n = 0u64;
            let mut last_ok = 0;
            let deadline = Instant::now() + Duration::from_secs(12);
            while Instant::now() < deadline {
                n += 1;
                let body = json!({
                    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                    "metadata": {"name": GW},
                    "status": {"conditions": [{
                        "type": type_, "status": "True", "reason": "Attached",
                        "message": format!("write {n}"), "observedGeneration": 1,
                        "lastTransitionTime": "2026-11-23T09:00:00Z"}]}
                });
                if api
                    .patch_status(GW, &PatchParams::apply(manager), &Patch::Apply(&body))
                    .await
                    .is_ok()
                {
                    last_ok = n;
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            last_ok
        })
    };
    let hub_writer = writer(
        r.sc.hub_gateways(),
        "policy-controller",
        "example.com/PolicyAffected",
    );
    let east_gws: Api<Gateway> = Api::namespaced(r.sc.workloads["east"].clone(), NS);
    let east_writer = writer(east_gws.clone(), "dns-operator", "example.com/DNSChecked");
    for programmed in [false, true, false, true] {
        r.sc.set_programmed("east", programmed).await.unwrap();
        converge(&r, &format!("programmed {programmed}")).await;
    }
    let hub_last = hub_writer.await.unwrap();
    let east_last = east_writer.await.unwrap();
    assert!(hub_last > 10 && east_last > 10, "the writers ran");

    let status = converge(&r, "end").await;
    let msg = |s: &GatewayStatus, t: &str| {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == t)
            .map(|c| c.message.clone())
    };
    assert_eq!(
        msg(&status, "example.com/PolicyAffected"),
        Some(format!("write {hub_last}")),
        "the foreign condition on the hub Gateway survived"
    );
    let east = east_gws.get(GW).await.unwrap().status.unwrap_or_default();
    assert_eq!(
        msg(&east, "example.com/DNSChecked"),
        Some(format!("write {east_last}"))
    );
    assert!(msg(&east, "LoadBalancerReady").is_some(), "the agent's");
    assert_eq!(msg(&east, "Accepted").as_deref(), Some("istio accepted"));
    let j = r.sc.judge(&rec, since);
    assert_only_late("foreign_writers", &j);
    let log = r.hub.log();
    assert_eq!(
        count_lines(&log, "status apply failed"),
        0,
        "{}",
        tail(&log)
    );
    r.hub.kill9();
}

// ---- clock skew: the test kit's raw agent over gRPC -----------------------

/// Sends a snapshot of the hub Gateway whose conditions carry `at` as their
/// times, and waits for its ack (the hub in Kubernetes mode, on a loaded
/// machine: up to 20 s).
async fn snapshot_at(agent: &mut RawAgent, at: Timestamp) {
    let c = |t: &str| condition(t, "True", t, "", Some(1), at);
    let status = GatewayStatus {
        conditions: Some(vec![c("Accepted"), c("Programmed")]),
        ..Default::default()
    };
    let report = v1::GatewayReport {
        namespace: NS.into(),
        name: GW.into(),
        uid: "uid".into(),
        generation: 1,
        status: Some(status_to_proto(&status).unwrap()),
    };
    agent.send_snapshot(1, 1, vec![report]).await;
    match agent.recv_within(Duration::from_secs(20)).await {
        hub_message::Message::Ack(a) => assert_eq!(a.seq, 1, "the snapshot's ack"),
        other => panic!("expected the snapshot's ack, got {other:?}"),
    }
}

/// A heartbeat saying it was sent at `sent_unix_millis` (the agent's clock).
async fn heartbeat_at(agent: &RawAgent, sent_unix_millis: i64) {
    agent
        .send(agent_message::Message::Heartbeat(v1::Heartbeat {
            sent_unix_millis,
        }))
        .await;
}

fn cond<'a>(s: &'a GatewayStatus, t: &str) -> Option<&'a gwhub_model::Condition> {
    s.conditions.iter().flatten().find(|c| c.type_ == t)
}

/// Reports whose times are decades in the future or the past, and
/// heartbeats with skewed send times, change nothing: freshness is the
/// hub's own receive time, so a silent cluster goes stale after
/// `--stale-after` of the hub's clock, and the stale message names the
/// hub's time of the last report.
#[tokio::test]
async fn clock_skew_in_reports_does_not_break_staleness() {
    if !require_assets("clock_skew_in_reports_does_not_break_staleness") {
        return;
    }
    let r = fleet(&[]).await;
    let future: Timestamp = "2099-01-01T00:00:00Z".parse().unwrap();
    let past: Timestamp = "1971-01-01T00:00:00Z".parse().unwrap();
    let hub = ([127, 0, 0, 1], r.hub_port).into();
    let mut ahead = RawAgent::connect(hub, "ahead").await;
    let mut behind = RawAgent::connect(hub, "behind").await;
    snapshot_at(&mut ahead, future).await;
    snapshot_at(&mut behind, past).await;

    let api = r.sc.hub_gateways();
    let fresh = |s: &GatewayStatus| {
        cond(s, "Programmed").is_some_and(|c| c.message == "Programmed is True in all 2 clusters")
            && cond(s, OWN).is_some_and(|c| c.message == "Aggregated the status of 2 clusters")
    };
    // The heartbeats go on their own beat, whatever the API server's
    // answers take (a slow read must not make a silence); "ahead" stops
    // when `ahead_on` goes false, and `last_ahead` is when it last sent.
    let ahead_on = AtomicBool::new(true);
    let done = AtomicBool::new(false);
    let last_ahead = std::sync::Mutex::new(Instant::now());
    let beats = async {
        while !done.load(Ordering::SeqCst) {
            if ahead_on.load(Ordering::SeqCst) {
                heartbeat_at(&ahead, future.as_millisecond()).await;
                if let Ok(mut t) = last_ahead.lock() {
                    *t = Instant::now();
                }
            }
            heartbeat_at(&behind, 0).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    let checks = async {
        // Both stay fresh for several windows while they heartbeat with
        // skewed clocks (the ancient one included).
        let until = Instant::now() + STALE * 3;
        let mut seen_fresh = false;
        while Instant::now() < until {
            let s = api.get(GW).await.unwrap().status.unwrap_or_default();
            if seen_fresh {
                assert!(
                    fresh(&s),
                    "skewed clocks made a cluster stale: {}",
                    summary(&s)
                );
            }
            seen_fresh |= fresh(&s);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(seen_fresh, "never aggregated");

        // "ahead" goes silent (its stream stays open); "behind" keeps going.
        ahead_on.store(false, Ordering::SeqCst);
        let wall = Timestamp::now();
        let deadline = Instant::now() + CONVERGE;
        let stale = loop {
            let s = api.get(GW).await.unwrap().status.unwrap_or_default();
            if cond(&s, "Programmed").is_some_and(|c| c.message.contains("ahead status is stale")) {
                break s;
            }
            assert!(Instant::now() < deadline, "never stale: {}", summary(&s));
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        done.store(true, Ordering::SeqCst);
        (stale, Instant::now(), wall)
    };
    let ((), (stale, seen, wall)) = tokio::join!(beats, checks);
    // From ahead's last heartbeat (the hub received it then or later) to
    // the stale status seen: never shorter than --stale-after, so a
    // far-future time neither keeps it fresh (it went stale above) nor
    // makes it stale early. Only a lower bound: how late it shows
    // depends on the machine, not on the hub's rule.
    let last = *last_ahead.lock().unwrap();
    let after = seen.duration_since(last);
    eprintln!("clock_skew: stale seen {after:?} after the last heartbeat (stale-after {STALE:?})");
    assert!(
        after + Duration::from_millis(600) >= STALE,
        "stale early: {after:?}"
    );
    let message = cond(&stale, "Programmed").unwrap().message.clone();
    assert!(!message.contains("behind"), "{message}");
    let since: Timestamp = message
        .rsplit("no report since ")
        .next()
        .and_then(|t| t.split(';').next())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no time in {message:?}"));
    let off = (since.as_second() - wall.as_second()).abs();
    assert!(
        off < 60,
        "the stale time is the hub's own ({since}, now {wall})"
    );
    drop((ahead, behind));
    drop(r);
}

// ---- HA -------------------------------------------------------------------

/// What [`kill_writer_and_wait`] saw.
struct Failover {
    /// The hub Gateway once it showed the change made after the kill.
    status: GatewayStatus,
    /// Every status written, from before the kill.
    rec: Recorder,
    since: Instant,
    /// The agent, streaming to the survivor.
    _agent: Proc,
}

/// The failover both HA tests measure: cluster `east`'s agent streams to
/// `survivor` (on `survivor_port`; `writer` imports its reports); once
/// the hub Gateway shows east not Programmed, `writer` (which writes it)
/// is killed with SIGKILL (no release) and east made Programmed again.
/// Waits for the survivor's write of that and asserts it came within
/// three Leases (the survivor takes the expired Lease, it retries every
/// 2 s, not Leases later); prints how long it took.
async fn kill_writer_and_wait(
    sc: &mut Scenario,
    writer: &mut Proc,
    survivor: &Proc,
    survivor_port: u16,
    test: &str,
) -> Failover {
    let agent = sc.agent("agent-east", "east", &hub_url(survivor_port));
    if let Err(e) = sc.wait_truth(CONVERGE).await {
        panic!("{e}\n{}", tail(&survivor.log()));
    }
    sc.set_programmed("east", false).await.unwrap();
    sc.wait_truth(CONVERGE).await.unwrap();
    let rec = Recorder::start(sc.hub_gateways(), GW);
    assert!(rec.wait_first(Duration::from_secs(10)).await);
    let since = Instant::now();

    writer.kill9();
    let killed = Instant::now();
    sc.set_programmed("east", true).await.unwrap();
    let status = match sc.wait_truth(Duration::from_secs(90)).await {
        Ok(s) => s,
        Err(e) => panic!("{e}\n{}", tail(&survivor.log())),
    };
    // wait_truth reads with a GET, which can see the write before the
    // recorder's watch delivers it.
    let right = |s: &GatewayStatus| verdict(s, sc.truth()) == Verdict::Right;
    assert!(
        rec.wait_until(Duration::from_secs(30), right).await,
        "{test}: the watch never delivered the survivor's write"
    );
    let written = rec
        .seen()
        .into_iter()
        .find(|s| s.at > killed && verdict(&s.status, sc.truth()) == Verdict::Right)
        .map(|s| s.at)
        .expect("the watch saw the survivor's write");
    let failover = written - killed;
    eprintln!(
        "{test}: the survivor wrote the change {failover:?} after the writer was killed (Lease {LEASE:?})"
    );
    assert!(
        failover < LEASE * 3,
        "{test}: failover took {failover:?} with a {LEASE:?} Lease"
    );
    Failover {
        status,
        rec,
        since,
        _agent: agent,
    }
}

/// Two replicas with Lease election; the leader is killed with SIGKILL
/// (no release). The other replica, which ingests the agent all along,
/// takes the Lease once it expires and writes the change made after the
/// kill. Prints the failover time (kill to the follower's first write).
#[tokio::test]
async fn ha_failover_after_the_leader_is_killed() {
    if !require_assets("ha_failover_after_the_leader_is_killed") {
        return;
    }
    let mut sc = Scenario::start(&["east"], STALE).await;
    let (pa, pb) = (free_port(), free_port());
    let mut a = sc.hub("hub-a", pa, Some("hub-a"));
    assert!(wait_listening(pa, Duration::from_secs(30)).await);
    let leases: Api<Lease> = Api::namespaced(sc.mgmt.clone(), HUB_NS);
    let holder = || async {
        leases
            .get_opt("gwhub-hub")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default()
    };
    let deadline = Instant::now() + CONVERGE;
    while !holder().await.starts_with("hub-a") {
        assert!(Instant::now() < deadline, "hub-a never led");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b = sc.hub("hub-b", pb, Some("hub-b"));
    assert!(wait_listening(pb, Duration::from_secs(30)).await);
    let f = kill_writer_and_wait(&mut sc, &mut a, &b, pb, "ha_failover").await;
    assert!(holder().await.starts_with("hub-b"), "hub-b holds the Lease");
    assert_eq!(
        cond(&f.status, "Programmed").map(|c| c.status.as_str()),
        Some("True")
    );
    let j = sc.judge(&f.rec, f.since);
    eprintln!(
        "ha_failover: wrong for {:?} in all (the failover gap)",
        j.total()
    );
    assert!(count_lines(&b.log(), "became leader") >= 1);
    drop(b);
}

/// `gwhub serve --status-shards 4` on two replicas: the shards spread two
/// each; the replica holding the hub Gateway's shard is killed with
/// SIGKILL (no release) and the other, which ingests the agent all along,
/// takes the shard once its Lease expires and writes the change made after
/// the kill, as fast as a leader failover.
#[tokio::test]
async fn sharded_failover_after_the_writer_is_killed() {
    if !require_assets("sharded_failover_after_the_writer_is_killed") {
        return;
    }
    const SHARDS: u32 = 4;
    let mut sc = Scenario::start(&["east"], STALE).await;
    let (pa, pb) = (free_port(), free_port());
    let flags = ["--status-shards", "4"];
    let mut a = sc.hub_with("hub-a", pa, Some("hub-a"), &flags);
    let mut b = sc.hub_with("hub-b", pb, Some("hub-b"), &flags);
    assert!(wait_listening(pa, Duration::from_secs(30)).await);
    assert!(wait_listening(pb, Duration::from_secs(30)).await);
    let leases: Api<Lease> = Api::namespaced(sc.mgmt.clone(), HUB_NS);
    let holder = |shard: u32| {
        let leases = leases.clone();
        async move {
            leases
                .get_opt(&format!("gwhub-shard-{shard}"))
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec?.holder_identity)
                .unwrap_or_default()
        }
    };
    // Spread: two shards each.
    let deadline = Instant::now() + CONVERGE;
    loop {
        let mut holders = Vec::new();
        for s in 0..SHARDS {
            holders.push(holder(s).await);
        }
        let of = |p: &str| holders.iter().filter(|h| h.starts_with(p)).count();
        if of("hub-a") == 2 && of("hub-b") == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "shards never spread: {holders:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let shard = gwhub_hub_rules::shards::shard_of(NS, GW, SHARDS);
    let writer = holder(shard).await;
    let (victim, survivor, survivor_port, survivor_id) = if writer.starts_with("hub-a") {
        (&mut a, &b, pb, "hub-b")
    } else {
        (&mut b, &a, pa, "hub-a")
    };
    let _failover =
        kill_writer_and_wait(&mut sc, victim, survivor, survivor_port, "sharded_failover").await;
    assert!(
        holder(shard).await.starts_with(survivor_id),
        "the survivor holds the shard"
    );
    assert!(count_lines(&survivor.log(), "took a status shard Lease") >= 3);
}

/// kill -9 of a hub whose store lags what it had heard (west's report is
/// lost, as when its first write had not happened yet at 10,000
/// clusters): the restarted hub is ready and takes east back, but writes
/// no hub Gateway status (east alone would be a shape the fleet never
/// had) until west, which the killed process's liveness record lists, is
/// back too. Every status seen is the settled one.
#[tokio::test]
async fn a_killed_hubs_lagging_store_is_not_written_on_restart() {
    use gwhub_hub_rules::liveness::{self, CLUSTERS_KEY, LABEL};
    use gwhub_hub_rules::report::ClusterReport;
    use gwhub_model::status::same_applied_status;
    use gwhub_test_kit::procs::scrape;
    use gwhub_test_kit::wait::until;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ListParams;
    if !require_assets("a_killed_hubs_lagging_store_is_not_written_on_restart") {
        return;
    }
    // Long enough that west is not stale before it is back.
    let sc = Scenario::start(&["east", "west"], Duration::from_secs(30)).await;
    let (hub_port, metrics_port) = (free_port(), free_port());
    let metrics = format!("127.0.0.1:{metrics_port}");
    let mut hub = sc.hub_with("hub", hub_port, None, &["--metrics-listen", &metrics]);
    assert!(wait_listening(hub_port, Duration::from_secs(30)).await);
    let url = hub_url(hub_port);
    let _east = sc.agent("agent-east", "east", &url);
    let mut west = sc.agent("agent-west", "west", &url);
    if let Err(e) = sc.wait_truth(CONVERGE).await {
        panic!("{e}\n{}", tail(&hub.log()));
    }
    // The hub's liveness record lists both (rewritten at most every 2 s).
    let configmaps: Api<ConfigMap> = Api::namespaced(sc.mgmt.clone(), HUB_NS);
    let labelled = ListParams::default().labels(&format!("{LABEL}=replica"));
    until(
        Duration::from_secs(30),
        || async {
            let records = configmaps.list(&labelled).await.unwrap().items;
            records
                .into_iter()
                .filter_map(|r| r.data?.get(CLUSTERS_KEY).cloned())
                .map(|text| liveness::decode(&text).0.into_keys().collect::<Vec<_>>())
                .collect::<Vec<_>>()
        },
        |lists| lists.iter().any(|l| l == &["east", "west"]),
    )
    .await;
    let rec = Recorder::start(sc.hub_gateways(), GW);
    assert!(rec.wait_first(Duration::from_secs(10)).await);
    let settled = rec.seen()[0].status.clone();

    hub.kill9();
    west.kill9();
    let reports: Api<ClusterReport> = Api::namespaced(sc.mgmt.clone(), HUB_NS);
    reports
        .delete(
            &gwhub_model::cluster::object_name("west"),
            &Default::default(),
        )
        .await
        .unwrap();
    hub.start();
    assert!(wait_listening(hub_port, Duration::from_secs(30)).await);
    assert!(wait_listening(metrics_port, Duration::from_secs(30)).await);
    let awaited = || async {
        scrape(metrics_port)
            .await
            .get("gwhub_restart_awaited_clusters")
            .copied()
    };
    // east comes back by itself; west is awaited.
    until(Duration::from_secs(30), awaited, |a| *a == Some(1)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        awaited().await,
        Some(1),
        "west, not back yet, stopped being awaited:\n{}",
        tail(&hub.log())
    );
    west.start();
    until(Duration::from_secs(30), awaited, |a| *a == Some(0)).await;
    if let Err(e) = sc.wait_truth(CONVERGE).await {
        panic!("{e}\n{}", tail(&hub.log()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (i, s) in rec.seen().iter().enumerate() {
        assert!(
            same_applied_status(&s.status, &settled),
            "status #{i} around the restart differs from the settled one:\n{:#?}\nsettled:\n{settled:#?}\n{}",
            s.status,
            tail(&hub.log())
        );
    }
    hub.kill9();
}
