//! `--dashboard-auth=kubernetes` against a real API server.
//! The hub reviews readers' tokens and asks what they may read as its own
//! ServiceAccount (so the shipped RBAC is exercised); three readers known
//! to the API server by static tokens: one bound to a Role reading hub
//! Gateways in one namespace, one bound cluster-wide, one bound to nothing.
//! Each sees exactly what RBAC lets them: on gRPC (lists, gets, history,
//! clusters, a watch, also as their access is revoked mid-watch, fleet
//! DNS names), on the web page and through `gwhubctl` with the reader's
//! kubeconfig (a token, a tokenFile, an exec plugin).

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub::serve::{Hub, HubConfig};
use gwhub_identity::authz::KubeReaders;
use gwhub_k8s::reviews::ApiServerReviews;
use gwhub_proto::convert::status_to_proto;
use gwhub_proto::v1::{self, dashboard_client::DashboardClient};
use gwhub_test_kit::apiserver::{Fleet, create_namespaces, require_assets, static_token};
use gwhub_test_kit::install::install_hub;
use gwhub_test_kit::kube_objects::apply;
use gwhub_test_kit::procs::workspace_binary;
use gwhub_test_kit::raw_agent::Agent as RawAgent;
use gwhub_test_kit::wait::{WAIT, until};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::metadata::MetadataValue;

const ONE: &str = "reader-one";
const ALL: &str = "reader-all";
const NONE: &str = "reader-none";

fn status() -> GatewayStatus {
    serde_json::from_value(json!({
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
            {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
        "addresses": [{"type": "IPAddress", "value": "192.0.2.10"}],
    }))
    .unwrap()
}

/// The test kit's raw agent for cluster `east`, sending full snapshots of
/// `(namespace, name)` Gateways (each acked), numbered in order.
struct Agent {
    raw: RawAgent,
    seq: u64,
}

impl Agent {
    async fn connect(addr: SocketAddr) -> Agent {
        Agent {
            raw: RawAgent::connect(addr, "east").await,
            seq: 0,
        }
    }

    async fn snapshot(&mut self, gateways: &[(&str, &str)]) {
        self.seq += 1;
        let gateways = gateways
            .iter()
            .map(|(ns, name)| v1::GatewayReport {
                namespace: (*ns).into(),
                name: (*name).into(),
                uid: format!("uid-{ns}-{name}"),
                generation: 1,
                status: Some(status_to_proto(&status()).unwrap()),
            })
            .collect();
        self.raw.snapshot(self.seq, self.seq, gateways).await;
    }
}

/// Whether the API server's authorizer already says `user` may get hub
/// Gateways in `namespace` ("": cluster-wide); RBAC reaches it by a watch.
async fn can(admin: &Client, user: &str, namespace: &str) -> bool {
    let api: Api<SubjectAccessReview> = Api::all(admin.clone());
    let review: SubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "resourceAttributes": {
            "namespace": namespace, "verb": "get",
            "group": "gateway.networking.k8s.io", "resource": "gateways"}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .is_some_and(|s| s.allowed)
}

/// Reader ONE may get gateways in team-a; ALL everywhere; NONE nowhere.
async fn grant(admin: &Client) {
    let rule = json!([{"apiGroups": ["gateway.networking.k8s.io"],
                        "resources": ["gateways"], "verbs": ["get"]}]);
    let ref_ = |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": "gateway-reader"});
    let user = |name: &str| json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}]);
    let roles: Api<Role> = Api::namespaced(admin.clone(), "team-a");
    apply(&roles, "gateway-reader", json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role", "metadata": {"name": "gateway-reader", "namespace": "team-a"}, "rules": rule})).await;
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "team-a");
    apply(
        &bindings,
        "gateway-reader",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding", "metadata": {"name": "gateway-reader", "namespace": "team-a"},
        "roleRef": ref_("Role"), "subjects": user(ONE)}),
    )
    .await;
    let croles: Api<ClusterRole> = Api::all(admin.clone());
    apply(
        &croles,
        "gateway-reader",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole", "metadata": {"name": "gateway-reader"}, "rules": rule}),
    )
    .await;
    let cbindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    apply(
        &cbindings,
        "gateway-reader-all",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": "gateway-reader-all"},
        "roleRef": ref_("ClusterRole"), "subjects": user(ALL)}),
    )
    .await;
    until(
        WAIT,
        || async { (can(admin, ONE, "team-a").await, can(admin, ALL, "").await) },
        |got| *got == (true, true),
    )
    .await;
}

