//! What `gwhub demo` prints: a `kubectl get -w`-style table of the hub
//! Gateways (a row each time one really changes) between one line per
//! simulated change, and a `DNS` line each time the records fleet DNS
//! would publish for a name change. Colour only on a terminal.

use std::collections::BTreeMap;

use gwhub_proto::v1;

use crate::ctl::{condition, printable, sets_cell, status_word, table};
use gwhub_hub_rules::aggregate::OWN_CONDITION as OWN;

const HEADER: [&str; 10] = [
    "TIME",
    "GATEWAY",
    "CLUSTERS",
    "ADDRESSES",
    "ACCEPTED",
    "PROGRAMMED",
    "LB-READY",
    "DNS-READY",
    "ROUTES",
    "AGGREGATED",
];

const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

/// Wall-clock time of an output line.
pub(super) fn now() -> String {
    jiff::Zoned::now().strftime("%H:%M:%S").to_string()
}

/// One row: conditions by status word, plus the listener-level DNSReady
/// (True/listeners that have it) and attached routes, which the
/// Gateway-level conditions do not show.
fn row(time: &str, g: &v1::AggregatedGateway) -> Vec<String> {
    let status = g.status.clone().unwrap_or_default();
    let with_dns: Vec<_> = status
        .listeners
        .iter()
        .filter_map(|l| l.conditions.iter().find(|c| c.r#type == "DNSReady"))
        .collect();
    let dns = if with_dns.is_empty() {
        "-".to_owned()
    } else {
        let ready = with_dns
            .iter()
            .filter(|c| c.status == v1::ConditionStatus::True as i32)
            .count();
        format!("{ready}/{}", with_dns.len())
    };
    let routes: i64 = status
        .listeners
        .iter()
        .map(|l| i64::from(l.attached_routes))
        .sum();
    let own = condition(g, OWN).map_or_else(|| "-".to_owned(), |c| c.reason.clone());
    vec![
        time.to_owned(),
        format!("{}/{}", g.namespace, g.name),
        g.clusters.len().to_string(),
        status.addresses.len().to_string(),
        status_word(condition(g, "Accepted")),
        status_word(condition(g, "Programmed")),
        status_word(condition(g, "LoadBalancerReady")),
        dns,
        routes.to_string(),
        own,
    ]
}

/// Prints rows for Gateways whose displayed columns changed.
pub(super) struct Screen {
    color: bool,
    header_printed: bool,
    /// What each Gateway's row last showed (without the time).
    shown: BTreeMap<(String, String), Vec<String>>,
    /// The records each fleet DNS name's line last showed.
    dns_shown: BTreeMap<String, String>,
}

impl Screen {
    pub(super) fn new(color: bool) -> Self {
        Screen {
            color,
            header_printed: false,
            shown: BTreeMap::new(),
            dns_shown: BTreeMap::new(),
        }
    }

    /// A `DNS` line per name whose published records changed (a dry run:
    /// what the hub would publish), with each cluster left out and the
    /// rule it fails; nothing for a name not published yet.
    pub(super) fn dns(&mut self, names: &[v1::DnsName]) -> String {
        let time = now();
        let mut out = String::new();
        for n in names {
            let records = sets_cell(&n.published);
            let shown = self.dns_shown.get(&n.hostname);
            if shown == Some(&records) || (shown.is_none() && n.published.is_empty()) {
                continue;
            }
            self.dns_shown.insert(n.hostname.clone(), records.clone());
            let mut line = format!("DNS {} {records}", n.hostname);
            let out_of: Vec<String> = n
                .clusters
                .iter()
                .filter(|c| !c.eligible)
                .map(|c| format!("{} rule {} {}", c.cluster, c.rule, c.reason))
                .collect();
            if !out_of.is_empty() {
                line.push_str(&format!("   (left out: {})", out_of.join(", ")));
            }
            let line = printable(&line).into_owned();
            out.push_str(&self.paint(CYAN, &format!("{time}   {line}")));
        }
        out
    }

    fn paint(&self, color: &str, line: &str) -> String {
        if self.color {
            format!("{color}{line}{RESET}\n")
        } else {
            format!("{line}\n")
        }
    }

    /// A simulated change.
    pub(super) fn event(&self, message: &str) -> String {
        self.paint(YELLOW, &format!("{}   * {message}", now()))
    }

    /// The lines for one Dashboard watch message: the header the first
    /// time, then one row per Gateway whose columns moved.
    pub(super) fn update(&mut self, msg: &v1::WatchGatewaysResponse) -> String {
        let time = now();
        let rows: Vec<_> = msg.upserted.iter().map(|g| row(&time, g)).collect();
        let mut out = String::new();
        // Rendered together so the columns line up within one update.
        let text = table(&HEADER, &rows);
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        if !self.header_printed && !rows.is_empty() {
            self.header_printed = true;
            out.push_str(&self.paint(BOLD, header));
        }
        for (line, (g, cells)) in lines.zip(msg.upserted.iter().zip(&rows)) {
            let key = (g.namespace.clone(), g.name.clone());
            if self.shown.get(&key).map(Vec::as_slice) == Some(&cells[1..]) {
                continue;
            }
            self.shown.insert(key, cells[1..].to_vec());
            let failing = cells[4..8]
                .iter()
                .any(|c| c == "False" || c.starts_with("0/"))
                || cells[9] != "Aggregated";
            out.push_str(&if failing {
                self.paint(RED, line)
            } else {
                format!("{line}\n")
            });
        }
        for d in &msg.deleted {
            self.shown.remove(&(d.namespace.clone(), d.name.clone()));
            out.push_str(&format!(
                "{time}   {}/{}   (no cluster reports it any more)\n",
                d.namespace, d.name
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gw(routes: i32, programmed: v1::ConditionStatus) -> v1::AggregatedGateway {
        let cond = |t: &str, s: v1::ConditionStatus, r: &str| v1::Condition {
            r#type: t.into(),
            status: s as i32,
            reason: r.into(),
            ..Default::default()
        };
        v1::AggregatedGateway {
            namespace: "openshift-ingress".into(),
            name: "default-gateway".into(),
            clusters: vec!["east".into(), "west".into()],
            status: Some(v1::GatewayStatus {
                conditions: vec![
                    cond("Accepted", v1::ConditionStatus::True, "Accepted"),
                    cond("Programmed", programmed, "Programmed"),
                    cond(OWN, v1::ConditionStatus::True, "Aggregated"),
                ],
                listeners: vec![v1::ListenerStatus {
                    name: "east.apps-http".into(),
                    attached_routes: routes,
                    conditions: vec![cond("DNSReady", v1::ConditionStatus::True, "x")],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn msg(g: v1::AggregatedGateway) -> v1::WatchGatewaysResponse {
        v1::WatchGatewaysResponse {
            snapshot: false,
            upserted: vec![g],
            ..Default::default()
        }
    }

    #[test]
    fn header_once_and_rows_only_on_visible_change() {
        let mut s = Screen::new(false);
        let first = s.update(&msg(gw(2, v1::ConditionStatus::True)));
        assert!(first.starts_with("TIME "), "{first}");
        assert_eq!(first.lines().count(), 2);
        let row = first.lines().nth(1).unwrap();
        assert!(row.contains("openshift-ingress/default-gateway"), "{row}");
        assert!(row.contains("1/1") && row.ends_with("Aggregated"), "{row}");
        assert_eq!(s.update(&msg(gw(2, v1::ConditionStatus::True))), "");
        let next = s.update(&msg(gw(3, v1::ConditionStatus::False)));
        assert_eq!(next.lines().count(), 1, "{next}");
        assert!(next.contains("False"), "{next}");
        assert!(!next.contains('\x1b'));
    }

    /// A DNS line when a name's records change, not otherwise; none
    /// before its first records.
    #[test]
    fn a_dns_line_per_change_of_a_name() {
        let name = |targets: &[&str], east: bool| v1::DnsName {
            hostname: "*.apps.example.com".into(),
            published: vec![v1::DnsRecordSet {
                r#type: "A".into(),
                targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            }],
            clusters: vec![v1::DnsClusterEligibility {
                cluster: "east".into(),
                eligible: east,
                rule: if east { 0 } else { 2 },
                reason: if east { "" } else { "LoadBalancerNotReady" }.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut s = Screen::new(false);
        let mut unpublished = name(&[], true);
        unpublished.published.clear();
        assert_eq!(s.dns(&[unpublished]), "");
        let first = s.dns(&[name(&["192.0.2.1", "192.0.2.2"], true)]);
        assert!(
            first.ends_with("   DNS *.apps.example.com A=192.0.2.1,192.0.2.2\n"),
            "{first}"
        );
        assert_eq!(s.dns(&[name(&["192.0.2.1", "192.0.2.2"], false)]), "");
        let next = s.dns(&[name(&["192.0.2.2"], false)]);
        assert!(
            next.ends_with(
                "   DNS *.apps.example.com A=192.0.2.2   (left out: east rule 2 LoadBalancerNotReady)\n"
            ),
            "{next}"
        );
    }

    #[test]
    fn colour_only_when_asked() {
        let mut s = Screen::new(true);
        let out = s.update(&msg(gw(2, v1::ConditionStatus::False)));
        assert!(out.contains(RED) && out.contains(BOLD), "{out:?}");
        assert!(s.event("east: x").contains(YELLOW));
    }
}
