//! The shipped manifests: every file parses with the project's own
//! reader, every kustomization names files that exist, and a real
//! kube-apiserver takes them all (`kubectl apply -k`), after which the hub
//! binary runs as its ServiceAccount and takes its Lease.

use std::collections::BTreeSet;

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_test_kit::install::{HUB_SA, apply_k, management};
use gwhub_test_kit::kube_objects::manifests;
use gwhub_test_kit::procs::gwhub_binary;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;

use crate::support::hub_fixtures::{HUB_NS, NS, create_hub_gateway, own, wait_status};

/// Every manifest parses with the project's own reader, every kustomization
/// names files that exist, and the API server takes them all.
#[tokio::test]
async fn manifests_parse_and_the_api_server_takes_them() {
    let dirs = [
        manifests(),
        manifests().join("hub"),
        manifests().join("agent"),
    ];
    let mut all = Vec::new();
    for dir in &dirs {
        let objs = gwhub_spoke_rules::manifest::read_paths(std::slice::from_ref(dir))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for o in &objs {
            if o.kind == "Kustomization" {
                for r in o.value["resources"].as_array().unwrap() {
                    let p = dir.join(r.as_str().unwrap());
                    assert!(p.exists(), "{}: {} missing", dir.display(), p.display());
                }
            }
        }
        all.extend(objs.into_iter().filter(|o| o.kind != "Kustomization"));
    }
    // `manifests/` lists the hub's files one by one (older kustomize takes
    // no directories): the same files as `manifests/hub/`.
    let listed = |dir: &std::path::Path, prefix: &str| -> BTreeSet<String> {
        let k = gwhub_spoke_rules::manifest::read_paths(&[dir.join("kustomization.yaml")]).unwrap();
        k[0].value["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r.as_str()?.strip_prefix(prefix).map(str::to_owned))
            .collect()
    };
    assert_eq!(
        listed(&manifests(), "hub/"),
        listed(&manifests().join("hub"), ""),
        "manifests/kustomization.yaml and manifests/hub/ list different hub files"
    );
    let kinds: BTreeSet<&str> = all.iter().map(|o| o.kind.as_str()).collect();
    for k in [
        "CustomResourceDefinition",
        "ClusterRole",
        "Role",
        "Deployment",
        "Service",
        "ServiceAccount",
    ] {
        assert!(kinds.contains(k), "no {k} in manifests/");
    }

    // `management` installed the hub with `kubectl apply -k manifests/`;
    // the agent's kustomization goes in as well (its Role lives in
    // openshift-ingress), exactly as the README says.
    let Some((fleet, client, _as_hub)) =
        management("manifests_parse_and_the_api_server_takes_them").await
    else {
        return;
    };
    apply_k(
        &fleet.cluster("mgmt").kubeconfig,
        &manifests().join("agent"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for o in &all {
        let gvk = GroupVersionKind::try_from(&kube::core::TypeMeta {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
        })
        .unwrap();
        let (ar, caps) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{} {}: {e}", o.kind, o.name()));
        let ns = o.value["metadata"]["namespace"].as_str();
        let api: Api<DynamicObject> = match (caps.scope, ns) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        let name = o.value["metadata"]["name"].as_str().unwrap();
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("{} {} not installed: {e}", o.kind, o.name()));
    }

    // The real binary in Kubernetes mode, as its ServiceAccount, in the
    // namespace just installed: it takes the Lease and marks a Gateway no cluster reports NoClusters.
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NS);
    create_hub_gateway(&gateways, "bin").await;
    let mut child = std::process::Command::new(gwhub_binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--dashboard-listen",
            "127.0.0.1:0",
        ])
        .args(["--insecure", "--namespace", HUB_NS, "--kubeconfig"])
        .arg(fleet.cluster("mgmt").kubeconfig_as(HUB_SA))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start gwhub");
    wait_status(&gateways, "bin", "NoClusters from the binary", |s| {
        own(s).is_some_and(|c| c.reason == "NoClusters")
    })
    .await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "gwhub-system");
    let lease = leases.get("gwhub-hub").await.unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_some());
    let _ = child.kill();
    let _ = child.wait();
}
