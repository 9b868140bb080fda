#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
//! Fleet DNS (spec section 8, docs/dns.md): DNS records for the hostnames of
//! hub Gateway listeners that hold the addresses of exactly the clusters
//! whose Gateway instance can serve them, following placement and removal.
//! A crate of its own so that the controller that acts on the fleet's
//! truth is read and changed without the listeners: it reads the index,
//! writes through the Kubernetes side's API budget (`gwhub_k8s`) and the
//! RFC 2136 client, and names no gRPC or web code.
//!
//! - [`config`]: the `--dns-*` flags, checked at start.
//! - `clusters`: the rules' inputs from the clusters' REPORTS (the index's
//!   copy, with each listener's hostname), never from the capped hub
//!   Gateway status.
//! - `names`: the state per name, sans I/O: the rules of
//!   `gwhub_dns_rules` (names, eligibility, record sets, a `Publisher` per
//!   record type), the writes due, the conditions, the [`DnsView`].
//! - `endpoint`: the `dnsendpoint` output (external-dns DNSEndpoint
//!   objects); `rfc2136`: dynamic updates with ownership records.
//! - [`DnsController`]: the task. It decides only while this replica leads
//!   (the Lease the status writer's leader holds) and the restart gate is
//!   open (`writable`: the clusters the ended replicas served are back or
//!   stale); after each start or leader change it reads the published
//!   sets back first and seeds the publishers with them (the DNSEndpoints'
//!   annotations; the rfc2136 records mapped to the clusters whose reports
//!   have their addresses, or whose addresses they were when this replica
//!   last wrote them, once the hub Gateways are listed). It runs a round
//!   on every index change (views or reports), hub Gateway change, and at
//!   the publishers' wake times; each round's writes go to every output,
//!   its conditions (`gwhub.io/DNSPublished`) into the index, which writes
//!   them with the hub's status, and its view onto a `watch`.

mod clusters;
pub mod config;
mod endpoint;
mod names;
mod rfc2136;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gateway_api::apis::standard::gateways::Gateway;
use gwhub_common::watch_events::{Change, changes};
use gwhub_hub_rules::aggregate::GatewayKey;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub use clusters::HubSpec;
pub use config::{
    CnameRoutingFlag, DnsConfig, DnsConfigError, DnsFlags, OutputKind, Rfc2136Config, WhenNoneFlag,
};
pub use endpoint::object_name;
pub use gwhub_index::{ClusterVerdict, DnsView, LastWrite, NameView, Verdict};
pub use names::{Job, Outcome};

use endpoint::{EndpointOutput, Seeds};
use gwhub_index::DnsPort;
use gwhub_k8s::budget::ApiBudget;
use gwhub_k8s::metrics::Metrics;
use names::{Names, Remembered, Round};

