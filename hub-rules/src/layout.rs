//! How a cluster's report is laid out over `ClusterReport` objects: pure
//! rules (names, labels, which object holds which Gateway, how many objects)
//! that the hub's `kube::store` executes (packing in `store/pack.rs`).
//!
//! One object cannot hold every cluster: the API server refuses an object
//! over ~1.5 MiB (etcd's request limit), and a cluster of 500 Gateways of
//! 16 listeners reports about 8 MB of status. So a cluster's report is split
//! into `parts` objects (a power of two): the *head* (part 0, named after the
//! cluster as before, holding the cluster's times) and parts `1..parts`
//! named `<head>.part-<i>`. A Gateway lives in part `hash(ns/name) % parts`,
//! so a change to one Gateway rewrites one object, and a Gateway never moves
//! unless the number of parts changes. The number doubles while a part
//! would exceed [`PART_BUDGET_BYTES`] and halves when everything would fit
//! in a quarter of the budget per part, so it does not flap around a
//! boundary.

use gwhub_model::GatewayKey;

/// The encoded bytes a part aims to stay under (the API server's limit is
/// ~1.5 MiB per object; a quarter of a MiB keeps writes of one part cheap
/// and leaves room for metadata).
pub const PART_BUDGET_BYTES: usize = 256 * 1024;
/// At most this many objects per cluster (1024 x 256 KiB: 256 MiB, far over
/// what the ingest limits let a cluster report).
pub const MAX_PARTS: u32 = 1024;
/// A single Gateway whose stored form is larger than this is left out of
/// the store (logged and counted): no object could hold it. The ingest
/// limits allow one Gateway up to a 4 MiB message.
pub const MAX_GATEWAY_BYTES: usize = 1024 * 1024;
/// Label naming the cluster of a `ClusterReport` (see [`cluster_label`]).
pub const CLUSTER_LABEL: &str = "gwhub.io/cluster";
/// Label holding a `ClusterReport`'s part index.
pub const PART_LABEL: &str = "gwhub.io/part";

const PART_SUFFIX: &str = ".part-";

pub use gwhub_model::cluster::fnv;

