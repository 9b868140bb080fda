//! TRIAL (issue 22 d6, not for merge): the same reconcile on
//! `kube::runtime::Controller` instead of the hand-built loop, selected with
//! `GWHUB_AGENT_LOOP=controller`, so the propagation bench and the agent's
//! end-to-end tests can run against both on one build.
//!
//! Gateways: `Controller::for_stream` over a reflector (deletes and re-lists
//! are seen on the raw stream: the Controller never reconciles a deleted
//! object). Services, DNSRecords, the load-balancer Events, GatewayClasses
//! and the DNS config: one reflector each, fed to `watches_stream` with a
//! mapper (label -> Gateway; a class or the DNS config -> every Gateway).
//! The status write happens inside the reconcile; failures go to
//! `error_policy` (per-Gateway backoff). `GWHUB_TRIAL_DEBOUNCE_MS` and
//! `GWHUB_TRIAL_CONCURRENCY` set the Controller's `Config`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tracing::Instrument;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gwhub_common::Backoff;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::cache::{Touch, WatchHealth};
use super::events::Notices;
use super::metrics::Metrics;
use super::{FIELD_MANAGER, MAX_RETRY, Settings, label_touch, owned};
use crate::conditions::load_balancer::{SYNC_LOAD_BALANCER_FAILED, is_provisioned};
use crate::engine::evaluate_with;
use crate::openshift::{CLUSTER_CONFIG_NAME, DNS, DNSRecord, GATEWAY_NAME_LABEL};
use crate::ownership::WriteMode;
use crate::runtime::{GatewayKey, GatewayStore};
use crate::scope;
use crate::snapshot::Snapshot;

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("status apply conflicted")]
    Conflict,
    #[error("status apply failed: {0}")]
    Write(#[source] kube::Error),
    #[error("a store's writer is gone")]
    Stopped,
}

struct Ctx {
    cluster: String,
    settings: Settings,
    api: Api<Gateway>,
    events: Api<Event>,
    gateways: Store<Gateway>,
    classes: Store<GatewayClass>,
    services: Store<Service>,
    records: Store<DNSRecord>,
    dnses: Store<DNS>,
    lb_events: Store<Event>,
    notices: Notices,
    metrics: Arc<Metrics>,
    store: Arc<GatewayStore>,
    backoff: Backoff<String>,
    /// Gateways in `store`, so a delete or re-list can drop them.
    streamed: Mutex<BTreeSet<String>>,
    /// Gateways reconciled at least once (readiness).
    reconciled: Mutex<BTreeSet<String>>,
}

impl Ctx {
    async fn all_ready(&self) -> Result<(), Error> {
        let r = tokio::try_join!(
            ready(&self.classes),
            ready(&self.services),
            ready(&self.records),
            ready(&self.dnses),
            ready(&self.lb_events),
        );
        r.map(|_| ())
    }

    fn forget(&self, name: &str) -> bool {
        let key = GatewayKey::new(&self.settings.scope.namespace, name);
        let gone = self.store.delete(&key);
        self.metrics.forget_mode(&key.to_string());
        self.streamed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.notices.forget(name);
        gone
    }

    fn streamed(&self, name: &str) {
        self.streamed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned());
    }
}

/// `Store::wait_until_ready`, re-polled: its one-shot receiver keeps only
/// the last waiter's waker, so with several waiters (the applier, other
/// reconciles) the others are never woken.
async fn ready<K>(store: &Store<K>) -> Result<(), Error>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(20), store.wait_until_ready()).await {
            Ok(r) => return r.map_err(|_| Error::Stopped),
            Err(_) => continue,
        }
    }
}

fn env_num(name: &str) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A reflector over `api`: its store, and its stream of touched objects
/// (health and watch errors recorded on the way).
fn reflect<K>(
    kind: &'static str,
    api: Api<K>,
    config: watcher::Config,
    health: Arc<WatchHealth>,
    metrics: Arc<Metrics>,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher::watcher(api, config)
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .reflect(writer)
        .inspect(move |ev| match ev {
            Ok(_) => health.set(kind, true),
            Err(e) => {
                health.set(kind, false);
                Metrics::bump(&metrics.watch_errors);
                tracing::warn!(kind, error = %e, "watch failed; retrying with backoff");
            }
        })
        .touched_objects();
    (reader, stream)
}

fn gateway_ref(ns: &str, touch: Touch, all: &Store<Gateway>) -> Vec<ObjectRef<Gateway>> {
    match touch {
        Touch::Nothing => Vec::new(),
        Touch::Gateway(name) => vec![ObjectRef::new(&name).within(ns)],
        Touch::All => all.state().iter().map(|g| ObjectRef::from_obj(&**g)).collect(),
    }
}

