//! The TSIG key the updates are signed with, and where it comes from.
//!
//! `--dns-tsig-secret-file` holds either the bare base64 secret (a
//! Kubernetes Secret's value) or a whole `key "name" { ... };` clause as
//! `tsig-keygen` prints it; `--dns-tsig-key-name` and
//! `--dns-tsig-algorithm` name the rest. A rotated Secret must be picked up
//! without a restart, so [`KeySource`] reads the file again each time a
//! message is signed (a file of a hundred bytes, read a few times a second
//! at most: cheaper than any watch, and it sees a `..data` symlink swap the
//! same as an in-place rewrite). A file that no longer parses keeps the
//! last good key in use and is reported, once per bad content.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use hickory_proto::rr::Name;
use hickory_proto::rr::TSigner;
use hickory_proto::rr::rdata::tsig::TsigAlgorithm;

/// The fudge put in each signature: how far apart the hub's and the
/// server's clocks may be (RFC 8945 recommends 300 s).
const FUDGE_SECS: u16 = 300;

/// A TSIG HMAC algorithm the signer implements (hickory has no HMAC-SHA1
/// signer, and the truncated variants are not accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// `hmac-sha256`, the default (`tsig-keygen`'s too).
    #[default]
    HmacSha256,
    /// `hmac-sha384`.
    HmacSha384,
    /// `hmac-sha512`.
    HmacSha512,
}

impl Algorithm {
    /// The name as BIND, Knot and RFC 8945 spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::HmacSha256 => "hmac-sha256",
            Algorithm::HmacSha384 => "hmac-sha384",
            Algorithm::HmacSha512 => "hmac-sha512",
        }
    }

    fn tsig(self) -> TsigAlgorithm {
        match self {
            Algorithm::HmacSha256 => TsigAlgorithm::HmacSha256,
            Algorithm::HmacSha384 => TsigAlgorithm::HmacSha384,
            Algorithm::HmacSha512 => TsigAlgorithm::HmacSha512,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Algorithm {
    type Err = KeyError;

    /// Case-insensitive, with or without the trailing dot of the wire name.
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let lower = s.trim().trim_end_matches('.').to_ascii_lowercase();
        match lower.as_str() {
            "hmac-sha256" => Ok(Algorithm::HmacSha256),
            "hmac-sha384" => Ok(Algorithm::HmacSha384),
            "hmac-sha512" => Ok(Algorithm::HmacSha512),
            _ => Err(KeyError::Algorithm(s.to_owned())),
        }
    }
}

/// Why a TSIG key could not be had. Each names the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read (missing, unreadable).
    #[error("TSIG secret file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// The file holds nothing but whitespace, or the clause's secret is "".
    #[error("TSIG secret file {path}: the secret is empty")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The secret is not base64.
    #[error("TSIG secret file {path}: the secret is not base64 ({detail})")]
    NotBase64 {
        /// The file.
        path: PathBuf,
        /// What the decoder said.
        detail: String,
    },
    /// A `key { ... };` clause that does not parse, or has no secret.
    #[error("TSIG secret file {path}: {problem}")]
    Clause {
        /// The file.
        path: PathBuf,
        /// What is wrong with the clause.
        problem: ClauseError,
    },
    /// The file's clause and the flags disagree on the key's name or algorithm.
    #[error(
        "TSIG secret file {path}: its key clause says {what} {file:?}, but {flag} says {configured:?}"
    )]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// `name` or `algorithm`.
        what: &'static str,
        /// The flag that says otherwise.
        flag: &'static str,
        /// What the file says.
        file: String,
        /// What the flag says.
        configured: String,
    },
    /// A bare secret, and no `--dns-tsig-key-name` to name it.
    #[error("TSIG secret file {path} holds a bare secret: --dns-tsig-key-name must name the key")]
    NoName {
        /// The file.
        path: PathBuf,
    },
    /// An algorithm other than hmac-sha256, hmac-sha384 or hmac-sha512.
    #[error("TSIG algorithm {0:?} is not supported (hmac-sha256, hmac-sha384 or hmac-sha512)")]
    Algorithm(String),
    /// A key name that is not a DNS name.
    #[error("TSIG key name {name:?} is not a DNS name: {detail}")]
    Name {
        /// The name given.
        name: String,
        /// What the parser said.
        detail: String,
    },
}

