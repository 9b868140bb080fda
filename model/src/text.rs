//! Lengths and cuts in characters, the unit of a CRD's `maxLength` (the API
//! server counts Unicode code points, not bytes). Shared by the hub's
//! aggregation and the agent's condition messages; [`truncate_bytes`] for the
//! one field counted in bytes. Also the one rule for showing text from
//! elsewhere safely ([`printable`], [`quote_client_input`]), used by
//! gwhubctl, the web page and the hub's error messages.

use std::borrow::Cow;

/// How many characters of a client's input an error message repeats.
pub(crate) const MAX_ECHO_CHARS: usize = 64;

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

/// Whether `c` must not be shown raw: a control character (ESC, BEL, CR,
/// LF, ...) or a bidirectional control (LRM, RLM, ALM, embeddings,
/// overrides and isolates), which could move a terminal's cursor or
/// reorder what a reader sees.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every [`is_unsafe_char`] escaped as Rust writes it
/// (`\u{1b}`, `\n`, `\u{202e}`), so text from elsewhere (a rogue
/// cluster's names and messages) cannot draw rows of its own or reorder
/// a line. Everything else is kept as is.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe_char) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// A client's input as an error message repeats it: quoted, at most
/// `MAX_ECHO_CHARS` characters of it, [`printable`], with `"` and `\`
/// escaped, and `...` after the closing quote when it was cut. Every
/// message that names what a client sent goes through here, so no answer
/// grows with the request or carries its control characters.
pub fn quote_client_input(s: &str) -> String {
    let mut out = String::with_capacity(MAX_ECHO_CHARS + 8);
    out.push('"');
    let mut chars = s.chars();
    for c in chars.by_ref().take(MAX_ECHO_CHARS) {
        if is_unsafe_char(c) || matches!(c, '"' | '\\') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('"');
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_controls_and_bidi_only() {
        assert_eq!(printable("east"), "east");
        assert!(matches!(printable("héllo"), Cow::Borrowed(_)));
        assert_eq!(
            printable("a\u{1b}[2Jb\u{7}\r\nfake-row\u{202e}"),
            "a\\u{1b}[2Jb\\u{7}\\r\\nfake-row\\u{202e}"
        );
        for c in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}', '\u{0}', '\u{7f}',
            '\u{9b}',
        ] {
            let p = printable(&c.to_string()).into_owned();
            assert_eq!(p, format!("\\u{{{:x}}}", c as u32), "{c:?}");
        }
        assert_eq!(printable("\"quoted\" \\ é 中"), "\"quoted\" \\ é 中");
    }

    #[test]
    fn client_input_echoes_a_short_escaped_prefix() {
        assert_eq!(quote_client_input("east/gw"), "\"east/gw\"");
        assert_eq!(quote_client_input(""), "\"\"");
        assert_eq!(quote_client_input("a\"b\\c"), "\"a\\\"b\\\\c\"");
        let exact = "x".repeat(MAX_ECHO_CHARS);
        assert_eq!(quote_client_input(&exact), format!("\"{exact}\""));
        // 10 KB of a name with control and bidi characters: a short,
        // escaped echo.
        let hostile = "\u{1b}[2J\u{202e}evil\n".repeat(1000);
        assert!(hostile.len() > 10_000);
        let echo = quote_client_input(&hostile);
        assert!(echo.len() < 400, "{} bytes", echo.len());
        assert!(echo.ends_with("\"..."), "{echo}");
        assert!(echo.starts_with("\"\\u{1b}[2J\\u{202e}evil\\n"), "{echo}");
        assert!(!echo.chars().any(is_unsafe_char), "{echo}");
        // Cut by characters, never inside one.
        let wide = quote_client_input(&"é".repeat(100));
        assert_eq!(wide, format!("\"{}\"...", "é".repeat(MAX_ECHO_CHARS)));
    }

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
