//! Reads Kubernetes manifests as users have them: `kubectl get -o yaml` or
//! `-o json` output, multi-document YAML, JSON streams, `kind: List`, or a
//! directory of such files. Every error names the file and the document.
//!
//! Documents are read one at a time and each object is handed on as soon as
//! its document is parsed ([`for_each_object`]), so memory is bounded by
//! the largest document (and what the caller keeps), not by the file: YAML
//! is split at its document markers (`---`, `...` at column 0, which end
//! any scalar) with a line reader, a JSON stream is read value by value,
//! and a top-level JSON array or the `items` of a JSON `List` element by
//! element.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

mod json;
mod yaml;

use json::parse_json;
use yaml::parse_yaml;

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
    for_each_object(paths, |o| {
        out.push(o);
        Ok::<_, ManifestError>(())
    })?;
    Ok(out)
}

/// Reads every object from the given files or directories, in order,
/// handing each to `each` as soon as its document is parsed; the first
/// error (the reader's or `each`'s) ends the reading.
pub fn for_each_object<P, E>(
    paths: &[P],
    mut each: impl FnMut(Object) -> Result<(), E>,
) -> Result<(), E>
where
    P: AsRef<Path>,
    E: From<ManifestError>,
{
    for p in paths {
        read_path_each(p.as_ref(), &mut each)?;
    }
    Ok(())
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

fn read_path_each<E: From<ManifestError>>(
    path: &Path,
    each: &mut dyn FnMut(Object) -> Result<(), E>,
) -> Result<(), E> {
    if path.as_os_str() == "-" {
        return parse_reader("<stdin>", std::io::stdin().lock(), each);
    }
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| ManifestError::Read {
        path: shown.clone(),
        source,
    })?;
    if meta.is_dir() {
        for f in manifest_files(path)? {
            read_path_each(&f, each)?;
        }
        return Ok(());
    }
    // A FIFO would block forever, a device (/dev/zero) never ends.
    if !meta.is_file() {
        return Err(ManifestError::NotRegular {
            path: shown,
            what: file_kind(&meta),
        }
        .into());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ManifestError::TooLarge {
            path: shown,
            size: meta.len(),
            max: MAX_FILE_BYTES,
        }
        .into());
    }
    let file = std::fs::File::open(path).map_err(|source| ManifestError::Read {
        path: shown.clone(),
        source,
    })?;
    parse_reader(&shown, file, each)
}

/// What the reader under the parsers found wrong with the bytes
/// themselves: more than [`MAX_FILE_BYTES`] (whatever a size claims), or
/// JSON nested deeper than [`MAX_NESTING`].
struct Guard<R> {
    inner: R,
    read: u64,
    too_large: bool,
    /// Refuse to read on once JSON nests too deep (set for JSON input).
    json: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Offset of the first bracket past [`MAX_NESTING`], outside strings.
    too_deep_at: Option<usize>,
}

impl<R: Read> Guard<R> {
    fn new(inner: R) -> Self {
        Guard {
            inner,
            read: 0,
            too_large: false,
            json: false,
            depth: 0,
            in_string: false,
            escaped: false,
            too_deep_at: None,
        }
    }

    /// Tracks JSON nesting over `bytes`, which start at `offset`: brackets
    /// outside strings (JSON has no other text that could hold one).
    fn scan(&mut self, bytes: &[u8], offset: u64) {
        for (i, &b) in bytes.iter().enumerate() {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    if self.depth > MAX_NESTING && self.too_deep_at.is_none() {
                        self.too_deep_at = Some(offset as usize + i);
                    }
                }
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// The error for what this guard saw, if anything.
    fn problem(&self, path: &str) -> Option<ManifestError> {
        if self.too_large {
            return Some(ManifestError::TooLarge {
                path: path.to_owned(),
                size: self.read,
                max: MAX_FILE_BYTES,
            });
        }
        match self.too_deep_at {
            Some(offset) if self.json => Some(ManifestError::TooDeep {
                path: path.to_owned(),
                max: MAX_NESTING,
                offset,
            }),
            _ => None,
        }
    }
}

impl<R: Read> Read for Guard<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let stop = |why: &str| Err(std::io::Error::other(why.to_owned()));
        if self.too_large {
            return stop("input too large");
        }
        if self.json && self.too_deep_at.is_some() {
            return stop("nested too deep");
        }
        let n = self.inner.read(buf)?;
        let offset = self.read;
        self.read += n as u64;
        if self.read > MAX_FILE_BYTES {
            self.too_large = true;
            return stop("input too large");
        }
        self.scan(&buf[..n], offset);
        Ok(n)
    }
}