/// What is wrong with a `key "name" { ... };` clause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClauseError {
    #[error("expected a key clause: key \"name\" {{ ... }};")]
    NotAClause,
    #[error("the key clause has no name")]
    NoName,
    #[error("key clause {0:?}: expected '{{' after the name")]
    NoOpenBrace(String),
    #[error("key clause {name:?}: {field} has no value")]
    NoValue { name: String, field: &'static str },
    #[error("key clause {name:?}: expected ';' after {field}")]
    NoSemicolon { name: String, field: &'static str },
    #[error("key clause {name:?}: unexpected {found:?} (only algorithm and secret)")]
    Unexpected { name: String, found: String },
    #[error("key clause {0:?} is not closed with '}};'")]
    NotClosed(String),
    #[error("more than one clause: the file must hold one key")]
    MoreThanOne,
    #[error("key clause {0:?}: expected ';' after '}}'")]
    NoFinalSemicolon(String),
    #[error("key clause {0:?} has no secret")]
    NoSecret(String),
    #[error("a comment is not closed with */")]
    OpenComment,
    #[error("a quoted string is not closed")]
    OpenQuote,
}

/// A TSIG key: its name, algorithm and secret. Its `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct TsigKey {
    name: Name,
    algorithm: Algorithm,
    secret: Vec<u8>,
}

impl fmt::Debug for TsigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TsigKey")
            .field("name", &self.name())
            .field("algorithm", &self.algorithm)
            .field("secret", &"<hidden>")
            .finish()
    }
}

impl TsigKey {
    /// A key from its parts; the name must be a DNS name.
    pub fn new(name: &str, algorithm: Algorithm, secret: Vec<u8>) -> Result<Self, KeyError> {
        let mut parsed = Name::from_ascii(name).map_err(|e| KeyError::Name {
            name: name.to_owned(),
            detail: e.to_string(),
        })?;
        parsed.set_fqdn(true);
        Ok(TsigKey {
            name: parsed,
            algorithm,
            secret,
        })
    }

    /// Reads a key file (see [`TsigKey::parse`]).
    pub fn from_file(
        path: &Path,
        name: Option<&str>,
        algorithm: Option<Algorithm>,
    ) -> Result<Self, KeyError> {
        let raw = std::fs::read(path).map_err(|source| KeyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&raw, path, name, algorithm)
    }

    /// Parses a key file's content: the bare base64 secret (whitespace
    /// trimmed), named by `name` and of `algorithm` (default hmac-sha256),
    /// or a `key "name" { algorithm ...; secret "..."; };` clause, whose
    /// name and algorithm must then agree with `name` and `algorithm` where
    /// those are given. `path` only names the file in errors.
    pub fn parse(
        raw: &[u8],
        path: &Path,
        name: Option<&str>,
        algorithm: Option<Algorithm>,
    ) -> Result<Self, KeyError> {
        let text = String::from_utf8_lossy(raw);
        let text = text.trim();
        if text.is_empty() {
            return Err(KeyError::Empty {
                path: path.to_owned(),
            });
        }
        if !is_clause(text) {
            let name = name.ok_or_else(|| KeyError::NoName {
                path: path.to_owned(),
            })?;
            let secret = decode_secret(text, path)?;
            return Self::new(name, algorithm.unwrap_or_default(), secret);
        }
        let clause = Clause::parse(text).map_err(|problem| KeyError::Clause {
            path: path.to_owned(),
            problem,
        })?;
        let file_algorithm = match &clause.algorithm {
            Some(a) => a.parse::<Algorithm>()?,
            None => Algorithm::default(),
        };
        if let Some(configured) = name
            && !same_name(configured, &clause.name)
        {
            return Err(KeyError::Mismatch {
                path: path.to_owned(),
                what: "name",
                flag: "--dns-tsig-key-name",
                file: clause.name,
                configured: configured.to_owned(),
            });
        }
        if let Some(configured) = algorithm
            && configured != file_algorithm
        {
            return Err(KeyError::Mismatch {
                path: path.to_owned(),
                what: "algorithm",
                flag: "--dns-tsig-algorithm",
                file: file_algorithm.to_string(),
                configured: configured.to_string(),
            });
        }
        let secret = clause.secret.ok_or_else(|| KeyError::Clause {
            path: path.to_owned(),
            problem: ClauseError::NoSecret(clause.name.clone()),
        })?;
        let secret = decode_secret(&secret, path)?;
        Self::new(&clause.name, file_algorithm, secret)
    }

