//! Adversarial tests of the join and identity side (spec section 7,
//! "Hardening"), each against a real API server, the hub acting
//! as its ServiceAccount from `manifests/` and making its own Secrets.
//! Attackers connect from other loopback source addresses (127.0.0.2,
//! 127.0.0.3, ...: the client socket is bound before it connects), the
//! honest client from 127.0.0.1; every loop is bounded.
//!
//! Covered: a tokenless request for a cluster holding a live identity is
//! refused `ALREADY_EXISTS` and records nothing; pending requests record
//! who asked (address, key fingerprint, time), several may wait for one
//! cluster and the hub never points one requester at another's; an
//! approval is for that key, once; one address holds at most 4 pending
//! requests and an expired one is deleted; a removed cluster's requests
//! (approved or pending) yield nothing and it needs a new token; Renew
//! checks the inventory in both modes (enforce refuses, observe reports).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use gwhub_common::join::JoinToken;
use gwhub_hub::kube_hub::KubeHub;
use gwhub_hub_rules::inventory::{ClusterProfile, Mode};
use gwhub_identity::tls::TlsPaths;
use gwhub_k8s::pending::{KEY_ANNOTATION, REQUESTED_ANNOTATION, SOURCE_ANNOTATION};
use gwhub_k8s::tls_secrets::{CA_SECRET, SecretsConfig};
use gwhub_k8s::{Connected, KubeOptions};
use gwhub_proto::v1::{self, ingest_client::IngestClient};
use gwhub_test_kit::apiserver::{Fleet, create_namespaces};
use gwhub_test_kit::install::{SYSTEM_NS, management};
use gwhub_test_kit::loopback;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, PostParams};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::support::hub_secrets::{decide, make_token};
use crate::support::kube_hub::kube_hub;

/// The honest client's address.
const HONEST: [u8; 4] = [127, 0, 0, 1];

/// The API server, the hub as its ServiceAccount (agent certificates for
/// an hour), the admin's client.
struct Setup {
    _fleet: Fleet,
    hub: KubeHub,
    as_hub: kube::Client,
    admin: kube::Client,
    ca: Vec<u8>,
    /// The inventory's mode (namespace [`FLEET_NS`]), when there is one.
    inventory: Option<Mode>,
}

/// The fleet inventory's namespace, when the test has one.
const FLEET_NS: &str = "fleet";

/// The hub as `as_hub`, its TLS from its Secrets, with the inventory in
/// mode `inventory` when given.
async fn start_hub(as_hub: &kube::Client, inventory: Option<Mode>) -> KubeHub {
    let hub = kube_hub(as_hub)
        .identity("attacks")
        .tls_from_secrets(|s| s.agent_lifetime = Duration::from_secs(3600));
    match inventory {
        Some(mode) => hub.inventory(FLEET_NS, mode),
        None => hub,
    }
    .start()
    .await
}

impl Setup {
    /// With the enforced inventory when `inventory`.
    async fn start(test: &str, inventory: bool) -> Option<Setup> {
        Self::start_in(test, inventory.then_some(Mode::Enforce)).await
    }

    /// With the inventory in mode `inventory` when given.
    async fn start_in(test: &str, inventory: Option<Mode>) -> Option<Setup> {
        let (fleet, admin, as_hub) = management(test).await?;
        if inventory.is_some() {
            gwhub_test_kit::crds::install_inventory(&admin)
                .await
                .expect("install the ClusterProfile CRD");
            create_namespaces(&admin, &[FLEET_NS]).await.unwrap();
        }
        let hub = start_hub(&as_hub, inventory).await;
        let ca = Api::<Secret>::namespaced(admin.clone(), SYSTEM_NS)
            .get(CA_SECRET)
            .await
            .unwrap()
            .data
            .unwrap()["tls.crt"]
            .0
            .clone();
        Some(Setup {
            _fleet: fleet,
            hub,
            as_hub,
            admin,
            ca,
            inventory,
        })
    }

    /// Stops the hub; `meanwhile` runs while none runs; starts it again.
    async fn restart<F: Future<Output = ()>>(self, meanwhile: F) -> Setup {
        self.hub.shutdown().await.unwrap();
        meanwhile.await;
        let hub = start_hub(&self.as_hub, self.inventory).await;
        Setup { hub, ..self }
    }

