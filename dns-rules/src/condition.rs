//! The hub's `gwhub.io/DNSPublished` condition on a hub Gateway, from the
//! states of the fleet DNS names it claims (spec section 8, "Visible").
//!
//! `False` with the first reason that applies, `Invalid` > `Conflict` >
//! `WriteFailed` > `NoneEligible` (a name published before that has no
//! eligible cluster now), the message naming the hostnames with that
//! reason; otherwise `True` / `Published`, the message naming any name not
//! yet published because no cluster was ever eligible.
//!
//! Messages stay within a condition message's limit, 32768 characters
//! ([`MAX_CONDITION_MESSAGE_LEN`]), as the aggregation's do: whole entries
//! are cut and the message ends with `; and N more hostnames`; an entry too
//! long on its own is shortened, ending `...`. Hostnames and details are
//! shown [`printable`] (a rogue cluster's hostname cannot draw lines).
//! A hub Gateway that claims no name gets no condition (`None`: the hub
//! removes it).

use gwhub_model::limits::MAX_CONDITION_MESSAGE_LEN;
use gwhub_model::text::{char_len, printable};

/// The condition type.
pub const CONDITION_TYPE: &str = "gwhub.io/DNSPublished";
pub const REASON_INVALID: &str = "Invalid";
pub const REASON_CONFLICT: &str = "Conflict";
pub const REASON_WRITE_FAILED: &str = "WriteFailed";
pub const REASON_NONE_ELIGIBLE: &str = "NoneEligible";
pub const REASON_PUBLISHED: &str = "Published";

/// How one name of the hub Gateway stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameState {
    /// Published and current.
    Published,
    /// Not published: no cluster has ever been eligible.
    NotYetPublished,
    /// Published before, no eligible cluster now; `kept`: the last set is
    /// still answered (`--dns-when-none=keep`), else the name was deleted.
    NoneEligible { kept: bool },
    /// The last write failed: why.
    WriteFailed(String),
    /// Another hub Gateway or owner holds it: who.
    Conflict(String),
    /// It cannot be published: why (the hostname, its ownership name).
    Invalid(String),
}

impl NameState {
    /// One word for it: the condition's reasons, and `NotYetPublished`.
    pub fn reason(&self) -> &'static str {
        match self {
            NameState::Published => REASON_PUBLISHED,
            NameState::NotYetPublished => "NotYetPublished",
            NameState::NoneEligible { .. } => REASON_NONE_ELIGIBLE,
            NameState::WriteFailed(_) => REASON_WRITE_FAILED,
            NameState::Conflict(_) => REASON_CONFLICT,
            NameState::Invalid(_) => REASON_INVALID,
        }
    }

    /// What the reason leaves to say, in words (empty for `Published`).
    pub fn detail(&self) -> String {
        match self {
            NameState::Published => String::new(),
            NameState::NotYetPublished => "no cluster was ever eligible".to_owned(),
            NameState::NoneEligible { kept: true } => {
                "no eligible cluster: the last published set is kept".to_owned()
            }
            NameState::NoneEligible { kept: false } => {
                "no eligible cluster: the name is deleted".to_owned()
            }
            NameState::WriteFailed(why) | NameState::Conflict(why) | NameState::Invalid(why) => {
                why.clone()
            }
        }
    }
}

/// One name and its state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameStatus {
    pub host: String,
    pub state: NameState,
}

/// The condition's status, reason and message (the hub adds the
/// bookkeeping: observedGeneration, lastTransitionTime).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsCondition {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// `gwhub.io/DNSPublished` from the hub Gateway's names (see the module
/// docs).
pub fn dns_published(names: &[NameStatus]) -> Option<DnsCondition> {
    dns_published_within(names, MAX_CONDITION_MESSAGE_LEN)
}

