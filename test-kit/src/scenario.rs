//! A whole fleet for fault tests and the soak harness: a management API
//! server with the hub Gateway `openshift-ingress/gw`, workload API servers
//! each with the same Gateway driven by simulated Istio and load balancer
//! controllers, and the real `gwhub serve` / `gwhub-agent run` binaries as
//! processes that can be killed with SIGKILL and restarted.
//!
//! The truth is what the simulated Istio says per cluster (`Programmed`
//! True or False); [`expected`] turns it into the summary conditions the hub
//! Gateway must show, independently of the hub's code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::{Gateway, GatewayStatus};
use k8s_openapi::api::core::v1::Service;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::apiserver::Fleet;
use crate::install::{AGENT_SA, HUB_SA, install_agent, install_hub};
use crate::kube_objects::{try_apply as apply, try_apply_status as apply_status};
pub use crate::procs::free_port;
use crate::procs::{agent_binary, gwhub_binary};
use crate::recorder::{Judgement, Recorder, Verdict, judge};

/// Namespace of the Gateways, on every cluster.
pub const NS: &str = "openshift-ingress";
/// The Gateway's name, on every cluster.
pub const GW: &str = "gw";
/// The hub's own namespace (ClusterReports, Lease).
pub const HUB_NS: &str = "gwhub-system";
pub const OWN: &str = "kuadrant.io/MultiClusterAggregated";
/// The leader Lease of hubs started with an identity: short, so failover
/// tests wait seconds, not the default 15.
pub const LEASE: Duration = Duration::from_secs(6);
/// What the simulated Istio says when the Gateway is not programmed.
pub const NOT_PROGRAMMED: &str = "address pending";
const CLASS: &str = "openshift-default";
const CONTROLLER: &str = "openshift.io/gateway-controller/v1";

// ------------------------------------------------------------- processes

/// A child process that can be killed (SIGKILL) and started again with
/// the same command line; killed when dropped. Output goes to `log`
/// (appended across restarts).
pub struct Proc {
    pub name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    pub starts: u32,
}

impl Proc {
    pub fn spawn(name: &str, program: &Path, args: Vec<String>, log: PathBuf) -> Proc {
        Self::spawn_env(name, program, args, Vec::new(), log)
    }