/// Why reading the published sets back failed (the task logs it and
/// tries again).
#[derive(Debug, thiserror::Error)]
enum ReadBackError {
    /// Listing the DNSEndpoints.
    #[error(transparent)]
    Endpoints(#[from] kube::Error),
    /// Reading one name's records from the DNS server.
    #[error("{host}: {source}")]
    Records {
        host: String,
        #[source]
        source: gwhub_dns_rfc2136::Error,
    },
}

/// The hub Gateways' specs, as the DNS controller's watch last saw them.
type Specs = Arc<Mutex<BTreeMap<GatewayKey, HubSpec>>>;

/// The fleet DNS task of one hub replica (see the module docs).
pub struct DnsController {
    pub config: DnsConfig,
    pub client: kube::Client,
    pub index: DnsPort,
    pub budget: Arc<ApiBudget>,
    pub metrics: Arc<Metrics>,
    /// `--gateway-namespace`.
    pub gateway_namespace: Option<String>,
    /// Whether this replica leads.
    pub leader: watch::Receiver<bool>,
    /// The restart gate: open once a restarted hub may write.
    pub writable: watch::Receiver<bool>,
    pub view: watch::Sender<Arc<DnsView>>,
}

fn now_millis() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// The first retry of a failed name; doubling to [`RETRY_MAX`] (the status
/// writer's backoff).
const RETRY_BASE: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(300);

/// How current this replica's report of a cluster is, for the read-back
/// rule (spec section 8: a cluster found published leaves only on a fresh
/// ineligible report).
struct Current {
    last_report_millis: i64,
    /// The cluster streams to this replica now.
    streams_here: bool,
}

impl Current {
    /// Fresh: received since this replica started leading at `started`, or
    /// from a stream open here, whose last report is the cluster's state
    /// now. The read-back rule guards against a view that is behind (reports
    /// restored at a start, imported from the store while another replica
    /// holds the stream); a replica that merely led again (a Lease renewal
    /// lost under load) is not behind for its own streams, and keeping such
    /// a cluster for `--stale-after` would hold a load balancer that is not
    /// ready in the record (found under load: a single replica's Lease
    /// flapped between a cluster's report and the write).
    fn is_fresh(&self, started: i64) -> bool {
        self.streams_here || self.last_report_millis >= started
    }
}

impl DnsController {
    /// Runs until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        self.index.set_dns_mode(gwhub_index::DnsMode::Following);
        self.view.send_replace(Arc::new(DnsView {
            enabled: true,
            outputs: self.config.outputs(),
            dry_run: self.config.dry_run,
            ..DnsView::default()
        }));
        let specs: Specs = Arc::default();
        let specs_changed = Arc::new(Notify::new());
        let mut listed = self.spawn_spec_watch(&specs, &specs_changed, &shutdown);
        let (endpoint, rfc) = self.outputs();
        let retry = gwhub_common::Backoff::<String>::new(RETRY_BASE, RETRY_MAX);
        // What this replica published per name and cluster when it last
        // led: a cluster whose address changed while it did not lead is
        // still recognised in the records read back (stays without the
        // rise; found under load: a lost Lease renewal made it flap).
        let mut remembered: Remembered = BTreeMap::new();
        loop {
            if !self.until_leading(&shutdown).await {
                return;
            }
            let started = now_millis();
            let read = self.read_back_retrying(
                endpoint.as_ref(),
                rfc.as_ref(),
                &specs,
                &mut listed,
                &remembered,
                &shutdown,
            );
            let Some(seeds) = read.await else {
                return;
            };
            tracing::info!(
                names = seeds.len(),
                "fleet DNS: leading; published sets read back"
            );
            let mut names = Names::new(
                self.config.clone(),
                started,
                seeds,
                std::mem::take(&mut remembered),
            );
            let mut views = self.index.subscribe();
            let mut reports = self.index.subscribe_reports();
            let mut wake: Option<i64> = None;
            let mut again = true;
            let mut resync = tokio::time::interval(self.config.resync);
            resync.tick().await;
            while *self.leader.borrow() {
                if !again {
                    let sleep = until_millis(wake);
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        r = views.changed() => if r.is_err() { return },
                        r = reports.changed() => if r.is_err() { return },
                        _ = specs_changed.notified() => {}
                        r = self.leader.changed() => if r.is_err() { return } else { continue },
                        _ = sleep => {}
                        _ = resync.tick() => {
                            tracing::debug!("fleet DNS: resync: reading back and repairing every name");
                            names.forget_written();
                        }
                    }
                    // Changes arriving together make one round.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                views.borrow_and_update();
                reports.borrow_and_update();
                let decided = self.round(&mut names, &specs, started);
                wake = decided.wake_at_millis;
                for (key, c) in decided.conditions {
                    self.index.set_dns_condition(&key, c);
                }
                // Decided from now on (not before: the conditions the last
                // leader wrote are carried until this round set them).
                self.index.set_dns_mode(gwhub_index::DnsMode::Leading);
                again = !decided.jobs.is_empty();
                for job in &decided.jobs {
                    self.write(
                        job,
                        &mut names,
                        endpoint.as_ref(),
                        rfc.as_ref(),
                        &specs,
                        &retry,
                    )
                    .await;
                }
                let mut view = decided.view;
                names.refresh(&mut view);
                view.writing = true;
                self.view.send_replace(Arc::new(view));
            }
            remembered = names.published_addresses();
            self.stop_leading();
        }
    }

    /// The outputs the flags name: DNSEndpoint objects, RFC 2136 updates.
    fn outputs(&self) -> (Option<EndpointOutput>, Option<rfc2136::RfcOutput>) {
        let endpoint = self.config.dnsendpoint.then(|| EndpointOutput {
            client: self.client.clone(),
            budget: self.budget.clone(),
            namespace: self.gateway_namespace.clone(),
        });
        let rfc = self
            .config
            .rfc2136
            .clone()
            .map(|c| rfc2136::RfcOutput::new(&c, &self.config.owner_id));
        (endpoint, rfc)
    }

