//! The data-link handshake: the dialling node says who it is, who it wants, which wiring
//! epoch and the cluster token; the accepting node checks all four against its current
//! wiring and answers welcome or refused. Only then do frames flow. The messages are
//! read with exact-length reads so no data frame is ever swallowed by a buffer.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use topocomm_proto::NodeId;
use topocomm_proto::codec;
use topocomm_proto::control::PROTOCOL_VERSION;

/// Handshake messages are small; anything longer is a stranger talking.
const MAX_HANDSHAKE: usize = 4096;

/// How long either side waits for the other's handshake message.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The dialling side's introduction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkHello {
    pub version: u32,
    pub token: String,
    pub epoch: u64,
    pub from: NodeId,
    pub to: NodeId,
}

/// The accepting side's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkReply {
    Welcome,
    Refused(String),
}

/// Why a handshake did not complete.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("handshake i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("handshake message of {0} bytes is too long")]
    TooLong(usize),
    #[error("handshake message unreadable: {0}")]
    Malformed(String),
    #[error("no handshake within {0:?}")]
    Timeout(Duration),
    #[error("refused: {0}")]
    Refused(String),
}

impl LinkHello {
    /// A hello from `from` to `to` in `epoch`.
    pub fn new(token: &str, epoch: u64, from: NodeId, to: NodeId) -> Self {
        LinkHello { version: PROTOCOL_VERSION, token: token.to_owned(), epoch, from, to }
    }
}

/// Dials side: sends the hello and waits for the answer.
pub async fn introduce<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    hello: &LinkHello,
) -> Result<(), HandshakeError> {
    write_message(stream, hello).await?;
    match with_deadline(read_message::<_, LinkReply>(stream)).await? {
        LinkReply::Welcome => Ok(()),
        LinkReply::Refused(reason) => Err(HandshakeError::Refused(reason)),
    }
}

/// Accepting side: reads the hello, asks `admit` whether it fits the current wiring,
/// answers, and returns the hello of an admitted peer.
pub async fn admit<S, F>(stream: &mut S, admit: F) -> Result<LinkHello, HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&LinkHello) -> Result<(), String>,
{
    let hello: LinkHello = with_deadline(read_message(stream)).await?;
    let verdict = if hello.version != PROTOCOL_VERSION {
        Err(format!("protocol version {} (this node speaks {PROTOCOL_VERSION})", hello.version))
    } else {
        admit(&hello)
    };
    match verdict {
        Ok(()) => {
            write_message(stream, &LinkReply::Welcome).await?;
            Ok(hello)
        }
        Err(reason) => {
            let _ = write_message(stream, &LinkReply::Refused(reason.clone())).await;
            Err(HandshakeError::Refused(reason))
        }
    }
}

async fn with_deadline<T>(future: impl Future<Output = Result<T, HandshakeError>>) -> Result<T, HandshakeError> {
    tokio::time::timeout(HANDSHAKE_TIMEOUT, future).await.map_err(|_| HandshakeError::Timeout(HANDSHAKE_TIMEOUT))?
}

async fn write_message<S: AsyncWrite + Unpin, T: Serialize>(stream: &mut S, message: &T) -> Result<(), HandshakeError> {
    let body = codec::encode(message).map_err(|e| HandshakeError::Malformed(e.to_string()))?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    stream.write_all(&out).await?;
    stream.flush().await?;
    Ok(())
}

async fn read_message<S: AsyncRead + Unpin, T: serde::de::DeserializeOwned>(
    stream: &mut S,
) -> Result<T, HandshakeError> {
    let len = stream.read_u32().await? as usize;
    if len > MAX_HANDSHAKE {
        return Err(HandshakeError::TooLong(len));
    }
    let mut body = vec![0; len];
    stream.read_exact(&mut body).await?;
    codec::decode(&body).map_err(|e| HandshakeError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn matching_hello_is_welcomed() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let hello = LinkHello::new("secret", 3, 1, 2);
        let (dialled, admitted) = tokio::join!(
            introduce(&mut a, &hello),
            admit(&mut b, |h| if h.token == "secret" { Ok(()) } else { Err("bad token".into()) })
        );
        dialled.unwrap();
        assert_eq!(admitted.unwrap(), hello);
    }

    #[tokio::test]
    async fn wrong_token_is_refused_on_both_sides() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let hello = LinkHello::new("guess", 3, 1, 2);
        let (dialled, admitted) = tokio::join!(
            introduce(&mut a, &hello),
            admit(&mut b, |h| if h.token == "secret" { Ok(()) } else { Err("bad token".into()) })
        );
        assert!(matches!(dialled, Err(HandshakeError::Refused(r)) if r == "bad token"));
        assert!(admitted.is_err());
    }

    #[tokio::test]
    async fn oversized_or_garbage_hello_is_an_error_not_a_panic() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        assert!(matches!(admit(&mut b, |_| Ok(())).await, Err(HandshakeError::TooLong(_))));

        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).await.unwrap();
        assert!(matches!(admit(&mut b, |_| Ok(())).await, Err(HandshakeError::Malformed(_))));
    }
}