    /// An unauthenticated Ingest client from source address `from`.
    async fn from(&self, from: [u8; 4]) -> IngestClient<Channel> {
        self.client_as(from, None).await
    }

    /// An Ingest client from `from`, presenting `identity` (certificate and
    /// key PEM) when given.
    async fn client_as(
        &self,
        from: [u8; 4],
        identity: Option<(&str, &str)>,
    ) -> IngestClient<Channel> {
        let hub = self.hub.hub.ingest_addr;
        let src = IpAddr::V4(Ipv4Addr::from(from));
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca))
            .domain_name("localhost");
        if let Some((cert, key)) = identity {
            tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
        }
        let endpoint = Endpoint::from_shared(format!("https://{hub}"))
            .unwrap()
            .tls_config(tls)
            .unwrap();
        let channel = loopback::channel_from(src, hub, endpoint)
            .await
            .unwrap_or_else(|e| panic!("cannot connect from {src} to {hub}: {e:?}"));
        IngestClient::new(channel)
    }

    fn csrs(&self) -> Api<CertificateSigningRequest> {
        Api::all(self.admin.clone())
    }

    async fn manual_csrs(&self) -> Vec<CertificateSigningRequest> {
        let lp = ListParams::default().labels("gwhub.io/approval=manual");
        self.csrs().list(&lp).await.unwrap().items
    }

    /// A join token for `cluster`, as `gwhubctl join create` makes it.
    async fn token(&self, cluster: &str) -> String {
        make_token(
            &Api::namespaced(self.admin.clone(), SYSTEM_NS),
            cluster,
            600,
        )
        .await
    }

    /// `kubectl certificate approve|deny` (`type_`: Approved, Denied).
    async fn decide(&self, name: &str, type_: &str) {
        decide(&self.csrs(), name, type_).await;
    }
}

/// A key and a certificate request naming `cluster`; the key's
/// fingerprint as the hub and the agent write it.
struct Key {
    csr: String,
    key_pem: String,
    fingerprint: String,
}

fn key_for(cluster: &str) -> Key {
    use rcgen::PublicKeyData;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.subject_alt_names = vec![rcgen::SanType::URI(
        format!("spiffe://gwhub/cluster/{cluster}")
            .try_into()
            .unwrap(),
    )];
    Key {
        csr: p.serialize_request(&key).unwrap().pem().unwrap(),
        key_pem: key.serialize_pem(),
        fingerprint: format!(
            "sha256:{}",
            gwhub_common::join::key_hash(&key.subject_public_key_info())
        ),
    }
}

async fn join(
    client: &mut IngestClient<Channel>,
    cluster: &str,
    token: &str,
    key: &Key,
) -> Result<v1::JoinResponse, tonic::Status> {
    client
        .join(v1::JoinRequest {
            cluster: cluster.into(),
            token: token.into(),
            csr_pem: key.csr.clone(),
        })
        .await
        .map(tonic::Response::into_inner)
}

/// The request a pending answer names (FAILED_PRECONDITION, `waiting for
/// approval: kubectl certificate approve NAME`).
fn waiting(answer: Result<v1::JoinResponse, tonic::Status>) -> String {
    let e = answer.expect_err("a pending request gets no certificate");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    e.message()
        .strip_prefix("waiting for approval: kubectl certificate approve ")
        .unwrap_or_else(|| panic!("not a pending answer: {e:?}"))
        .to_owned()
}

fn annotation<'a>(csr: &'a CertificateSigningRequest, key: &str) -> &'a str {
    csr.metadata.annotations.as_ref().unwrap()[key].as_str()
}

/// East joined with a token: a tokenless Join naming east from another
/// address with the attacker's key is refused ALREADY_EXISTS, naming the
/// renewal and removal paths, and no request is recorded; so is the real
/// east agent asking without a token (never told to approve another's).
#[tokio::test]
async fn a_tokenless_request_for_a_live_cluster_is_refused_and_records_nothing() {
    let Some(s) = Setup::start("a_tokenless_request_for_a_live_cluster_is_refused", false).await
    else {
        return;
    };
    let mut honest = s.from(HONEST).await;
    let token = s.token("east").await;
    join(&mut honest, "east", &token, &key_for("east"))
        .await
        .expect("a valid token joins east");
    let before = s
        .csrs()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .len();

    let mut attacker = s.from([127, 0, 0, 2]).await;
    for who in [&mut attacker, &mut honest] {
        let e = join(who, "east", "", &key_for("east")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::AlreadyExists, "{e:?}");
        for path in [
            "Renew",
            "gwhubctl cluster remove east",
            "gwhubctl join create east",
        ] {
            assert!(e.message().contains(path), "{path} not named: {e:?}");
        }
        assert!(!e.message().contains("approve"), "{e:?}");
    }
    assert!(s.manual_csrs().await.is_empty());
    assert_eq!(
        s.csrs()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        before
    );
    s.hub.shutdown().await.unwrap();
}

