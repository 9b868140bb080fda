//! A cluster's report packed into `ClusterReport` parts and hashed, and
//! stored parts read back: the pure half of the store, beside the layout
//! rules it follows ([`gwhub_hub_rules::layout`]), kept apart from the
//! writer and the importer so both hash a part the same way (a new stream
//! after a restart then rewrites only the parts that differ).

use std::collections::BTreeMap;

use gateway_api::apis::standard::gateways::GatewayStatus;
use gwhub_hub_rules::layout::{self, part_name};
use gwhub_hub_rules::report::{self, ClusterReportSpec, ReportedGateway};
use jiff::Timestamp;

use gwhub_hub_rules::aggregate::GatewayKey;
use gwhub_index::ClusterRecord;

pub(super) fn rfc3339(millis: i64) -> Option<String> {
    (millis > 0)
        .then(|| Timestamp::from_millisecond(millis).ok())
        .flatten()
        .map(|t| t.to_string())
}

pub(super) fn millis(s: Option<&str>) -> i64 {
    s.and_then(|s| s.parse::<Timestamp>().ok())
        .map(Timestamp::as_millisecond)
        .unwrap_or(0)
}

/// One part of a cluster's report, ready to write: its spec (Gateways
/// packed) and the hash and packed size of its Gateways.
pub(super) struct PartSpec {
    pub(super) spec: ClusterReportSpec,
    pub(super) hash: u64,
    pub(super) bytes: usize,
}

/// A cluster's record laid out over parts ([`layout::part_count`], given
/// the count it is stored in now), the head first; Gateways too large for
/// any object are left out and counted in the second value. A Gateway's
/// size for the layout is its packed size on its own, which is never less
/// than what it adds to its part's packed string (a part compresses better
/// than its Gateways one by one), so a part stays within the budget.
pub(super) fn parts_of(record: ClusterRecord, current: u32) -> (Vec<PartSpec>, usize) {
    // (json, key hash, packed bytes, content hash)
    let mut sized: Vec<(Vec<u8>, u64, usize, u64)> = Vec::new();
    let mut left_out = 0;
    for (k, status) in record.gateways {
        let g = ReportedGateway {
            namespace: k.namespace.clone(),
            name: k.name.clone(),
            status,
        };
        let json = serde_json::to_vec(&g).unwrap_or_default();
        let bytes = report::packed_len(&json);
        if bytes > layout::MAX_GATEWAY_BYTES {
            tracing::warn!(cluster = %record.cluster, gateway = %k, bytes, "a Gateway's status is too large for a ClusterReport; not stored (still aggregated)");
            left_out += 1;
            continue;
        }
        let content = content_hash(&json);
        sized.push((json, layout::key_hash(&k), bytes, content));
    }
    let items: Vec<(u64, usize)> = sized.iter().map(|(_, h, b, _)| (*h, *b)).collect();
    let n = layout::part_count(&items, current, layout::PART_BUDGET_BYTES);
    let mut arrays: Vec<Vec<u8>> = vec![b"[".to_vec(); n as usize];
    let mut parts: Vec<PartSpec> = (0..n)
        .map(|part| PartSpec {
            spec: ClusterReportSpec {
                cluster: record.cluster.clone(),
                part,
                parts: n,
                gateway_count: 0,
                last_report_time: rfc3339(record.last_report_millis),
                last_seen_time: None,
                gateways_packed: None,
                gateways: Vec::new(),
            },
            hash: part_hash(n, []),
            bytes: 0,
        })
        .collect();
    // In key order (the record's), so each part's list is sorted.
    for (json, h, _, content) in sized {
        let i = (h % u64::from(n)) as usize;
        let p = &mut parts[i];
        if p.spec.gateway_count > 0 {
            arrays[i].push(b',');
        }
        arrays[i].extend_from_slice(&json);
        p.spec.gateway_count += 1;
        p.hash = layout::fnv(
            p.hash
                .to_le_bytes()
                .into_iter()
                .chain(content.to_le_bytes()),
        );
    }
    for (p, mut array) in parts.iter_mut().zip(arrays) {
        array.push(b']');
        let packed = report::pack(&array);
        p.bytes = packed.len();
        p.spec.gateways_packed = Some(packed);
    }
    parts[0].spec.last_seen_time = rfc3339(record.last_seen_millis);
    (parts, left_out)
}

/// Stored parts back into what the index takes (later parts win a key
/// that two hold); a part whose Gateways cannot be read adds none.
pub(super) fn gateways_of<'a>(
    parts: impl IntoIterator<Item = &'a ClusterReportSpec>,
) -> BTreeMap<GatewayKey, GatewayStatus> {
    let mut out = BTreeMap::new();
    for spec in parts {
        match spec.reported_gateways() {
            Ok(list) => out.extend(
                list.into_iter()
                    .map(|g| (GatewayKey::new(g.namespace, g.name), g.status)),
            ),
            Err(e) => {
                tracing::error!(cluster = %spec.cluster, object = %part_name(&spec.cluster, spec.part), error = %e, "a stored ClusterReport cannot be read; its Gateways are left out")
            }
        }
    }
    out
}