/// Adds the reader's `authorization` header.
type AddToken =
    Box<dyn FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Send>;

type Dashboard = DashboardClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, AddToken>,
>;

/// A Dashboard client presenting `token` (none: no header).
async fn dashboard(addr: SocketAddr, token: Option<String>) -> Dashboard {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let header: Option<MetadataValue<_>> = token.map(|t| format!("Bearer {t}").parse().unwrap());
    let add: AddToken = Box::new(move |mut req: tonic::Request<()>| {
        if let Some(h) = &header {
            req.metadata_mut().insert("authorization", h.clone());
        }
        Ok(req)
    });
    DashboardClient::with_interceptor(channel, add)
}

async fn as_reader(addr: SocketAddr, user: &str) -> Dashboard {
    dashboard(addr, Some(static_token(user))).await
}

/// `namespace/name` of every Gateway a ListGateways returns.
async fn listed(d: &mut Dashboard, namespace: &str) -> Result<Vec<String>, Code> {
    let filter = v1::GatewayFilter {
        namespace: namespace.into(),
        ..Default::default()
    };
    d.list_gateways(v1::ListGatewaysRequest {
        filter: Some(filter),
        ..Default::default()
    })
    .await
    .map(|r| {
        r.into_inner()
            .gateways
            .iter()
            .map(|g| format!("{}/{}", g.namespace, g.name))
            .collect()
    })
    .map_err(|s| s.code())
}

async fn get(d: &mut Dashboard, namespace: &str, name: &str) -> Code {
    let r = d
        .get_gateway(v1::GetGatewayRequest {
            namespace: namespace.into(),
            name: name.into(),
        })
        .await;
    r.map(|_| Code::Ok).unwrap_or_else(|s| s.code())
}

async fn history(d: &mut Dashboard, namespace: &str, name: &str) -> Code {
    let r = d
        .get_gateway_history(v1::GetGatewayHistoryRequest {
            namespace: namespace.into(),
            name: name.into(),
            limit: 0,
        })
        .await;
    r.map(|_| Code::Ok).unwrap_or_else(|s| s.code())
}

async fn clusters(d: &mut Dashboard) -> Result<Vec<String>, Code> {
    d.list_clusters(v1::ListClustersRequest::default())
        .await
        .map(|r| {
            r.into_inner()
                .clusters
                .into_iter()
                .map(|c| c.name)
                .collect()
        })
        .map_err(|s| s.code())
}

/// The hostnames a ListDnsNames returns.
async fn dns_hosts(d: &mut Dashboard, namespace: &str) -> Result<Vec<String>, Code> {
    d.list_dns_names(v1::ListDnsNamesRequest {
        namespace: namespace.into(),
    })
    .await
    .map(|r| {
        r.into_inner()
            .names
            .into_iter()
            .map(|n| n.hostname)
            .collect()
    })
    .map_err(|s| s.code())
}

/// Fleet DNS as a leader would show it: one name owned by a hub Gateway
/// in each of team-a and team-b.
fn dns_view() -> gwhub_dns::DnsView {
    let name = |ns: &str| gwhub_dns::NameView {
        zone: "fleet.test".into(),
        owner: Some(gwhub_hub_rules::aggregate::GatewayKey::new(ns, "gw")),
        state: "Published".into(),
        ..Default::default()
    };
    gwhub_dns::DnsView {
        names: [("a.fleet.test", "team-a"), ("b.fleet.test", "team-b")]
            .into_iter()
            .map(|(h, ns)| (h.to_owned(), name(ns)))
            .collect(),
        enabled: true,
        writing: true,
        ..Default::default()
    }
}

/// One GET over plaintext HTTP/1.1: the status code and the JSON body.
async fn web_get(addr: SocketAddr, path: &str, user: Option<&str>) -> (u16, Value) {
    let auth = user
        .map(|u| format!("Authorization: Bearer {}\r\n", static_token(u)))
        .unwrap_or_default();
    web_get_with(addr, path, &auth).await
}

