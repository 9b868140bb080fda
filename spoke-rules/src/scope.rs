//! Which Gateways the agent looks after, and which Service and DNSRecords
//! belong to each (spec §2: found by the `gateway.networking.k8s.io/gateway-name`
//! label in the Gateway's namespace, as Istio and the ingress operator set it).

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::conditions::dns::normalize_hostname;
use crate::openshift::{DNSRecord, GATEWAY_NAME_LABEL};
use crate::snapshot::DEFAULT_NAMESPACE;

/// Default of `--namespace`: where OpenShift runs its managed Gateways.
pub const DEFAULT_SCOPE_NAMESPACE: &str = "openshift-ingress";
/// Default of `--controller-name`: OpenShift's Gateway controller.
pub const DEFAULT_CONTROLLER_NAME: &str = "openshift.io/gateway-controller/v1";

/// The agent's scope (`--namespace`, `--controller-name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub namespace: String,
    pub controller_name: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: DEFAULT_SCOPE_NAMESPACE.to_owned(),
            controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
        }
    }
}

/// The namespace of an object, `default` when unset.
pub(crate) fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_NAMESPACE)
}

/// A Gateway is in scope when it is in the scoped namespace and its
/// GatewayClass (by `spec.gatewayClassName`) names the scoped controller. A
/// Gateway whose class is missing is out of scope: nobody OpenShift-managed
/// provisions it.
pub fn in_scope(gateway: &Gateway, classes: &[GatewayClass], opts: &Options) -> bool {
    in_scope_by_class(
        namespace_of(&gateway.metadata),
        &gateway.spec.gateway_class_name,
        classes,
        opts,
    )
}

/// [`in_scope`] from the Gateway's (defaulted) namespace and
/// `spec.gatewayClassName` alone, for callers that keep only those.
pub fn in_scope_by_class(
    namespace: &str,
    class_name: &str,
    classes: &[GatewayClass],
    opts: &Options,
) -> bool {
    namespace == opts.namespace
        && classes.iter().any(|c| {
            c.metadata.name.as_deref() == Some(class_name)
                && c.spec.controller_name == opts.controller_name
        })
}

fn labelled_for(meta: &ObjectMeta, gateway: &Gateway) -> bool {
    namespace_of(meta) == namespace_of(&gateway.metadata)
        && meta
            .labels
            .as_ref()
            .and_then(|l| l.get(GATEWAY_NAME_LABEL))
            .is_some_and(|v| Some(v.as_str()) == gateway.metadata.name.as_deref())
}

/// The Gateway's Service: labelled for it in its namespace; of several, the
/// first by name (the operator takes the first its cache lists).
pub fn service_for<'a>(gateway: &Gateway, services: &'a [Service]) -> Option<&'a Service> {
    services
        .iter()
        .filter(|s| labelled_for(&s.metadata, gateway))
        .min_by(|a, b| a.metadata.name.cmp(&b.metadata.name))
}

/// The Gateway's DNSRecords (labelled for it in its namespace), by name.
pub(crate) fn dns_records_for<'a>(
    gateway: &Gateway,
    records: &'a [DNSRecord],
) -> Vec<&'a DNSRecord> {
    let mut out: Vec<_> = records
        .iter()
        .filter(|r| labelled_for(&r.metadata, gateway))
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// The records of `records` whose `spec.dnsName` is `hostname`, one trailing dot
/// trimmed on both sides, by name; the ingress operator makes one per
/// hostname, so more than one is reported by the caller and the last by name
/// is used (as the operator does: the later record replaces the earlier).
pub(crate) fn records_for_hostname<'a>(
    hostname: &str,
    records: &[&'a DNSRecord],
) -> Vec<&'a DNSRecord> {
    let want = normalize_hostname(hostname);
    records
        .iter()
        .copied()
        .filter(|r| normalize_hostname(&r.spec.dns_name) == want)
        .collect()
}
