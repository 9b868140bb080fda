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

use serde::Deserialize;
use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
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

/// A YAML stream, document by document: lines are gathered up to the next
/// document marker (`---` or `...` at column 0, which the YAML spec
/// forbids inside any scalar), then that document alone is parsed. A part
/// with only comments, directives or blank lines joins the next document.
fn parse_yaml<R: Read, E: From<ManifestError>>(
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

/// A JSON stream: the first value through [`Doc`] (a top-level array or a
/// `List`'s items element by element), the values after it one by one.
fn parse_json<R: Read, E: From<ManifestError>>(
    file: &str,
    r: &mut Input<R>,
    each: &mut dyn FnMut(Object) -> Result<(), E>,
) -> Result<(), E> {
    let mut ctx = Ctx {
        file,
        each,
        failed: None,
    };
    let json_error = |r: &Input<R>, e: serde_json::Error, document: usize| {
        r.get_ref().problem(file).unwrap_or(ManifestError::Json {
            path: file.to_owned(),
            message: format!("{e} (document {document})"),
        })
    };
    let first = {
        let mut de = serde_json::Deserializer::from_reader(&mut *r);
        let first = Doc {
            ctx: &mut ctx,
            document: 1,
        }
        .deserialize(&mut de);
        match first {
            Ok(first) => Ok((first, de)),
            Err(e) => Err(e),
        }
    };
    let (first, de) = match first {
        Ok(v) => v,
        Err(e) => {
            if let Some(failed) = ctx.failed.take() {
                return Err(failed);
            }
            return Err(json_error(r, e, 1).into());
        }
    };
    let mut rest = de.into_iter::<Value>();
    let mut document = 1;
    let mut next = rest.next();
    match first {
        // A top-level array is a list of objects, when it is all there is.
        Parsed::Array if next.is_some() => {
            let at = Location {
                file: file.to_owned(),
                document: 1,
                item: None,
            };
            return Err(ManifestError::Shape {
                at: Box::new(at),
                problem: "expected a Kubernetes object, found a list".into(),
            }
            .into());
        }
        Parsed::Array | Parsed::Done => {}
        Parsed::Value(v) => {
            let at = Location {
                file: file.to_owned(),
                document: 1,
                item: None,
            };
            collect(v, at, ctx.each)?;
        }
    }
    while let Some(v) = next {
        let v = match v {
            Ok(v) => v,
            Err(e) => {
                drop(rest);
                return Err(json_error(r, e, document + 1).into());
            }
        };
        document += 1;
        let at = Location {
            file: file.to_owned(),
            document,
            item: None,
        };
        collect(v, at, ctx.each)?;
        next = rest.next();
    }
    drop(rest);
    match r.get_ref().problem(file) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Where a streamed JSON value's objects go, and the first error `each`
/// gave (the parser only carries its own).
struct Ctx<'a, 'f, E> {
    file: &'a str,
    each: &'f mut dyn FnMut(Object) -> Result<(), E>,
    failed: Option<E>,
}

impl<E: From<ManifestError>> Ctx<'_, '_, E> {
    /// Collects `v`; an error is kept here and the parser told to stop.
    fn collect<X: serde::de::Error>(&mut self, v: Value, at: Location) -> Result<(), X> {
        collect(v, at, self.each).map_err(|e| {
            self.failed = Some(e);
            X::custom("stopped")
        })
    }

    fn fail<X: serde::de::Error>(&mut self, e: ManifestError) -> X {
        self.failed = Some(e.into());
        X::custom("stopped")
    }
}

/// What the first JSON value was, once its objects were handed on.
enum Parsed {
    /// A top-level array, each element handed on as a document.
    Array,
    /// An object, handed on (a `List`'s items one by one).
    Done,
    /// Anything else, for the caller to refuse.
    Value(Value),
}

/// The first JSON value of a file.
struct Doc<'c, 'a, 'f, E> {
    ctx: &'c mut Ctx<'a, 'f, E>,
    document: usize,
}

impl<'de, E: From<ManifestError>> DeserializeSeed<'de> for Doc<'_, '_, '_, E> {
    type Value = Parsed;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, E: From<ManifestError>> Visitor<'de> for Doc<'_, '_, '_, E> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object or a list of them")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let mut i = 0;
        while let Some(v) = seq.next_element::<Value>()? {
            i += 1;
            let at = Location {
                file: self.ctx.file.to_owned(),
                document: i,
                item: None,
            };
            self.ctx.collect(v, at)?;
        }
        Ok(Parsed::Array)
    }

    /// An object; a `List`'s items are handed on as they are read. Which
    /// kind it is may come after its items (kubectl writes `apiVersion`,
    /// `items`, `kind`), so items are streamed unless a kind that is not
    /// a List came first, and a non-List kind after them is refused.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let at = Location {
            file: self.ctx.file.to_owned(),
            document: self.document,
            item: None,
        };
        let mut fields = serde_json::Map::new();
        let mut streamed = false;
        while let Some(key) = map.next_key::<String>()? {
            let list_so_far = fields
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(|k| k.ends_with("List"));
            if key == "items" && !streamed && !fields.contains_key("items") && list_so_far {
                match map.next_value_seed(Items {
                    ctx: &mut *self.ctx,
                    at: at.clone(),
                })? {
                    Some(other) => {
                        fields.insert(key, other);
                    }
                    None => streamed = true,
                }
            } else {
                let v: Value = map.next_value()?;
                fields.insert(key, v);
            }
        }
        if !streamed {
            self.ctx.collect(Value::Object(fields), at)?;
            return Ok(Parsed::Done);
        }
        // Its items were handed on: what collect checks of a List.
        let (_, kind) = header(&fields, &at).map_err(|e| self.ctx.fail(e))?;
        if !kind.ends_with("List") {
            let problem = format!("{kind}: items are only read in a List (a kind ending in List)");
            return Err(self.ctx.fail(ManifestError::Shape {
                at: Box::new(at),
                problem,
            }));
        }
        Ok(Parsed::Done)
    }

    fn visit_bool<X>(self, v: bool) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::Bool(v)))
    }

    fn visit_i64<X>(self, v: i64) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_u64<X>(self, v: u64) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_f64<X>(self, v: f64) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_str<X>(self, v: &str) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_unit<X>(self) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::Null))
    }
}