/// [`web_get`] with raw header lines (each ending in CRLF).
async fn web_get_with(addr: SocketAddr, path: &str, auth: &str) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut text = String::new();
    tokio::time::timeout(WAIT, s.read_to_string(&mut text))
        .await
        .unwrap()
        .unwrap();
    let code = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    // A chunked body of one JSON document: take it from its first brace.
    let json = body
        .find('{')
        .and_then(|i| body[i..].rfind('}').map(|j| &body[i..=i + j]))
        .unwrap_or("null");
    (code, serde_json::from_str(json).unwrap_or(Value::Null))
}

/// The first event of the page's event stream as `user`: its JSON.
async fn web_snapshot(addr: SocketAddr, path: &str, user: &str) -> Value {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
            static_token(user)
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("the snapshot in time")
            .unwrap();
        assert!(
            n > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&text)
        );
        text.extend_from_slice(&buf[..n]);
        let t = String::from_utf8_lossy(&text);
        if let Some(at) = t.find("event: snapshot\ndata: ") {
            let data = &t[at + "event: snapshot\ndata: ".len()..];
            if let Some(end) = data.find("\n\n") {
                return serde_json::from_str(&data[..end]).unwrap();
            }
        }
    }
}

/// The watch's next message, in time.
async fn next(
    s: &mut tonic::Streaming<v1::WatchGatewaysResponse>,
) -> Result<v1::WatchGatewaysResponse, tonic::Status> {
    tokio::time::timeout(WAIT, s.next())
        .await
        .unwrap_or_else(|_| panic!("no watch message within {WAIT:?}"))
        .expect("the watch closed without a status")
}

