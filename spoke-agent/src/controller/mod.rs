//! Kubernetes mode of the agent (`gwhub-agent run` without `--from-dir`):
//! watches the cluster's API server, evaluates the in-scope Gateways with the
//! same [`crate::engine`] as everywhere else, server-side applies our three
//! conditions onto each Gateway's status and feeds the [`GatewayStore`] the
//! hub client streams from.
//!
//! Tasks: one watch per input kind ([`cache`]) marking the Gateways a change
//! touches; one reconcile loop that paces (one budget per cluster), evaluates and queues; one
//! `writer`. A failing watch, an object that does not parse or a rejected
//! write is logged and counted, never fatal.
//!
//! Why not `kube::runtime::Controller` (issue 22; tried in commit `be06d8b`,
//! figures in docs/benchmarks.md): on one Gateway it matched this loop
//! (propagation p50 36-45 against 40-45 ms, storm writes 24-27 against
//! 22-24, the same CPU) in ~485 lines against ~780, but it bounds
//! parallelism, not rate: one DNS config change over 300 Gateways wrote
//! 215 statuses in one second where this loop keeps the cluster's budget
//! (42, budget 50), and its debounce delays every change (100 ms: p50 141
//! ms). It also needed its typed watches (one bad object fails a kind's
//! list), a tap on the raw stream for deletes and re-lists, waiting on
//! every store inside the reconcile (`Store::wait_until_ready` wakes only
//! its last waiter), and its mappers see only an object's new version (a
//! relabelled Service leaves its old Gateway stale until the resync).

pub mod cache;
mod events;
pub mod metrics;
mod writer;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gwhub_common::Backoff;
use gwhub_common::pace::sleep_until;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Service};
use kube::Client;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::conditions::load_balancer::{SYNC_LOAD_BALANCER_FAILED, is_provisioned};
use crate::engine::evaluate_with;
use crate::openshift::{CLUSTER_CONFIG_NAME, DNS, DNSRecord, GATEWAY_NAME_LABEL};
use crate::ownership::WriteMode;
use crate::runtime::{GatewayKey, GatewayStore, HubConfig, run_agent};
use crate::scope::{self, Options};
use crate::snapshot::Snapshot;

pub use cache::{Cache, Dirty, Touch};
use events::Notices;
pub use events::{CLUSTER_CONFIG_MISSING, CONDITION_LIMIT_REACHED, DUPLICATE_DNS_RECORDS};
pub use metrics::Metrics;
use writer::{Pending, WriteQueue, Writer};

pub use gwhub_spoke_rules::engine::FIELD_MANAGER;

/// Why the controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes config: neither KUBECONFIG/~/.kube/config nor an in-cluster service account ({0})"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("--metrics-listen {addr}: {source}")]
    MetricsListen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A client from `kubeconfig`, else inferred (`KUBECONFIG`, `~/.kube/config`,
/// then the in-cluster service account).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|source| Error::Kubeconfig {
                path: path.to_owned(),
                source,
            })?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::Kubeconfig {
                    path: path.to_owned(),
                    source,
                })?
        }
        None => kube::Config::infer().await.map_err(Error::Infer)?,
    };
    Client::try_from(config).map_err(Error::Client)
}

/// How the controller behaves.
#[derive(Clone, Debug)]
pub struct Settings {
    pub scope: Options,
    /// `--write-local-status`: which of our conditions the agent writes to
    /// each Gateway ([`crate::ownership::plan`]).
    pub write_local_status: WriteMode,
    /// Evaluation passes per second for the whole cluster (`--kube-api-qps`;
    /// 0: no limit). Each pass is at most one status write and one change
    /// streamed to the hub; a pass that changed nothing costs nothing.
    /// Gateways over the budget wait in line, each its turn
    /// ([`gwhub_common::FairPacer`]), so one busy Gateway is not taxed and
    /// a storm costs at most `api_burst + api_qps·W` passes over any
    /// window `W`.
    pub api_qps: f64,
    /// Passes that may go at once before `api_qps` applies
    /// (`--kube-api-burst`).
    pub api_burst: u32,
    /// How often every Gateway is re-evaluated regardless of changes.
    pub resync: Duration,
    /// Delay before retrying a Gateway whose write or Event list failed.
    pub retry: Duration,
}