    pub(crate) fn spawn_env(
        name: &str,
        program: &Path,
        args: Vec<String>,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> Proc {
        let mut p = Proc {
            name: name.to_owned(),
            program: program.to_path_buf(),
            args,
            env,
            log,
            child: None,
            starts: 0,
        };
        p.start();
        p
    }

    /// Starts the process (again); a running one is killed first.
    pub fn start(&mut self) {
        self.kill9();
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("{}: {e}", self.log.display()));
        let err = out.try_clone().expect("dup log");
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("GWHUB_E2E_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.program.display()));
        self.child = Some(child);
        self.starts += 1;
    }

    /// SIGKILL, as `kill -9`: no shutdown, no Lease release, no goodbye.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Waits until something accepts TCP on `port`.
pub async fn wait_listening(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

// ------------------------------------------------------------- the truth

/// Per cluster: does the simulated Istio say the Gateway is programmed?
pub type Truth = BTreeMap<String, bool>;

/// `(type, status, message)` of the summary conditions the hub Gateway
/// must show for `truth`, written from the spec (section 4).
pub fn expected(truth: &Truth) -> Vec<(String, String, String)> {
    let n = truth.len();
    let all_true = |t: &str| {
        if n == 1 {
            format!("{t} is True in the only cluster")
        } else {
            format!("{t} is True in all {n} clusters")
        }
    };
    let failing: Vec<String> = truth
        .iter()
        .filter(|(_, p)| !**p)
        .map(|(c, _)| format!("{c} {NOT_PROGRAMMED}"))
        .collect();
    let programmed = if failing.is_empty() {
        ("True".to_owned(), all_true("Programmed"))
    } else {
        ("False".to_owned(), failing.join("; "))
    };
    let plural = if n == 1 { "" } else { "s" };
    vec![
        ("Accepted".into(), "True".into(), all_true("Accepted")),
        ("Programmed".into(), programmed.0, programmed.1),
        (
            "LoadBalancerReady".into(),
            "True".into(),
            all_true("LoadBalancerReady"),
        ),
        (
            OWN.into(),
            "True".into(),
            format!("Aggregated the status of {n} cluster{plural}"),
        ),
    ]
}

/// Right if the summary conditions are exactly [`expected`]; Stale if some
/// summary says a cluster's report is stale; otherwise Wrong.
pub fn verdict(status: &GatewayStatus, truth: &Truth) -> Verdict {
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let want = expected(truth);
    let stale = want.iter().any(|(t, _, _)| {
        conditions
            .iter()
            .any(|c| c.type_ == *t && c.message.contains("status is stale"))
    });
    if stale {
        return Verdict::Stale;
    }
    let right = want.iter().all(|(t, s, m)| {
        conditions
            .iter()
            .any(|c| c.type_ == *t && c.status == *s && c.message == *m)
    });
    if right {
        Verdict::Right
    } else {
        Verdict::Wrong
    }
}

/// Whether `status` shows what held before: each cluster as it was at some
/// moment of `before` (the truths up to the status's moment). Clusters
/// report apart, so a late status may join one cluster's newer state with
/// another's older one; it may not claim a state a cluster never had.
pub fn earlier(status: &GatewayStatus, before: &[(Instant, Truth)]) -> bool {
    let Some((_, last)) = before.last() else {
        return false;
    };
    // Every combination of the states each cluster had (a few clusters,
    // two states each).
    let mut combos: Vec<Truth> = vec![Truth::new()];
    for cluster in last.keys() {
        let had: std::collections::BTreeSet<bool> = before
            .iter()
            .filter_map(|(_, t)| t.get(cluster).copied())
            .collect();
        combos = combos
            .into_iter()
            .flat_map(|c| {
                had.iter().map(move |p| {
                    let mut c = c.clone();
                    c.insert(cluster.clone(), *p);
                    c
                })
            })
            .collect();
    }
    combos.iter().any(|t| verdict(status, t) == Verdict::Right)
}

/// The summary conditions of `status`, for failure messages.
pub fn summary(status: &GatewayStatus) -> String {
    status
        .conditions
        .iter()
        .flatten()
        .map(|c| format!("{} {} {:?}", c.type_, c.status, c.message))
        .collect::<Vec<_>>()
        .join(" | ")
}

// ------------------------------------------------------------- objects

/// A workload cluster's objects: our GatewayClass, DNS config, the Gateway,
/// its provisioned LoadBalancer Service, Istio's status.
pub(crate) async fn setup_workload(client: &Client, programmed: bool) -> kube::Result<()> {
    apply(
        &Api::<GatewayClass>::all(client.clone()),
        CLASS,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": CLASS}, "spec": {"controllerName": CONTROLLER}}),
    )
    .await?;
    let dns: Api<gwhub_spoke_rules::openshift::DNS> = Api::all(client.clone());
    apply(
        &dns,
        "cluster",
        json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS",
               "metadata": {"name": "cluster"},
               "spec": {"baseDomain": "example.com", "publicZone": {"id": "Z1"}}}),
    )
    .await?;
    apply(
        &Api::<Gateway>::namespaced(client.clone(), NS),
        GW,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": GW, "namespace": NS},
               "spec": {"gatewayClassName": CLASS, "listeners": [
                   {"name": "https", "hostname": "*.apps.example.com", "port": 443, "protocol": "HTTP"}]}}),
    )
    .await?;
    let services = Api::<Service>::namespaced(client.clone(), NS);
    let svc = format!("{GW}-lb");
    apply(
        &services,
        &svc,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": svc, "namespace": NS,
                            "labels": {"gateway.networking.k8s.io/gateway-name": GW}},
               "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}),
    )
    .await?;
    apply_status(
        &services,
        "lb-controller",
        &svc,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc},
               "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}),
    )
    .await?;
    istio_writes(client, programmed).await
}

/// The simulated Istio writes the Gateway's status (field manager `istio`).
pub async fn istio_writes(client: &Client, programmed: bool) -> kube::Result<()> {
    let c = |t: &str, ok: bool, reason: &str, msg: &str| {
        json!({"type": t, "status": if ok { "True" } else { "False" }, "reason": reason,
               "message": msg, "observedGeneration": 1,
               "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    let programmed = if programmed {
        c("Programmed", true, "Programmed", "")
    } else {
        c("Programmed", false, "AddressNotAssigned", NOT_PROGRAMMED)
    };
    let status = json!({
        "conditions": [c("Accepted", true, "Accepted", "istio accepted"), programmed],
        "listeners": [{"name": "https", "attachedRoutes": 1,
            "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
            "conditions": [c("Accepted", true, "Accepted", ""), c("Programmed", true, "Programmed", "")]}],
        "addresses": [{"type": "IPAddress", "value": "192.0.2.10"}]
    });
    apply_status(
        &Api::<Gateway>::namespaced(client.clone(), NS),
        "istio",
        GW,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": GW}, "status": status}),
    )
    .await
}

/// The management cluster's objects: the hub Gateway (the hub itself is
/// installed with [`crate::install::install_hub`]).
pub(crate) async fn setup_management(client: &Client) -> kube::Result<()> {
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": GW, "namespace": NS},
        "spec": {
            "gatewayClassName": "kuadrant-multi-cluster-gateway-instance-per-cluster",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]
        }
    }))
    .expect("a valid Gateway");
    Api::<Gateway>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &gw)
        .await?;
    Ok(())
}

