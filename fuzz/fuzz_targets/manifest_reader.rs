//! Arbitrary text through the manifest reader of `gwhub-agent compute` and
//! `gwhub aggregate` (multi-document YAML, JSON streams, `kind: List`), then
//! through what each command does with the objects: errors are fine, panics
//! are not, and what the hub would write passes the CRD checker.
#![no_main]

mod common;

use gwhub_hub_rules::aggregate::{Fleet, HubGateway, Options};
use gwhub_spoke_rules::manifest::parse_str;
use gwhub_common::output::OutputFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(objects) = parse_str("fuzz.yaml", text) else {
        return;
    };
    for o in &objects {
        let _ = o.name();
        let _ = o.group();
    }
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    // gwhub-agent compute
    let _ = gwhub::agent::compute::compute(
        &objects,
        &gwhub_spoke_rules::scope::Options::default(),
        now,
        OutputFormat::Yaml,
    );
    // gwhub aggregate: the same objects as one cluster's files and as the
    // hub Gateways.
    let Ok(found) = gwhub::hub::gateways_from_objects(objects) else {
        return;
    };
    let mut fleet = Fleet::new();
    for f in &found {
        fleet.upsert(
            "fuzz",
            f.key.clone(),
            f.doc.status.clone().unwrap_or_default(),
        );
    }
    for f in &found {
        let existing = f
            .doc
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let reports = fleet.reports(&f.key);
        // The API server never hands out a negative generation.
        let generation = f.doc.metadata.generation.unwrap_or(1).max(0);
        let hub = HubGateway::from_existing(generation, &existing, &reports);
        if let Ok(a) = gwhub_hub_rules::aggregate::aggregate(&hub, &reports, &Options::default(), now) {
            let _ = gwhub_common::output::render_list(
                vec![serde_json::to_value(&a.status).unwrap()],
                OutputFormat::Json,
            );
            if let Err(e) = common::crd::check_status(&a.status) {
                panic!("Gateway {} breaks the CRD: {e}", f.key);
            }
        }
    }
});