impl Settings {
    pub fn new(scope: Options) -> Self {
        Self {
            scope,
            write_local_status: WriteMode::Auto,
            api_qps: gwhub_common::fair_pace::DEFAULT_QPS,
            api_burst: gwhub_common::fair_pace::DEFAULT_BURST,
            resync: Duration::from_secs(300),
            retry: Duration::from_secs(1),
        }
    }
}

/// The number of watched kinds; evaluation starts once all were listed.
const KINDS: usize = 6;
/// Longest wait before a Gateway whose status writes keep failing is tried again.
const MAX_RETRY: Duration = Duration::from_secs(300);

/// Watches, evaluates and writes until `shutdown`, keeping `store` equal to
/// the in-scope Gateways with their merged status. Marks `store` ready after
/// the first evaluation of everything listed.
pub async fn run(
    client: Client,
    settings: Settings,
    store: Arc<GatewayStore>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    run_as(String::new(), client, settings, store, metrics, shutdown).await
}

/// [`run`] for `cluster`, the name its reconcile spans carry.
async fn run_as(
    cluster: String,
    client: Client,
    settings: Settings,
    store: Arc<GatewayStore>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let ns = settings.scope.namespace.clone();
    let dirty = Arc::new(Dirty::default());
    let health = Arc::new(cache::WatchHealth::new(store.clone()));
    let caches = Caches::default();
    let mut tasks = follow(&caches, &client, &ns, &dirty, &metrics, &health, &shutdown);

    let queue = Arc::new(WriteQueue::default());
    tasks.spawn(
        Writer {
            api: Api::namespaced(client.clone(), &ns),
            namespace: ns.clone(),
            queue: queue.clone(),
            gateways: caches.gateways.clone(),
            dirty: dirty.clone(),
            metrics: metrics.clone(),
            backoff: Backoff::new(settings.retry, MAX_RETRY),
        }
        .run(shutdown.clone()),
    );

    let Caches {
        gateways,
        classes,
        services,
        records,
        dnses,
        lb_events,
    } = caches;

    let reconciler = Reconciler {
        cluster,
        events: Api::namespaced(client.clone(), &ns),
        lb_events,
        notices: Notices::new(client, metrics.clone()),
        settings,
        gateways,
        classes,
        services,
        records,
        dnses,
        dirty,
        metrics,
        store,
        queue,
        streamed: Default::default(),
        shutdown: shutdown.clone(),
    };
    reconciler.run().await;
    shutdown.cancel();
    while tasks.join_next().await.is_some() {}
}

/// What the controller watches, one cache per kind.
#[derive(Default)]
struct Caches {
    gateways: Arc<Cache<Gateway>>,
    classes: Arc<Cache<GatewayClass>>,
    services: Arc<Cache<Service>>,
    records: Arc<Cache<DNSRecord>>,
    dnses: Arc<Cache<DNS>>,
    lb_events: Arc<Cache<Event>>,
}

