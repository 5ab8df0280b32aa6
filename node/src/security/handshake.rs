//! The mutual handshake that opens every connection — a node's or a client's control
//! link to the coordinator, a data link between neighbours — before any other byte is
//! read (the messages and proofs are `topocomm_proto::auth`):
//!
//! ```text
//! initiator                                   acceptor
//!   Hello { purpose, nonce_i, encrypted } ─▶    key_for(hello): the key, or a refusal
//!                                         ◀─  Challenge { nonce_a, MAC_acceptor }
//!   checks MAC_acceptor (a stranger that
//!   cannot prove the key gets nothing)
//!   Answer { MAC_initiator }              ─▶  checks it; admit(hello): takes the slot
//!                                         ◀─  Verdict::Welcome
//!   (with --encrypt: a Noise handshake keyed by both nonces, then every byte sealed)
//! ```
//!
//! Each message is `u32 length | bincode`, at most `auth::MAX_HANDSHAKE_MESSAGE` bytes,
//! read with exact-length reads (no data byte is swallowed by a buffer), and the whole
//! exchange has [`HANDSHAKE_TIMEOUT`]: nothing a stranger does before authentication
//! costs more than a few KiB or more than a few seconds. A listener admits connections
//! through [`accept_pending`], which holds each in the capped `PendingHandshakes` and,
//! when a newer one takes its place, tells the other side it was dropped (busy) before
//! closing: a client or node retries such a refusal ([`HandshakeError::is_transient`]).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use topocomm_proto::NodeId;
use topocomm_proto::auth::{self, Answer, Challenge, Hello, Key, NameError, Purpose, Side, Verdict};
use topocomm_proto::control::PROTOCOL_VERSION;

use crate::security::encryption::{self, Channel, EncryptionError};
use crate::security::{PendingHandshakes, RefusalLog};

/// How long a whole handshake may take, on either side.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a handshake did not complete.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("handshake i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("handshake message of {0} bytes is over the limit")]
    TooLong(usize),
    #[error("handshake message unreadable: {0}")]
    Malformed(String),
    #[error("no handshake within {0:?}")]
    Timeout(Duration),
    /// The other side refused us; the reason is the one it sent.
    #[error("refused: {0}")]
    Refused(String),
    /// This side refused the other (and sent it the refusal's text as the reason).
    #[error("refused: {0}")]
    Refusing(Refusal),
    /// The acceptor could not prove the key: not the coordinator or neighbour we meant.
    #[error(
        "the other side could not prove the cluster token (the two sides have different tokens, or it is not \
         the coordinator or node it claims to be)"
    )]
    Impostor,
    #[error("encryption: {0}")]
    Encryption(String),
}

impl HandshakeError {
    /// The cause, in a word or two, that refusals are counted by in the log.
    pub fn cause(&self) -> &'static str {
        match self {
            HandshakeError::Io(_) => "connection closed or reset",
            HandshakeError::TooLong(_) => "oversized hello",
            HandshakeError::Malformed(_) => "malformed hello",
            HandshakeError::Timeout(_) => "no handshake in time",
            HandshakeError::Refused(_) => "refused by the other side",
            HandshakeError::Refusing(refusal) => refusal.cause(),
            HandshakeError::Impostor => "other side without the key",
            HandshakeError::Encryption(_) => "encryption failed",
        }
    }

    /// Whether trying again may succeed: the other side was busy and said so, or the
    /// connection broke mid-way (as an older acceptor drops a busy one, without a word).
    pub fn is_transient(&self) -> bool {
        match self {
            HandshakeError::Io(_) => true,
            HandshakeError::Refused(reason) => auth::is_busy(reason),
            _ => false,
        }
    }
}

impl From<EncryptionError> for HandshakeError {
    fn from(error: EncryptionError) -> Self {
        match error {
            EncryptionError::Io(error) => HandshakeError::Io(error),
            EncryptionError::Noise(reason) => HandshakeError::Encryption(reason),
        }
    }
}

