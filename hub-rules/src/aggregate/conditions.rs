//! Gateway-level summary conditions: one per type any cluster reports, True
//! only where every cluster agrees, with a message that says which clusters
//! disagree and why.

use gwhub_model::Condition;
use gwhub_model::time::rfc3339;

use super::constants::{
    FRAGMENT_SEPARATOR, MORE_CLUSTERS, REASON_NOT_TRUE_IN_SOME, REASON_TRUE_IN_ALL,
};
use super::limits::{MAX_MESSAGE, char_len};
use super::{Absence, ClusterReport, Freshness};

/// The status/reason/message of one aggregated type, before bookkeeping
/// (observedGeneration, lastTransitionTime) is added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Summarises `type_` over `reports` (already in cluster order) and the
/// expected clusters that do not report (`absent`, in name order): each is
/// a fragment of its own, in cluster order with the reports'.
pub(crate) fn summarize_expected(
    type_: &str,
    reports: &[ClusterReport<'_>],
    absent: &[(&str, Absence)],
) -> Summary {
    let mut named: Vec<(&str, String)> = Vec::new();
    for r in reports {
        if let Some(fragment) = fragment(type_, r) {
            named.push((r.cluster, fragment));
        }
    }
    for (cluster, why) in absent {
        named.push((cluster, absence_fragment(cluster, *why)));
    }
    // Stable: a cluster's own order is kept (there is one entry each).
    named.sort_by(|a, b| a.0.cmp(b.0));
    let n = named.len();
    summary(type_, reports.len(), named.into_iter().map(|(_, f)| f), n)
}

/// The summary of `type_` over `reports` clusters, `count` of which are
/// not True: `fragments` yields their fragments in cluster order (only as
/// many are taken as the message can show).
pub(crate) fn summary<S: AsRef<str>>(
    type_: &str,
    reports: usize,
    fragments: impl IntoIterator<Item = S>,
    count: usize,
) -> Summary {
    if count == 0 {
        let message = if reports == 1 {
            format!("{type_} is True in the only cluster")
        } else {
            format!("{type_} is True in all {reports} clusters")
        };
        Summary {
            status: "True",
            reason: REASON_TRUE_IN_ALL,
            message,
        }
    } else {
        Summary {
            status: "False",
            reason: REASON_NOT_TRUE_IN_SOME,
            message: cap_join_iter(fragments, count, MORE_CLUSTERS, MAX_MESSAGE),
        }
    }
}

/// The fragment a cluster contributes when `type_` is not True there.
pub fn fragment(type_: &str, r: &ClusterReport<'_>) -> Option<String> {
    let cluster = r.cluster;
    if let Freshness::Stale { last_report } = r.freshness {
        return Some(format!(
            "{cluster} status is stale: no report since {}",
            rfc3339(last_report)
        ));
    }
    match r.status.conditions().iter().find(|c| c.type_() == type_) {
        None => Some(format!("{cluster} {type_} not reported")),
        Some(c) if c.status() == "True" => None,
        Some(c) if c.message().is_empty() => Some(format!(
            "{cluster} {type_} is {} ({})",
            c.status(),
            c.reason()
        )),
        Some(c) => Some(format!("{cluster} {}", c.message())),
    }
}

/// The fragment of an expected cluster that does not report the Gateway.
pub fn absence_fragment(cluster: &str, why: Absence) -> String {
    match why {
        Absence::NeverReported => format!("{cluster} never reported"),
        Absence::GatewayAbsent => format!("{cluster} does not report this Gateway"),
    }
}

/// Joins `fragments` with `"; "` into at most [`MAX_MESSAGE`] characters,
/// cutting whole fragments and ending with `; and N more <unit>`. A first
/// fragment too long on its own is shortened (ending in `...`) rather than
/// dropped, so the message always names at least one problem.
#[cfg(test)]
pub(crate) fn cap_join(fragments: &[String], unit: &str) -> String {
    cap_join_at(fragments, unit, MAX_MESSAGE)
}

/// [`cap_join`] with an explicit limit (for tests).
#[cfg(test)]
pub(crate) fn cap_join_at(fragments: &[String], unit: &str, max: usize) -> String {
    cap_join_iter(fragments.iter().cloned(), fragments.len(), unit, max)
}

/// [`cap_join_at`] over `n` fragments given lazily: only those the message
/// can show (and the first that does not fit) are taken, so a long list
/// costs what the message shows, not its length.
pub(crate) fn cap_join_iter<S: AsRef<str>>(
    fragments: impl IntoIterator<Item = S>,
    n: usize,
    unit: &str,
    max: usize,
) -> String {
    let suffix = |more: usize| -> String {
        if more == 0 {
            String::new()
        } else {
            format!("{FRAGMENT_SEPARATOR}and {more} more {unit}")
        }
    };
    let sep = char_len(FRAGMENT_SEPARATOR);
    // `suffix(more)`'s length, counted rather than formatted per fragment.
    let unit_len = char_len(unit);
    let suffix_len = |more: usize| -> usize {
        match more {
            0 => 0,
            _ => sep + "and ".len() + more.ilog10() as usize + 1 + " more ".len() + unit_len,
        }
    };
    // Largest k such that the first k fragments plus the suffix fit.
    let mut taken: Vec<S> = Vec::new();
    let mut best = 0;
    let mut total = 0;
    let (mut bytes, mut running) = (0, 0);
    for (i, f) in fragments.into_iter().enumerate() {
        total += char_len(f.as_ref()) + if i > 0 { sep } else { 0 };
        running += f.as_ref().len();
        taken.push(f);
        if total > max {
            break;
        }
        if total + suffix_len(n.saturating_sub(i + 1)) <= max {
            best = i + 1;
            bytes = running;
        }
    }
    if best > 0 {
        let tail = suffix(n.saturating_sub(best));
        let mut out = String::with_capacity(bytes + best * FRAGMENT_SEPARATOR.len() + tail.len());
        for (i, f) in taken[..best].iter().enumerate() {
            if i > 0 {
                out.push_str(FRAGMENT_SEPARATOR);
            }
            out.push_str(f.as_ref());
        }
        out.push_str(&tail);
        return out;
    }
    let Some(first) = taken.first() else {
        return String::new();
    };
    // Not even one whole fragment fits: shorten the first one.
    let tail = suffix(n.saturating_sub(1));
    let room = max.saturating_sub(char_len(&tail) + 3);
    let mut out: String = first.as_ref().chars().take(room).collect();
    out.push_str("...");
    out.push_str(&tail);
    out
}

/// Builds the condition, keeping the previous transition time while the
/// status is unchanged.
pub fn to_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    generation: i64,
    previous: &[Condition],
    now: jiff::Timestamp,
) -> Condition {
    let next = gwhub_model::conditions::new(type_, status, reason, message, Some(generation), now);
    gwhub_model::conditions::carry_transition_time(
        next,
        gwhub_model::conditions::find(previous, type_),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_cuts_whole_fragments() {
        let f: Vec<String> = ["a", "b", "c"].iter().map(|c| c.repeat(30)).collect();
        // All three: 30 + 2 + 30 + 2 + 30 = 94 characters.
        assert_eq!(cap_join_at(&f, "clusters", 94), f.join("; "));
        // Two plus "; and 1 more clusters" (21) = 83.
        let m = cap_join_at(&f, "clusters", 93);
        assert_eq!(m, format!("{}; {}; and 1 more clusters", f[0], f[1]));
        assert_eq!(char_len(&m), 83);
        assert_eq!(cap_join_at(&f, "clusters", 83), m);
        assert_eq!(
            cap_join_at(&f, "clusters", 82),
            format!("{}; and 2 more clusters", f[0])
        );
        assert_eq!(cap_join_at(&[], "clusters", 10), "");
    }

    #[test]
    fn cap_shortens_a_giant_first_fragment() {
        let f = vec!["x".repeat(100), "y".into()];
        let m = cap_join_at(&f, "clusters", 50);
        assert_eq!(char_len(&m), 50);
        assert!(m.ends_with("...; and 1 more clusters"), "{m}");
        let f = vec!["é".repeat(40_000)];
        let m = cap_join(&f, "clusters");
        assert_eq!(char_len(&m), MAX_MESSAGE);
        assert!(m.ends_with("..."));
    }

    /// The suffix's length is counted, not formatted: at every count of
    /// fragments left out (digits from 1 to 5) the cut is where the
    /// formatted suffix puts it.
    #[test]
    fn the_cut_counts_the_suffix_exactly() {
        for n in [
            2usize, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 10_000, 10_001,
        ] {
            // Longer than any suffix, so one more never fits.
            let f: Vec<String> = (0..n).map(|i| format!("c{i:0>29}")).collect();
            for keep in [1usize, 2].into_iter().filter(|&k| k < n) {
                let shown: usize =
                    f[..keep].iter().map(|s| s.len()).sum::<usize>() + 2 * (keep - 1);
                let suffix = format!("; and {} more clusters", n - keep);
                let fits = shown + suffix.len();
                let m = cap_join_at(&f, "clusters", fits);
                assert_eq!(m, format!("{}{suffix}", f[..keep].join("; ")), "{n} {keep}");
                // One character less: one fragment fewer (or shortened).
                let less = cap_join_at(&f, "clusters", fits - 1);
                assert!(char_len(&less) < fits, "{n} {keep}: {less}");
                assert_ne!(less, m);
            }
        }
    }

    #[test]
    fn cap_at_the_real_limit() {
        let f: Vec<String> = (0..2000)
            .map(|i| format!("c{i:04} {}", "m".repeat(30)))
            .collect();
        let m = cap_join(&f, "clusters");
        assert!(char_len(&m) <= MAX_MESSAGE);
        assert!(m.ends_with("more clusters"));
        let shown = m.matches("; c").count() + 1;
        assert!(
            m.ends_with(&format!("; and {} more clusters", 2000 - shown)),
            "{}",
            &m[m.len() - 40..]
        );
    }
}