/// [`dns_published`] with messages of at most `max` characters.
pub(crate) fn dns_published_within(names: &[NameStatus], max: usize) -> Option<DnsCondition> {
    if names.is_empty() {
        return None;
    }
    let mut sorted: Vec<&NameStatus> = names.iter().collect();
    sorted.sort_by(|a, b| a.host.cmp(&b.host));
    let of = |pick: Pick| -> Vec<String> {
        sorted
            .iter()
            .filter_map(|n| {
                pick(&n.state).map(|detail| {
                    let host = printable(&n.host);
                    if detail.is_empty() {
                        host.into_owned()
                    } else {
                        format!("{host}: {}", printable(&detail))
                    }
                })
            })
            .collect()
    };
    let failures: [(&'static str, &str, Pick); 4] = [
        (REASON_INVALID, "cannot be published", |s| match s {
            NameState::Invalid(why) => Some(why.clone()),
            _ => None,
        }),
        (REASON_CONFLICT, "held by another", |s| match s {
            NameState::Conflict(who) => Some(who.clone()),
            _ => None,
        }),
        (REASON_WRITE_FAILED, "the write failed", |s| match s {
            NameState::WriteFailed(why) => Some(why.clone()),
            _ => None,
        }),
        (REASON_NONE_ELIGIBLE, "no eligible cluster", |s| match s {
            NameState::NoneEligible { kept: true } => {
                Some("the last published set is kept".to_owned())
            }
            NameState::NoneEligible { kept: false } => Some("deleted".to_owned()),
            _ => None,
        }),
    ];
    for (reason, prefix, pick) in failures {
        let entries = of(pick);
        if !entries.is_empty() {
            return Some(DnsCondition {
                status: "False",
                reason,
                message: bounded(&format!("{prefix}: "), &entries, max),
            });
        }
    }
    let waiting = of(|s| matches!(s, NameState::NotYetPublished).then(String::new));
    let published = names.len() - waiting.len();
    let mut head = format!("published {published} of {} hostnames", names.len());
    let message = if waiting.is_empty() {
        head
    } else {
        head.push_str("; not yet published, no cluster was ever eligible: ");
        bounded(&head, &waiting, max)
    };
    Some(DnsCondition {
        status: "True",
        reason: REASON_PUBLISHED,
        message,
    })
}

/// A state's entry detail, when the state is the one picked.
type Pick = fn(&NameState) -> Option<String>;

const SEPARATOR: &str = "; ";

/// `head` then `entries` joined by `"; "`, within `max` characters: whole
/// entries cut, ending `; and N more hostnames`; a first entry too long on
/// its own shortened with `...`.
fn bounded(head: &str, entries: &[String], max: usize) -> String {
    let more = |n: usize| {
        if n == 0 {
            String::new()
        } else {
            format!("{SEPARATOR}and {n} more hostnames")
        }
    };
    let mut len = char_len(head);
    let mut fit = 0;
    for (i, e) in entries.iter().enumerate() {
        len += char_len(e) + if i > 0 { SEPARATOR.len() } else { 0 };
        if len + char_len(&more(entries.len() - i - 1)) > max {
            break;
        }
        fit = i + 1;
    }
    let mut out = head.to_owned();
    if fit == 0 {
        let tail = more(entries.len().saturating_sub(1));
        let room = max.saturating_sub(char_len(head) + char_len(&tail) + 3);
        if let Some(first) = entries.first() {
            out.extend(first.chars().take(room));
            out.push_str("...");
        }
        out.push_str(&tail);
        return within(out, max);
    }
    for (i, e) in entries.iter().take(fit).enumerate() {
        if i > 0 {
            out.push_str(SEPARATOR);
        }
        out.push_str(e);
    }
    out.push_str(&more(entries.len() - fit));
    within(out, max)
}

/// `text` cut to `max` characters, ending `...` when cut: the last bound,
/// for a head that leaves no room even for one shortened entry and the
/// count of the others (only with a `max` far below the condition's 32768).
fn within(text: String, max: usize) -> String {
    if char_len(&text) <= max {
        return text;
    }
    let mut out: String = text.chars().take(max.saturating_sub(3)).collect();
    out.push_str(&"..."[..max.min(3)]);
    out
}

#[cfg(test)]
mod tests;
