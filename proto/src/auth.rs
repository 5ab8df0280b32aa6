//! Who may talk to whom: the messages and proofs of the handshake that opens every
//! connection (a node's or a CLI client's control link to the coordinator, a data link
//! between neighbours), before a single other byte is read.
//!
//! The shared secret never travels. Each side sends a fresh random nonce and proves it
//! holds the key with a keyed BLAKE3 MAC over the whole exchange (the initiator's hello,
//! which carries its nonce, and the acceptor's nonce), with a different label for each
//! side so that one side's proof can never be replayed as the other's. The acceptor
//! proves first, so an initiator never hands its proof to a party that could not prove
//! the key (a node refuses a coordinator that does not know the token). Proofs are
//! compared in constant time (`blake3::Hash`'s equality). This is the challenge-response
//! of CHAP (RFC 1994) made mutual, as etcd, Consul and Ray authenticate peers with a
//! shared secret before anything else.
//!
//! Control links are keyed by the cluster key, derived from the token. A data link is
//! keyed by a random key the coordinator made for that one link of that one wiring epoch
//! and handed only to its two ends ([`crate::control::Wiring`]), so the slot of a link
//! can be taken by nobody but the node wired to it.
//!
//! Every message here is small: the reader refuses a length prefix over
//! [`MAX_HANDSHAKE_MESSAGE`] before reading its body, so nothing a stranger sends before
//! it is authenticated costs more than a few KiB.

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::topology::NodeId;

/// The most a handshake message may hold: anything longer is a stranger talking.
pub const MAX_HANDSHAKE_MESSAGE: usize = 4096;

/// How a refusal that may pass if tried again begins: the acceptor had too many
/// connections in their handshake and dropped this one for a newer one.
pub const BUSY: &str = "busy: ";

/// Whether a refusal's reason says the other side was busy (so trying again may pass).
pub fn is_busy(reason: &str) -> bool {
    reason.starts_with(BUSY)
}

/// The longest node name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// The longest data address accepted (`host:port`), in bytes.
pub const MAX_ADDRESS_LEN: usize = 256;

/// A fresh random number, one from each side of every handshake.
pub type Nonce = [u8; 32];

/// A MAC that proves the key over one exchange.
pub type Proof = [u8; 32];

/// A 256-bit secret: the cluster key (from the token) or a data link's key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Which side of a handshake made a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The party that opened the connection (node, CLI client, dialling neighbour).
    Initiator,
    /// The party that accepted it (coordinator, admitting neighbour).
    Acceptor,
}

impl Key {
    /// The cluster key of `token` (BLAKE3's key derivation, so that the token itself is
    /// never used as a key and never has to be of a fixed length).
    pub fn from_token(token: &str) -> Key {
        Key(blake3::derive_key("topocomm 2026-11 cluster key from the token", token.as_bytes()))
    }

    /// A fresh random key (one per data link and wiring epoch).
    pub fn random() -> Key {
        Key(random_bytes())
    }

    /// The proof that `side` holds this key, over `hello` (the initiator's encoded
    /// hello, its nonce inside) and the acceptor's nonce.
    pub fn prove(&self, side: Side, hello: &[u8], acceptor_nonce: &Nonce) -> Proof {
        let label: &[u8] = match side {
            Side::Initiator => b"topocomm initiator proof\0",
            Side::Acceptor => b"topocomm acceptor proof\0",
        };
        let mut mac = blake3::Hasher::new_keyed(&self.0);
        mac.update(label);
        mac.update(&(hello.len() as u64).to_le_bytes());
        mac.update(hello);
        mac.update(acceptor_nonce);
        *mac.finalize().as_bytes()
    }

    /// Whether `proof` is `side`'s proof over this exchange (compared in constant time).
    pub fn verify(&self, side: Side, hello: &[u8], acceptor_nonce: &Nonce, proof: &Proof) -> bool {
        blake3::Hash::from_bytes(self.prove(side, hello, acceptor_nonce)) == blake3::Hash::from_bytes(*proof)
    }

    /// The pre-shared key of the encrypted session that follows this exchange: fresh
    /// for every connection, since both nonces go into it.
    pub fn session_key(&self, hello: &[u8], acceptor_nonce: &Nonce) -> [u8; 32] {
        let mut mac = blake3::Hasher::new_keyed(&self.0);
        mac.update(b"topocomm session key\0");
        mac.update(&(hello.len() as u64).to_le_bytes());
        mac.update(hello);
        mac.update(acceptor_nonce);
        *mac.finalize().as_bytes()
    }
}

/// A fresh nonce from the operating system's generator (through `rand`'s thread RNG,
/// a CSPRNG seeded from it).
pub fn nonce() -> Nonce {
    random_bytes()
}

fn random_bytes() -> [u8; 32] {
    use rand::Rng;
    rand::rng().random()
}

/// What the initiator opens the connection for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Purpose {
    /// A node daemon's control link: its stable name, where its data listener accepts
    /// neighbours, and how much memory it has for runs (bytes; 0 if unknown).
    Node { name: String, data_addr: String, memory_bytes: u64 },
    /// A CLI client's request.
    Client,
    /// A data link from neighbour `from` to neighbour `to` in wiring `epoch`.
    Link { epoch: u64, from: NodeId, to: NodeId },
}

/// The initiator's first message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    pub purpose: Purpose,
    pub nonce: Nonce,
    /// Whether the initiator will encrypt the connection (both sides must agree).
    pub encrypted: bool,
}