    /// The key's name as a DNS name, without the trailing dot.
    pub fn name(&self) -> String {
        self.name.to_ascii().trim_end_matches('.').to_owned()
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub(crate) fn signer(&self) -> Result<TSigner, hickory_proto::dnssec::DnsSecError> {
        TSigner::new(
            self.secret.clone(),
            self.algorithm.tsig(),
            self.name.clone(),
            FUDGE_SECS,
        )
    }
}

fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

fn decode_secret(text: &str, path: &Path) -> Result<Vec<u8>, KeyError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(KeyError::Empty {
            path: path.to_owned(),
        });
    }
    let secret = STANDARD
        .decode(text)
        .or_else(|e| STANDARD_NO_PAD.decode(text).map_err(|_| e))
        .map_err(|e| KeyError::NotBase64 {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    if secret.is_empty() {
        return Err(KeyError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(secret)
}

/// Whether the text is meant as a `key ... { ... };` clause rather than a
/// bare secret (base64 has no braces, and no word `key` before a space).
fn is_clause(text: &str) -> bool {
    text.contains('{') || text.starts_with("key ") || text.starts_with("key\"")
}

/// A `key "name" { algorithm a; secret "s"; };` clause, as BIND's
/// `tsig-keygen` and `ddns-confgen` print it (comments allowed).
struct Clause {
    name: String,
    algorithm: Option<String>,
    secret: Option<String>,
}

impl Clause {
    fn parse(text: &str) -> Result<Clause, ClauseError> {
        let tokens = tokenize(text)?;
        let mut it = tokens.iter().map(String::as_str);
        if it.next() != Some("key") {
            return Err(ClauseError::NotAClause);
        }
        let name = match it.next() {
            Some(n) if !matches!(n, "{" | "}" | ";") => n.to_owned(),
            _ => return Err(ClauseError::NoName),
        };
        if it.next() != Some("{") {
            return Err(ClauseError::NoOpenBrace(name));
        }
        let mut algorithm = None;
        let mut secret = None;
        loop {
            match it.next() {
                Some("}") => break,
                Some(word @ ("algorithm" | "secret")) => {
                    let field = if word == "algorithm" {
                        "algorithm"
                    } else {
                        "secret"
                    };
                    let value = match it.next() {
                        Some(v) if !matches!(v, "{" | "}" | ";") => v.to_owned(),
                        _ => return Err(ClauseError::NoValue { name, field }),
                    };
                    if it.next() != Some(";") {
                        return Err(ClauseError::NoSemicolon { name, field });
                    }
                    if field == "algorithm" {
                        algorithm = Some(value);
                    } else {
                        secret = Some(value);
                    }
                }
                Some(other) => {
                    return Err(ClauseError::Unexpected {
                        name,
                        found: other.to_owned(),
                    });
                }
                None => return Err(ClauseError::NotClosed(name)),
            }
        }
        match (it.next(), it.next()) {
            (Some(";"), None) => Ok(Clause {
                name,
                algorithm,
                secret,
            }),
            (Some(";"), Some(_)) => Err(ClauseError::MoreThanOne),
            _ => Err(ClauseError::NoFinalSemicolon(name)),
        }
    }
}

/// Words, quoted strings (quotes removed), and `{`, `}`, `;`; comments
/// (`#`, `//` to the end of the line, `/* ... */`) dropped.
fn tokenize(text: &str) -> Result<Vec<String>, ClauseError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '{' | '}' | ';' => tokens.push(c.to_string()),
            '#' => skip_line(&mut chars),
            '/' if chars.peek() == Some(&'/') => skip_line(&mut chars),
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                loop {
                    match chars.next() {
                        Some('/') if prev == '*' => break,
                        Some(c) => prev = c,
                        None => return Err(ClauseError::OpenComment),
                    }
                }
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some(c) => s.push(c),
                        None => return Err(ClauseError::OpenQuote),
                    }
                }
                tokens.push(s);
            }
            c => {
                let mut s = c.to_string();
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '{' | '}' | ';' | '"') {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                tokens.push(s);
            }
        }
    }
    Ok(tokens)
}

fn skip_line(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if c == '\n' {
            break;
        }
    }
}