// ------------------------------------------------------------- the scenario

/// How the hub runs.
#[derive(Clone, Debug)]
pub struct HubFlags {
    pub stale_after: Duration,
    /// `None`: `--no-leader-election` (one replica).
    pub identity: Option<String>,
}

/// A fleet with the objects in place, the binaries built, nothing running.
pub struct Scenario {
    pub fleet: Fleet,
    pub mgmt: Client,
    pub workloads: BTreeMap<String, Client>,
    pub stale_after: Duration,
    pub gwhub: PathBuf,
    pub agent: PathBuf,
    truths: Vec<(Instant, Truth)>,
}

impl Scenario {
    /// Starts `mgmt` plus `workloads`, every workload Gateway programmed.
    pub async fn start(workloads: &[&str], stale_after: Duration) -> Scenario {
        let gwhub = gwhub_binary();
        let agent = agent_binary();
        let mut names = vec!["mgmt"];
        names.extend_from_slice(workloads);
        let fleet = Fleet::start(&names).await.expect("start the API servers");
        // Installed as the README says; the binaries run as the
        // ServiceAccounts the manifests create.
        install_hub(fleet.cluster("mgmt")).await;
        let mgmt = fleet.cluster("mgmt").client().await.expect("mgmt client");
        setup_management(&mgmt).await.expect("management objects");
        let mut clients = BTreeMap::new();
        let mut truth = Truth::new();
        for w in workloads {
            install_agent(fleet.cluster(w)).await;
            let client = fleet.cluster(w).client().await.expect("workload client");
            setup_workload(&client, true)
                .await
                .expect("workload objects");
            clients.insert((*w).to_owned(), client);
            truth.insert((*w).to_owned(), true);
        }
        Scenario {
            fleet,
            mgmt,
            workloads: clients,
            stale_after,
            gwhub,
            agent,
            truths: vec![(Instant::now(), truth)],
        }
    }

    /// The hub Gateways on the management cluster.
    pub fn hub_gateways(&self) -> Api<Gateway> {
        Api::namespaced(self.mgmt.clone(), NS)
    }

    /// `gwhub serve` in Kubernetes mode on `port`; with an `identity`, it
    /// elects a leader with a Lease of [`LEASE`] (not started twice on
    /// one port; restart the [`Proc`]).
    pub fn hub(&self, tag: &str, port: u16, identity: Option<&str>) -> Proc {
        self.hub_with(tag, port, identity, &[])
    }