/// Why this side refused the other; its text is the reason the other side is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The hello speaks another protocol version.
    #[error("protocol version {theirs} (this side speaks {PROTOCOL_VERSION})")]
    Version { theirs: u32 },
    /// The initiator encrypts and this side does not.
    #[error("this side does not encrypt; start both sides with or without --encrypt")]
    NotEncrypting,
    /// This side encrypts and the initiator does not.
    #[error("this side encrypts every link (--encrypt); start the other side with it too")]
    EncryptingOnly,
    /// The initiator's answer did not prove the key.
    #[error("wrong key: the hello did not prove the cluster token (or this link's key)")]
    WrongKey,
    /// The [`Gate`] turned the hello away.
    #[error(transparent)]
    Gate(#[from] GateRefusal),
    /// Dropped before it finished, to make room for newer connections.
    #[error(
        "{}too many connections from {from} are in their handshake here at once; this one was dropped for a newer one (try again)",
        auth::BUSY
    )]
    Evicted { from: IpAddr },
}

impl Refusal {
    /// The cause, in a word or two, that refusals are counted by in the log.
    pub fn cause(&self) -> &'static str {
        match self {
            Refusal::Version { .. } => "other protocol version",
            Refusal::NotEncrypting | Refusal::EncryptingOnly => "other encryption mode",
            Refusal::WrongKey => "wrong key",
            Refusal::Gate(GateRefusal::Name(_)) => "bad name or address",
            Refusal::Gate(_) => "not admitted here",
            Refusal::Evicted { .. } => "busy (dropped for newer)",
        }
    }
}

/// Why a [`Gate`] turns a hello away: a node's data port (`daemon`) or the
/// coordinator's control port. Its text is the reason the other side is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateRefusal {
    /// Anything but a data link, at a node's data port.
    #[error("this is a node's data port: only links between neighbours open here")]
    NotALink,
    /// A data link, at a node that has no wiring yet.
    #[error("this node is not wired yet")]
    NotWired,
    /// A data link of another wiring than the node's current one.
    #[error("wiring epoch {asked} is not the current one ({current})")]
    StaleEpoch { asked: u64, current: u64 },
    /// A data link meant for another node.
    #[error("this is node {this}, not node {asked}")]
    WrongNode { this: NodeId, asked: NodeId },
    /// A data link from a node that is not a neighbour still expected to dial in.
    #[error("node {from} is not a neighbour waiting to link with node {this} in the {topology}")]
    NotANeighbour { from: NodeId, this: NodeId, topology: String },
    /// A proven data link whose slot is taken, or gone with a new wiring.
    #[error("node {from} is linked already, or the wiring changed")]
    AlreadyLinked { from: NodeId },
    /// A data link, at the coordinator's control port.
    #[error("this is the coordinator's control port, not a node's data port")]
    NotAControlLink,
    /// A node whose name or data address is not accepted.
    #[error(transparent)]
    Name(#[from] NameError),
}

/// Opens a connection as `purpose`, proving `key` and checking that the other side
/// holds it too; returns the channel, encrypted when asked.
pub async fn initiate<S>(stream: S, key: &Key, purpose: Purpose, encrypted: bool) -> Result<Channel<S>, HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    with_deadline(async move {
        let mut stream = stream;
        let hello = Hello { version: PROTOCOL_VERSION, purpose, nonce: auth::nonce(), encrypted };
        let hello_bytes = auth::encode(&hello).map_err(|e| HandshakeError::Malformed(e.to_string()))?;
        write_body(&mut stream, &hello_bytes).await?;
        let acceptor_nonce = match read_message::<_, Challenge>(&mut stream).await? {
            Challenge::Refused(reason) => return Err(HandshakeError::Refused(reason)),
            Challenge::Proceed { nonce, proof } => {
                if !key.verify(Side::Acceptor, &hello_bytes, &nonce, &proof) {
                    return Err(HandshakeError::Impostor);
                }
                nonce
            }
        };
        let proof = key.prove(Side::Initiator, &hello_bytes, &acceptor_nonce);
        write_message(&mut stream, &Answer { proof }).await?;
        match read_message::<_, Verdict>(&mut stream).await? {
            Verdict::Refused(reason) => return Err(HandshakeError::Refused(reason)),
            Verdict::Welcome => {}
        }
        if !encrypted {
            return Ok(Channel::Plain(stream));
        }
        let session_key = key.session_key(&hello_bytes, &acceptor_nonce);
        encryption::initiate(stream, &session_key).await.map(Channel::Encrypted).map_err(HandshakeError::from)
    })
    .await
}