/// The key in use and where it comes from: a file read again each time a
/// message is signed ([`KeySource::current`]), or a fixed key. Clones
/// share the state.
#[derive(Clone, Debug)]
pub struct KeySource {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: Option<KeyFile>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct KeyFile {
    path: PathBuf,
    name: Option<String>,
    algorithm: Option<Algorithm>,
}

#[derive(Debug)]
struct State {
    key: TsigKey,
    /// The file's content that gave `key`.
    raw: Vec<u8>,
    /// The content (or read error) last found unusable, and why.
    bad: Option<(Result<Vec<u8>, String>, String)>,
}

impl KeySource {
    /// Reads `path` now (an error if it does not give a key) and again each
    /// time [`KeySource::current`] is asked. `name` and `algorithm` are the
    /// flags' `--dns-tsig-key-name` and `--dns-tsig-algorithm`, if given.
    pub fn file(
        path: impl Into<PathBuf>,
        name: Option<&str>,
        algorithm: Option<Algorithm>,
    ) -> Result<Self, KeyError> {
        let path = path.into();
        let raw = std::fs::read(&path).map_err(|source| KeyError::Read {
            path: path.clone(),
            source,
        })?;
        let key = TsigKey::parse(&raw, &path, name, algorithm)?;
        Ok(KeySource {
            inner: Arc::new(Inner {
                file: Some(KeyFile {
                    path,
                    name: name.map(str::to_owned),
                    algorithm,
                }),
                state: Mutex::new(State {
                    key,
                    raw,
                    bad: None,
                }),
            }),
        })
    }

    /// Always `key`.
    pub fn fixed(key: TsigKey) -> Self {
        KeySource {
            inner: Arc::new(Inner {
                file: None,
                state: Mutex::new(State {
                    key,
                    raw: Vec::new(),
                    bad: None,
                }),
            }),
        }
    }

    /// The key to sign with now: the file's, read again; if it no longer
    /// gives a key, the last good one (the problem is logged once per bad
    /// content and kept for [`KeySource::reload_error`]).
    pub fn current(&self) -> TsigKey {
        let mut state = match self.inner.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let Some(file) = &self.inner.file else {
            return state.key.clone();
        };
        let read = std::fs::read(&file.path);
        let outcome = match &read {
            Ok(raw) if *raw == state.raw => return state.key.clone(),
            Ok(raw) => TsigKey::parse(raw, &file.path, file.name.as_deref(), file.algorithm),
            Err(e) => Err(KeyError::Read {
                path: file.path.clone(),
                source: std::io::Error::new(e.kind(), e.to_string()),
            }),
        };
        let seen = read.map_err(|e| e.to_string());
        match outcome {
            Ok(key) => {
                if key != state.key {
                    tracing::info!(
                        path = %file.path.display(),
                        key = %key.name(),
                        algorithm = %key.algorithm(),
                        "TSIG key file changed: signing with the new key"
                    );
                }
                state.key = key;
                state.raw = seen.unwrap_or_default();
                state.bad = None;
            }
            Err(e) => {
                let again = state.bad.as_ref().is_some_and(|(b, _)| *b == seen);
                if !again {
                    tracing::warn!(
                        error = %e,
                        key = %state.key.name(),
                        "TSIG key file changed but gives no key: still signing with the last good key"
                    );
                    state.bad = Some((seen, e.to_string()));
                }
            }
        }
        state.key.clone()
    }