/// A watch as `reader`, with its first message. The hub answers a watch it
/// cannot review yet (the API server did not answer in time, as on a
/// loaded machine) with UNAVAILABLE, at the call or as the first message:
/// retried every 200 ms as a client would; any other refusal, or
/// UNAVAILABLE for [`WAIT`], fails naming it.
async fn watch_first(
    reader: &mut Dashboard,
) -> (
    tonic::Streaming<v1::WatchGatewaysResponse>,
    v1::WatchGatewaysResponse,
) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = match reader
            .watch_gateways(v1::WatchGatewaysRequest::default())
            .await
        {
            Ok(r) => {
                let mut stream = r.into_inner();
                match next(&mut stream).await {
                    Ok(first) => return (stream, first),
                    Err(status) => status,
                }
            }
            Err(status) => status,
        };
        assert!(
            status.code() == Code::Unavailable && tokio::time::Instant::now() < deadline,
            "the watch's first message never came: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn names(fleet: &Value) -> Vec<String> {
    let mut v: Vec<String> = fleet["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            format!(
                "{}/{}",
                g["namespace"].as_str().unwrap(),
                g["name"].as_str().unwrap()
            )
        })
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn each_reader_sees_exactly_what_rbac_lets_them() {
    if !require_assets("each_reader_sees_exactly_what_rbac_lets_them") {
        return;
    }
    let fleet = Fleet::start(&["authz"]).await.expect("start API server");
    let cluster = fleet.cluster("authz");
    // The hub asks as its ServiceAccount, with the shipped RBAC.
    let as_hub = install_hub(cluster).await;
    let admin = cluster.client().await.unwrap();
    create_namespaces(&admin, &["team-a", "team-b"])
        .await
        .unwrap();
    grant(&admin).await;

    let mut config = HubConfig::loopback(Duration::from_secs(60));
    config.web_listen = Some("127.0.0.1:0".parse().unwrap());
    let readers = Arc::new(KubeReaders::new(Arc::new(ApiServerReviews::new(as_hub))));
    let extras = gwhub_hub::serve::KubeExtras {
        readers: Some(readers),
        ..gwhub_hub::serve::KubeExtras::default()
    };
    let hub = Hub::start_with(config, None, extras).await.unwrap();
    let (dash, web) = (hub.dashboard_addr, hub.web_addr.unwrap());
    let mut agent = Agent::connect(hub.ingest_addr).await;
    agent
        .snapshot(&[("team-a", "gw-a"), ("team-b", "gw-b"), ("default", "gw-c")])
        .await;
    let index = hub.index.clone();
    until(
        WAIT,
        || async { index.subscribe().borrow().gateways.len() },
        |n| *n == 3,
    )
    .await;

    // No token, or one the API server does not know: UNAUTHENTICATED.
    let mut anon = dashboard(dash, None).await;
    assert_eq!(listed(&mut anon, "").await, Err(Code::Unauthenticated));
    let mut bogus = dashboard(dash, Some("not-a-token".into())).await;
    assert_eq!(listed(&mut bogus, "").await, Err(Code::Unauthenticated));
    assert_eq!(
        get(&mut bogus, "team-a", "gw-a").await,
        Code::Unauthenticated
    );
    assert_eq!(clusters(&mut bogus).await, Err(Code::Unauthenticated));

    // One namespace.
    let mut one = as_reader(dash, ONE).await;
    assert_eq!(
        listed(&mut one, "").await,
        Ok(vec!["team-a/gw-a".to_owned()])
    );
    assert_eq!(
        listed(&mut one, "team-a").await,
        Ok(vec!["team-a/gw-a".to_owned()])
    );
    assert_eq!(
        listed(&mut one, "team-b").await,
        Err(Code::PermissionDenied)
    );
    assert_eq!(get(&mut one, "team-a", "gw-a").await, Code::Ok);
    assert_eq!(
        get(&mut one, "team-b", "gw-b").await,
        Code::PermissionDenied
    );
    // A forbidden namespace is refused whether or not the Gateway exists.
    assert_eq!(
        get(&mut one, "team-b", "absent").await,
        Code::PermissionDenied
    );
    assert_eq!(get(&mut one, "team-a", "absent").await, Code::NotFound);
    assert_eq!(history(&mut one, "team-a", "gw-a").await, Code::Ok);
    assert_eq!(
        history(&mut one, "default", "gw-c").await,
        Code::PermissionDenied
    );
    assert_eq!(clusters(&mut one).await, Err(Code::PermissionDenied));

    // Cluster-wide.
    let mut all = as_reader(dash, ALL).await;
    let mut everything = listed(&mut all, "").await.unwrap();
    everything.sort();
    assert_eq!(everything, ["default/gw-c", "team-a/gw-a", "team-b/gw-b"]);
    assert_eq!(get(&mut all, "team-b", "gw-b").await, Code::Ok);
    assert_eq!(clusters(&mut all).await, Ok(vec!["east".to_owned()]));

    // Nothing.
    let mut none = as_reader(dash, NONE).await;
    assert_eq!(listed(&mut none, "").await, Ok(vec![]));
    assert_eq!(
        get(&mut none, "team-a", "gw-a").await,
        Code::PermissionDenied
    );
    assert_eq!(
        history(&mut none, "team-a", "gw-a").await,
        Code::PermissionDenied
    );
    assert_eq!(clusters(&mut none).await, Err(Code::PermissionDenied));

    // Fleet DNS: the names of the hub Gateways each reader may read, on
    // gRPC and on the page.
    hub.dns_view.send_replace(Arc::new(dns_view()));
    assert_eq!(dns_hosts(&mut bogus, "").await, Err(Code::Unauthenticated));
    assert_eq!(
        dns_hosts(&mut one, "").await,
        Ok(vec!["a.fleet.test".to_owned()])
    );
    assert_eq!(
        dns_hosts(&mut one, "team-b").await,
        Err(Code::PermissionDenied)
    );
    assert_eq!(
        dns_hosts(&mut all, "").await,
        Ok(vec!["a.fleet.test".to_owned(), "b.fleet.test".to_owned()])
    );
    assert_eq!(dns_hosts(&mut none, "").await, Ok(vec![]));
    let (code, page) = web_get(web, "/api/dns", Some(ONE)).await;
    assert_eq!(code, 200, "{page}");
    assert_eq!(page["names"][0]["hostname"], "a.fleet.test");
    assert_eq!(page["names"].as_array().map(Vec::len), Some(1));
    let (code, _) = web_get(web, "/api/dns?namespace=team-b", Some(ONE)).await;
    assert_eq!(code, 403);

    // The web page: the same readers, the same views.
    let (code, _) = web_get(web, "/api/fleet", None).await;
    assert_eq!(code, 401);
    let (code, page) = web_get(web, "/api/fleet", Some(ONE)).await;
    assert_eq!(code, 200, "{page}");
    assert_eq!(names(&page), ["team-a/gw-a"]);
    assert_eq!(
        page["clusters"],
        json!([]),
        "the fleet's clusters are cluster-wide"
    );
    // The page's own way: the token in its cookie.
    let cookie = format!("Cookie: gwhub_token={}\r\n", static_token(ONE));
    let (code, page) = web_get_with(web, "/api/fleet", &cookie).await;
    assert_eq!((code, names(&page)), (200, vec!["team-a/gw-a".to_owned()]));
    let (code, page) = web_get(web, "/api/fleet", Some(ALL)).await;
    assert_eq!(code, 200);
    assert_eq!(names(&page), ["default/gw-c", "team-a/gw-a", "team-b/gw-b"]);
    assert_eq!(page["clusters"][0]["name"], "east");
    let (code, page) = web_get(web, "/api/fleet", Some(NONE)).await;
    assert_eq!((code, names(&page)), (200, vec![]));
    let (code, _) = web_get(web, "/api/gateway?namespace=team-b&name=gw-b", Some(ONE)).await;
    assert_eq!(code, 403);
    let (code, _) = web_get(web, "/api/gateway?namespace=team-a&name=gw-a", Some(ONE)).await;
    assert_eq!(code, 200);
    let (code, _) = web_get(web, "/api/events?namespace=team-b", Some(ONE)).await;
    assert_eq!(code, 403);
    let events = web_snapshot(web, "/api/events", ONE).await;
    assert_eq!(names(&events), ["team-a/gw-a"]);
    assert_eq!(events["clusters"], json!([]));
    let events = web_snapshot(web, "/api/events", ALL).await;
    assert_eq!(names(&events).len(), 3);

    // gwhubctl takes the reader's token from their kubeconfig: written
    // in it, in its tokenFile (with the final newline editors leave), or
    // printed by its exec plugin (a login helper), which kube runs.
    let token_file = fleet.dir.join("reader-one.token");
    std::fs::write(&token_file, format!("{}\n", static_token(ONE))).unwrap();
    let plugin = fleet.dir.join("reader-one-login.sh");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
         \"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\",\
         \"expirationTimestamp\":\"2099-01-01T00:00:00Z\"}}' \"$READER_TOKEN\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let users = [
        ("token", format!("{{token: {}}}", static_token(ONE))),
        (
            "tokenfile",
            format!("{{tokenFile: {}}}", token_file.display()),
        ),
        (
            "exec",
            format!(
                "{{exec: {{apiVersion: client.authentication.k8s.io/v1, command: {}, \
                 interactiveMode: Never, env: [{{name: READER_TOKEN, value: {}}}]}}}}",
                plugin.display(),
                static_token(ONE)
            ),
        ),
    ];
    for (kind, user) in users {
        let kubeconfig = fleet.dir.join(format!("reader-one-{kind}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: r\n\
                 contexts: [{{name: r, context: {{cluster: c, user: one}}}}]\n\
                 clusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:1\"}}}}]\n\
                 users: [{{name: one, user: {user}}}]\n"
            ),
        )
        .unwrap();
        let ctl = |what: &'static str| {
            let mut c =
                std::process::Command::new(workspace_binary("gwhub", "gwhubctl", "GWHUB_CTL_BIN"));
            c.args(["--server", &format!("http://{dash}")])
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["get", what, "-o", "json"]);
            // The hub runs on this test's runtime: run the client off it.
            tokio::task::spawn_blocking(move || c.output().unwrap())
        };
        let o = ctl("gateways").await.unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.contains("gw-a") && !out.contains("gw-b") && !out.contains("gw-c"),
            "{kind}: {out}"
        );
        let o = ctl("clusters").await.unwrap();
        assert!(!o.status.success(), "{kind}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("PermissionDenied"),
            "{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    // A watch: filtered from the snapshot on, also as Gateways of new
    // namespaces (readable or not) appear.
    let (mut stream, first) = watch_first(&mut one).await;
    assert!(first.snapshot, "the watch did not start with its snapshot");
    let upserted = |m: &v1::WatchGatewaysResponse| -> Vec<String> {
        m.upserted
            .iter()
            .map(|g| format!("{}/{}", g.namespace, g.name))
            .collect()
    };
    assert_eq!(upserted(&first), ["team-a/gw-a"]);
    agent
        .snapshot(&[
            ("team-a", "gw-a"),
            ("team-a", "gw-a2"),
            ("team-b", "gw-b"),
            ("team-b", "gw-b2"),
            ("default", "gw-c"),
            ("other", "gw-d"),
        ])
        .await;
    loop {
        let m = next(&mut stream)
            .await
            .unwrap_or_else(|s| panic!("the watch ended before team-a/gw-a2 came: {s:?}"));
        let got = upserted(&m);
        assert!(
            got.iter().all(|g| g.starts_with("team-a/")),
            "the watch sent a Gateway of a namespace reader-one may not read: {got:?}"
        );
        if got.contains(&"team-a/gw-a2".to_owned()) {
            break;
        }
    }

    // RBAC changes during the watch: the binding goes, and within the
    // decision cache's life the watch says team-a's Gateways are gone.
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "team-a");
    bindings
        .delete("gateway-reader", &DeleteParams::default())
        .await
        .unwrap();
    until(WAIT, || can(&admin, ONE, "team-a"), |allowed| !allowed).await;
    let mut gone = Vec::new();
    while gone.len() < 2 {
        let m = next(&mut stream)
            .await
            .unwrap_or_else(|s| panic!("the watch ended before team-a's Gateways went: {s:?}"));
        assert!(m.upserted.is_empty(), "{:?}", upserted(&m));
        gone.extend(
            m.deleted
                .iter()
                .map(|r| format!("{}/{}", r.namespace, r.name)),
        );
    }
    gone.sort();
    assert_eq!(gone, ["team-a/gw-a", "team-a/gw-a2"]);
    drop(stream);
    hub.shutdown().await.unwrap();
}