/// Starts one watch per cache, each marking dirty the Gateways a change
/// touches: the Gateways of the namespace, every GatewayClass, the
/// labelled Services and DNSRecords, the cluster's DNS config, and the
/// Events of a Service's load balancer failing.
fn follow(
    caches: &Caches,
    client: &Client,
    ns: &str,
    dirty: &Arc<Dirty>,
    metrics: &Arc<Metrics>,
    health: &Arc<cache::WatchHealth>,
    shutdown: &CancellationToken,
) -> tokio::task::JoinSet<()> {
    let labelled = watcher::Config::default().labels(GATEWAY_NAME_LABEL);
    let singleton =
        watcher::Config::default().fields(&format!("metadata.name={CLUSTER_CONFIG_NAME}"));
    let mut tasks = tokio::task::JoinSet::new();
    macro_rules! follow {
        ($kind:literal, $cache:expr, $ns:expr, $config:expr, $touches:expr) => {{
            let f = cache::Follow {
                keep_managed_fields: $kind == "Gateway",
                kind: $kind,
                cache: $cache.clone(),
                dirty: dirty.clone(),
                metrics: metrics.clone(),
                health: health.clone(),
                touches: Box::new($touches),
            };
            let api = cache::dynamic_api_for(&$cache, client.clone(), $ns);
            tasks.spawn(f.run(api, $config, shutdown.clone()));
        }};
    }
    follow!(
        "Gateway",
        caches.gateways,
        Some(ns),
        watcher::Config::default(),
        |g: &Gateway| { Touch::Gateway(g.metadata.name.clone().unwrap_or_default()) }
    );
    follow!(
        "GatewayClass",
        caches.classes,
        None,
        watcher::Config::default(),
        |_: &GatewayClass| Touch::All
    );
    follow!(
        "Service",
        caches.services,
        Some(ns),
        labelled.clone(),
        |s: &Service| { label_touch(&s.metadata) }
    );
    follow!(
        "DNSRecord",
        caches.records,
        Some(ns),
        labelled,
        |r: &DNSRecord| label_touch(&r.metadata)
    );
    follow!("DNS", caches.dnses, None, singleton, |_: &DNS| Touch::All);
    // A service-controller failure changes no Service: this watch
    // re-evaluates the Gateway when one arrives (the evaluation then lists
    // the Service's Events fresh, as the spec asks).
    let failures = watcher::Config::default().fields(&format!(
        "involvedObject.kind=Service,reason={SYNC_LOAD_BALANCER_FAILED}"
    ));
    let svcs = caches.services.clone();
    follow!(
        "Event",
        caches.lb_events,
        Some(ns),
        failures,
        move |e: &Event| {
            let svc = e.involved_object.name.as_deref().unwrap_or_default();
            svcs.filtered(|s| s.metadata.name.as_deref() == Some(svc))
                .first()
                .map_or(Touch::Nothing, |s| label_touch(&s.metadata))
        }
    );
    tasks
}

/// An agent against a Kubernetes API server: the controller feeding `store`
/// (empty; the caller may answer probes from it) and the hub client
/// streaming it, until `shutdown`.
pub async fn run_kube_agent(
    hub: HubConfig,
    client: Client,
    settings: Settings,
    store: Arc<GatewayStore>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let controller = tokio::spawn(run_as(
        hub.cluster.clone(),
        client,
        settings,
        store.clone(),
        metrics,
        shutdown.clone(),
    ));
    let watchdog = crate::runtime::stop_if_source_ends(controller, store.clone(), shutdown.clone());
    run_agent(hub, store, shutdown).await;
    let _ = watchdog.await;
}