/// The trial loop: as [`super::run_as`], on `kube::runtime::Controller`.
pub(super) async fn run(
    cluster: String,
    client: Client,
    settings: Settings,
    store: Arc<GatewayStore>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let ns = settings.scope.namespace.clone();
    let health = Arc::new(WatchHealth::new(store.clone()));
    let labelled = watcher::Config::default().labels(GATEWAY_NAME_LABEL);
    let singleton =
        watcher::Config::default().fields(&format!("metadata.name={CLUSTER_CONFIG_NAME}"));
    let failures = watcher::Config::default().fields(&format!(
        "involvedObject.kind=Service,reason={SYNC_LOAD_BALANCER_FAILED}"
    ));
    let (gw_reader, gw_writer) = reflector::store::<Gateway>();
    let (classes, class_stream) = reflect(
        "GatewayClass",
        Api::<GatewayClass>::all(client.clone()),
        watcher::Config::default(),
        health.clone(),
        metrics.clone(),
    );
    let (services, svc_stream) = reflect(
        "Service",
        Api::<Service>::namespaced(client.clone(), &ns),
        labelled.clone(),
        health.clone(),
        metrics.clone(),
    );
    let (records, rec_stream) = reflect(
        "DNSRecord",
        Api::<DNSRecord>::namespaced(client.clone(), &ns),
        labelled,
        health.clone(),
        metrics.clone(),
    );
    let (dnses, dns_stream) = reflect(
        "DNS",
        Api::<DNS>::all(client.clone()),
        singleton,
        health.clone(),
        metrics.clone(),
    );
    let (lb_events, ev_stream) = reflect(
        "Event",
        Api::<Event>::namespaced(client.clone(), &ns),
        failures,
        health.clone(),
        metrics.clone(),
    );
    let ctx = Arc::new(Ctx {
        cluster,
        api: Api::namespaced(client.clone(), &ns),
        events: Api::namespaced(client.clone(), &ns),
        gateways: gw_reader.clone(),
        classes,
        services: services.clone(),
        records,
        dnses,
        lb_events,
        notices: Notices::new(client.clone(), metrics.clone()),
        metrics: metrics.clone(),
        store: store.clone(),
        backoff: Backoff::new(settings.retry, MAX_RETRY),
        streamed: Mutex::default(),
        reconciled: Mutex::default(),
        settings,
    });

    // Gateways: deletes and re-lists drop what the Controller never sees.
    let gw_ctx = ctx.clone();
    let gw_health = health.clone();
    let gw_metrics = metrics.clone();
    let gw_stream = watcher::watcher(
        Api::<Gateway>::namespaced(client.clone(), &ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(gw_writer)
    .inspect(move |ev| match ev {
        Ok(watcher::Event::Delete(gw)) => {
            gw_health.set("Gateway", true);
            gw_ctx.forget(&gw.name_any());
        }
        Ok(watcher::Event::InitDone) => {
            gw_health.set("Gateway", true);
            let live: BTreeSet<String> =
                gw_ctx.gateways.state().iter().map(|g| g.name_any()).collect();
            let gone: Vec<String> = gw_ctx
                .streamed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|n| !live.contains(*n))
                .cloned()
                .collect();
            for name in gone {
                gw_ctx.forget(&name);
            }
        }
        Ok(_) => gw_health.set("Gateway", true),
        Err(e) => {
            gw_health.set("Gateway", false);
            Metrics::bump(&gw_metrics.watch_errors);
            tracing::warn!(kind = "Gateway", error = %e, "watch failed; retrying with backoff");
        }
    })
    .applied_objects();

    let config = Config::default()
        .debounce(Duration::from_millis(env_num("GWHUB_TRIAL_DEBOUNCE_MS")))
        .concurrency(env_num("GWHUB_TRIAL_CONCURRENCY") as u16);
    let (a, b, f, g, h) = (
        gw_reader.clone(),
        gw_reader.clone(),
        gw_reader.clone(),
        gw_reader.clone(),
        gw_reader.clone(),
    );
    let (c, d, e) = (ns.clone(), ns.clone(), ns.clone());
    let controller = Controller::for_stream(gw_stream, gw_reader.clone())
        .with_config(config)
        .watches_stream(class_stream, move |_: GatewayClass| {
            gateway_ref("", Touch::All, &a)
        })
        .watches_stream(dns_stream, move |_: DNS| gateway_ref("", Touch::All, &b))
        .watches_stream(svc_stream, move |s: Service| {
            gateway_ref(&c, label_touch(&s.metadata), &f)
        })
        .watches_stream(rec_stream, move |r: DNSRecord| {
            gateway_ref(&d, label_touch(&r.metadata), &g)
        })
        .watches_stream(ev_stream, move |ev: Event| {
            let svc = ev.involved_object.name.unwrap_or_default();
            let touch = services
                .state()
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(svc.as_str()))
                .map_or(Touch::Nothing, |s| label_touch(&s.metadata));
            gateway_ref(&e, touch, &h)
        })
        .graceful_shutdown_on(shutdown.clone().cancelled_owned());

    // Ready once every kind is listed and every Gateway listed then was
    // reconciled once (the hub's first snapshot needs them all).
    let ready_ctx = ctx.clone();
    let ready_stop = shutdown.clone();
    let readiness = tokio::spawn(async move {
        let wait = async {
            if ready(&ready_ctx.gateways).await.is_err()
                || ready_ctx.all_ready().await.is_err()
            {
                return;
            }
            let want: BTreeSet<String> = ready_ctx
                .gateways
                .state()
                .iter()
                .map(|g| g.name_any())
                .collect();
            loop {
                let done = ready_ctx
                    .reconciled
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_superset(&want);
                if done {
                    ready_ctx.store.mark_ready();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            _ = ready_stop.cancelled() => {}
            _ = wait => {}
        }
    });

    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "reconcile");
            }
        })
        .await;
    readiness.abort();
    shutdown.cancel();
}

