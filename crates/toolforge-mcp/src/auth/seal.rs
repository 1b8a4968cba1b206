//! Tokens encrypted at rest: XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`) under the
//! operator's 32-byte key, a random 24-byte nonce per record, and the record's place, its
//! (server, principal), as associated data. A record copied to another principal's row, or
//! another server's, does not open: one principal's grant can never be read as another's.

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// The format's first byte: a later format can be told apart.
const VERSION: u8 = 1;
const NONCE: usize = 24;

/// The key tokens are sealed with. Never printed.
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// Why a key or a record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error(
        "the token key must be 32 bytes, written as 64 hex digits or in base64 (got {0} bytes)"
    )]
    KeyLength(usize),
    #[error("a stored token record does not open with this key (another key, or not ours)")]
    Unopenable,
}

impl SealKey {
    /// A key from its text: 64 hex digits, or base64 (standard or URL-safe) of 32 bytes.
    /// Surrounding whitespace (a file's newline) is ignored.
    ///
    /// # Errors
    /// The text is not 32 bytes in either encoding.
    pub fn parse(text: &str) -> Result<Self, SealError> {
        use base64::Engine as _;
        let text = text.trim();
        let bytes = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
            hex::decode(text).map_err(|_| SealError::KeyLength(0))?
        } else {
            let engines = [
                base64::engine::general_purpose::STANDARD,
                base64::engine::general_purpose::URL_SAFE,
            ];
            engines
                .iter()
                .find_map(|e| e.decode(text).ok())
                .or_else(|| {
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .decode(text.trim_end_matches('='))
                        .ok()
                })
                .ok_or(SealError::KeyLength(0))?
        };
        let key: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| SealError::KeyLength(bytes.len()))?;
        Ok(Self(key))
    }

    /// A fresh random key (for tests and for stores that live in memory only).
    #[must_use]
    pub fn random() -> Self {
        Self(XChaCha20Poly1305::generate_key(&mut OsRng).into())
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&self.0.into())
    }
}

/// The associated data of the record at (server, principal).
fn place(server: &str, principal: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(24 + server.len() + principal.len());
    aad.extend_from_slice(b"toolforge-token\0");
    aad.extend_from_slice(&(server.len() as u64).to_be_bytes());
    aad.extend_from_slice(server.as_bytes());
    aad.extend_from_slice(principal.as_bytes());
    aad
}

/// Seals `plain` for the record at (server, principal).
#[must_use]
pub fn seal(key: &SealKey, server: &str, principal: &str, plain: &[u8]) -> Vec<u8> {
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let aad = place(server, principal);
    // Encryption with a fresh nonce and an in-memory buffer cannot fail.
    let sealed = key
        .cipher()
        .encrypt(
            &nonce,
            Payload {
                msg: plain,
                aad: &aad,
            },
        )
        .unwrap_or_default();
    let mut out = Vec::with_capacity(1 + NONCE + sealed.len());
    out.push(VERSION);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    out
}

/// Opens a record sealed for (server, principal).
///
/// # Errors
/// Another key, another place, a changed byte, or not a record of this format.
pub fn open(
    key: &SealKey,
    server: &str,
    principal: &str,
    sealed: &[u8],
) -> Result<Vec<u8>, SealError> {
    if sealed.len() < 1 + NONCE || sealed[0] != VERSION {
        return Err(SealError::Unopenable);
    }
    let nonce = XNonce::from_slice(&sealed[1..=NONCE]);
    let aad = place(server, principal);
    key.cipher()
        .decrypt(
            nonce,
            Payload {
                msg: &sealed[1 + NONCE..],
                aad: &aad,
            },
        )
        .map_err(|_| SealError::Unopenable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_opens_only_at_its_place_with_its_key() {
        let key = SealKey::random();
        let sealed = seal(&key, "github", "alice", b"{\"token\":1}");
        assert_eq!(
            open(&key, "github", "alice", &sealed).unwrap(),
            b"{\"token\":1}"
        );
        assert!(
            !sealed.windows(9).any(|w| w == b"\"token\":1"),
            "not in the clear"
        );
        for (server, principal) in [("github", "bob"), ("gitlab", "alice"), ("githuba", "lice")] {
            assert_eq!(
                open(&key, server, principal, &sealed),
                Err(SealError::Unopenable),
                "{server}/{principal}"
            );
        }
        assert_eq!(
            open(&SealKey::random(), "github", "alice", &sealed),
            Err(SealError::Unopenable)
        );
        let mut changed = sealed.clone();
        let last = changed.len() - 1;
        changed[last] ^= 1;
        assert_eq!(
            open(&key, "github", "alice", &changed),
            Err(SealError::Unopenable)
        );
        assert_ne!(
            seal(&key, "github", "alice", b"x"),
            seal(&key, "github", "alice", b"x")
        );
    }

    #[test]
    fn keys_parse_from_hex_or_base64_of_32_bytes() {
        let hex_key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        assert!(SealKey::parse(&format!("{hex_key}\n")).is_ok());
        assert!(SealKey::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").is_ok());
        assert!(SealKey::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8").is_ok());
        assert_eq!(
            SealKey::parse("c2hvcnQ=").unwrap_err(),
            SealError::KeyLength(5)
        );
        assert!(SealKey::parse("not a key at all!").is_err());
        assert_eq!(format!("{:?}", SealKey::random()), "SealKey(..)");
    }
}