    /// [`Scenario::hub`] with `extra` flags.
    pub fn hub_with(&self, tag: &str, port: u16, identity: Option<&str>, extra: &[&str]) -> Proc {
        let mut args: Vec<String> = [
            "serve",
            "--insecure",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--dashboard-listen",
            "127.0.0.1:0",
            "--namespace",
            HUB_NS,
            "--gateway-namespace",
            NS,
            "--stale-after",
            &format!("{}ms", self.stale_after.as_millis()),
            "--kubeconfig",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let kubeconfig = self.fleet.cluster("mgmt").kubeconfig_as(HUB_SA);
        args.push(kubeconfig.display().to_string());
        let mut env = Vec::new();
        match identity {
            None => args.push("--no-leader-election".into()),
            // The Lease identity is POD_NAME plus the pid.
            Some(id) => {
                env.push(("POD_NAME".to_owned(), id.to_owned()));
                args.push("--lease-duration".into());
                args.push(format!("{}s", LEASE.as_secs()));
            }
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        Proc::spawn_env(tag, &self.gwhub, args, env, self.log(tag))
    }

    /// `gwhub-agent run` for `cluster`, reporting to `hub_url`.
    pub fn agent(&self, tag: &str, cluster: &str, hub_url: &str) -> Proc {
        self.agent_with(tag, cluster, hub_url, &[])
    }

    /// [`Self::agent`] with `extra` flags (e.g. `--kube-api-qps 10`).
    pub fn agent_with(&self, tag: &str, cluster: &str, hub_url: &str, extra: &[String]) -> Proc {
        let mut args = vec![
            "run".to_owned(),
            "--insecure".to_owned(),
            "--cluster".to_owned(),
            cluster.to_owned(),
            "--hub".to_owned(),
            hub_url.to_owned(),
            "--kubeconfig".to_owned(),
            self.fleet
                .cluster(cluster)
                .kubeconfig_as(AGENT_SA)
                .display()
                .to_string(),
        ];
        args.extend(extra.iter().cloned());
        Proc::spawn(tag, &self.agent, args, self.log(tag))
    }

    pub fn log(&self, tag: &str) -> PathBuf {
        self.fleet.dir.join(format!("{tag}.log"))
    }

    /// The truth now.
    pub fn truth(&self) -> &Truth {
        &self.truths.last().expect("a truth").1
    }

    /// Istio on `cluster` says programmed (or not); the truth changes when
    /// the API server has it.
    pub async fn set_programmed(&mut self, cluster: &str, programmed: bool) -> kube::Result<()> {
        let client = self.workloads[cluster].clone();
        // The truth changes when the write is sent, not when its answer
        // comes: the agent may see the change (and the hub show it) before
        // a slow answer arrives, and a status must never lead its truth.
        let sent = Instant::now();
        istio_writes(&client, programmed).await?;
        let mut truth = self.truth().clone();
        truth.insert(cluster.to_owned(), programmed);
        self.truths.push((sent, truth));
        Ok(())
    }

    /// Waits until the hub Gateway shows the truth; the status, or an error
    /// with the last status seen.
    pub async fn wait_truth(&self, within: Duration) -> Result<GatewayStatus, String> {
        let api = self.hub_gateways();
        let deadline = Instant::now() + within;
        let mut last = None;
        while Instant::now() < deadline {
            if let Ok(gw) = api.get(GW).await {
                let status = gw.status.unwrap_or_default();
                if verdict(&status, self.truth()) == Verdict::Right {
                    return Ok(status);
                }
                last = Some(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "the hub Gateway did not show the truth {:?} within {within:?}; last: {}",
            self.truth(),
            last.as_ref().map(summary).unwrap_or_default()
        ))
    }

    /// Judges everything `recorder` saw, from `since` to now.
    pub fn judge(&self, recorder: &Recorder, since: Instant) -> Judgement {
        self.judge_window(recorder, since, Instant::now())
    }

    /// Judges what `recorder` saw between `since` and `until`.
    pub fn judge_window(&self, recorder: &Recorder, since: Instant, until: Instant) -> Judgement {
        let all = recorder.seen();
        let mut seen = Vec::new();
        // The status shown at `since`, then every later one.
        if let Some(mut first) = all.iter().rev().find(|s| s.at <= since).cloned() {
            first.at = since;
            seen.push(first);
        }
        seen.extend(
            all.iter()
                .filter(|s| s.at > since && s.at <= until)
                .cloned(),
        );
        // The truth holding at `since`, then every later change.
        let mut truths: Vec<(Instant, Truth)> = Vec::new();
        if let Some((_, t)) = self.truths.iter().rev().find(|(at, _)| *at <= since) {
            truths.push((since, t.clone()));
        }
        truths.extend(
            self.truths
                .iter()
                .filter(|(at, _)| *at > since && *at <= until)
                .cloned(),
        );
        // A late status may show what held before `since` too (a restarted
        // hub restores reports from before it died): the whole history up
        // to the status's moment explains it.
        // (`self.truths` is in time order: that history is a prefix.)
        let explained = |status: &GatewayStatus, before: &[(Instant, Truth)]| {
            let upto = before.last().map(|(at, _)| *at);
            let n = self.truths.partition_point(|(at, _)| Some(*at) <= upto);
            earlier(status, &self.truths[..n])
        };
        judge(&seen, &truths, until, verdict, explained)
    }
}

/// Counts lines of `log` containing `needle`.
pub fn count_lines(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hub Gateway status that is right for `t`.
    fn shown(t: &Truth) -> GatewayStatus {
        let conditions: Vec<serde_json::Value> = expected(t)
            .into_iter()
            .map(|(type_, status, message)| {
                json!({"type": type_, "status": status, "message": message,
                       "reason": "Test", "lastTransitionTime": "2026-11-29T00:00:00Z"})
            })
            .collect();
        serde_json::from_value(json!({ "conditions": conditions })).unwrap()
    }

    fn truth(east: bool, west: bool) -> Truth {
        [("east".to_owned(), east), ("west".to_owned(), west)].into()
    }

    #[test]
    fn a_late_status_may_join_clusters_from_different_moments() {
        let t0 = Instant::now();
        // east goes down then up; then west goes down.
        let before = vec![
            (t0, truth(true, true)),
            (t0, truth(false, true)),
            (t0, truth(true, true)),
            (t0, truth(true, false)),
        ];
        // east's older report with west's newer one: never held as a
        // whole, but each cluster was so: late, not false.
        assert!(earlier(&shown(&truth(false, false)), &before));
        assert!(earlier(&shown(&truth(true, true)), &before));
        // west down before it ever went down: never true.
        assert!(!earlier(&shown(&truth(true, false)), &before[..3]));
        // Not a status of the truth at all.
        assert!(!earlier(&GatewayStatus::default(), &before));
    }
}