/// TokenReviews the API server has served, from its own `/metrics`.
async fn apiserver_token_reviews(admin: &Client) -> u64 {
    let request = tonic::codegen::http::Request::get("/metrics")
        .body(Vec::new())
        .unwrap();
    let text = admin.request_text(request).await.unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{") && l.contains("resource=\"tokenreviews\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// 2,000 made-up tokens, spread over 12 s (past a reader's
/// cached review), against a real API server: the TokenReviews reaching
/// it (its own count, and the hub's metric) stay within
/// `50 + 10·(T + 1)`, every caller not reviewed is refused with
/// RESOURCE_EXHAUSTED naming the limit (counted by the hub), and a reader
/// reviewed before is served throughout.
#[tokio::test]
async fn made_up_tokens_are_held_to_the_token_review_budget() {
    if !require_assets("made_up_tokens_are_held_to_the_token_review_budget") {
        return;
    }
    let fleet = Fleet::start(&["flood"]).await.expect("start API server");
    let cluster = fleet.cluster("flood");
    let as_hub = install_hub(cluster).await;
    let admin = cluster.client().await.unwrap();
    create_namespaces(&admin, &["team-a"]).await.unwrap();
    grant(&admin).await;
    let readers = Arc::new(KubeReaders::new(Arc::new(ApiServerReviews::new(as_hub))));
    let extras = gwhub_hub::serve::KubeExtras {
        readers: Some(readers),
        ..gwhub_hub::serve::KubeExtras::default()
    };
    let config = HubConfig::loopback(Duration::from_secs(60));
    let hub = Hub::start_with(config, None, extras).await.unwrap();
    let dash = hub.dashboard_addr;
    let counters = hub.metrics.reviews.clone();
    let before = apiserver_token_reviews(&admin).await;
    let mut reader = as_reader(dash, ALL).await;
    assert_eq!(listed(&mut reader, "").await, Ok(vec![]));

    const TOKENS: usize = 2_000;
    const TASKS: usize = 4;
    const SPREAD: Duration = Duration::from_secs(12);
    let start = std::time::Instant::now();
    let mut flood = Vec::new();
    for task in 0..TASKS {
        // From addresses of their own: the reader (127.0.0.1) is not
        // held to the flood's per-address share of the call pool.
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{dash}")).unwrap();
        let from = gwhub_test_kit::loopback::address(2 + task as u8);
        let channel = gwhub_test_kit::loopback::channel_from(from, dash, endpoint)
            .await
            .unwrap();
        flood.push(tokio::spawn(async move {
            let per_task = TOKENS / TASKS;
            futures::stream::iter(0..per_task)
                .map(|i| {
                    let channel = channel.clone();
                    async move {
                        let at = SPREAD.mul_f64(i as f64 / per_task as f64);
                        tokio::time::sleep_until((start + at).into()).await;
                        let mut request = tonic::Request::new(v1::ListGatewaysRequest::default());
                        let bearer = format!("Bearer made-up-{task}-{i}").parse().unwrap();
                        request.metadata_mut().insert("authorization", bearer);
                        let asked = std::time::Instant::now();
                        let r = DashboardClient::new(channel).list_gateways(request).await;
                        (r.err(), asked.elapsed())
                    }
                })
                .buffer_unordered(8)
                .collect::<Vec<_>>()
                .await
        }));
    }
    // The reader keeps answering, every 250 ms, until the last made-up
    // token has its answer: every call is served (the 60 s bound only
    // says how long a failing run takes to say so; how fast is a figure
    // for docs/benchmarks.md, not an assert).
    let flood = futures::future::join_all(flood);
    tokio::pin!(flood);
    let mut answered = 0;
    let outcomes = loop {
        let r = tokio::time::timeout(Duration::from_secs(60), listed(&mut reader, "")).await;
        assert_eq!(r, Ok(Ok(vec![])), "the reader at {:?}", start.elapsed());
        answered += 1;
        tokio::select! {
            done = &mut flood => break done,
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    };
    let outcomes: Vec<_> = outcomes.into_iter().flat_map(|r| r.unwrap()).collect();
    let slowest = outcomes.iter().map(|(_, took)| *took).max();
    eprintln!("the slowest refusal took {slowest:?}");
    let elapsed = start.elapsed().as_secs_f64();
    let (mut refused, mut rejected, mut unanswered) = (0usize, 0usize, 0usize);
    for (status, _) in &outcomes {
        let status = status.as_ref().expect("a made-up token was served");
        match status.code() {
            Code::Unauthenticated => rejected += 1,
            Code::ResourceExhausted => {
                refused += 1;
                assert!(status.message().contains("TokenReviews"), "{status:?}");
            }
            // Reviewed, but the API server did not answer in time (a
            // loaded machine): not served either.
            Code::Unavailable if status.message().contains("cannot review the token") => {
                unanswered += 1;
            }
            other => panic!("{other:?}: {status:?}"),
        }
    }
    assert_eq!(refused + rejected + unanswered, TOKENS);
    let bound = 50.0 + 10.0 * (elapsed + 1.0) + 2.0;
    let at_apiserver = apiserver_token_reviews(&admin).await - before;
    let by_hub = counters.token_reviews("authenticated")
        + counters.token_reviews("unauthenticated")
        + counters.token_reviews("error");
    eprintln!(
        "{TOKENS} made-up tokens in {elapsed:.1} s: {at_apiserver} TokenReviews at the API server, \
         {by_hub} counted by the hub, {refused} refused, {rejected} rejected, {unanswered} not \
         answered in time, reader answered {answered} times"
    );
    assert!(
        (at_apiserver as f64) <= bound,
        "{at_apiserver} > {bound:.0}"
    );
    // Every review the API server answered, the hub counted; one the hub
    // gave up waiting for (an "error") the API server may not have
    // counted yet, or never received.
    assert!(
        at_apiserver <= by_hub && by_hub - at_apiserver <= unanswered as u64,
        "{at_apiserver} reviews at the API server, {by_hub} counted by the hub, \
         {unanswered} not answered in time"
    );
    assert_eq!(counters.token_reviews("unauthenticated") as usize, rejected);
    assert_eq!(counters.token_reviews("error") as usize, unanswered);
    assert_eq!(
        (counters.token_reviews_refused("rate") + counters.token_reviews_refused("in_flight"))
            as usize,
        refused
    );
    hub.shutdown().await.unwrap();
}