/// What an acceptor makes of a hello.
pub trait Gate {
    /// The key this hello must prove, or why it is refused (before any proof).
    fn key_for(&self, hello: &Hello) -> Result<Key, GateRefusal>;
    /// Called once the initiator proved the key: whether it is admitted (it may take a
    /// slot here, which no unproven hello can).
    fn admit(&self, hello: &Hello) -> Result<(), GateRefusal>;
}

/// Accepts a connection: reads the hello, proves the key `gate` names for it, checks the
/// initiator's proof and lets `gate` admit it; `encrypted` is this side's mode, and a
/// hello of the other mode is refused. Returns the hello and the channel.
pub async fn accept<S, G>(stream: S, gate: &G, encrypted: bool) -> Result<(Hello, Channel<S>), HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    G: Gate + ?Sized,
{
    accept_in_place(stream, gate, encrypted, None).await
}

/// Accepts a connection from `peer` as [`accept`] does, holding a place among `pending`
/// meanwhile: if newer connections push it out, the other side is told so (a busy
/// refusal it can print and retry) and the handshake ends. A refusal is counted in
/// `refusals`, not logged on its own.
pub async fn accept_pending<S, G>(
    stream: S,
    peer: SocketAddr,
    pending: &PendingHandshakes,
    refusals: &RefusalLog,
    gate: &G,
    encrypted: bool,
) -> Result<(Hello, Channel<S>), HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    G: Gate + ?Sized,
{
    let ticket = pending.enter(peer.ip());
    let place = PendingSlot { evicted: &ticket.evicted, source: peer.ip() };
    let accepted = accept_in_place(stream, gate, encrypted, Some(&place)).await;
    drop(ticket);
    if let Err(error) = &accepted {
        refusals.refused(peer, error.cause(), error);
    }
    accepted
}

/// A connection's place among the pending handshakes: cancelled when it is pushed out.
struct PendingSlot<'a> {
    evicted: &'a CancellationToken,
    source: IpAddr,
}

/// Runs one read of the handshake, unless the connection is pushed out of its `place`
/// first (then [`Refusal::Evicted`]).
async fn unless_evicted<T>(
    place: Option<&PendingSlot<'_>>,
    step: impl Future<Output = Result<T, HandshakeError>>,
) -> Result<T, HandshakeError> {
    let Some(place) = place else { return step.await };
    tokio::select! {
        result = step => result,
        () = place.evicted.cancelled() => Err(HandshakeError::Refusing(Refusal::Evicted { from: place.source })),
    }
}

async fn accept_in_place<S, G>(
    stream: S,
    gate: &G,
    encrypted: bool,
    place: Option<&PendingSlot<'_>>,
) -> Result<(Hello, Channel<S>), HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    G: Gate + ?Sized,
{
    with_deadline(async move {
        let mut stream = stream;
        let hello_bytes = match unless_evicted(place, read_body(&mut stream)).await {
            Err(HandshakeError::Refusing(refusal)) => {
                let _ = write_message(&mut stream, &Challenge::Refused(refusal.to_string())).await;
                return Err(HandshakeError::Refusing(refusal));
            }
            read => read?,
        };
        let hello: Hello = auth::decode(&hello_bytes).map_err(|e| HandshakeError::Malformed(e.to_string()))?;
        let key = match first_look(&hello, encrypted).and_then(|()| gate.key_for(&hello).map_err(Refusal::Gate)) {
            Ok(key) => key,
            Err(refusal) => {
                let _ = write_message(&mut stream, &Challenge::Refused(refusal.to_string())).await;
                return Err(HandshakeError::Refusing(refusal));
            }
        };
        let nonce = auth::nonce();
        let proof = key.prove(Side::Acceptor, &hello_bytes, &nonce);
        write_message(&mut stream, &Challenge::Proceed { nonce, proof }).await?;
        let answer: Answer = match unless_evicted(place, read_message(&mut stream)).await {
            Err(HandshakeError::Refusing(refusal)) => {
                let _ = write_message(&mut stream, &Verdict::Refused(refusal.to_string())).await;
                return Err(HandshakeError::Refusing(refusal));
            }
            read => read?,
        };
        let verdict = if key.verify(Side::Initiator, &hello_bytes, &nonce, &answer.proof) {
            gate.admit(&hello).map_err(Refusal::Gate)
        } else {
            Err(Refusal::WrongKey)
        };
        if let Err(refusal) = verdict {
            let _ = write_message(&mut stream, &Verdict::Refused(refusal.to_string())).await;
            return Err(HandshakeError::Refusing(refusal));
        }
        write_message(&mut stream, &Verdict::Welcome).await?;
        if !encrypted {
            return Ok((hello, Channel::Plain(stream)));
        }
        let session_key = key.session_key(&hello_bytes, &nonce);
        let channel = encryption::accept(stream, &session_key).await?;
        Ok((hello, Channel::Encrypted(channel)))
    })
    .await
}

