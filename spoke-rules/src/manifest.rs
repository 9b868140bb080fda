//! Reads Kubernetes manifests as users have them: `kubectl get -o yaml` or
//! `-o json` output, multi-document YAML, JSON streams, `kind: List`, or a
//! directory of such files. Every error names the file and the document.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Files larger than this are refused rather than read into memory.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Deepest nesting of flow collections (`[`, `{`) a file may have. Real
/// manifests nest a dozen levels; the YAML parser's cost grows with the
/// square of the depth, so deeper input is refused before parsing.
pub const MAX_NESTING: usize = 100;

/// Everything that can be wrong with an input file, each naming where.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: file is {size} bytes, larger than the {max} byte limit")]
    TooLarge { path: String, size: u64, max: u64 },
    #[error(
        "{path}: not a regular file ({what}); give a regular file, a directory of them, or - for standard input"
    )]
    NotRegular { path: String, what: &'static str },
    #[error(
        "{path}: nested more than {max} levels deep (at byte {offset}); Kubernetes manifests nest far less"
    )]
    TooDeep {
        path: String,
        max: usize,
        offset: usize,
    },
    #[error("{path}: invalid YAML: {message}")]
    Yaml { path: String, message: String },
    #[error("{path}: invalid JSON: {message}")]
    Json { path: String, message: String },
    #[error("{at}: {problem}")]
    Shape { at: Box<Location>, problem: String },
    #[error("{at}: {kind} {name}: {problem}")]
    Invalid {
        at: Box<Location>,
        kind: String,
        name: String,
        problem: String,
    },
    #[error("{at}: {kind} {name}: unsupported apiVersion {api_version:?} (supported: {expected})")]
    ApiVersion {
        at: Box<Location>,
        kind: String,
        name: String,
        api_version: String,
        expected: String,
    },
}

/// Where an object came from: file, document number (1-based) and, inside a
/// `List`, the item index (0-based, as `kubectl` prints `items[i]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub document: usize,
    pub item: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if let Some(i) = self.item {
            write!(f, ", items[{i}]")?;
        }
        Ok(())
    }
}

/// One Kubernetes object read from a file, not yet typed.
#[derive(Clone, Debug)]
pub struct Object {
    pub at: Location,
    pub api_version: String,
    pub kind: String,
    pub value: Value,
}

impl Object {
    /// `metadata.name`, or `<unnamed>` for messages.
    pub fn name(&self) -> String {
        let meta = &self.value["metadata"];
        match (meta["namespace"].as_str(), meta["name"].as_str()) {
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => n.to_owned(),
            _ => "<unnamed>".to_owned(),
        }
    }

    /// The API group of `apiVersion` (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// Fails unless `apiVersion` is one of `supported`.
    pub fn expect_api_version(&self, supported: &[&str]) -> Result<(), ManifestError> {
        if supported.contains(&self.api_version.as_str()) {
            Ok(())
        } else {
            Err(ManifestError::ApiVersion {
                at: Box::new(self.at.clone()),
                kind: self.kind.clone(),
                name: self.name(),
                api_version: self.api_version.clone(),
                expected: supported.join(", "),
            })
        }
    }

    /// Deserializes into a typed object; the error names the field path.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ManifestError> {
        serde_path_to_error::deserialize(&self.value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            ManifestError::Invalid {
                at: Box::new(self.at.clone()),
                kind: self.kind.clone(),
                name: self.name(),
                problem: if path == "." {
                    inner.to_string()
                } else {
                    format!("{path}: {inner}")
                },
            }
        })
    }
}

/// Reads every object from the given files or directories, in order.
pub fn read_paths<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<Object>, ManifestError> {
    let mut out = Vec::new();
    for p in paths {
        read_path_into(p.as_ref(), &mut out)?;
    }
    Ok(out)
}

/// The manifest files of a directory (`*.yaml`, `*.yml`, `*.json`, not hidden),
/// sorted by name so the result does not depend on the file system.
pub fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let read_err = |source| ManifestError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let wanted = !name.starts_with('.')
            && (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"));
        if wanted && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// What a path that is neither a regular file nor a directory is.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    let _ = meta;
    "not a file or directory"
}

