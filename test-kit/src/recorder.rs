//! Records every status the API server shows for one Gateway (through a
//! watch, with the time each was seen), and judges the record against a
//! timeline of the truth: when was the status wrong, and was it only late
//! (what held earlier) or did it claim what never held?
//! How long a spell lasts depends on the machine's load: the fault tests
//! assert that each is only late and that it ends, never its length.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use kube::api::Api;
use kube::runtime::watcher;

/// A status and when the watch delivered it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub status: GatewayStatus,
}

/// Watches one Gateway until dropped.
pub struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Starts watching `name` (the first entry is its status now).
    pub fn start(api: Api<Gateway>, name: &str) -> Recorder {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, cfg).boxed();
            while let Some(ev) = stream.next().await {
                if let Ok(watcher::Event::Apply(gw) | watcher::Event::InitApply(gw)) = ev {
                    let status = gw.status.unwrap_or_default();
                    let mut seen = sink.lock().unwrap_or_else(|e| e.into_inner());
                    // A re-list after a watch error repeats the current object.
                    if seen.last().is_none_or(|s: &Seen| s.status != status) {
                        seen.push(Seen {
                            at: Instant::now(),
                            status,
                        });
                    }
                }
            }
        });
        Recorder { seen, task }
    }

    /// Everything seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until the watch has delivered at least one status.
    pub async fn wait_first(&self, within: Duration) -> bool {
        self.wait_until(within, |_| true).await
    }

    /// Waits until the watch has delivered a status that satisfies `done`
    /// (a GET can see a write before the watch delivers it).
    pub async fn wait_until(
        &self,
        within: Duration,
        done: impl Fn(&GatewayStatus) -> bool,
    ) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self
                .seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|s| done(&s.status))
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How a recorded status compares with the truth of its moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Says what is true.
    Right,
    /// Says honestly that some cluster's report is stale (not a claim about
    /// the cluster, so not wrong).
    Stale,
    /// Claims something that is not true.
    Wrong,
}

/// One stretch of time during which the status was wrong.
#[derive(Clone, Debug)]
pub struct WrongSpell {
    pub from: Instant,
    pub to: Instant,
    /// The statuses shown during the spell.
    pub statuses: Vec<GatewayStatus>,
    /// The statuses of the spell that were not merely late: no earlier
    /// truth up to their moment explains them.
    pub unexplained: Vec<GatewayStatus>,
}

impl WrongSpell {
    pub fn duration(&self) -> Duration {
        self.to - self.from
    }

    /// Whether every status of the spell showed what held earlier: the
    /// status lagged, it claimed nothing that was never true.
    pub fn only_late(&self) -> bool {
        self.unexplained.is_empty()
    }
}

/// What a record says overall.
#[derive(Clone, Debug, Default)]
pub struct Judgement {
    pub statuses: usize,
    pub stale: usize,
    pub spells: Vec<WrongSpell>,
}

impl Judgement {
    /// The longest wrong spell (zero if none).
    pub fn longest(&self) -> Duration {
        self.spells
            .iter()
            .map(WrongSpell::duration)
            .max()
            .unwrap_or_default()
    }

    /// Total wrong time.
    pub fn total(&self) -> Duration {
        self.spells.iter().map(WrongSpell::duration).sum()
    }
}

