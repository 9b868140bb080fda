//! Seeded soak harness: one fleet (a management and two workload
//! API servers, the real `gwhub serve` and two real `gwhub-agent run`
//! processes, each agent behind a TCP proxy), and per run a random fault
//! schedule drawn from the seed: connection cuts and stalls, SIGKILLs of
//! agents and of the hub, and changes of the truth. A watch records every
//! status of the hub Gateway. Reported at the end:
//!
//! - runs, faults injected (by kind);
//! - wrong-status seconds: time the hub Gateway's summary conditions
//!   differed from the truth (without saying a report is stale) beyond the
//!   allowed window (`--stale-after` + sweep period + one write); periods
//!   when the hub itself was down are not judged (nobody can write then);
//! - lost reports: clusters whose final truth the hub did not show within
//!   60 s of the run's end, with every fault healed;
//! - API writes rejected: hub status applies / report stores the API server
//!   refused (from the hub's log), and the agents' failed status writes.
//!
//! `cargo run -p gwhub-tests --bin soak -- --seed 1 --runs 10`
//! (same seed, same schedule). Exits 1 if any figure is not zero.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gwhub_test_kit::proxy::{Mode, Proxy};
use gwhub_test_kit::recorder::Recorder;
use gwhub_test_kit::scenario::{GW, Proc, Scenario, count_lines, free_port, wait_listening};

/// splitmix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