fn label_touch(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Touch {
    match meta.labels.as_ref().and_then(|l| l.get(GATEWAY_NAME_LABEL)) {
        Some(name) if !name.is_empty() => Touch::Gateway(name.clone()),
        _ => Touch::Nothing,
    }
}

struct Reconciler {
    /// The cluster's name, for the reconcile spans ("" when not known).
    cluster: String,
    events: Api<Event>,
    /// The same Events from a watch: it re-evaluates a Gateway when one
    /// arrives, and stands in when a fresh list fails.
    lb_events: Arc<Cache<Event>>,
    notices: Notices,
    settings: Settings,
    gateways: Arc<Cache<Gateway>>,
    classes: Arc<Cache<GatewayClass>>,
    services: Arc<Cache<Service>>,
    records: Arc<Cache<DNSRecord>>,
    dnses: Arc<Cache<DNS>>,
    dirty: Arc<Dirty>,
    metrics: Arc<Metrics>,
    store: Arc<GatewayStore>,
    queue: Arc<WriteQueue>,
    /// Names of the Gateways in `store`, so a re-list can drop the gone ones.
    streamed: std::sync::Mutex<BTreeSet<String>>,
    shutdown: CancellationToken,
}

impl Reconciler {
    async fn run(self) {
        // One budget for the cluster's Gateways, served in turn.
        let mut pacer = gwhub_common::FairPacer::<String>::new(
            self.settings.api_qps,
            self.settings.api_burst,
            Instant::now(),
        );
        let mut ready = false;
        let mut resync = tokio::time::interval(self.settings.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.tick().await;
        loop {
            let due = pacer.next_due(Instant::now());
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = self.dirty.changed() => {}
                _ = resync.tick() => self.dirty.touch(Touch::All),
                _ = sleep_until(due), if due.is_some() => {}
            }
            if self.dirty.synced_count() < KINDS {
                continue;
            }
            let batch = self.dirty.take();
            if batch.all {
                let streamed = self
                    .streamed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                pacer.wait(
                    self.gateways
                        .all()
                        .iter()
                        .filter_map(|g| g.metadata.name.clone())
                        .chain(streamed),
                );
            }
            pacer.wait(batch.names);
            // The first evaluation of everything listed is not paced: the
            // hub's first snapshot needs every Gateway.
            let (round, paced) = if ready {
                (pacer.take_due(Instant::now()), true)
            } else {
                (pacer.take_all(), false)
            };
            for name in round {
                if self.shutdown.is_cancelled() {
                    return;
                }
                if !self.reconcile(&name).await && paced {
                    // Typically the echo of our own status write: it must
                    // not spend the budget of the next real change.
                    pacer.idle();
                }
            }
            ready = true;
            self.store.mark_ready();
        }
    }

    /// Evaluates one Gateway and queues its write if anything but time
    /// changed. Returns whether it changed what the hub is sent or queued a
    /// write. Each reconcile starts a trace (exported with
    /// `--otlp-endpoint`) that the report of its change continues.
    #[tracing::instrument(name = "reconcile", parent = None, skip_all, fields(cluster = %self.cluster, gateway = %name))]
    async fn reconcile(&self, name: &str) -> bool {
        let started = Instant::now();
        let changed = self.reconcile_now(name).await;
        self.metrics.reconcile_seconds.observe(started.elapsed());
        changed
    }

    /// [`Self::reconcile`]'s work, untimed.
    async fn reconcile_now(&self, name: &str) -> bool {
        Metrics::bump(&self.metrics.reconciles);
        let opts = &self.settings.scope;
        let key = GatewayKey::new(&opts.namespace, name);
        let classes: Vec<GatewayClass> = self.classes.all().iter().map(|c| (**c).clone()).collect();
        let gw = match self.gateways.get(&opts.namespace, name) {
            Some(gw) if scope::in_scope(&gw, &classes, opts) => gw,
            _ => {
                let gone = self.store.delete(&key);
                self.metrics.forget_mode(&key.to_string());
                self.set_streamed(name, false);
                self.queue.remove(name);
                self.notices.forget(name);
                return gone;
            }
        };
        let mine = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            label_touch(meta) == Touch::Gateway(name.to_owned())
        };
        let mut snapshot = Snapshot {
            gateways: vec![(*gw).clone()],
            gateway_classes: classes,
            services: owned(self.services.filtered(|s| mine(&s.metadata))),
            dns_records: owned(self.records.filtered(|r| mine(&r.metadata))),
            events: Vec::new(),
            dns: self
                .dnses
                .get("", CLUSTER_CONFIG_NAME)
                .map(|d| (*d).clone()),
        };
        if let Some(svc) = scope::service_for(&gw, &snapshot.services)
            && !is_provisioned(svc)
        {
            let svc_name = svc.metadata.name.clone().unwrap_or_default();
            snapshot.events = match self.fresh_events(&svc_name).await {
                Ok(events) => events,
                Err(e) => {
                    // The watch's copy for now, and a fresh read soon.
                    Metrics::bump(&self.metrics.event_list_errors);
                    tracing::warn!(service = %svc_name, error = %e, "cannot list the Service's Events; using the watch's copy and retrying");
                    self.retry_later(name);
                    owned(
                        self.lb_events.filtered(|e| {
                            e.involved_object.name.as_deref() == Some(svc_name.as_str())
                        }),
                    )
                }
            };
        }
        let mode = self.settings.write_local_status;
        let evaluation = match evaluate_with(&snapshot, opts, mode, Timestamp::now()) {
            Ok(mut evals) if !evals.is_empty() => evals.remove(0),
            Ok(_) => return false,
            Err(e) => {
                // No guess: nothing is written; the hub gets the Gateway as
                // it is, and the config's watch re-evaluates when it appears.
                self.notices.config_error(&gw, &e).await;
                let changed = self.store.upsert((*gw).clone());
                self.set_streamed(name, true);
                return changed;
            }
        };
        // The hub first: Events are an API round trip it need not wait for.
        let changed = self.store.upsert(evaluation.merged_gateway());
        self.set_streamed(name, true);
        self.notices.config_ok(&gw);
        self.notices.problems(&gw, &evaluation.problems).await;
        let gw_mode = evaluation.plan.mode();
        if let Some(before) = self.metrics.set_mode(&key.to_string(), gw_mode) {
            tracing::info!(
                write_local_status = %mode,
                mode = gw_mode.as_str(),
                before = before.map_or("none", |m| m.as_str()),
                writes = ?evaluation.plan.gateway.iter().map(|t| format!("status.conditions {t}")).chain(evaluation.plan.listener.iter().map(|t| format!("listener {t}"))).filter(|_| evaluation.plan.write).collect::<Vec<_>>(),
                "write mode of the Gateway changed: the agent writes only the condition types no other field manager writes"
            );
        }
        if !evaluation.plan.write {
            return changed;
        }
        if evaluation.needs_write() {
            self.queue.push(
                name.to_owned(),
                Pending {
                    patch: evaluation.apply_patch(),
                    desired: evaluation.status,
                    force: mode == WriteMode::Always,
                },
            );
            true
        } else {
            Metrics::bump(&self.metrics.skipped_writes);
            changed
        }
    }

    /// The Service's load-balancer failure Events, listed from the API
    /// server now (the spec: a watch cache could be behind the controller
    /// that just reported the failure).
    async fn fresh_events(&self, service: &str) -> kube::Result<Vec<Event>> {
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Service,involvedObject.name={service},reason={SYNC_LOAD_BALANCER_FAILED}"
        ));
        Ok(self.events.list(&lp).await?.items)
    }

    fn retry_later(&self, name: &str) {
        self.dirty.touch_after(
            Touch::Gateway(name.to_owned()),
            self.settings.retry,
            &self.shutdown,
        );
    }

    fn set_streamed(&self, name: &str, present: bool) {
        let mut s = self.streamed.lock().unwrap_or_else(|e| e.into_inner());
        if present {
            s.insert(name.to_owned());
        } else {
            s.remove(name);
        }
    }
}