    /// Waits until this replica leads, past the restart gate; `false` at
    /// shutdown (or when either channel closes).
    async fn until_leading(&mut self, shutdown: &CancellationToken) -> bool {
        // Leader, past the restart gate.
        let ready = async {
            self.leader.wait_for(|l| *l).await.is_ok()
                && self.writable.wait_for(|w| *w).await.is_ok()
        };
        tokio::select! {
            _ = shutdown.cancelled() => false,
            ok = ready => ok,
        }
    }

    /// Starts following the hub Gateways' specs into `specs` (notifying
    /// `specs_changed`); the receiver says when they are listed.
    fn spawn_spec_watch(
        &self,
        specs: &Specs,
        specs_changed: &Arc<Notify>,
        shutdown: &CancellationToken,
    ) -> watch::Receiver<bool> {
        let gateways: Api<Gateway> = match &self.gateway_namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let (listed_tx, listed) = watch::channel(false);
        tokio::spawn(watch_specs(
            gateways,
            specs.clone(),
            specs_changed.clone(),
            listed_tx,
            shutdown.clone(),
        ));
        listed
    }

    /// [`DnsController::read_back`] until it succeeds (retried after
    /// [`RETRY_BASE`]); `None` at shutdown.
    async fn read_back_retrying(
        &self,
        endpoint: Option<&EndpointOutput>,
        rfc: Option<&rfc2136::RfcOutput>,
        specs: &Specs,
        listed: &mut watch::Receiver<bool>,
        remembered: &Remembered,
        shutdown: &CancellationToken,
    ) -> Option<Seeds> {
        loop {
            let read = tokio::select! {
                _ = shutdown.cancelled() => return None,
                r = self.read_back(endpoint, rfc, specs, listed, remembered) => r,
            };
            match read {
                Ok(s) => return Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "fleet DNS: reading the published sets back failed; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return None,
                        _ = tokio::time::sleep(RETRY_BASE) => {}
                    }
                }
            }
        }
    }

    /// Executes one job and hands its outcome to `names`; a failed name is
    /// tried again after `retry`'s backoff.
    async fn write(
        &self,
        job: &Job,
        names: &mut Names,
        endpoint: Option<&EndpointOutput>,
        rfc: Option<&rfc2136::RfcOutput>,
        specs: &Specs,
        retry: &gwhub_common::Backoff<String>,
    ) {
        let outcome = self.execute(job, endpoint, rfc, specs).await;
        let retry_in = match &outcome {
            Outcome::Written => {
                retry.succeeded(&job.host);
                0
            }
            _ => retry.failed(&job.host).as_millis() as i64,
        };
        let removals = names.written(job, outcome, now_millis(), retry_in);
        for ms in removals {
            self.metrics
                .dns_removal_seconds
                .observe(Duration::from_millis(ms.max(0) as u64));
        }
    }

    /// This replica no longer leads: nothing is written, the conditions
    /// are the leader's, and the view says so.
    fn stop_leading(&self) {
        tracing::info!("fleet DNS: no longer leading; writing nothing");
        self.index.set_dns_mode(gwhub_index::DnsMode::Following);
        self.view.send_modify(|v| {
            let mut next = (**v).clone();
            next.writing = false;
            *v = Arc::new(next);
        });
    }

    /// The published sets read back from every output that can tell: the
    /// DNSEndpoints' annotations, and for `rfc2136` the records of every
    /// fleet name mapped to the clusters whose reports have them, or whose
    /// they were when this replica last wrote them (`remembered`; once the
    /// hub Gateways are listed: they say the names).
    async fn read_back(
        &self,
        endpoint: Option<&EndpointOutput>,
        rfc: Option<&rfc2136::RfcOutput>,
        specs: &Specs,
        listed: &mut watch::Receiver<bool>,
        remembered: &Remembered,
    ) -> Result<Seeds, ReadBackError> {
        let mut seeds = match endpoint {
            Some(e) => e.read_back().await?,
            None => Seeds::new(),
        };
        let Some(rfc) = rfc else {
            return Ok(seeds);
        };
        if listed.wait_for(|l| *l).await.is_err() {
            return Ok(seeds);
        }
        let gateways = self.hub_gateways(specs);
        let fleet = gwhub_dns_rules::fleet_names(&gateways, &self.config.zones);
        for (host, name) in &fleet.names {
            let mut clusters: Vec<(String, gwhub_dns_rules::Usable)> =
                clusters::views(&self.index, &name.owner)
                    .iter()
                    .filter(|v| v.reports_gateway)
                    .map(|v| (v.cluster.clone(), gwhub_dns_rules::usable(&v.addresses)))
                    .collect();
            if let Some(before) = remembered.get(host.as_str()) {
                clusters.extend(before.iter().map(|(c, u)| (c.clone(), u.clone())));
            }
            let found = rfc
                .read_back(host, &name.owner, &clusters)
                .await
                .map_err(|source| ReadBackError::Records {
                    host: host.to_string(),
                    source,
                })?;
            let entry = seeds.entry(host.as_str().to_owned()).or_default();
            for (t, published) in found {
                entry.entry(t).or_default().extend(published);
            }
        }
        Ok(seeds)
    }

    /// The hub Gateways as the names need them.
    fn hub_gateways(&self, specs: &Specs) -> Vec<gwhub_dns_rules::HubGateway> {
        let specs = specs.lock().clone();
        let views = self
            .index
            .subscribe()
            .borrow()
            .gateways
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>();
        let index = &self.index;
        specs
            .iter()
            .map(|(key, s)| gwhub_dns_rules::HubGateway {
                key: key.clone(),
                created_millis: s.created_millis,
                listeners: s.listeners.clone(),
                has_clusters: views.contains(key)
                    || index
                        .subscribe()
                        .borrow()
                        .get(key)
                        .is_some_and(|v| !v.missing.is_empty()),
            })
            .collect()
    }

    fn round(&self, names: &mut Names, specs: &Specs, started: i64) -> names::Decided {
        let gateways = self.hub_gateways(specs);
        let index = &self.index;
        let current: BTreeMap<String, Current> = index
            .clusters()
            .into_iter()
            .map(|c| {
                let now = Current {
                    last_report_millis: c.last_report_millis,
                    streams_here: c.connected,
                };
                (c.name, now)
            })
            .collect();
        let clusters = |key: &GatewayKey| clusters::views(index, key);
        let fresh = |c: &str| current.get(c).is_some_and(|c| c.is_fresh(started));
        let fleet = gwhub_dns_rules::fleet_names(&gateways, &self.config.zones);
        names.round(&Round {
            now_millis: now_millis(),
            names: &fleet,
            clusters: &clusters,
            fresh: &fresh,
        })
    }

    /// Hands `job` to every output; the first problem is the outcome.
    async fn execute(
        &self,
        job: &Job,
        endpoint: Option<&EndpointOutput>,
        rfc: Option<&rfc2136::RfcOutput>,
        specs: &Specs,
    ) -> Outcome {
        if self.config.dry_run {
            tracing::info!(host = %job.host, sets = ?names::targets(&job.sets), "fleet DNS dry run: would write");
            return Outcome::Written;
        }
        let records: usize = job.sets.values().map(|s| s.targets().len()).sum();
        let mut outcome = Outcome::Written;
        let uid = specs.lock().get(&job.owner).map(|s| s.uid.clone());
        let record = |kind: OutputKind, o: &Outcome, took: Duration| {
            let result = match o {
                Outcome::Written => "ok",
                Outcome::Conflict(_) => "conflict",
                Outcome::Failed(_) => "error",
            };
            self.metrics
                .dns_writes
                .get_or_create(&vec![
                    ("output".to_owned(), kind.label().to_owned()),
                    ("result".to_owned(), result.to_owned()),
                ])
                .inc();
            self.metrics.dns_write_seconds.observe(took);
        };
        if let Some(out) = endpoint {
            let t = std::time::Instant::now();
            let o = out.write(job, uid.as_deref()).await;
            record(OutputKind::Dnsendpoint, &o, t.elapsed());
            if outcome == Outcome::Written {
                outcome = o;
            }
        }
        if let Some(out) = rfc {
            let t = std::time::Instant::now();
            let o = out.write(job).await;
            record(OutputKind::Rfc2136, &o, t.elapsed());
            if outcome == Outcome::Written {
                outcome = o;
            }
        }
        if outcome == Outcome::Written && !job.sets.is_empty() {
            self.metrics.dns_records_per_name.observe(records);
        }
        outcome
    }
}