#[derive(Debug)]
struct Args {
    seed: u64,
    runs: u32,
    faults: u32,
    stale_after: Duration,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        seed: 1,
        runs: 1,
        faults: 8,
        stale_after: Duration::from_secs(3),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--runs" => a.runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--faults" => a.faults = value()?.parse().map_err(|e| format!("--faults: {e}"))?,
            "--stale-after-ms" => {
                let ms: u64 = value()?
                    .parse()
                    .map_err(|e| format!("--stale-after-ms: {e}"))?;
                a.stale_after = Duration::from_millis(ms.max(500));
            }
            "-h" | "--help" => {
                return Err(
                    "usage: soak [--seed N] [--runs N] [--faults PER_RUN] [--stale-after-ms MS]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

const CLUSTERS: [&str; 2] = ["east", "west"];

#[derive(Default, Debug)]
struct Figures {
    runs: u32,
    faults: BTreeMap<&'static str, u32>,
    wrong: Duration,
    longest_wrong: Duration,
    lost_reports: u32,
    hub_write_failures: usize,
    rejected_writes: usize,
    agent_write_failures: usize,
}

struct Fleet {
    sc: Scenario,
    hub: Proc,
    hub_port: u16,
    agents: BTreeMap<&'static str, (Proc, Proxy)>,
}

impl Fleet {
    async fn hub_up(&self) {
        if !wait_listening(self.hub_port, Duration::from_secs(30)).await {
            panic!("the hub did not listen again");
        }
    }
}

#[tokio::main]
async fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if !gwhub_test_kit::apiserver::assets_present() {
        eprintln!("soak: no kube-apiserver/etcd; run scripts/kube-assets.sh first");
        std::process::exit(2);
    }
    let started = Instant::now();
    let sc = Scenario::start(&CLUSTERS, args.stale_after).await;
    let allowed = args.stale_after + args.stale_after / 4 + Duration::from_millis(500);
    let hub_port = free_port();
    let hub = sc.hub("hub", hub_port, None);
    let mut fleet = Fleet {
        hub,
        hub_port,
        agents: BTreeMap::new(),
        sc,
    };
    fleet.hub_up().await;
    let target = format!("127.0.0.1:{hub_port}").parse().expect("an address");
    for c in CLUSTERS {
        let proxy = Proxy::start(target).await.expect("a proxy");
        let agent = fleet.sc.agent(&format!("agent-{c}"), c, &proxy.url());
        fleet.agents.insert(c, (agent, proxy));
    }
    if let Err(e) = fleet.sc.wait_truth(Duration::from_secs(60)).await {
        panic!("the fleet never settled: {e}");
    }
    eprintln!(
        "soak: seed {}, {} runs of {} faults, stale-after {:?} (allowed wrong {:?}); fleet up in {:?}; logs in {}",
        args.seed,
        args.runs,
        args.faults,
        args.stale_after,
        allowed,
        started.elapsed(),
        fleet.sc.fleet.dir.display()
    );

    let mut rng = Rng(args.seed);
    let mut fig = Figures::default();
    let rec = Recorder::start(fleet.sc.hub_gateways(), GW);
    rec.wait_first(Duration::from_secs(10)).await;
    for run in 1..=args.runs {
        let run_start = Instant::now();
        // Judged windows: from `since` to the next hub kill (or run end).
        let mut since = Instant::now();
        let mut windows: Vec<(Instant, Instant)> = Vec::new();
        let mut schedule = Vec::new();
        for _ in 0..args.faults {
            let cluster = CLUSTERS[rng.below(2) as usize];
            let kind = match rng.below(10) {
                0..=3 => "change",
                4 | 5 => "cut",
                6 => "stall",
                7 | 8 => "kill-agent",
                _ => "kill-hub",
            };
            *fig.faults.entry(kind).or_default() += 1;
            schedule.push(format!("{kind}:{cluster}"));
            match kind {
                "change" => {
                    let now = fleet.sc.truth()[cluster];
                    fleet
                        .sc
                        .set_programmed(cluster, !now)
                        .await
                        .expect("change the truth");
                }
                "cut" => {
                    fleet.agents[cluster].1.cut();
                    if rng.below(2) == 0 {
                        let now = fleet.sc.truth()[cluster];
                        let _ = fleet.sc.set_programmed(cluster, !now).await;
                    }
                }
                "stall" => {
                    let proxy = &fleet.agents[cluster].1;
                    proxy.set_mode(Mode::Stall);
                    let now = fleet.sc.truth()[cluster];
                    let _ = fleet.sc.set_programmed(cluster, !now).await;
                    tokio::time::sleep(rng.millis(500, 6000)).await;
                    if rng.below(2) == 0 {
                        proxy.cut();
                    }
                    proxy.set_mode(Mode::Pass);
                }
                "kill-agent" => {
                    let down = rng.millis(0, 5000);
                    fleet.agents.get_mut(cluster).expect("agent").0.kill9();
                    if rng.below(2) == 0 {
                        let now = fleet.sc.truth()[cluster];
                        let _ = fleet.sc.set_programmed(cluster, !now).await;
                    }
                    tokio::time::sleep(down).await;
                    fleet.agents.get_mut(cluster).expect("agent").0.start();
                }
                _ => {
                    windows.push((since, Instant::now()));
                    fleet.hub.kill9();
                    tokio::time::sleep(rng.millis(0, 3000)).await;
                    fleet.hub.start();
                    since = Instant::now();
                    fleet.hub_up().await;
                }
            }
            tokio::time::sleep(rng.millis(100, 3000)).await;
        }
        // Heal: every proxy passes, everything runs; the truth must arrive.
        for (agent, proxy) in fleet.agents.values_mut() {
            proxy.set_mode(Mode::Pass);
            if !agent.running() {
                agent.start();
            }
        }
        let settled = fleet.sc.wait_truth(Duration::from_secs(60)).await;
        if let Err(e) = &settled {
            eprintln!("run {run}: {e}");
            fig.lost_reports += lost(&fleet).await;
        }
        windows.push((since, Instant::now()));
        let mut run_wrong = Duration::ZERO;
        for (from, to) in windows {
            let j = fleet.sc.judge_window(&rec, from, to);
            for s in &j.spells {
                fig.longest_wrong = fig.longest_wrong.max(s.duration());
                if s.duration() > allowed {
                    run_wrong += s.duration() - allowed;
                }
            }
        }
        fig.wrong += run_wrong;
        fig.runs += 1;
        eprintln!(
            "run {run}: {} in {:?}; wrong beyond the window {:?}; settled: {}",
            schedule.join(" "),
            run_start.elapsed(),
            run_wrong,
            settled.is_ok()
        );
    }

    let hub_log = fleet.hub.log();
    fig.hub_write_failures = count_lines(&hub_log, "status apply failed")
        + count_lines(&hub_log, "cannot store the cluster's report");
    fig.rejected_writes = hub_log
        .lines()
        .filter(|l| {
            (l.contains("status apply failed") || l.contains("cannot store the cluster's report"))
                && l.contains("ApiError")
        })
        .count();
    fig.agent_write_failures = fleet
        .agents
        .values()
        .map(|(a, _)| count_lines(&a.log(), "status apply failed"))
        .sum();
    let faults: u32 = fig.faults.values().sum();
    println!("seed                        {}", args.seed);
    println!("runs                        {}", fig.runs);
    println!("faults injected             {faults} {:?}", fig.faults);
    println!(
        "wrong-status seconds        {:.1} (beyond {:?}; longest wrong spell {:.1}s)",
        fig.wrong.as_secs_f64(),
        allowed,
        fig.longest_wrong.as_secs_f64()
    );
    println!("lost reports                {}", fig.lost_reports);
    println!(
        "API writes rejected         {} (hub write failures of any kind: {}, agent: {})",
        fig.rejected_writes, fig.hub_write_failures, fig.agent_write_failures
    );
    println!("elapsed                     {:?}", started.elapsed());
    let bad = fig.wrong > Duration::ZERO || fig.lost_reports > 0 || fig.rejected_writes > 0;
    drop(rec);
    drop(fleet);
    std::process::exit(i32::from(bad));
}

/// Clusters whose truth the hub Gateway does not show.
async fn lost(fleet: &Fleet) -> u32 {
    let Ok(gw) = fleet.sc.hub_gateways().get(GW).await else {
        return CLUSTERS.len() as u32;
    };
    let status = gw.status.unwrap_or_default();
    let programmed = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Programmed")
        .map(|c| (c.status.clone(), c.message.clone()));
    let mut lost = 0;
    for c in CLUSTERS {
        let truth = fleet.sc.truth()[c];
        let shown_failing = programmed.as_ref().is_some_and(|(s, m)| {
            s == "False" && m.contains(&format!("{c} {}", gwhub_test_kit::scenario::NOT_PROGRAMMED))
        });
        let shown_ok = programmed.as_ref().is_some_and(|(s, _)| s == "True")
            || (programmed.is_some() && !shown_failing);
        if (truth && !shown_ok) || (!truth && !shown_failing) {
            lost += 1;
        }
    }
    lost
}
