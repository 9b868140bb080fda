//! Lengths and cuts in characters, the unit of a CRD's `maxLength` (the API
//! server counts Unicode code points, not bytes). Shared by the hub's
//! aggregation and the agent's condition messages; [`truncate_bytes`] for the
//! one field counted in bytes.

/// Length in characters.
pub fn char_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

/// Shortens `s` to at most `max` characters, ending a cut string with `...`
/// so a reader sees it was cut.
pub fn truncate(s: &str, max: usize) -> String {
    if char_len(s) <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(3)).collect();
        out.push_str("...");
        out
    }
}

/// Shortens `s` to at most `max` bytes (on a character boundary), ending a
/// cut string with `...`. Only for the one field the API server counts in
/// bytes: an Event's `note` (Go's `len`, 1 kB); every CRD `maxLength` is
/// counted in characters ([`truncate`]).
pub fn truncate_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_cuts_characters_not_bytes() {
        assert_eq!(char_len("héllo"), 5);
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo wörld", 6), "hél...");
        assert_eq!(char_len(&truncate(&"é".repeat(40_000), 32_768)), 32_768);
        assert_eq!(truncate("abc", 2), "...");
    }

    #[test]
    fn event_notes_are_cut_by_bytes() {
        assert_eq!(truncate_bytes("héllo", 6), "héllo");
        assert_eq!(truncate_bytes("héllo wörld", 6), "hé...");
        assert_eq!(truncate_bytes("aé", 4), "aé");
        assert_eq!(truncate_bytes("aéé", 4), "a...");
        assert!(truncate_bytes(&"é".repeat(1000), 1000).len() <= 1000);
    }
}
