//! Clock handling: `--now` pins it so output is reproducible.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Parses an RFC 3339 timestamp as given to `--now`.
pub fn parse_rfc3339(s: &str) -> Result<Timestamp, String> {
    s.parse::<Timestamp>()
        .map_err(|e| format!("invalid RFC 3339 time {s:?}: {e}"))
}

/// Kubernetes `metav1.Time` has second precision on the wire; truncating here
/// keeps in-memory values equal to what a round trip through the API returns.
pub fn k8s_time(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// Formats a timestamp as RFC 3339 with second precision (the form used in
/// condition messages).
pub fn rfc3339(ts: Timestamp) -> String {
    k8s_time(ts).0.to_string()
}
