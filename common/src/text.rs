//! Lengths and cuts in characters, the unit of a CRD's `maxLength` (the API
//! server counts Unicode code points, not bytes). Shared by the hub's
//! aggregation and the agent's condition messages.

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
}