/// The checks every hello passes before its key is looked up: the version and the mode.
fn first_look(hello: &Hello, encrypted: bool) -> Result<(), Refusal> {
    if hello.version != PROTOCOL_VERSION {
        return Err(Refusal::Version { theirs: hello.version });
    }
    match (hello.encrypted, encrypted) {
        (true, false) => Err(Refusal::NotEncrypting),
        (false, true) => Err(Refusal::EncryptingOnly),
        _ => Ok(()),
    }
}

async fn with_deadline<T>(future: impl Future<Output = Result<T, HandshakeError>>) -> Result<T, HandshakeError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, future).await.map_err(|_| HandshakeError::Timeout(HANDSHAKE_TIMEOUT))?
}

async fn write_message<S: AsyncWrite + Unpin, T: serde::Serialize>(
    stream: &mut S,
    message: &T,
) -> Result<(), HandshakeError> {
    let body = auth::encode(message).map_err(|e| HandshakeError::Malformed(e.to_string()))?;
    write_body(stream, &body).await
}

async fn write_body<S: AsyncWrite + Unpin>(stream: &mut S, body: &[u8]) -> Result<(), HandshakeError> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    stream.write_all(&out).await?;
    stream.flush().await?;
    Ok(())
}

/// Reads one message body, refusing a length over the limit before reading it.
async fn read_body<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Vec<u8>, HandshakeError> {
    let len = stream.read_u32().await? as usize;
    if len > auth::MAX_HANDSHAKE_MESSAGE {
        return Err(HandshakeError::TooLong(len));
    }
    let mut body = vec![0; len];
    stream.read_exact(&mut body).await?;
    Ok(body)
}

