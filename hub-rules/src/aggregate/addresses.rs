//! `status.addresses`: every cluster address as `<cluster>/<value>` with a
//! multi-cluster type, so consumers can find a hub Gateway's clusters.

use gateway_api::apis::standard::gateways::GatewayStatusAddresses;

use super::compact::{ReportedAddress, ReportedStatus};

use super::constants::IP_ADDRESS_TYPE;
use super::limits::{MAX_ADDRESS_LEN, MAX_ADDRESSES, char_len, is_address_prefix, round_robin};
use super::omissions::{Item, Omissions, Rule};
use super::{ClusterReport, Options};

/// The hub's addresses from `reports` (in cluster order), at most 16.
pub fn aggregate(
    reports: &[ClusterReport<'_>],
    options: &Options,
    omissions: &mut Omissions,
) -> Vec<GatewayStatusAddresses> {
    // Validate first and build only what is kept: past the limit most
    // entries are dropped, and re-aggregation should not pay for them.
    let per_cluster: Vec<Vec<(&ReportedAddress, &str)>> = reports
        .iter()
        .map(|r| valid(r.cluster, r.status, options, omissions))
        .collect();
    let lens: Vec<usize> = per_cluster.iter().map(Vec::len).collect();
    let kept = round_robin(&lens, MAX_ADDRESSES);
    let mut out = Vec::with_capacity(MAX_ADDRESSES);
    for ((r, list), keep) in reports.iter().zip(per_cluster).zip(kept) {
        for (a, type_) in &list[..keep] {
            out.push(build(r.cluster, a, type_));
        }
        for (a, _) in &list[keep..] {
            omissions.push(
                Some(r.cluster),
                Item::Address,
                a.value.to_string(),
                Rule::TooManyRoundRobin(MAX_ADDRESSES),
            );
        }
    }
    out
}

/// The hub's copy of a kept address of `cluster`.
pub(crate) fn build(cluster: &str, a: &ReportedAddress, type_: &str) -> GatewayStatusAddresses {
    GatewayStatusAddresses {
        r#type: Some(type_.to_owned()),
        value: format!("{cluster}/{}", a.value),
    }
}

/// `cluster`'s addresses the hub can write, in order, with their
/// multi-cluster type; the others go to `omissions`.
pub(crate) fn valid<'a>(
    cluster: &str,
    status: &'a ReportedStatus,
    options: &'a Options,
    omissions: &mut Omissions,
) -> Vec<(&'a ReportedAddress, &'a str)> {
    let mut valid = Vec::new();
    let addresses = status.addresses();
    let cluster_name = cluster;
    let cluster = Some(cluster);
    if !is_address_prefix(cluster_name) {
        for a in addresses {
            omissions.push(
                cluster,
                Item::Address,
                a.value.to_string(),
                Rule::ClusterNameNotAddressPrefix,
            );
        }
        return valid;
    }
    let prefix_len = char_len(cluster_name) + 1;
    for a in addresses {
        let type_ = match a.r#type.as_deref() {
            None | Some("IPAddress") => IP_ADDRESS_TYPE,
            Some("Hostname") => options.hostname_address_type.as_str(),
            Some(other) => {
                let rule = Rule::UnsupportedAddressType(other.to_owned());
                omissions.push(cluster, Item::Address, a.value.to_string(), rule);
                continue;
            }
        };
        if a.value.is_empty() {
            omissions.push(
                cluster,
                Item::Address,
                String::new(),
                Rule::EmptyAddressValue,
            );
            continue;
        }
        if prefix_len + char_len(&a.value) > MAX_ADDRESS_LEN {
            omissions.push(
                cluster,
                Item::Address,
                a.value.to_string(),
                Rule::AddressValueTooLong,
            );
            continue;
        }
        valid.push((a, type_));
    }
    valid
}