/// North has no identity: an attacker (127.0.0.2) and the real agent
/// (127.0.0.1) each ask without a token; each is told to wait for its own
/// request, which records its source address, key fingerprint and time.
/// Approving the real one gives the real key its certificate once (the
/// request is then deleted; asking again is ALREADY_EXISTS); the
/// attacker's, approved by mistake afterwards, yields nothing.
#[tokio::test]
async fn pending_requests_record_who_asked_and_an_approval_is_for_that_key_once() {
    let Some(s) = Setup::start("pending_requests_record_who_asked", false).await else {
        return;
    };
    let mut honest = s.from(HONEST).await;
    let mut attacker = s.from([127, 0, 0, 2]).await;
    let (real, forged) = (key_for("north"), key_for("north"));
    let theirs = waiting(join(&mut attacker, "north", "", &forged).await);
    let ours = waiting(join(&mut honest, "north", "", &real).await);
    assert_ne!(ours, theirs, "the hub named another requester's request");
    let started = jiff::Timestamp::now();
    for (name, source, key) in [(&ours, "127.0.0.1", &real), (&theirs, "127.0.0.2", &forged)] {
        let csr = s.csrs().get(name).await.unwrap();
        assert_eq!(annotation(&csr, SOURCE_ANNOTATION), source);
        assert_eq!(annotation(&csr, KEY_ANNOTATION), key.fingerprint);
        let at: jiff::Timestamp = annotation(&csr, REQUESTED_ANNOTATION).parse().unwrap();
        assert!(
            (started - at).get_seconds().abs() < 60,
            "{at} is not when it was asked"
        );
    }
    assert_eq!(s.manual_csrs().await.len(), 2);

    s.decide(&ours, "Approved").await;
    // The attacker's own request is still pending: nothing for it.
    assert_eq!(
        waiting(join(&mut attacker, "north", "", &forged).await),
        theirs
    );
    let issued = join(&mut honest, "north", "", &real)
        .await
        .expect("the approved key gets its certificate");
    let id = gwhub_common::identity::cluster_from_pem(issued.certificate_pem.as_bytes()).unwrap();
    assert_eq!(id.cluster, "north");
    assert!(
        s.csrs().get_opt(&ours).await.unwrap().is_none(),
        "not deleted once issued"
    );
    // Once: the same key again is refused.
    let e = join(&mut honest, "north", "", &real).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::AlreadyExists, "{e:?}");
    // The attacker's request approved by mistake: void, and deleted.
    s.decide(&theirs, "Approved").await;
    let e = join(&mut attacker, "north", "", &forged).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::AlreadyExists, "{e:?}");
    assert!(s.manual_csrs().await.is_empty());
    s.hub.shutdown().await.unwrap();
}