    /// Why the file's present content is not in use, if it is not (the last
    /// good key is); `None` once it gives a key again.
    pub fn reload_error(&self) -> Option<String> {
        let state = match self.inner.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        state.bad.as_ref().map(|(_, e)| e.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "bzlFiGsFjRdaSj1ywoiLPtdr9LCYcwbZV0Td+QQB5Mk=";

    fn p() -> &'static Path {
        Path::new("/run/secrets/tsig")
    }

    #[test]
    fn a_bare_secret_is_trimmed_and_named_by_the_flag() {
        let k =
            TsigKey::parse(format!("  {SECRET}\n").as_bytes(), p(), Some("gwhub"), None).unwrap();
        assert_eq!(k.name(), "gwhub");
        assert_eq!(k.algorithm(), Algorithm::HmacSha256);
        assert_eq!(k.secret.len(), 32);
        let k = TsigKey::parse(
            SECRET.as_bytes(),
            p(),
            Some("gwhub."),
            Some(Algorithm::HmacSha512),
        )
        .unwrap();
        assert_eq!(k.algorithm(), Algorithm::HmacSha512);
        assert!(!format!("{k:?}").contains(SECRET), "Debug hides the secret");
    }

    #[test]
    fn a_clause_as_tsig_keygen_prints_it() {
        let text = format!(
            "key \"gwhub-key\" {{\n\talgorithm hmac-sha384;\n\tsecret \"{SECRET}\";\n}};\n"
        );
        let k = TsigKey::parse(text.as_bytes(), p(), None, None).unwrap();
        assert_eq!(k.name(), "gwhub-key");
        assert_eq!(k.algorithm(), Algorithm::HmacSha384);
        // The flags may repeat what the clause says.
        TsigKey::parse(
            text.as_bytes(),
            p(),
            Some("GWHUB-key."),
            Some(Algorithm::HmacSha384),
        )
        .unwrap();
        // Comments and a clause on one line.
        let one = format!(
            "# made by tsig-keygen\nkey gwhub-key {{ secret \"{SECRET}\"; /* default alg */ }}; // end"
        );
        let k = TsigKey::parse(one.as_bytes(), p(), None, None).unwrap();
        assert_eq!(k.algorithm(), Algorithm::HmacSha256);
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let err = |raw: &str, name: Option<&str>, alg: Option<Algorithm>| {
            TsigKey::parse(raw.as_bytes(), p(), name, alg)
                .unwrap_err()
                .to_string()
        };
        let e = err(" \n", Some("k"), None);
        assert!(
            e.contains("/run/secrets/tsig") && e.contains("empty"),
            "{e}"
        );
        let e = err("not base64!", Some("k"), None);
        assert!(
            e.contains("/run/secrets/tsig") && e.contains("not base64"),
            "{e}"
        );
        let e = err(SECRET, None, None);
        assert!(e.contains("--dns-tsig-key-name"), "{e}");
        let e = err("key \"k\" { algorithm hmac-sha256; };", None, None);
        assert!(
            e.contains("/run/secrets/tsig") && e.contains("no secret"),
            "{e}"
        );
        let e = err("key \"k\" { secret \"\"; };", None, None);
        assert!(e.contains("empty"), "{e}");
        let e = err("key \"k\" { secret \"abc", None, None);
        assert!(e.contains("not closed"), "{e}");
        let e = err(
            &format!("key \"k\" {{ algorithm hmac-md5; secret \"{SECRET}\"; }};"),
            None,
            None,
        );
        assert!(e.contains("hmac-md5") && e.contains("not supported"), "{e}");
        let e = err(
            &format!("key \"k\" {{ secret \"{SECRET}\"; }};"),
            Some("other"),
            None,
        );
        assert!(
            e.contains("\"k\"") && e.contains("\"other\"") && e.contains("--dns-tsig-key-name"),
            "{e}"
        );
        let e = err(
            &format!("key \"k\" {{ secret \"{SECRET}\"; }};"),
            None,
            Some(Algorithm::HmacSha512),
        );
        assert!(e.contains("--dns-tsig-algorithm"), "{e}");
        let e = err(
            &format!(
                "key \"a\" {{ secret \"{SECRET}\"; }};\nkey \"b\" {{ secret \"{SECRET}\"; }};"
            ),
            None,
            None,
        );
        assert!(e.contains("more than one"), "{e}");
        let e = TsigKey::from_file(Path::new("/nonexistent/tsig"), Some("k"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/tsig"), "{e}");
        assert!(
            "hmac-sha1"
                .parse::<Algorithm>()
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
        assert_eq!(
            "HMAC-SHA512.".parse::<Algorithm>().unwrap(),
            Algorithm::HmacSha512
        );
    }

    #[test]
    fn the_source_follows_the_file_and_keeps_the_last_good_key() {
        let dir = std::env::temp_dir().join(format!("gwhub-rfc2136-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("secret");
        std::fs::write(&f, SECRET).unwrap();
        let src = KeySource::file(&f, Some("k"), None).unwrap();
        let first = src.current();
        assert_eq!(first.secret.len(), 32);
        std::fs::write(&f, "garbage!").unwrap();
        assert_eq!(src.current(), first, "garbage keeps the old key");
        let e = src.reload_error().unwrap();
        assert!(e.contains("not base64"), "{e}");
        std::fs::remove_file(&f).unwrap();
        assert_eq!(src.current(), first, "a missing file keeps the old key");
        assert!(src.reload_error().unwrap().contains("secret"));
        let other = STANDARD.encode([7u8; 32]);
        std::fs::write(&f, &other).unwrap();
        let second = src.current();
        assert_eq!(second.secret, vec![7u8; 32]);
        assert!(src.reload_error().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