/// The hash of one Gateway's stored JSON.
pub(super) fn content_hash(json: &[u8]) -> u64 {
    layout::fnv(json.iter().copied())
}

/// A part's hash: its count and its Gateways' content hashes in order.
pub(super) fn part_hash(parts: u32, contents: impl IntoIterator<Item = u64>) -> u64 {
    contents
        .into_iter()
        .fold(layout::fnv(parts.to_le_bytes()), |h, c| {
            layout::fnv(h.to_le_bytes().into_iter().chain(c.to_le_bytes()))
        })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A Gateway's status with `listeners` listeners, each with a message
    /// of 256 hex digits unique to (`gateway`, listener): hardly
    /// compressible, so the packed size grows with the count.
    fn status(gateway: usize, listeners: usize) -> GatewayStatus {
        let ls: Vec<serde_json::Value> = (0..listeners)
            .map(|i| {
                let noise: String = (0..16u64)
                    .map(|k| {
                        format!(
                            "{:016x}",
                            layout::fnv(
                                [gateway as u64, i as u64, k]
                                    .iter()
                                    .flat_map(|v| v.to_le_bytes())
                            )
                        )
                    })
                    .collect();
                serde_json::json!({"name": format!("listener-{i}"), "attachedRoutes": 1,
                    "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                    "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                        "message": noise, "observedGeneration": 1,
                        "lastTransitionTime": "2026-11-23T10:00:00Z"}]})
            })
            .collect();
        serde_json::from_value(serde_json::json!({"listeners": ls})).unwrap()
    }

    pub(in crate::store) fn record(gateways: usize, listeners: usize) -> ClusterRecord {
        ClusterRecord {
            cluster: "cluster_1".into(),
            gateways: (0..gateways)
                .map(|i| {
                    (
                        GatewayKey::new("ns", format!("gw-{i}")),
                        status(i, listeners),
                    )
                })
                .collect(),
            last_report_millis: 1_700_000_000_123,
            last_seen_millis: 1_700_000_005_000,
            connected: true,
            report_rev: 3,
        }
    }

    /// A record laid out over parts and read back is the same record; each
    /// part fits the API server's limit; the head carries lastSeenTime.
    #[test]
    fn parts_round_trip_a_record_at_any_size() {
        // (gateways, listeners) -> parts
        let cases: &[(usize, usize, u32)] = &[(0, 0, 1), (1, 4, 1), (100, 4, 1), (500, 16, 8)];
        for (gateways, listeners, want) in cases {
            let rec = record(*gateways, *listeners);
            let (parts, left_out) = parts_of(rec.clone(), 1);
            assert_eq!(left_out, 0);
            assert_eq!(parts.len() as u32, *want, "{gateways} x {listeners}");
            for (i, p) in parts.iter().enumerate() {
                assert_eq!(p.spec.part as usize, i);
                assert!(
                    p.bytes <= layout::PART_BUDGET_BYTES,
                    "part {i}: {}",
                    p.bytes
                );
                assert_eq!(
                    Some(p.bytes),
                    p.spec.gateways_packed.as_ref().map(String::len)
                );
                assert_eq!(p.spec.parts, *want);
                assert_eq!(
                    p.spec.gateway_count as usize,
                    p.spec.reported_gateways().unwrap().len()
                );
                assert!(p.spec.gateways.is_empty(), "written packed only");
                assert_eq!(p.spec.last_seen_time.is_some(), i == 0);
                let json = serde_json::to_vec(&p.spec).unwrap();
                assert!(json.len() < 1024 * 1024, "part {i}: {} bytes", json.len());
                let back: ClusterReportSpec = serde_json::from_slice(&json).unwrap();
                assert_eq!(back, p.spec);
            }
            let specs: Vec<&ClusterReportSpec> = parts.iter().map(|p| &p.spec).collect();
            assert_eq!(gateways_of(specs), rec.gateways);
            // Same content, same hashes: nothing to rewrite.
            let (again, _) = parts_of(rec.clone(), *want);
            let hashes = |p: &[PartSpec]| p.iter().map(|p| p.hash).collect::<Vec<_>>();
            assert_eq!(hashes(&again), hashes(&parts));
        }
        // One Gateway changes: one part's hash changes.
        let mut rec = record(500, 16);
        let (before, _) = parts_of(rec.clone(), 1);
        rec.gateways
            .insert(GatewayKey::new("ns", "gw-7"), status(7, 15));
        let (after, _) = parts_of(rec, 8);
        let changed = before
            .iter()
            .zip(&after)
            .filter(|(a, b)| a.hash != b.hash)
            .count();
        assert_eq!(changed, 1);
    }

    #[test]
    fn old_objects_without_parts_read_as_one_part() {
        let spec: ClusterReportSpec = serde_json::from_value(serde_json::json!({
            "cluster": "east", "gatewayCount": 0, "gateways": []
        }))
        .unwrap();
        assert_eq!((spec.part, spec.parts), (0, 1));
    }

    #[test]
    fn times_round_trip() {
        assert_eq!(
            millis(rfc3339(1_700_000_000_123).as_deref()),
            1_700_000_000_123
        );
        assert_eq!(rfc3339(0), None);
        assert_eq!(millis(Some("not a time")), 0);
    }
}