/// One address (127.0.0.3) holds at most 4 pending requests: the 5th is
/// refused (RESOURCE_EXHAUSTED) and records nothing, while another address
/// still may ask; a request older than an hour is deleted, and its slot is
/// free again; the leader's sweep deletes expired and denied requests
/// with nobody asking.
#[tokio::test]
async fn one_address_holds_at_most_four_pending_and_expired_ones_are_deleted() {
    let Some(s) = Setup::start("one_address_holds_at_most_four_pending", false).await else {
        return;
    };
    let mut attacker = s.from([127, 0, 0, 3]).await;
    let mut names = Vec::new();
    for i in 0..4 {
        names.push(waiting(
            join(
                &mut attacker,
                &format!("c{i}"),
                "",
                &key_for(&format!("c{i}")),
            )
            .await,
        ));
    }
    let e = join(&mut attacker, "c4", "", &key_for("c4"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("127.0.0.3"), "{e:?}");
    assert_eq!(s.manual_csrs().await.len(), 4);
    let mut other = s.from([127, 0, 0, 4]).await;
    waiting(join(&mut other, "d0", "", &key_for("d0")).await);

    // One of the four asked two hours ago: expired, deleted at the next
    // request, which takes its slot.
    let csrs = s.csrs();
    let mut old = csrs.get(&names[0]).await.unwrap();
    let two_hours_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2);
    old.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(REQUESTED_ANNOTATION.into(), two_hours_ago.to_string());
    csrs.replace(&names[0], &PostParams::default(), &old)
        .await
        .unwrap();
    waiting(join(&mut attacker, "c4", "", &key_for("c4")).await);
    assert!(
        csrs.get_opt(&names[0]).await.unwrap().is_none(),
        "expired, not deleted"
    );
    assert_eq!(s.manual_csrs().await.len(), 5);

    // With nobody asking, the leader's sweep (at its start, then every
    // 12 minutes) deletes an expired and a denied request.
    let mut old = csrs.get(&names[1]).await.unwrap();
    old.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(REQUESTED_ANNOTATION.into(), two_hours_ago.to_string());
    csrs.replace(&names[1], &PostParams::default(), &old)
        .await
        .unwrap();
    s.decide(&names[2], "Denied").await;
    let s = s.restart(async {}).await;
    gwhub_test_kit::wait::until(
        Duration::from_secs(30),
        || async { s.manual_csrs().await.len() },
        |n| *n == 3,
    )
    .await;
    for gone in &names[1..3] {
        assert!(s.csrs().get_opt(gone).await.unwrap().is_none(), "{gone}");
    }
    s.hub.shutdown().await.unwrap();
}

/// West's tokenless request is approved, then west is removed (as
/// `gwhubctl cluster remove west` records it): collecting the approved
/// request yields nothing and deletes it, a new tokenless request is
/// refused naming the token path, and only a new token joins west again.
#[tokio::test]
async fn a_removed_clusters_approved_request_yields_nothing() {
    let Some(s) = Setup::start("a_removed_clusters_approved_request_yields_nothing", false).await
    else {
        return;
    };
    let mut client = s.from(HONEST).await;
    let key = key_for("west");
    let name = waiting(join(&mut client, "west", "", &key).await);
    s.decide(&name, "Approved").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(s.admin.clone(), SYSTEM_NS);
    // A second later than the request, as a removal after it would be.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    gwhub_k8s::revocations::record(&configmaps, "west", gwhub_k8s::revocations::now())
        .await
        .unwrap();
    let e = join(&mut client, "west", "", &key).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("new token"), "{e:?}");
    assert!(
        s.csrs().get_opt(&name).await.unwrap().is_none(),
        "not voided"
    );
    let e = join(&mut client, "west", "", &key_for("west"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(s.manual_csrs().await.is_empty());
    // A new token is the way back.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let token = s.token("west").await;
    join(&mut client, "west", &token, &key_for("west"))
        .await
        .expect("a new token joins a removed cluster");
    s.hub.shutdown().await.unwrap();
}

/// With the inventory enforced: east joins with a token (its ClusterProfile
/// published); while no hub runs, its ClusterProfile is deleted; the
/// restarted hub revokes east as if it had seen the deletion (recorded in
/// gwhub-revoked), so east's certificate no longer streams.
#[tokio::test]
async fn a_profile_deleted_while_no_hub_ran_is_revoked_at_start() {
    let Some(s) = Setup::start(
        "a_profile_deleted_while_no_hub_ran_is_revoked_at_start",
        true,
    )
    .await
    else {
        return;
    };
    let mut client = s.from(HONEST).await;
    let token = s.token("east").await;
    join(&mut client, "east", &token, &key_for("east"))
        .await
        .expect("a valid token joins east");
    let profiles: Api<ClusterProfile> = Api::namespaced(s.admin.clone(), FLEET_NS);
    let configmaps: Api<ConfigMap> = Api::namespaced(s.admin.clone(), SYSTEM_NS);
    assert!(profiles.get_opt("east").await.unwrap().is_some());
    let revoked = || async {
        configmaps
            .get_opt(gwhub_k8s::revocations::REVOKED_CONFIGMAP)
            .await
            .unwrap()
            .and_then(|c| c.data)
            .is_some_and(|d| d.contains_key("east"))
    };
    assert!(!revoked().await);
    let s = s
        .restart(async {
            profiles.delete("east", &Default::default()).await.unwrap();
        })
        .await;
    gwhub_test_kit::wait::until(Duration::from_secs(30), revoked, |r| *r).await;
    s.hub.shutdown().await.unwrap();
}

/// 200 made-up, well-formed tokens from 8 addresses (127.0.0.10-17), all
/// at once: each is refused UNAUTHENTICATED from memory (no token Secret
/// read, nobody's budget spent) and counted in gwhub_join_refused_total; right after, a valid token joins from the
/// honest address and another from an attacker's address (one load
/// balancer for all), so does a token for a 253-character cluster name,
/// and the CertificateSigningRequests the hub made are gone once issued.
#[tokio::test]
async fn made_up_tokens_from_many_addresses_never_keep_a_valid_token_out() {
    let Some(s) = Setup::start("made_up_tokens_never_keep_a_valid_token_out", false).await else {
        return;
    };
    // Per address 5 connections of 5 calls each (a connection's concurrent
    // streams are capped by the hub).
    let mut floods = Vec::new();
    for a in 10..18u8 {
        for _ in 0..5 {
            let mut client = s.from([127, 0, 0, a]).await;
            floods.push(tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..5 {
                    let bogus = JoinToken::generate().unwrap().reveal();
                    answers.push(join(&mut client, "east", &bogus, &key_for("east")).await);
                }
                answers
            }));
        }
    }
    let mut refused = 0;
    for f in floods {
        for answer in f.await.unwrap() {
            let e = answer.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("unknown"), "{e:?}");
            refused += 1;
        }
    }
    assert_eq!(refused, 200);
    // Counted (gwhub_join_refused_total{reason="bad_token"}).
    assert!(s.hub.hub.metrics.joins.joins_refused("bad_token") >= 200);
    // How soon they were refused is the machine's business (no timed
    // assert); that an unknown id waits at most the grace and never
    // queues behind others is `join_limits`' unit tests'.

    let mut honest = s.from(HONEST).await;
    let token = s.token("east").await;
    join(&mut honest, "east", &token, &key_for("east"))
        .await
        .expect("a valid token joins at once after the flood");
    let mut shared = s.from([127, 0, 0, 10]).await;
    let token = s.token("west").await;
    join(&mut shared, "west", &token, &key_for("west"))
        .await
        .expect("a valid token joins from a flooding address");
    // Every valid cluster name can get a token (253 characters, beyond a
    // label value's 63).
    let long = format!("{}.{}", "l".repeat(126), "m".repeat(126));
    let token = s.token(&long).await;
    let issued = join(&mut honest, &long, &token, &key_for(&long))
        .await
        .expect("a 253-character cluster name joins");
    let id = gwhub_common::identity::cluster_from_pem(issued.certificate_pem.as_bytes()).unwrap();
    assert_eq!(id.cluster, long);
    assert!(
        s.csrs()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "the issued requests were not deleted"
    );
    s.hub.shutdown().await.unwrap();
}