fn error_policy(gw: Arc<Gateway>, error: &Error, ctx: Arc<Ctx>) -> Action {
    let name = gw.name_any();
    let delay = ctx.backoff.failed(&name);
    tracing::info!(gateway = %name, %error, ?delay, "reconcile failed; retrying");
    Action::requeue(delay)
}

async fn reconcile(gw: Arc<Gateway>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.all_ready().await?;
    let name = gw.name_any();
    let span = tracing::info_span!("reconcile", cluster = %ctx.cluster, gateway = %name);
    let started = Instant::now();
    let out = reconcile_now(&gw, &name, &ctx).instrument(span).await;
    ctx.metrics.reconcile_seconds.observe(started.elapsed());
    ctx.reconciled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name);
    out
}

async fn reconcile_now(gw: &Arc<Gateway>, name: &str, ctx: &Ctx) -> Result<Action, Error> {
    Metrics::bump(&ctx.metrics.reconciles);
    let resync = Action::requeue(ctx.settings.resync);
    let opts = &ctx.settings.scope;
    let key = GatewayKey::new(&opts.namespace, name);
    let classes: Vec<GatewayClass> = ctx.classes.state().iter().map(|c| (**c).clone()).collect();
    if !scope::in_scope(gw, &classes, opts) {
        ctx.forget(name);
        return Ok(resync);
    }
    let mine = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        label_touch(meta) == Touch::Gateway(name.to_owned())
    };
    let mut snapshot = Snapshot {
        gateways: vec![(**gw).clone()],
        gateway_classes: classes,
        services: owned(ctx.services.state_filter(|s| mine(&s.metadata))),
        dns_records: owned(ctx.records.state_filter(|r| mine(&r.metadata))),
        events: Vec::new(),
        dns: ctx
            .dnses
            .get(&ObjectRef::new(CLUSTER_CONFIG_NAME))
            .map(|d| (*d).clone()),
    };
    let mut action = resync;
    if let Some(svc) = scope::service_for(gw, &snapshot.services)
        && !is_provisioned(svc)
    {
        let svc_name = svc.metadata.name.clone().unwrap_or_default();
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Service,involvedObject.name={svc_name},reason={SYNC_LOAD_BALANCER_FAILED}"
        ));
        snapshot.events = match ctx.events.list(&lp).await {
            Ok(list) => list.items,
            Err(e) => {
                Metrics::bump(&ctx.metrics.event_list_errors);
                tracing::warn!(gateway = %key, service = %svc_name, error = %e, "cannot list the Service's Events; using the watch's copy and retrying");
                action = Action::requeue(ctx.settings.retry);
                owned(ctx.lb_events.state_filter(|e| {
                    e.involved_object.name.as_deref() == Some(svc_name.as_str())
                }))
            }
        };
    }
    let mode = ctx.settings.write_local_status;
    let evaluation = match evaluate_with(&snapshot, opts, mode, Timestamp::now()) {
        Ok(mut evals) if !evals.is_empty() => evals.remove(0),
        Ok(_) => return Ok(action),
        Err(e) => {
            ctx.notices.config_error(gw, &e).await;
            ctx.store.upsert((**gw).clone());
            ctx.streamed(name);
            return Ok(action);
        }
    };
    ctx.store.upsert(evaluation.merged_gateway());
    ctx.streamed(name);
    ctx.notices.config_ok(gw);
    ctx.notices.problems(gw, &evaluation.problems).await;
    let gw_mode = evaluation.plan.mode();
    if let Some(before) = ctx.metrics.set_mode(&key.to_string(), gw_mode) {
        tracing::info!(gateway = %key, write_local_status = %mode, mode = gw_mode.as_str(),
            before = before.map_or("none", |m| m.as_str()), "write mode of the Gateway changed");
    }
    if !evaluation.plan.write {
        return Ok(action);
    }
    if !evaluation.needs_write() {
        Metrics::bump(&ctx.metrics.skipped_writes);
        return Ok(action);
    }
    let mut params = PatchParams::apply(FIELD_MANAGER);
    params.force = mode == WriteMode::Always;
    match ctx
        .api
        .patch_status(name, &params, &Patch::Apply(&evaluation.apply_patch()))
        .await
    {
        Ok(_) => {
            ctx.backoff.succeeded(&name.to_owned());
            Metrics::bump(&ctx.metrics.writes);
            Ok(action)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            Metrics::bump(&ctx.metrics.write_conflicts);
            Err(Error::Conflict)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(action),
        Err(e) => {
            Metrics::bump(&ctx.metrics.write_errors);
            Err(Error::Write(e))
        }
    }
}