/// A JSON `List`'s `items`, each handed on as it is read; `Some` (the
/// value) when it is not an array.
struct Items<'c, 'a, 'f, E> {
    ctx: &'c mut Ctx<'a, 'f, E>,
    at: Location,
}

impl<'de, E: From<ManifestError>> DeserializeSeed<'de> for Items<'_, '_, '_, E> {
    type Value = Option<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, E: From<ManifestError>> Visitor<'de> for Items<'_, '_, '_, E> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of Kubernetes objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        let mut i = 0;
        while let Some(v) = seq.next_element::<Value>()? {
            let at = Location {
                item: Some(i),
                ..self.at.clone()
            };
            self.ctx.collect(v, at)?;
            i += 1;
        }
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<Value>, A::Error> {
        Value::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
    }

    fn visit_bool<X>(self, v: bool) -> Result<Option<Value>, X> {
        Ok(Some(Value::Bool(v)))
    }

    fn visit_i64<X>(self, v: i64) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_u64<X>(self, v: u64) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_f64<X>(self, v: f64) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_str<X>(self, v: &str) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_unit<X>(self) -> Result<Option<Value>, X> {
        Ok(Some(Value::Null))
    }
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

    /// The old reader: the whole text through one YAML parser.
    fn whole_text(file: &str, text: &str) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (i, de) in serde_norway::Deserializer::from_str(text).enumerate() {
            let v = Value::deserialize(de).unwrap();
            let at = Location {
                file: file.to_owned(),
                document: i + 1,
                item: None,
            };
            collect(v, at, &mut |o: Object| {
                out.push((o.at.to_string(), o.value));
                Ok::<_, ManifestError>(())
            })
            .unwrap();
        }
        out
    }

    fn streamed(file: &str, text: &str) -> Vec<(String, Value)> {
        parse_str(file, text)
            .unwrap()
            .into_iter()
            .map(|o| (o.at.to_string(), o.value))
            .collect()
    }

    #[test]
    fn yaml_document_by_document_reads_what_the_whole_text_does() {
        let cm = |i: usize| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\ndata:\n  script: |\n    ---not a marker\n     --- nor this\n  q: \"a\n    --- b\"\n  'k': '...x'\n"
            )
        };
        let mut text = String::from("\u{feff}# leading comment\n\n%YAML 1.2\n---\n");
        for i in 0..300 {
            text.push_str(&cm(i));
            text.push_str(match i % 5 {
                0 => "---\n",
                1 => "--- # marker with a comment\n",
                2 => "...\n# between\n---\n",
                3 => "---\n---\n",
                _ => "---\t\n",
            });
        }
        text.push_str("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Event, metadata: {name: e}}\n---\n");
        text.push_str("--- {apiVersion: v1, kind: Service, metadata: {name: flow}}\n...\n");
        let want = whole_text("m.yaml", &text);
        assert_eq!(want.len(), 302);
        assert_eq!(streamed("m.yaml", &text), want);
        // An error's line is the file's, not the document's.
        let bad = format!("{}{}", cm(0), "---\napiVersion: v1\nkind: [unclosed\n");
        let whole = serde_norway::Deserializer::from_str(&bad)
            .map(|de| Value::deserialize(de).map(|_| ()))
            .find_map(Result::err)
            .unwrap()
            .to_string();
        let e = parse_str("bad.yaml", &bad).unwrap_err().to_string();
        assert_eq!(e, format!("bad.yaml: invalid YAML: {whole} (document 2)"));
        assert!(e.contains("at line 14 column 7"), "{e}");
        // Nesting is still bounded, at the file's offset.
        let deep = format!("{}---\na: {}\n", cm(0), "[".repeat(200));
        match parse_str("deep.yaml", &deep).unwrap_err() {
            ManifestError::TooDeep { offset, .. } => {
                assert_eq!(offset, deep.find('[').unwrap() + MAX_NESTING)
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn json_arrays_and_lists_element_by_element() {
        let svc = |i: usize| {
            format!(r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"s{i}"}}}}"#)
        };
        let items: Vec<String> = (0..50).map(svc).collect();
        let array = format!("\n  [{}]\n", items.join(","));
        let objs = parse_str("a.json", &array).unwrap();
        assert_eq!(objs.len(), 50);
        assert_eq!(objs[49].at.to_string(), "a.json: document 50");
        // kubectl's order: items before kind.
        let list = format!(
            r#"{{"apiVersion":"v1","items":[{}],"kind":"List","metadata":{{}}}}
            {}"#,
            items.join(","),
            svc(99)
        );
        let objs = parse_str("l.json", &list).unwrap();
        assert_eq!(objs.len(), 51);
        assert_eq!(objs[3].at.to_string(), "l.json: document 1, items[3]");
        assert_eq!(objs[50].at.to_string(), "l.json: document 2");
        // An object with items of its own is refused when its kind is not
        // a List (kind after items), kept as is when the kind came first.
        let e = parse_str("x.json", r#"{"apiVersion":"v1","items":[],"kind":"Thing"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "x.json: document 1: Thing: items are only read in a List (a kind ending in List)"
        );
        let objs = parse_str(
            "y.json",
            r#"{"apiVersion":"v1","kind":"Thing","items":[1]}"#,
        )
        .unwrap();
        assert_eq!(objs[0].value["items"], serde_json::json!([1]));
        let e = parse_str("z.json", r#"{"apiVersion":"v1","items":[]}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "z.json: document 1: object has no kind");
        let e = parse_str("n.json", r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"List","items":[]}]}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "n.json: document 1, items[0]: List nested inside a List");
        // An array is a list of objects only when it is all there is.
        let e = parse_str("t.json", &format!("[{}] {}", svc(1), svc(2)))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "t.json: document 1: expected a Kubernetes object, found a list"
        );
        let e = parse_str("u.json", &format!("{} [{}]", svc(1), svc(2)))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "u.json: document 2: expected a Kubernetes object, found a list"
        );
    }

    /// A reader that hands out `parts` one per read and counts reads.
    struct Parts {
        parts: std::collections::VecDeque<Vec<u8>>,
        reads: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl Read for Parts {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some(mut part) = self.parts.pop_front() else {
                return Ok(0);
            };
            self.reads.set(self.reads.get() + 1);
            let n = part.len().min(buf.len());
            buf[..n].copy_from_slice(&part[..n]);
            if n < part.len() {
                self.parts.push_front(part.split_off(n));
            }
            Ok(n)
        }
    }

    /// Memory follows the largest document, not the input: the first
    /// object is handed on long before the reader is exhausted.
    #[test]
    fn objects_are_handed_on_before_the_input_ends() {
        let big = "x".repeat(20_000);
        let svc = |i: usize| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"s{i}","annotations":{{"a":"{big}"}}}}}}"#
            )
        };
        let yaml_doc = |i: usize| {
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: s{i}\n  annotations:\n    a: {big}\n---\n"
            )
        };
        let inputs: Vec<(&str, Vec<String>)> = vec![
            ("y.yaml", (0..100).map(yaml_doc).collect()),
            ("s.json", (0..100).map(|i| svc(i) + "\n").collect()),
            ("a.json", {
                let mut p: Vec<String> = (0..100).map(|i| svc(i) + ",").collect();
                p[0].insert(0, '[');
                p[99] = svc(99) + "]";
                p
            }),
            ("l.json", {
                let mut p: Vec<String> = (0..100).map(|i| svc(i) + ",").collect();
                p[0].insert_str(0, r#"{"apiVersion":"v1","items":["#);
                p[99] = svc(99) + r#"],"kind":"List"}"#;
                p
            }),
        ];
        for (file, parts) in inputs {
            let reads = std::rc::Rc::new(std::cell::Cell::new(0));
            let reader = Parts {
                parts: parts.iter().map(|p| p.clone().into_bytes()).collect(),
                reads: reads.clone(),
            };
            let mut at_first = None;
            let mut names = Vec::new();
            parse_reader(file, reader, &mut |o: Object| {
                at_first.get_or_insert(reads.get());
                names.push(o.name());
                Ok::<_, ManifestError>(())
            })
            .unwrap();
            assert_eq!(names.len(), 100, "{file}");
            assert_eq!(names[99], "s99", "{file}");
            let at_first = at_first.unwrap();
            assert!(
                at_first < 10 && reads.get() >= 100,
                "{file}: first object after {at_first} of {} reads",
                reads.get()
            );
        }
        // The reader's own errors stop it where they are.
        let reads = std::rc::Rc::new(std::cell::Cell::new(0));
        let reader = Parts {
            parts: vec![
                yaml_doc(0).into_bytes(),
                b"kind: [unclosed\n".to_vec(),
                yaml_doc(1).into_bytes(),
            ]
            .into(),
            reads: reads.clone(),
        };
        let mut seen = 0;
        let e = parse_reader("e.yaml", reader, &mut |_| {
            seen += 1;
            Ok::<_, ManifestError>(())
        })
        .unwrap_err();
        assert_eq!(seen, 1);
        assert!(e.to_string().starts_with("e.yaml: invalid YAML"), "{e}");
    }

    #[test]
    fn missing_file() {
        let e = read_paths(&["/nonexistent/gw.yaml"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/gw.yaml: cannot read:"), "{e}");
    }
}