/// Reads at most [`MAX_FILE_BYTES`] from `reader` (whatever its size claims).
fn read_bounded(shown: &str, reader: impl std::io::Read) -> Result<String, ManifestError> {
    use std::io::Read as _;
    let read_err = |source| ManifestError::Read {
        path: shown.to_owned(),
        source,
    };
    let mut bytes = Vec::new();
    reader
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ManifestError::TooLarge {
            path: shown.to_owned(),
            size: bytes.len() as u64,
            max: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|_| {
        read_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

fn read_path_into(path: &Path, out: &mut Vec<Object>) -> Result<(), ManifestError> {
    if path.as_os_str() == "-" {
        let text = read_bounded("<stdin>", std::io::stdin().lock())?;
        out.extend(parse_str("<stdin>", &text)?);
        return Ok(());
    }
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| ManifestError::Read {
        path: shown.clone(),
        source,
    })?;
    if meta.is_dir() {
        for f in manifest_files(path)? {
            read_path_into(&f, out)?;
        }
        return Ok(());
    }
    // A FIFO would block forever, a device (/dev/zero) never ends.
    if !meta.is_file() {
        return Err(ManifestError::NotRegular {
            path: shown,
            what: file_kind(&meta),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ManifestError::TooLarge {
            path: shown,
            size: meta.len(),
            max: MAX_FILE_BYTES,
        });
    }
    let file = std::fs::File::open(path).map_err(|source| ManifestError::Read {
        path: shown.clone(),
        source,
    })?;
    let text = read_bounded(&shown, file)?;
    out.extend(parse_str(&shown, &text)?);
    Ok(())
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

/// Parses the text of one file (named `file` in errors).
pub fn parse_str(file: &str, text: &str) -> Result<Vec<Object>, ManifestError> {
    check_nesting(file, text)?;
    let docs = split_documents(file, text)?;
    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let at = Location {
            file: file.to_owned(),
            document: i + 1,
            item: None,
        };
        collect(doc, at, &mut out)?;
    }
    Ok(out)
}

fn split_documents(file: &str, text: &str) -> Result<Vec<Value>, ManifestError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut docs = Vec::new();
        for v in serde_json::Deserializer::from_str(trimmed).into_iter::<Value>() {
            docs.push(v.map_err(|e| ManifestError::Json {
                path: file.to_owned(),
                message: e.to_string(),
            })?);
        }
        // A top-level JSON array is a list of objects.
        if let [Value::Array(items)] = docs.as_slice() {
            return Ok(items.clone());
        }
        return Ok(docs);
    }
    let mut docs = Vec::new();
    for de in serde_norway::Deserializer::from_str(text) {
        let v = Value::deserialize(de).map_err(|e| ManifestError::Yaml {
            path: file.to_owned(),
            message: e.to_string(),
        })?;
        docs.push(v);
    }
    Ok(docs)
}

fn collect(doc: Value, at: Location, out: &mut Vec<Object>) -> Result<(), ManifestError> {
    let shape = |problem: String| ManifestError::Shape {
        at: Box::new(at.clone()),
        problem,
    };
    let map = match doc {
        Value::Null => return Ok(()), // empty document, e.g. a trailing `---`
        Value::Object(map) => map,
        other => {
            return Err(shape(format!(
                "expected a Kubernetes object, found {}",
                json_type(&other)
            )));
        }
    };
    let api_version = match map.get("apiVersion") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(shape("apiVersion must be a non-empty string".into())),
        None => return Err(shape("object has no apiVersion".into())),
    };
    let kind = match map.get("kind") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(shape("kind must be a non-empty string".into())),
        None => return Err(shape("object has no kind".into())),
    };
    if kind.ends_with("List") && map.contains_key("items") {
        let Some(Value::Array(items)) = map.get("items") else {
            return Err(shape(format!("{kind}: items must be a list")));
        };
        if at.item.is_some() {
            return Err(shape(format!("{kind} nested inside a List")));
        }
        for (i, item) in items.iter().enumerate() {
            let item_at = Location {
                item: Some(i),
                ..at.clone()
            };
            collect(item.clone(), item_at, out)?;
        }
        return Ok(());
    }
    match map.get("metadata") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return Err(shape(format!("{kind}: metadata must be a mapping"))),
    }
    out.push(Object {
        at,
        api_version,
        kind,
        value: Value::Object(map),
    });
    Ok(())
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeply_nested_flow_yaml_is_refused_before_parsing() {
        // 200 KB of nesting took seconds of CPU in the YAML parser.
        let deep = format!("a: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = parse_str("deep.yaml", &deep).unwrap_err();
        assert!(
            matches!(
                e,
                ManifestError::TooDeep {
                    max: MAX_NESTING,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("deep.yaml"), "{e}");
        let json = format!("{}{}", "{\"a\":".repeat(200), "}".repeat(200));
        assert!(matches!(
            parse_str("deep.json", &json),
            Err(ManifestError::TooDeep { .. })
        ));
        // Ordinary nesting is fine.
        let ok = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: {{a: {}x{}}}\n",
            "[".repeat(20),
            "]".repeat(20)
        );
        assert!(parse_str("ok.yaml", &ok).is_ok());
    }

    #[test]
    fn brackets_hidden_in_quotes_do_not_bypass_the_nesting_bound() {
        // Each level closes a bracket inside a string: the parser nests.
        let level = |q: &str| format!("[ {q}]{q}, ");
        for hidden in [
            format!("a: {}", level("\"").repeat(50_000)),
            format!("a: {}", level("'").repeat(50_000)),
        ] {
            assert!(
                matches!(
                    parse_str("hidden.yaml", &hidden),
                    Err(ManifestError::TooDeep { .. })
                ),
                "{}",
                &hidden[..40]
            );
        }
        // Escapes inside quotes do not end them; comments are skipped.
        let escaped = format!("a: {}", "[ \"\\\"]\", ".repeat(200));
        assert!(matches!(
            parse_str("escaped.yaml", &escaped),
            Err(ManifestError::TooDeep { .. })
        ));
        let quoted = format!("a: {}", "[ 'it''s ]', ".repeat(200));
        assert!(matches!(
            parse_str("quoted.yaml", &quoted),
            Err(ManifestError::TooDeep { .. })
        ));
        let comment = format!("a: {}", "[ # ]\n".repeat(200));
        assert!(matches!(
            parse_str("comment.yaml", &comment),
            Err(ManifestError::TooDeep { .. })
        ));
    }

    #[test]
    fn brackets_that_are_text_do_not_count() {
        let brackets = "[{".repeat(MAX_NESTING);
        let ok = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x # {brackets}\n  annotations:\n    q: \"{brackets}\"\n    s: '{brackets}'\ndata:\n  script: |\n    {brackets}\n\n    echo {brackets}\n  folded: >-\n    {brackets}\n  after: [x]\n"
        );
        let objects = parse_str("ok.yaml", &ok).unwrap();
        assert_eq!(objects.len(), 1);
        // A block scalar ends where the indentation does: what follows counts.
        let after = format!("data:\n  script: |\n    x\n  deep: {}x\n", "[".repeat(200));
        assert!(matches!(
            parse_str("after.yaml", &after),
            Err(ManifestError::TooDeep { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_read() {
        let e = read_paths(&["/dev/zero"]).unwrap_err();
        assert!(
            matches!(
                e,
                ManifestError::NotRegular {
                    what: "a device",
                    ..
                }
            ),
            "{e}"
        );
        let fifo = std::env::temp_dir().join(format!("gwhub-fifo-{}.yaml", std::process::id()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            // Refused without opening it (opening a FIFO blocks).
            let e = read_paths(&[&fifo]).unwrap_err();
            let _ = std::fs::remove_file(&fifo);
            assert!(
                matches!(e, ManifestError::NotRegular { what: "a FIFO", .. }),
                "{e}"
            );
            assert!(e.to_string().contains("- for standard input"), "{e}");
        }
    }

    #[test]
    fn multi_document_yaml_and_lists() {
        let text = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Event, metadata: {name: e}}\n\
                    - {apiVersion: v1, kind: Event, metadata: {name: f}}\n---\n";
        let objs = parse_str("f.yaml", text).unwrap();
        assert_eq!(objs.len(), 3);
        assert_eq!(objs[0].name(), "ns/a");
        assert_eq!(objs[2].at.to_string(), "f.yaml: document 2, items[1]");
    }

    #[test]
    fn json_list_and_stream() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}}]}
        {"apiVersion":"v1","kind":"Service","metadata":{"name":"b"}}"#;
        let objs = parse_str("f.json", text).unwrap();
        assert_eq!(objs.len(), 2);
    }

    #[test]
    fn errors_name_file_and_problem() {
        let e = parse_str("bad.yaml", "apiVersion: v1\nkind: [unclosed\n").unwrap_err();
        assert!(e.to_string().starts_with("bad.yaml: invalid YAML"), "{e}");
        let e = parse_str("bad.json", "{\"apiVersion\": ").unwrap_err();
        assert!(e.to_string().starts_with("bad.json: invalid JSON"), "{e}");
        let e = parse_str("k.yaml", "apiVersion: v1\nmetadata: {name: x}\n").unwrap_err();
        assert_eq!(e.to_string(), "k.yaml: document 1: object has no kind");
        let e = parse_str("s.yaml", "just a string\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.yaml: document 1: expected a Kubernetes object, found a string"
        );
    }

    #[test]
    fn typed_parse_names_field_path() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct S {
            spec: Spec,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Spec {
            port: i32,
        }
        let objs = parse_str(
            "t.yaml",
            "apiVersion: v1\nkind: Thing\nmetadata: {name: n}\nspec: {port: eighty}\n",
        )
        .unwrap();
        let e = objs[0].parse::<S>().unwrap_err().to_string();
        assert!(
            e.starts_with("t.yaml: document 1: Thing n: spec.port: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn api_version_check() {
        let objs = parse_str(
            "v.yaml",
            "apiVersion: x/v9\nkind: Gateway\nmetadata: {name: g}\n",
        )
        .unwrap();
        let e = objs[0]
            .expect_api_version(&["x/v1"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "v.yaml: document 1: Gateway g: unsupported apiVersion \"x/v9\" (supported: x/v1)"
        );
    }

    #[test]
    fn missing_file() {
        let e = read_paths(&["/nonexistent/gw.yaml"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/gw.yaml: cannot read:"), "{e}");
    }
}
