//! Condition bookkeeping, the same rules `meta.SetStatusCondition` applies in
//! Go controllers, so gwhub behaves like every other writer of these lists.

use jiff::Timestamp;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::time::k8s_time;

pub use crate::limits::MAX_CONDITIONS;

/// Builds a condition whose `lastTransitionTime` is `now`; [`set`] replaces
/// it with the previous time when the status did not change.
pub fn new(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time: k8s_time(now),
    }
}

/// Carries `lastTransitionTime` over from `previous` when the status is
/// unchanged, so the time marks a real transition and not the last write.
pub fn carry_transition_time(mut next: Condition, previous: Option<&Condition>) -> Condition {
    if let Some(prev) = previous
        && prev.status == next.status
    {
        next.last_transition_time = prev.last_transition_time.clone();
    }
    next
}

/// Sets `next` in `list`: replaces the entry of the same type in place
/// (keeping its transition time if the status is unchanged) or appends it.
/// Returns `false`, leaving the list untouched, when appending would exceed
/// [`MAX_CONDITIONS`].
pub fn set(list: &mut Vec<Condition>, next: Condition) -> bool {
    if let Some(slot) = list.iter_mut().find(|c| c.type_ == next.type_) {
        let merged = carry_transition_time(next, Some(slot));
        *slot = merged;
        true
    } else if list.len() < MAX_CONDITIONS {
        list.push(next);
        true
    } else {
        false
    }
}

/// Removes the condition of `type_`; returns whether one was there.
pub fn remove(list: &mut Vec<Condition>, type_: &str) -> bool {
    let before = list.len();
    list.retain(|c| c.type_ != type_);
    list.len() != before
}

/// Finds the condition of `type_`.
pub fn find<'a>(list: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    list.iter().find(|c| c.type_ == type_)
}

/// Equality that ignores `lastTransitionTime`: two lists that differ only in
/// time need no API write.
pub fn same_ignoring_time(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.type_ == y.type_
                && x.status == y.status
                && x.reason == y.reason
                && x.message == y.message
                && x.observed_generation == y.observed_generation
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn set_keeps_transition_time_when_status_unchanged() {
        let mut list = vec![new("Ready", "True", "A", "a", Some(1), t(10))];
        assert!(set(
            &mut list,
            new("Ready", "True", "B", "b", Some(2), t(20))
        ));
        assert_eq!(list[0].last_transition_time.0, t(10));
        assert_eq!(list[0].reason, "B");
        assert_eq!(list[0].observed_generation, Some(2));
    }

    #[test]
    fn set_moves_transition_time_when_status_changes() {
        let mut list = vec![new("Ready", "True", "A", "a", Some(1), t(10))];
        assert!(set(
            &mut list,
            new("Ready", "False", "A", "a", Some(1), t(20))
        ));
        assert_eq!(list[0].last_transition_time.0, t(20));
    }

    #[test]
    fn set_refuses_a_ninth_condition() {
        let mut list: Vec<_> = (0..8)
            .map(|i| new(&format!("T{i}"), "True", "R", "", None, t(1)))
            .collect();
        assert!(!set(&mut list, new("Extra", "True", "R", "", None, t(2))));
        assert_eq!(list.len(), 8);
        assert!(set(&mut list, new("T3", "False", "R", "", None, t(2))));
        assert_eq!(list.len(), 8);
    }

    #[test]
    fn compare_ignores_time_only() {
        let a = vec![new("Ready", "True", "A", "a", Some(1), t(10))];
        let b = vec![new("Ready", "True", "A", "a", Some(1), t(99))];
        assert!(same_ignoring_time(&a, &b));
        let c = vec![new("Ready", "True", "A", "other", Some(1), t(10))];
        assert!(!same_ignoring_time(&a, &c));
    }

    #[test]
    fn remove_reports_presence() {
        let mut list = vec![new("Ready", "True", "A", "a", Some(1), t(10))];
        assert!(!remove(&mut list, "Other"));
        assert!(remove(&mut list, "Ready"));
        assert!(list.is_empty());
    }
}
