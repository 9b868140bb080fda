//! Turning what a run saw into its figures: the latency summary both modes
//! put in their JSON (one histogram for every bench: test-kit's
//! [`Latencies`]), and the hub's warnings and errors.

use gwhub_test_kit::latency::Latencies;

/// `{"p50", "p99", "max"}` in ms (NaN without samples), `samples` and
/// `unobserved` (marks sent but never seen): the JSON fields the figures in
/// docs/benchmarks.md were taken from.
pub(crate) fn latency_json(l: &Latencies, unobserved: usize) -> serde_json::Value {
    serde_json::json!({
        "p50": l.ms(0.5),
        "p99": l.ms(0.99),
        "max": l.ms(1.0),
        "samples": l.len(),
        "unobserved": unobserved,
    })
}

/// Prints how many warnings and errors the hub logged, with a few of them.
pub(crate) fn print_problems(problems: &(usize, Vec<String>)) {
    if problems.0 > 0 {
        eprintln!("hub logged {} warnings/errors, e.g.:", problems.0);
        for l in &problems.1 {
            eprintln!("  {l}");
        }
    }
}

/// Bytes in MiB.
pub(crate) fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}
