//! Join tokens and the hub CA pin (spec section 7), shared by the hub
//! (which checks them), `gwhubctl join create` (which makes them) and the
//! agent (which presents the token and pins the CA). A token is
//! `<id>.<secret>` as kubeadm's bootstrap tokens are: the id names the
//! Secret `gwhub-join-<id>` that records it, the secret is only stored as
//! its SHA-256. The CA pin is `sha256:<hex>` of the CA certificate's
//! SubjectPublicKeyInfo (kubeadm's `--discovery-token-ca-cert-hash`).

use x509_parser::prelude::{FromDer, X509Certificate};

/// The prefix of a join token's Secret name.
pub(crate) const SECRET_PREFIX: &str = "gwhub-join-";
/// The label every join token's Secret carries.
pub const TOKEN_LABEL: &str = "gwhub.io/join-token";
const ID_LEN: usize = 6;
const SECRET_LEN: usize = 16;
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JoinError {
    #[error(
        "not a join token: expected <id>.<secret> ({ID_LEN} and {SECRET_LEN} lowercase letters or digits)"
    )]
    Token,
    #[error("not a CA hash: expected sha256:<64 hex digits>")]
    Pin,
    #[error("not a valid X.509 certificate: {0}")]
    Certificate(String),
    #[error("no secure random numbers: {0}")]
    Random(String),
}

/// A join token, parsed. Its `Debug` leaves out the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    pub id: String,
    secret: String,
}

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinToken")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

fn word_ok(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| ALPHABET.contains(&b))
}

fn random_word(rng: &ring::rand::SystemRandom, len: usize) -> Result<String, JoinError> {
    use ring::rand::SecureRandom;
    let mut bytes = vec![0u8; len];
    rng.fill(&mut bytes)
        .map_err(|e| JoinError::Random(e.to_string()))?;
    // 252 = 7 * 36: rejection sampling keeps every character equally likely.
    let mut out = String::with_capacity(len);
    let mut i = 0;
    while out.len() < len {
        if i == bytes.len() {
            rng.fill(&mut bytes)
                .map_err(|e| JoinError::Random(e.to_string()))?;
            i = 0;
        }
        let b = bytes[i];
        i += 1;
        if b < 252 {
            out.push(ALPHABET[usize::from(b) % ALPHABET.len()] as char);
        }
    }
    Ok(out)
}

impl JoinToken {
    /// A new random token.
    pub fn generate() -> Result<JoinToken, JoinError> {
        let rng = ring::rand::SystemRandom::new();
        Ok(JoinToken {
            id: random_word(&rng, ID_LEN)?,
            secret: random_word(&rng, SECRET_LEN)?,
        })
    }

    /// `<id>.<secret>` (surrounding whitespace, e.g. a file's newline, is ignored).
    pub fn parse(s: &str) -> Result<JoinToken, JoinError> {
        let (id, secret) = s.trim().split_once('.').ok_or(JoinError::Token)?;
        if !word_ok(id, ID_LEN) || !word_ok(secret, SECRET_LEN) {
            return Err(JoinError::Token);
        }
        Ok(JoinToken {
            id: id.to_owned(),
            secret: secret.to_owned(),
        })
    }

    /// The token as the agent presents it.
    pub fn reveal(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// The name of the Secret that records this token.
    pub fn secret_name(&self) -> String {
        format!("{SECRET_PREFIX}{}", self.id)
    }

    /// The stored hash of the secret part (hex SHA-256).
    pub fn hash(&self) -> String {
        hex(ring::digest::digest(&ring::digest::SHA256, self.secret.as_bytes()).as_ref())
    }

    /// Whether `stored` is this token's hash, compared in constant time.
    pub fn matches(&self, stored: &str) -> bool {
        let mine = self.hash();
        let (a, b) = (mine.as_bytes(), stored.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex SHA-256 of a DER SubjectPublicKeyInfo: names a key (a tokenless
/// join's CertificateSigningRequest) without revealing anything.
pub fn key_hash(spki_der: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, spki_der).as_ref())
}

/// `sha256:<hex>` of a DER certificate's SubjectPublicKeyInfo.
pub fn ca_pin_der(der: &[u8]) -> Result<String, JoinError> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| JoinError::Certificate(e.to_string()))?;
    let spki = cert.tbs_certificate.subject_pki.raw;
    Ok(format!(
        "sha256:{}",
        hex(ring::digest::digest(&ring::digest::SHA256, spki).as_ref())
    ))
}

/// [`ca_pin_der`] of the first certificate in `pem`.
pub fn ca_pin_pem(pem: &[u8]) -> Result<String, JoinError> {
    let (_, block) =
        x509_parser::pem::parse_x509_pem(pem).map_err(|e| JoinError::Certificate(e.to_string()))?;
    ca_pin_der(&block.contents)
}

/// A `--hub-ca-hash`, normalised to lowercase.
pub fn parse_pin(s: &str) -> Result<String, JoinError> {
    let hexpart = s.trim().strip_prefix("sha256:").ok_or(JoinError::Pin)?;
    if hexpart.len() != 64 || !hexpart.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(JoinError::Pin);
    }
    Ok(format!("sha256:{}", hexpart.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_only_the_hash_matches() {
        let t = JoinToken::generate().unwrap();
        let shown = t.reveal();
        assert_eq!(shown.len(), ID_LEN + 1 + SECRET_LEN);
        let back = JoinToken::parse(&format!("{shown}\n")).unwrap();
        assert_eq!(back, t);
        assert!(back.matches(&t.hash()));
        assert_eq!(t.hash().len(), 64);
        assert!(!t.hash().contains(&shown[ID_LEN + 1..]));
        let other = JoinToken::generate().unwrap();
        assert!(!other.matches(&t.hash()));
        assert!(!t.matches(""));
        assert_eq!(t.secret_name(), format!("gwhub-join-{}", t.id));
        assert!(!format!("{t:?}").contains(&shown[ID_LEN + 1..]));
    }

    #[test]
    fn malformed_tokens_and_pins_are_refused() {
        for bad in [
            "",
            "abcdef",
            "abcdef.",
            "ABCDEF.0123456789abcdef",
            "abcde.0123456789abcdef",
            "abcdef.0123456789abcde",
            "abcdef.0123456789abcde!",
        ] {
            assert_eq!(JoinToken::parse(bad), Err(JoinError::Token), "{bad:?}");
        }
        let good = format!("sha256:{}", "A".repeat(64));
        assert_eq!(
            parse_pin(&good).unwrap(),
            format!("sha256:{}", "a".repeat(64))
        );
        for bad in [
            "",
            "sha256:",
            "md5:00",
            &format!("sha256:{}", "g".repeat(64)),
        ] {
            assert_eq!(parse_pin(bad), Err(JoinError::Pin), "{bad:?}");
        }
        assert!(ca_pin_der(b"junk").is_err());
    }
}
