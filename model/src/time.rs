//! Clock handling: `--now` pins it so output is reproducible.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A time or duration flag that does not parse, or is out of range.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TimeFlagError {
    #[error("invalid RFC 3339 time {given:?}: {source}")]
    Rfc3339 {
        given: String,
        #[source]
        source: jiff::Error,
    },
    #[error("{given:?}: {source} (use e.g. 60s, 500ms)")]
    Duration {
        given: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("{0:?}: must be longer than zero")]
    Zero(String),
    #[error("{0:?}: must be at most a year")]
    TooLong(String),
}

/// Parses an RFC 3339 timestamp as given to `--now`.
pub fn parse_rfc3339(s: &str) -> Result<Timestamp, TimeFlagError> {
    s.parse::<Timestamp>()
        .map_err(|source| TimeFlagError::Rfc3339 {
            given: s.to_owned(),
            source,
        })
}

/// The longest duration a command-line flag takes: far beyond any useful
/// setting, and small enough that no timer or deadline built from it
/// overflows.
pub const MAX_FLAG_DURATION: std::time::Duration = std::time::Duration::from_secs(366 * 24 * 3600);

/// Parses a duration flag (`60s`, `2m`, `500ms`): longer than zero, at most
/// [`MAX_FLAG_DURATION`].
pub fn parse_duration(s: &str) -> Result<std::time::Duration, TimeFlagError> {
    let d = humantime::parse_duration(s).map_err(|source| TimeFlagError::Duration {
        given: s.to_owned(),
        source,
    })?;
    if d.is_zero() {
        return Err(TimeFlagError::Zero(s.to_owned()));
    }
    if d > MAX_FLAG_DURATION {
        return Err(TimeFlagError::TooLong(s.to_owned()));
    }
    Ok(d)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_are_positive_and_at_most_a_year() {
        assert_eq!(
            parse_duration("90s").unwrap(),
            std::time::Duration::from_secs(90)
        );
        assert_eq!(parse_duration("366d").unwrap(), MAX_FLAG_DURATION);
        assert_eq!(
            parse_duration("0s").unwrap_err().to_string(),
            "\"0s\": must be longer than zero"
        );
        assert_eq!(
            parse_duration("300000000000y").unwrap_err().to_string(),
            "\"300000000000y\": must be at most a year"
        );
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .to_string()
                .contains("use e.g. 60s")
        );
    }
}