type Input<R> = BufReader<Guard<R>>;

/// A read error, or what the guard saw that caused it.
fn read_error<R: Read>(path: &str, r: &Input<R>, source: std::io::Error) -> ManifestError {
    r.get_ref().problem(path).unwrap_or(ManifestError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Parses one file's contents (named `file` in errors) from `reader`,
/// handing each object to `each` as soon as its document is parsed.
pub fn parse_reader<E: From<ManifestError>>(
    file: &str,
    reader: impl Read,
    each: &mut dyn FnMut(Object) -> Result<(), E>,
) -> Result<(), E> {
    let mut r = BufReader::new(Guard::new(reader));
    // Past a byte order mark and blank lines: JSON or YAML?
    let mut lines = 0;
    let mut offset = 0;
    let first = loop {
        let buf = match r.fill_buf() {
            Ok(buf) => buf,
            Err(e) => return Err(read_error(file, &r, e).into()),
        };
        if offset == 0 && buf.starts_with(b"\xef\xbb\xbf") {
            r.consume(3);
            offset = 3;
            continue;
        }
        if buf.is_empty() {
            break None;
        }
        let content = buf.iter().position(|b| !b.is_ascii_whitespace());
        let end = content.unwrap_or(buf.len());
        // Whole lines only: a YAML line's indentation is part of it.
        let take = buf[..end]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let take = if content.is_none() { buf.len() } else { take };
        let first = content.map(|p| buf[p]);
        lines += buf[..take].iter().filter(|&&b| b == b'\n').count();
        offset += take;
        r.consume(take);
        if first.is_some() {
            break first;
        }
    };
    match first {
        Some(b'{' | b'[') => {
            r.get_mut().json = true;
            parse_json(file, &mut r, each)
        }
        _ => parse_yaml(file, &mut r, lines, offset, each),
    }
}

/// Parses the text of one file (named `file` in errors).
pub fn parse_str(file: &str, text: &str) -> Result<Vec<Object>, ManifestError> {
    let mut out = Vec::new();
    parse_reader(file, text.as_bytes(), &mut |o| {
        out.push(o);
        Ok::<_, ManifestError>(())
    })?;
    Ok(out)
}

/// A document's `apiVersion` and `kind`, checked.
fn header(
    map: &serde_json::Map<String, Value>,
    at: &Location,
) -> Result<(String, String), ManifestError> {
    let shape = |problem: &str| ManifestError::Shape {
        at: Box::new(at.clone()),
        problem: problem.to_owned(),
    };
    let api_version = match map.get("apiVersion") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(shape("apiVersion must be a non-empty string")),
        None => return Err(shape("object has no apiVersion")),
    };
    let kind = match map.get("kind") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(shape("kind must be a non-empty string")),
        None => return Err(shape("object has no kind")),
    };
    Ok((api_version, kind))
}

/// Hands on the object(s) of one document: the object, or a `List`'s items.
fn collect<E: From<ManifestError>>(
    doc: Value,
    at: Location,
    each: &mut dyn FnMut(Object) -> Result<(), E>,
) -> Result<(), E> {
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
            ))
            .into());
        }
    };
    let (api_version, kind) = header(&map, &at)?;
    if kind.ends_with("List") && map.contains_key("items") {
        if !matches!(map.get("items"), Some(Value::Array(_))) {
            return Err(shape(format!("{kind}: items must be a list")).into());
        }
        if at.item.is_some() {
            return Err(shape(format!("{kind} nested inside a List")).into());
        }
        let mut map = map;
        let Some(Value::Array(items)) = map.remove("items") else {
            return Ok(());
        };
        for (i, item) in items.into_iter().enumerate() {
            let item_at = Location {
                item: Some(i),
                ..at.clone()
            };
            collect(item, item_at, each)?;
        }
        return Ok(());
    }
    match map.get("metadata") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return Err(shape(format!("{kind}: metadata must be a mapping")).into()),
    }
    each(Object {
        at,
        api_version,
        kind,
        value: Value::Object(map),
    })
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
mod tests;
