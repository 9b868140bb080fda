//! The YAML side of the reader: a stream split at its document markers
//! and parsed one document at a time, after a linear check that refuses
//! nesting too deep for the parser. Apart from the JSON side because the
//! two share only what a document is ([`super::header`],
//! [`super::collect`]).

use std::io::{BufRead, Read};

use serde::Deserialize;
use serde_json::Value;

use super::{Input, Location, MAX_NESTING, ManifestError, Object, collect, read_error};

/// A YAML stream, document by document: lines are gathered up to the next
/// document marker (`---` or `...` at column 0, which the YAML spec
/// forbids inside any scalar), then that document alone is parsed. A part
/// with only comments, directives or blank lines joins the next document.
pub(super) fn parse_yaml<R: Read, E: From<ManifestError>>(
    file: &str,
    r: &mut Input<R>,
    mut line_no: usize,
    mut offset: usize,
    each: &mut dyn FnMut(Object) -> Result<(), E>,
) -> Result<(), E> {
    let marker = |line: &str, m: &str| {
        line.strip_prefix(m)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
    };
    let substantive = |line: &str| {
        let t = line.trim();
        !(t.is_empty() || t.starts_with('#') || line.starts_with('%'))
    };
    let mut doc = YamlDoc {
        file,
        text: String::new(),
        line: line_no,
        offset,
        marked: false,
        substantive: false,
        number: 0,
    };
    let mut line = String::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line).map_err(|e| read_error(file, r, e))?;
        if n == 0 {
            break;
        }
        let start = marker(&line, "---");
        let end = !start && marker(&line, "...");
        if start {
            if doc.marked || doc.substantive {
                doc.parse(each)?;
                doc.restart(line_no, offset);
            }
            doc.marked = true;
            doc.substantive |= substantive(&line[3..]);
        } else if !end && substantive(&line) {
            doc.substantive = true;
        }
        doc.text.push_str(&line);
        line_no += 1;
        offset += n;
        if end {
            if doc.marked || doc.substantive {
                doc.parse(each)?;
            }
            doc.restart(line_no, offset);
        }
    }
    if doc.marked || doc.substantive {
        doc.parse(each)?;
    }
    Ok(())
}

/// The YAML document being gathered, and where it starts in the file.
struct YamlDoc<'a> {
    file: &'a str,
    text: String,
    /// Lines and bytes of the file before it.
    line: usize,
    offset: usize,
    /// It starts with `---`; it has more than comments and directives.
    marked: bool,
    substantive: bool,
    /// Documents parsed so far.
    number: usize,
}

impl YamlDoc<'_> {
    fn restart(&mut self, line: usize, offset: usize) {
        self.text.clear();
        self.line = line;
        self.offset = offset;
        self.marked = false;
        self.substantive = false;
    }

    fn parse<E: From<ManifestError>>(
        &mut self,
        each: &mut dyn FnMut(Object) -> Result<(), E>,
    ) -> Result<(), E> {
        check_nesting(self.file, &self.text).map_err(|e| match e {
            ManifestError::TooDeep { path, max, offset } => ManifestError::TooDeep {
                path,
                max,
                offset: offset + self.offset,
            },
            e => e,
        })?;
        for de in serde_norway::Deserializer::from_str(&self.text) {
            let v = Value::deserialize(de).map_err(|e| ManifestError::Yaml {
                path: self.file.to_owned(),
                message: format!(
                    "{} (document {})",
                    shift_lines(&e.to_string(), self.line),
                    self.number + 1
                ),
            })?;
            self.number += 1;
            let at = Location {
                file: self.file.to_owned(),
                document: self.number,
                item: None,
            };
            collect(v, at, each)?;
        }
        Ok(())
    }
}

/// A YAML error's message with its `line N column M` marks moved down by
/// `by` lines (the document's start in the file).
fn shift_lines(message: &str, by: usize) -> String {
    if by == 0 {
        return message.to_owned();
    }
    let mut out = String::with_capacity(message.len() + 4);
    let mut rest = message;
    while let Some(i) = rest.find("line ") {
        out.push_str(&rest[..i + 5]);
        rest = &rest[i + 5..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0
            && rest[digits..].starts_with(" column ")
            && let Ok(n) = rest[..digits].parse::<usize>()
        {
            out.push_str(&(n + by).to_string());
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// Refuses text nesting flow collections deeper than [`MAX_NESTING`], in
/// one linear scan that skips what the YAML parser reads as text: quoted
/// scalars (`'...'` with `''`, `"..."` with `\` escapes), comments (a `#`
/// at a line start or after whitespace) and, outside flow collections,
/// block scalars (`|`, `>`: the more indented lines after them). Brackets
/// in plain scalars still count, which only makes it stricter than needed
/// for text no manifest has.
fn check_nesting(file: &str, text: &str) -> Result<(), ManifestError> {
    let b = text.as_bytes();
    let too_deep = |offset| ManifestError::TooDeep {
        path: file.to_owned(),
        max: MAX_NESTING,
        offset,
    };
    let mut depth = 0usize;
    // Indentation of the current line.
    let mut indent = 0usize;
    let mut i = 0;
    while i < b.len() {
        let prev = i.checked_sub(1).map(|p| b[p]);
        // Whether a scalar (or comment) may start here.
        let starts = matches!(
            prev,
            None | Some(b' ' | b'\t' | b'\r' | b'\n' | b'[' | b'{' | b',' | b':')
        );
        let spaced = matches!(prev, None | Some(b' ' | b'\t' | b'\r' | b'\n'));
        match b[i] {
            b'\n' => {
                i += 1;
                indent = b[i..].iter().take_while(|&&c| c == b' ').count();
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_deep(i));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'#' if spaced => {
                i = line_end(b, i);
                continue;
            }
            b'\'' if starts => {
                i += 1;
                while i < b.len() {
                    if b[i] == b'\'' {
                        if b.get(i + 1) == Some(&b'\'') {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
            }
            b'"' if starts => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'|' | b'>' if spaced && depth == 0 && block_header(&b[i + 1..line_end(b, i)]) => {
                // The block scalar's lines: blank or indented deeper than
                // the line that starts it.
                i = line_end(b, i);
                while i < b.len() {
                    let line = &b[i + 1..line_end(b, i + 1)];
                    let deeper = line.iter().take_while(|&&c| c == b' ').count() > indent;
                    let blank = line.iter().all(|c| c.is_ascii_whitespace());
                    if !(deeper || blank) {
                        break;
                    }
                    i = line_end(b, i + 1);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Where the line holding `i` ends (its `\n`, or the end of the text).
fn line_end(b: &[u8], i: usize) -> usize {
    b[i.min(b.len())..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| i + p)
}

/// Whether `rest` (after `|` or `>` up to the line's end) is a block scalar
/// header's remainder: indentation and chomping indicators, then at most
/// whitespace and a comment.
fn block_header(rest: &[u8]) -> bool {
    let n = rest
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'+' || **c == b'-')
        .count();
    let tail = &rest[n..];
    let body = tail
        .iter()
        .position(|&c| c == b'#')
        .filter(|&p| p > 0 && tail[p - 1].is_ascii_whitespace())
        .map_or(tail, |p| &tail[..p]);
    (tail.is_empty() || tail[0].is_ascii_whitespace())
        && body.iter().all(|c| c.is_ascii_whitespace())
}