/// The acceptor's answer to a hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Challenge {
    /// The acceptor's nonce and its proof of the key.
    Proceed { nonce: Nonce, proof: Proof },
    /// Refused before any proof (wrong version, wrong mode, no such link).
    Refused(String),
}

/// The initiator's proof, once it has checked the acceptor's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub proof: Proof,
}

/// The acceptor's last word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    Welcome,
    Refused(String),
}

/// Why a name or an address a stranger sent is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{what} of {len} bytes is longer than {limit}")]
    TooLong { what: &'static str, len: usize, limit: usize },
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error("{what} {shown} holds characters other than letters, digits and . _ - : [ ]")]
    Characters { what: &'static str, shown: String },
}

/// Checks a node name: at most [`MAX_NAME_LEN`] bytes of ASCII letters, digits and
/// `. _ -` (host names, container ids, `node-07`), so that a name can never forge a log
/// line or a terminal escape.
pub fn check_name(name: &str) -> Result<(), NameError> {
    check_text("node name", name, MAX_NAME_LEN, |c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Checks a data address: at most [`MAX_ADDRESS_LEN`] bytes of what a `host:port` or
/// `[v6]:port` holds.
pub fn check_address(address: &str) -> Result<(), NameError> {
    check_text("data address", address, MAX_ADDRESS_LEN, |c| c.is_ascii_alphanumeric() || "._-:[]".contains(c))
}

fn check_text(what: &'static str, text: &str, limit: usize, allowed: impl Fn(char) -> bool) -> Result<(), NameError> {
    if text.len() > limit {
        return Err(NameError::TooLong { what, len: text.len(), limit });
    }
    if text.is_empty() {
        return Err(NameError::Empty { what });
    }
    if !text.chars().all(allowed) {
        return Err(NameError::Characters { what, shown: shown(text) });
    }
    Ok(())
}

/// `text` as it may go into a log: escaped (no control characters) and cut to 64
/// characters.
pub fn shown(text: &str) -> String {
    let cut: String = text.chars().take(64).collect();
    let mut escaped = cut.escape_debug().to_string();
    if text.chars().count() > 64 {
        escaped.push('…');
    }
    format!("\"{escaped}\"")
}

/// Encodes a handshake message (always far under the limit).
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, CodecError> {
    codec::encode(message)
}

/// Decodes a handshake message body, refusing one over [`MAX_HANDSHAKE_MESSAGE`].
pub fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, CodecError> {
    if body.len() > MAX_HANDSHAKE_MESSAGE {
        return Err(CodecError::Decode(format!(
            "handshake message of {} bytes is over the {MAX_HANDSHAKE_MESSAGE}-byte limit",
            body.len()
        )));
    }
    codec::decode(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Vec<u8> {
        encode(&Hello {
            version: 1,
            purpose: Purpose::Link { epoch: 3, from: 1, to: 2 },
            nonce: [7; 32],
            encrypted: false,
        })
        .unwrap()
    }

    #[test]
    fn a_proof_holds_only_for_its_side_key_and_exchange() {
        let key = Key::from_token("secret");
        let acceptor_nonce = [9; 32];
        let proof = key.prove(Side::Acceptor, &hello(), &acceptor_nonce);
        assert!(key.verify(Side::Acceptor, &hello(), &acceptor_nonce, &proof));
        assert!(!key.verify(Side::Initiator, &hello(), &acceptor_nonce, &proof), "replayed as the other side's");
        assert!(!Key::from_token("guess").verify(Side::Acceptor, &hello(), &acceptor_nonce, &proof));
        assert!(!key.verify(Side::Acceptor, &hello(), &[8; 32], &proof), "another nonce");
        let mut other = hello();
        *other.last_mut().unwrap() ^= 1;
        assert!(!key.verify(Side::Acceptor, &other, &acceptor_nonce, &proof), "another hello");
    }

    #[test]
    fn keys_and_nonces_are_fresh() {
        assert_ne!(nonce(), nonce());
        assert_ne!(Key::random(), Key::random());
        assert_eq!(Key::from_token("a"), Key::from_token("a"));
        assert_eq!(format!("{:?}", Key::from_token("a")), "Key(…)");
    }

    #[test]
    fn names_are_checked_and_shown_escaped() {
        assert!(check_name("node-07").is_ok());
        assert!(check_name("2ea147d46a49").is_ok());
        assert!(matches!(check_name(""), Err(NameError::Empty { .. })));
        assert!(matches!(check_name(&"x".repeat(129)), Err(NameError::TooLong { len: 129, .. })));
        let forged = "n\nINFO cluster formed \u{1b}[2J";
        let error = check_name(forged).unwrap_err().to_string();
        assert!(!error.contains('\n') && !error.contains('\u{1b}'), "{error}");
        assert!(check_address("[::1]:7000").is_ok());
        assert!(check_address("node-1.topocomm_default:7000").is_ok());
        assert!(check_address("a b:1").is_err());
        assert_eq!(shown(&"y".repeat(100)).chars().count(), 64 + 3);
    }

    #[test]
    fn an_oversized_message_is_refused_before_decoding() {
        let error = decode::<Answer>(&vec![0; MAX_HANDSHAKE_MESSAGE + 1]).unwrap_err();
        assert!(error.to_string().contains("limit"), "{error}");
    }
}