fn owned<K: Clone>(v: Vec<Arc<K>>) -> Vec<K> {
    v.into_iter().map(|o| (*o).clone()).collect()
}

/// Serves `metrics` as Prometheus text on `addr` (`GET /metrics`), and
/// `probes` on `GET /healthz` and `GET /readyz` ([`crate::runtime::probes`]),
/// until `shutdown`, through the responder shared with the hub
/// ([`gwhub_common::metrics_http`]).
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    probes: gwhub_common::metrics_http::Probes,
    shutdown: CancellationToken,
) -> Result<()> {
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    registry.register_collector(Box::new(gwhub_common::metrics_http::ProcessMemory));
    let addr = gwhub_common::metrics_http::serve_probes(addr, Arc::new(registry), probes, shutdown)
        .await
        .map_err(|source| Error::MetricsListen { addr, source })?;
    tracing::info!(%addr, "serving metrics on /metrics, probes on /healthz and /readyz");
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    /// The ingress operator's `Test_gatewayFromResourceLabel`
    /// (pkg/operator/controller/gateway-status/controller_test.go): an object
    /// labelled with a non-empty Gateway name touches that Gateway; no label
    /// or an empty one touches nothing. The operator's request also carries
    /// the object's namespace; the agent's watches are namespaced, so a
    /// touched name is always a Gateway in the object's (the watched) namespace.
    #[test]
    fn label_touch_as_gateway_from_resource_label() {
        let meta = |labels: Option<&[(&str, &str)]>, namespace: Option<&str>| ObjectMeta {
            labels: labels.map(|l| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            namespace: namespace.map(str::to_owned),
            ..ObjectMeta::default()
        };
        let cases = [
            (
                "no labels should return empty",
                meta(None, None),
                Touch::Nothing,
            ),
            (
                "no matching labels should return empty",
                meta(Some(&[(GATEWAY_NAME_LABEL, "")]), None),
                Touch::Nothing,
            ),
            (
                "matching labels should a reconciliation for resource on the same namespace",
                meta(
                    Some(&[(GATEWAY_NAME_LABEL, "my-gateway")]),
                    Some("somenamespace"),
                ),
                Touch::Gateway("my-gateway".into()),
            ),
        ];
        for (name, meta, want) in cases {
            assert_eq!(label_touch(&meta), want, "{name}");
        }
    }
}
