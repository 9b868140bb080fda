//! PEM text from DER and the first block of a PEM file, through the `pem`
//! crate (base64 and framing are not ours to write). Used where the hub
//! and the agent make PEM themselves: the hub CA found by its pin while
//! joining, the serving chain that ends with the hub CA.

/// Why PEM text cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("not valid PEM: {0}")]
pub struct PemError(#[from] ::pem::PemError);

/// Result alias of this module.
pub type Result<T> = std::result::Result<T, PemError>;

/// `der` as one PEM block labelled `label` (64-character lines, `\n`
/// line endings, as rcgen and openssl write them).
pub fn encode(label: &str, der: &[u8]) -> String {
    ::pem::encode_config(
        &::pem::Pem::new(label, der),
        ::pem::EncodeConfig::new().set_line_ending(::pem::LineEnding::LF),
    )
}

/// The first block of `text`, written again by [`encode`].
pub fn first_block(text: &str) -> Result<String> {
    let block = ::pem::parse(text)?;
    Ok(encode(block.tag(), block.contents()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_and_first_block_round_trip() {
        // (DER, PEM): lengths 0-3 mod 3 exercise the padding; 49 bytes
        // wrap after 64 characters.
        let cases: &[(&[u8], &str)] = &[
            (b"", "-----BEGIN X-----\n-----END X-----\n"),
            (b"a", "-----BEGIN X-----\nYQ==\n-----END X-----\n"),
            (b"ab", "-----BEGIN X-----\nYWI=\n-----END X-----\n"),
            (b"abc", "-----BEGIN X-----\nYWJj\n-----END X-----\n"),
            (
                &[0u8; 49],
                "-----BEGIN X-----\n\
                 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n\
                 AA==\n-----END X-----\n",
            ),
        ];
        for (der, want) in cases {
            assert_eq!(encode("X", der), *want, "{der:?}");
            let two = format!("{want}{}", encode("Y", b"other"));
            assert_eq!(first_block(&two).unwrap(), *want);
        }
    }

    #[test]
    fn bad_pem_says_why() {
        for bad in ["", "nope", "-----BEGIN X-----\n!!!\n-----END X-----\n"] {
            let e = first_block(bad).unwrap_err().to_string();
            assert!(e.starts_with("not valid PEM: "), "{bad:?}: {e}");
        }
    }
}