/// Walks the record and the truth timeline together (both sorted by time;
/// the first truth must be at or before the first status) up to `end`, and
/// returns each maximal stretch during which `judge(status, truth)` was
/// [`Verdict::Wrong`]. A status is judged against every truth that held
/// while it was shown; a wrong one is only late if `earlier(status,
/// truths so far)` says it shows what held before (for a fleet: each
/// cluster as it was at some earlier moment, as reports arrive apart).
pub fn judge<T>(
    seen: &[Seen],
    truths: &[(Instant, T)],
    end: Instant,
    judge: impl Fn(&GatewayStatus, &T) -> Verdict,
    earlier: impl Fn(&GatewayStatus, &[(Instant, T)]) -> bool,
) -> Judgement {
    // Merge the change points: at each, (status shown, truth holding).
    let mut points: Vec<Instant> = seen
        .iter()
        .map(|s| s.at)
        .chain(truths.iter().map(|t| t.0))
        .filter(|t| *t <= end)
        .collect();
    points.sort();
    points.dedup();
    let mut out = Judgement {
        statuses: seen.len(),
        stale: 0,
        spells: Vec::new(),
    };
    let mut open: Option<WrongSpell> = None;
    let mut last_stale: Option<usize> = None;
    let mut unexplained_seen: Vec<usize> = Vec::new();
    for (i, at) in points.iter().enumerate() {
        let status = seen.iter().rposition(|s| s.at <= *at);
        let truth = truths.iter().rposition(|t| t.0 <= *at);
        let (Some(si), Some(ti)) = (status, truth) else {
            continue;
        };
        let verdict = judge(&seen[si].status, &truths[ti].1);
        let unexplained = verdict == Verdict::Wrong
            && !unexplained_seen.contains(&si)
            && !earlier(&seen[si].status, &truths[..=ti]);
        if unexplained {
            unexplained_seen.push(si);
        }
        if verdict == Verdict::Stale && last_stale != Some(si) {
            out.stale += 1;
            last_stale = Some(si);
        }
        let next = points.get(i + 1).copied().unwrap_or(end);
        match (verdict, open.as_mut()) {
            (Verdict::Wrong, Some(spell)) => {
                spell.to = next;
                if spell.statuses.last() != Some(&seen[si].status) {
                    spell.statuses.push(seen[si].status.clone());
                }
                if unexplained {
                    spell.unexplained.push(seen[si].status.clone());
                }
            }
            (Verdict::Wrong, None) => {
                open = Some(WrongSpell {
                    from: *at,
                    to: next,
                    statuses: vec![seen[si].status.clone()],
                    unexplained: if unexplained {
                        vec![seen[si].status.clone()]
                    } else {
                        Vec::new()
                    },
                });
            }
            (_, _) => {
                if let Some(spell) = open.take() {
                    out.spells.push(spell);
                }
            }
        }
    }
    if let Some(spell) = open.take() {
        out.spells.push(spell);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(tag: &str) -> GatewayStatus {
        serde_json::from_value(serde_json::json!({
            "addresses": [{"type": "IPAddress", "value": tag}]
        }))
        .unwrap()
    }

    fn tag(s: &GatewayStatus) -> String {
        s.addresses.as_ref().unwrap()[0].value.clone()
    }

    #[test]
    fn spells_span_from_the_truth_change_to_the_right_status() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let seen = vec![
            Seen {
                at: at(0),
                status: status("a"),
            },
            Seen {
                at: at(1500),
                status: status("stale"),
            },
            Seen {
                at: at(2000),
                status: status("b"),
            },
            Seen {
                at: at(5000),
                status: status("x"),
            },
        ];
        let truths = vec![(at(0), "a"), (at(1000), "b")];
        let j = judge(
            &seen,
            &truths,
            at(6000),
            |s, t| match tag(s).as_str() {
                "stale" => Verdict::Stale,
                x if x == *t => Verdict::Right,
                _ => Verdict::Wrong,
            },
            |s, before| before.iter().any(|(_, t)| tag(s) == *t),
        );
        assert_eq!(j.stale, 1);
        assert_eq!(j.spells.len(), 2, "{j:?}");
        assert_eq!(j.spells[0].duration(), Duration::from_millis(500));
        assert_eq!(j.spells[1].duration(), Duration::from_millis(1000));
        assert_eq!(j.longest(), Duration::from_millis(1000));
        // "a" late after the truth became "b": only late; "x": never true.
        assert!(j.spells[0].only_late(), "{j:?}");
        assert_eq!(j.spells[1].unexplained, [status("x")]);
    }
}
