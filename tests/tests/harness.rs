//! The harness itself: a real API server starts and serves the CRDs.

use gateway_api::apis::standard::gateways::Gateway;
use gwhub_test_kit::apiserver::{Fleet, require_assets};
use kube::api::{Api, ListParams};

#[tokio::test]
async fn apiserver_serves_gateway_crd() {
    if !require_assets("apiserver_serves_gateway_crd") {
        return;
    }
    let fleet = Fleet::start(&["solo"]).await.expect("start fleet");
    let client = fleet.cluster("solo").client().await.unwrap();
    let gws: Api<Gateway> = Api::all(client);
    let list = gws.list(&ListParams::default()).await.unwrap();
    assert!(list.items.is_empty());
}

/// The OpenShift CRDs are served too (upstream or generated).
#[tokio::test]
async fn apiserver_serves_openshift_crds() {
    if !require_assets("apiserver_serves_openshift_crds") {
        return;
    }
    use gwhub_spoke_rules::openshift::{DNS, DNSRecord};
    let fleet = Fleet::start(&["solo"]).await.expect("start fleet");
    let client = fleet.cluster("solo").client().await.unwrap();
    let lp = ListParams::default();
    assert!(
        Api::<DNSRecord>::all(client.clone())
            .list(&lp)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        Api::<DNS>::all(client)
            .list(&lp)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