/// Whether `name` ends like a part's name (`.part-<digits>`).
fn looks_like_part(name: &str) -> bool {
    name.rfind(PART_SUFFIX).is_some_and(|i| {
        let digits = &name[i + PART_SUFFIX.len()..];
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The head object's name for `cluster`: the model's object name
/// ([`gwhub_model::cluster::object_name`]), except that a cluster whose name
/// looks like a part's gets the sanitised-plus-hash form, so a head is never
/// another cluster's part.
pub fn object_name(cluster: &str) -> String {
    let name = gwhub_model::cluster::object_name(cluster);
    if !looks_like_part(&name) {
        return name;
    }
    let base: String = name.replace('.', "-").chars().take(200).collect();
    format!(
        "{}-{:08x}",
        base.trim_matches('-'),
        fnv(cluster.bytes()) as u32
    )
}

/// The object name of `cluster`'s part `part` (0: the head). Never the name
/// of another cluster's head (heads never look like parts) and at most 253
/// characters (a long head is shortened and keeps a hash of the cluster).
pub fn part_name(cluster: &str, part: u32) -> String {
    let head = object_name(cluster);
    if part == 0 {
        return head;
    }
    let suffix = format!("{PART_SUFFIX}{part}");
    if head.len() + suffix.len() <= 253 {
        return format!("{head}{suffix}");
    }
    let short: String = head.chars().take(200).collect();
    let short = short.trim_end_matches(['-', '.']);
    format!("{short}-{:08x}{suffix}", fnv(cluster.bytes()) as u32)
}

/// The value of [`CLUSTER_LABEL`]: the head's name when it fits a label
/// value (63 characters), else a shortened form with a hash of the cluster.
pub fn cluster_label(cluster: &str) -> String {
    let head = object_name(cluster);
    if head.len() <= 63 {
        return head;
    }
    let short: String = head.chars().take(50).collect();
    let short = short.trim_end_matches(['-', '.']);
    format!("{short}-{:08x}", fnv(cluster.bytes()) as u32)
}

/// The part of `parts` that holds `key`.
pub fn part_of(key: &GatewayKey, parts: u32) -> u32 {
    (key_hash(key) % u64::from(parts.max(1))) as u32
}

/// How many parts a report of `items` (each Gateway's part hash and stored
/// bytes) takes, given it is stored in `current` parts now (1 when new).
/// Halves while everything fits in a quarter of the budget per part;
/// doubles while a part holding more than one Gateway exceeds `budget`.
pub fn part_count(items: &[(u64, usize)], current: u32, budget: usize) -> u32 {
    let mut n = current
        .clamp(1, MAX_PARTS)
        .next_power_of_two()
        .min(MAX_PARTS);
    let total: usize = items.iter().map(|(_, b)| b).sum();
    while n > 1 && total <= budget.saturating_mul(n as usize) / 4 {
        n /= 2;
    }
    while n < MAX_PARTS {
        let mut bytes = vec![0usize; n as usize];
        let mut count = vec![0usize; n as usize];
        for (h, b) in items {
            let i = (h % u64::from(n)) as usize;
            bytes[i] += b;
            count[i] += 1;
        }
        if !bytes.iter().zip(&count).any(|(b, c)| *b > budget && *c > 1) {
            break;
        }
        n *= 2;
    }
    n
}

/// The hash [`part_count`] and [`part_of`] use for `key`.
pub fn key_hash(key: &GatewayKey) -> u64 {
    fnv(key
        .namespace
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(key.name.bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid_name(n: &str) -> bool {
        gwhub_model::names::NameRule::Dns1123Subdomain.allows(n)
    }

    #[test]
    fn heads_are_the_models_object_names_unless_they_look_like_parts() {
        // The model tests its own names (valid, distinct); a head is that
        // name, except for a cluster named like a part
        // (`part_names_never_collide_with_heads`).
        for name in [
            "gateway-1",
            "cluster_1",
            "Cluster_1",
            "_x_",
            "",
            "a.b",
            "-a",
        ] {
            assert_eq!(
                object_name(name),
                gwhub_model::cluster::object_name(name),
                "{name}"
            );
        }
        let long = "x".repeat(300);
        assert_eq!(object_name(&long), gwhub_model::cluster::object_name(&long));
    }

    #[test]
    fn part_names_never_collide_with_heads() {
        // (cluster, part) -> name
        let cases: &[(&str, u32, &str)] = &[
            ("east", 0, "east"),
            ("east", 1, "east.part-1"),
            ("east", 12, "east.part-12"),
            ("a.b", 3, "a.b.part-3"),
        ];
        for (cluster, part, want) in cases {
            assert_eq!(part_name(cluster, *part), *want, "{cluster} {part}");
        }
        // A cluster named like a part gets a hashed head, not east's part 1.
        let odd = object_name("east.part-1");
        assert_ne!(odd, "east.part-1");
        assert!(valid_name(&odd) && !looks_like_part(&odd), "{odd}");
        // Names that only resemble the suffix stay as they are.
        assert_eq!(object_name("east.part-x"), "east.part-x");
        // Long names stay valid and distinct per cluster.
        let long_a = "a".repeat(250);
        let long_b = format!("{}b", "a".repeat(249));
        for part in [1, 7, 1023] {
            let (na, nb) = (part_name(&long_a, part), part_name(&long_b, part));
            assert!(valid_name(&na) && valid_name(&nb), "{na} {nb}");
            assert_ne!(na, nb);
            assert!(na.ends_with(&format!(".part-{part}")), "{na}");
        }
    }

    #[test]
    fn cluster_labels_are_valid_label_values() {
        assert_eq!(cluster_label("east"), "east");
        for c in ["east", "Cluster_1", &"x".repeat(300), &"a.b".repeat(40)] {
            let l = cluster_label(c);
            assert!(l.len() <= 63 && valid_name(&l), "{l}");
        }
        assert_ne!(
            cluster_label(&"x".repeat(100)),
            cluster_label(&"x".repeat(101))
        );
    }

    #[test]
    fn part_of_is_stable_and_in_range() {
        let key = GatewayKey::new("openshift-ingress", "gw-17");
        for parts in [1, 2, 4, 64] {
            let p = part_of(&key, parts);
            assert!(p < parts);
            assert_eq!(p, part_of(&key, parts));
            assert_eq!(u64::from(p), key_hash(&key) % u64::from(parts));
        }
        assert_eq!(part_of(&key, 0), 0);
    }

    #[test]
    fn part_count_grows_shrinks_with_hysteresis_and_stops() {
        let kb = 1024;
        // Gateways with spread hashes.
        let items = |n: u64, bytes: usize| -> Vec<(u64, usize)> {
            (0..n).map(|i| (fnv(i.to_le_bytes()), bytes)).collect()
        };
        // (items, current, budget) -> parts
        type Case = (Vec<(u64, usize)>, u32, usize, u32);
        let cases: Vec<Case> = vec![
            // Nothing, or little: one object.
            (vec![], 1, 256 * kb, 1),
            (items(10, 8 * kb), 1, 256 * kb, 1),
            // 500 x 16 listeners (~16 KB each): 8 MB over 256 KiB parts.
            (items(500, 16 * kb), 1, 256 * kb, 32),
            // Same size, already split: stays.
            (items(500, 16 * kb), 64, 256 * kb, 64),
            // Shrinks once it would fit a quarter of the budget per part...
            (items(10, 8 * kb), 64, 256 * kb, 1),
            // ...but not before (160 KB over 2 parts: over a quarter each).
            (items(20, 8 * kb), 2, 256 * kb, 2),
            // A lone Gateway over the budget cannot be split further.
            (vec![(7, 2000 * kb)], 1, 256 * kb, 1),
            // Current counts that are not powers of two are rounded.
            (items(500, 16 * kb), 3, 256 * kb, 32),
            (items(1, 1), 5000, 256 * kb, 1),
        ];
        for (i, (items, current, budget, want)) in cases.iter().enumerate() {
            let n = part_count(items, *current, *budget);
            assert_eq!(n, *want, "case {i}");
            assert!(n.is_power_of_two() && n <= MAX_PARTS);
        }
        // Every part fits the budget after a split (unless it is one Gateway).
        let big = items(500, 16 * kb);
        let n = part_count(&big, 1, 256 * kb);
        let mut per = vec![0usize; n as usize];
        for (h, b) in &big {
            per[(h % u64::from(n)) as usize] += b;
        }
        assert!(per.iter().all(|b| *b <= 256 * kb), "{per:?}");
    }
}