async fn read_message<S: AsyncRead + Unpin, T: serde::de::DeserializeOwned>(
    stream: &mut S,
) -> Result<T, HandshakeError> {
    let body = read_body(stream).await?;
    auth::decode(&body).map_err(|e| HandshakeError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A gate with one key that admits each `Link` purpose's `from` once.
    struct OneKey {
        key: Key,
        admitted: Mutex<Vec<usize>>,
    }

    impl OneKey {
        fn new(token: &str) -> Self {
            OneKey { key: Key::from_token(token), admitted: Mutex::new(Vec::new()) }
        }
    }

    impl Gate for OneKey {
        fn key_for(&self, _hello: &Hello) -> Result<Key, GateRefusal> {
            Ok(self.key.clone())
        }
        fn admit(&self, hello: &Hello) -> Result<(), GateRefusal> {
            let Purpose::Link { from, .. } = hello.purpose else { return Ok(()) };
            let mut admitted = self.admitted.lock().unwrap();
            if admitted.contains(&from) {
                return Err(GateRefusal::AlreadyLinked { from });
            }
            admitted.push(from);
            Ok(())
        }
    }

    fn link(from: usize) -> Purpose {
        Purpose::Link { epoch: 1, from, to: 9 }
    }

    #[tokio::test]
    async fn both_sides_prove_the_key_and_data_flows_after() {
        for encrypted in [false, true] {
            let (a, b) = tokio::io::duplex(1 << 16);
            let gate = OneKey::new("secret");
            let key = Key::from_token("secret");
            let (opened, accepted) = tokio::join!(initiate(a, &key, link(1), encrypted), accept(b, &gate, encrypted));
            let (mut opened, (hello, mut accepted)) = (opened.unwrap(), accepted.unwrap());
            assert_eq!(hello.purpose, link(1));
            opened.write_all(b"after the handshake").await.unwrap();
            opened.flush().await.unwrap();
            let mut got = [0; 19];
            accepted.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"after the handshake");
        }
    }

    #[tokio::test]
    async fn a_wrong_key_is_refused_and_learns_nothing_of_the_right_one() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let gate = OneKey::new("secret");
        let key = Key::from_token("guess");
        let (opened, accepted) = tokio::join!(initiate(a, &key, link(1), false), accept(b, &gate, false));
        // The initiator sees the acceptor's proof fail against its own (wrong) key and
        // stops before proving anything: to it the acceptor is an impostor.
        assert!(matches!(opened, Err(HandshakeError::Impostor)), "{opened:?}");
        assert!(accepted.is_err());
        assert!(gate.admitted.lock().unwrap().is_empty(), "no slot taken");
    }

    #[tokio::test]
    async fn an_acceptor_without_the_key_is_an_impostor() {
        // A fake coordinator that knows the protocol but not the token.
        let (a, b) = tokio::io::duplex(1 << 16);
        let fake = OneKey::new("not the token");
        let key = Key::from_token("secret");
        let (opened, _) = tokio::join!(initiate(a, &key, link(1), false), accept(b, &fake, false));
        assert!(matches!(opened, Err(HandshakeError::Impostor)), "{opened:?}");
    }

    #[tokio::test]
    async fn the_token_never_travels() {
        // Everything the initiator writes, captured: neither the token nor the key is in it.
        let token = "a-very-recognisable-token-0123456789";
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let opened = tokio::spawn(async move { initiate(a, &Key::from_token(token), link(1), false).await });
        let mut seen = vec![0u8; 4096];
        let n = b.read(&mut seen).await.unwrap();
        seen.truncate(n);
        drop(b);
        let _ = opened.await;
        assert!(n > 0);
        assert!(!seen.windows(token.len()).any(|w| w == token.as_bytes()));
    }

    /// Sends `hello` as an initiator would and returns the acceptor's challenge.
    async fn send_hello<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, hello: &Hello) -> Challenge {
        write_body(stream, &auth::encode(hello).unwrap()).await.unwrap();
        read_message(stream).await.unwrap()
    }

    #[tokio::test]
    async fn mismatched_modes_and_versions_are_refused_with_the_reason() {
        let gate = OneKey::new("k");
        let key = Key::from_token("k");
        for (initiator_encrypts, refusal) in [(false, Refusal::EncryptingOnly), (true, Refusal::NotEncrypting)] {
            let (a, b) = tokio::io::duplex(1 << 16);
            let acceptor_encrypts = !initiator_encrypts;
            let (opened, accepted) =
                tokio::join!(initiate(a, &key, link(1), initiator_encrypts), accept(b, &gate, acceptor_encrypts));
            assert!(matches!(&opened, Err(HandshakeError::Refused(r)) if r.contains("--encrypt")), "{opened:?}");
            // The initiator reads the acceptor's refusal word for word.
            assert!(matches!(&opened, Err(HandshakeError::Refused(r)) if *r == refusal.to_string()), "{opened:?}");
            assert!(matches!(&accepted, Err(HandshakeError::Refusing(r)) if *r == refusal), "{accepted:?}");
        }

        let (mut a, b) = tokio::io::duplex(1 << 16);
        let hello = Hello { version: PROTOCOL_VERSION + 1, purpose: link(1), nonce: auth::nonce(), encrypted: false };
        let (challenge, accepted) = tokio::join!(send_hello(&mut a, &hello), accept(b, &gate, false));
        let refusal = Refusal::Version { theirs: PROTOCOL_VERSION + 1 };
        assert!(matches!(&challenge, Challenge::Refused(r) if *r == refusal.to_string()), "{challenge:?}");
        assert!(refusal.to_string().starts_with(&format!("protocol version {}", PROTOCOL_VERSION + 1)));
        assert!(matches!(&accepted, Err(HandshakeError::Refusing(r)) if *r == refusal), "{accepted:?}");
        assert!(gate.admitted.lock().unwrap().is_empty(), "no slot taken");
    }

    #[tokio::test]
    async fn an_answer_without_the_key_is_refused_as_a_wrong_key() {
        let gate = OneKey::new("k");
        let (mut a, b) = tokio::io::duplex(1 << 16);
        let hello = Hello { version: PROTOCOL_VERSION, purpose: link(2), nonce: auth::nonce(), encrypted: false };
        let initiator = async {
            let challenge = send_hello(&mut a, &hello).await;
            assert!(matches!(challenge, Challenge::Proceed { .. }), "{challenge:?}");
            write_message(&mut a, &Answer { proof: [7; 32] }).await.unwrap();
            read_message::<_, Verdict>(&mut a).await.unwrap()
        };
        let (verdict, accepted) = tokio::join!(initiator, accept(b, &gate, false));
        let said = Refusal::WrongKey.to_string();
        assert!(matches!(&verdict, Verdict::Refused(r) if *r == said), "{verdict:?}");
        assert!(matches!(&accepted, Err(HandshakeError::Refusing(Refusal::WrongKey))), "{accepted:?}");
        assert!(gate.admitted.lock().unwrap().is_empty(), "no slot taken");
    }

    #[tokio::test]
    async fn one_slot_is_taken_once() {
        let gate = OneKey::new("k");
        for expect_ok in [true, false] {
            let (a, b) = tokio::io::duplex(1 << 16);
            let key = Key::from_token("k");
            let (opened, accepted) = tokio::join!(initiate(a, &key, link(3), false), accept(b, &gate, false));
            assert_eq!(opened.is_ok(), expect_ok);
            assert_eq!(accepted.is_ok(), expect_ok);
            if !expect_ok {
                // The initiator reads the gate's refusal word for word.
                let reason = "node 3 is linked already, or the wiring changed";
                assert!(matches!(&opened, Err(HandshakeError::Refused(r)) if r == reason), "{opened:?}");
                let refusal = Refusal::Gate(GateRefusal::AlreadyLinked { from: 3 });
                assert!(matches!(&accepted, Err(HandshakeError::Refusing(r)) if *r == refusal), "{accepted:?}");
            }
        }
    }

    #[tokio::test]
    async fn oversized_garbage_and_silence_are_errors_not_allocations() {
        let gate = OneKey::new("k");
        let (mut a, b) = tokio::io::duplex(1 << 16);
        a.write_all(&(512u32 << 20).to_be_bytes()).await.unwrap();
        assert!(matches!(accept(b, &gate, false).await, Err(HandshakeError::TooLong(_))));

        let (mut a, b) = tokio::io::duplex(1 << 16);
        a.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).await.unwrap();
        assert!(matches!(accept(b, &gate, false).await, Err(HandshakeError::Malformed(_))));
    }

    #[tokio::test]
    async fn a_connection_pushed_out_by_newer_ones_is_told_it_was_busy() {
        use crate::security::MAX_PENDING_PER_SOURCE;
        let gate = OneKey::new("k");
        let pending = PendingHandshakes::default();
        let refusals = RefusalLog::start("test connections");
        let peer: SocketAddr = "127.0.0.9:4000".parse().unwrap();
        let (mut a, b) = tokio::io::duplex(1 << 16);
        let initiator = async {
            // The acceptor has taken its place and waits for the hello: push it out,
            // then read what it says.
            tokio::task::yield_now().await;
            let newer: Vec<_> = (0..MAX_PENDING_PER_SOURCE).map(|_| pending.enter(peer.ip())).collect();
            let said = read_message::<_, Challenge>(&mut a).await;
            drop(newer);
            said
        };
        let (accepted, said) = tokio::join!(accept_pending(b, peer, &pending, &refusals, &gate, false), initiator);
        assert!(matches!(&accepted, Err(HandshakeError::Refusing(Refusal::Evicted { .. }))), "{accepted:?}");
        let Ok(Challenge::Refused(reason)) = said else { panic!("the pushed-out party read {said:?}") };
        assert!(reason.starts_with("busy: too many connections from 127.0.0.9"), "{reason}");
        // An initiator takes it for a refusal worth trying again.
        assert!(HandshakeError::Refused(reason).is_transient());
        assert!(!HandshakeError::Impostor.is_transient());
        assert!(!HandshakeError::Refused(Refusal::WrongKey.to_string()).is_transient());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_stranger_is_dropped_at_the_deadline() {
        let gate = OneKey::new("k");
        let (_a, b) = tokio::io::duplex(1 << 16);
        assert!(matches!(accept(b, &gate, false).await, Err(HandshakeError::Timeout(_))));
    }
}