/// The hub's own Secret gwhub-serving (gwhub.io/managed-by: gwhub) is
/// corrupted while no hub runs: the restarted hub starts anyway, serving
/// (a Join call is answered over TLS), and the leader re-issues the Secret.
/// An operator's corrupt gwhub-serving is only read: the start fails
/// naming it, and the Secret is left as it was.
#[tokio::test]
async fn a_corrupt_managed_serving_secret_is_reissued_on_restart() {
    let Some(s) = Setup::start("a_corrupt_managed_serving_secret_is_reissued", false).await else {
        return;
    };
    let secrets: Api<Secret> = Api::namespaced(s.admin.clone(), SYSTEM_NS);
    let corrupt = |managed: bool| {
        let secrets = secrets.clone();
        async move {
            let mut serving = secrets.get("gwhub-serving").await.unwrap();
            let data = serving.data.as_mut().unwrap();
            data.insert("tls.crt".into(), ByteString(b"not a certificate".to_vec()));
            if !managed {
                serving.metadata.annotations = None;
            }
            secrets
                .replace("gwhub-serving", &PostParams::default(), &serving)
                .await
                .unwrap();
        }
    };
    let s = s.restart(corrupt(true)).await;
    let mut client = s.from(HONEST).await;
    let e = join(&mut client, "east", "", &key_for("west"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    let usable = |s: &Secret| {
        let crt = &s.data.as_ref().unwrap()["tls.crt"].0;
        gwhub_common::identity::soonest_expiry_pem(crt).is_ok()
    };
    gwhub_test_kit::wait::until(
        Duration::from_secs(30),
        || async { secrets.get("gwhub-serving").await.unwrap() },
        usable,
    )
    .await;

    // An operator's: only read.
    s.hub.shutdown().await.unwrap();
    corrupt(false).await;
    let before = secrets.get("gwhub-serving").await.unwrap();
    let connected = Connected::new(s.as_hub.clone(), KubeOptions::new(SYSTEM_NS))
        .await
        .unwrap();
    let e = connected
        .tls_from_secrets(SecretsConfig::new(SYSTEM_NS), &TlsPaths::default())
        .await
        .expect_err("an operator's corrupt Secret stops the start");
    assert!(e.to_string().contains("gwhub-serving"), "{e}");
    let after = secrets.get("gwhub-serving").await.unwrap();
    assert_eq!(after.data, before.data);
}

/// With the inventory enforced, Renew checks it: east (joined with a
/// token) renews while its ClusterProfile exists; once the ClusterProfile
/// is deleted, its current certificate renews nothing.
#[tokio::test]
async fn a_renewal_needs_the_clusters_profile() {
    let Some(s) = Setup::start("a_renewal_needs_the_clusters_profile", true).await else {
        return;
    };
    let mut client = s.from(HONEST).await;
    let key = key_for("east");
    let token = s.token("east").await;
    let issued = join(&mut client, "east", &token, &key).await.unwrap();
    let mut east = s
        .client_as(HONEST, Some((&issued.certificate_pem, &key.key_pem)))
        .await;
    let renew = |csr: String| v1::RenewRequest { csr_pem: csr };
    east.renew(renew(key_for("east").csr))
        .await
        .expect("east renews while its ClusterProfile exists");
    Api::<ClusterProfile>::namespaced(s.admin.clone(), FLEET_NS)
        .delete("east", &Default::default())
        .await
        .unwrap();
    let e = gwhub_test_kit::wait::until(
        Duration::from_secs(20),
        || {
            let mut east = east.clone();
            async move { east.renew(renew(key_for("east").csr)).await.err() }
        },
        |e| e.is_some(),
    )
    .await
    .unwrap();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    s.hub.shutdown().await.unwrap();
}

/// Renew checks the inventory in every mode, as a stream does. "rogue"
/// holds a certificate from the hub's CA (made before there was an
/// inventory, say) and has no ClusterProfile: enforce mode refuses its
/// renewal naming the inventory; observe mode renews it, logs it and
/// counts it in `gwhub_renewals_outside_inventory_total`.
#[tokio::test]
async fn a_renewal_outside_the_inventory_is_refused_or_reported() {
    for mode in [Mode::Enforce, Mode::Observe] {
        let Some(s) = Setup::start_in(
            "a_renewal_outside_the_inventory_is_refused_or_reported",
            Some(mode),
        )
        .await
        else {
            return;
        };
        let ca = Api::<Secret>::namespaced(s.admin.clone(), SYSTEM_NS)
            .get(CA_SECRET)
            .await
            .unwrap();
        let text = |k: &str| String::from_utf8(ca.data.as_ref().unwrap()[k].0.clone()).unwrap();
        let pair = gwhub_identity::pki::Pair {
            cert_pem: text("tls.crt"),
            key_pem: text("tls.key"),
        };
        let key = key_for("rogue");
        let now = jiff::Timestamp::now().as_second();
        let cert = gwhub_identity::pki::sign_agent_csr(
            &pair,
            &key.csr,
            "rogue",
            now,
            Duration::from_secs(3600),
        )
        .unwrap()
        .unwrap();
        let mut rogue = s.client_as(HONEST, Some((&cert, &key.key_pem))).await;
        let renewed = rogue
            .renew(v1::RenewRequest {
                csr_pem: key_for("rogue").csr,
            })
            .await;
        let counted = s.hub.hub.metrics.joins.renewals_outside_inventory.get();
        match mode {
            Mode::Enforce => {
                let e = renewed.unwrap_err();
                assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
                assert!(e.message().contains("no ClusterProfile"), "{e:?}");
                assert_eq!(counted, 0);
            }
            Mode::Observe => {
                let r = renewed.expect("observe mode renews and reports");
                assert!(!r.into_inner().certificate_pem.is_empty());
                assert_eq!(counted, 1);
            }
        }
        s.hub.shutdown().await.unwrap();
    }
}