/// Fleet DNS without Kubernetes (`gwhub serve --no-kube --dns-dry-run`,
/// `gwhub demo`): the names are the hostnames the clusters report per
/// listener ([`gwhub_dns_rules::names_from_reports`]), and nothing is
/// sent: each round's writes are taken as made, so the view shows what
/// the hub would publish as the clusters change, and the hub Gateways'
/// `gwhub.io/DNSPublished` says so. Nothing was published
/// before this process, so there is no earlier set to respect: names
/// join at once, as after the restart grace. Runs until `shutdown`.
pub async fn run_without_kube(
    config: DnsConfig,
    index: DnsPort,
    view: watch::Sender<Arc<DnsView>>,
    shutdown: CancellationToken,
) {
    let outputs = config.outputs();
    let started = now_millis().saturating_sub(config.publish.stale_after_millis);
    let mut names = Names::new(config.clone(), started, Seeds::new(), Remembered::new());
    let mut views = index.subscribe();
    let mut reports = index.subscribe_reports();
    loop {
        views.borrow_and_update();
        reports.borrow_and_update();
        let keys: Vec<GatewayKey> = views.borrow().gateways.keys().cloned().collect();
        let reported: Vec<gwhub_dns_rules::ReportedGateway> = keys
            .iter()
            .flat_map(|key| {
                index.cluster_reports(key).into_iter().map(|r| {
                    let c = clusters::reported(&index, key, &r, None);
                    gwhub_dns_rules::ReportedGateway {
                        key: key.clone(),
                        cluster: c.cluster,
                        listeners: c
                            .listeners
                            .into_iter()
                            .map(|l| gwhub_dns_rules::HubListener {
                                name: l.name,
                                hostname: l.hostname,
                            })
                            .collect(),
                    }
                })
            })
            .collect();
        let fleet = gwhub_dns_rules::names_from_reports(&reported, &config.zones);
        let clusters = |key: &GatewayKey| clusters::views(&index, key);
        let fresh = |_: &str| true;
        let decided = names.round(&Round {
            now_millis: now_millis(),
            names: &fleet,
            clusters: &clusters,
            fresh: &fresh,
        });
        let wake = decided.wake_at_millis;
        // The hub Gateways' `gwhub.io/DNSPublished` as the dry run decides
        // it (what `gwhub demo` and the Dashboard show on each hub Gateway).
        for (key, c) in decided.conditions {
            index.set_dns_condition(&key, c);
        }
        index.set_dns_mode(gwhub_index::DnsMode::Leading);
        for job in &decided.jobs {
            tracing::info!(host = %job.host, sets = ?names::targets(&job.sets), "fleet DNS dry run: would write");
            names.written(job, Outcome::Written, now_millis(), 0);
        }
        let mut next = decided.view;
        names.refresh(&mut next);
        next.writing = true;
        next.dry_run = true;
        next.outputs = outputs.clone();
        view.send_replace(Arc::new(next));
        if !decided.jobs.is_empty() {
            continue;
        }
        let sleep = until_millis(wake);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = views.changed() => if r.is_err() { return },
            r = reports.changed() => if r.is_err() { return },
            _ = sleep => {}
        }
        // Changes arriving together make one round.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sleeps until the unix millisecond `wake` (a rise or coalescing
/// deadline the rules asked for), for ever when there is none.
async fn until_millis(wake: Option<i64>) {
    match wake {
        Some(t) => {
            let ms = u64::try_from(t - now_millis()).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        None => std::future::pending().await,
    }
}

/// Keeps `specs` as the management cluster's hub Gateways are.
async fn watch_specs(
    api: Api<Gateway>,
    specs: Specs,
    changed: Arc<Notify>,
    listed: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(changes(events, shutdown));
    while let Some(change) = stream.next().await {
        let touched = {
            let mut map = specs.lock();
            match change {
                Change::Listed(all) => {
                    let next: BTreeMap<GatewayKey, HubSpec> = all
                        .iter()
                        .map(|g| (GatewayKey::of(g), HubSpec::of(g)))
                        .collect();
                    let touched = *map != next;
                    *map = next;
                    listed.send_replace(true);
                    touched
                }
                Change::Applied(g) => {
                    let spec = HubSpec::of(&g);
                    map.insert(GatewayKey::of(&g), spec.clone()) != Some(spec)
                }
                Change::Deleted(g) => map.remove(&GatewayKey::of(&g)).is_some(),
                Change::Failed(e) => {
                    tracing::warn!(error = %e, "fleet DNS: watching hub Gateways failed; retrying");
                    false
                }
            }
        };
        if touched {
            changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Current;

    /// (last report, streams here) -> fresh for a leader since 1000.
    #[test]
    fn a_report_is_fresh_if_received_since_the_start_or_streamed_here() {
        let cases = [
            (999, false, false),
            (1000, false, true),
            (1001, false, true),
            (999, true, true),
            (0, true, true),
        ];
        for (last_report_millis, streams_here, want) in cases {
            let c = Current {
                last_report_millis,
                streams_here,
            };
            assert_eq!(
                c.is_fresh(1000),
                want,
                "{last_report_millis} {streams_here}"
            );
        }
    }
}
