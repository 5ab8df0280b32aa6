//! The opt-in encrypted mode (`--encrypt`): after the mutual handshake, a Noise session
//! (`Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s`, through the `snow` crate) seals every byte
//! of the connection. Its pre-shared key is the handshake's session key — the cluster
//! key (or the link's key) mixed with both fresh nonces — so only a holder of the key
//! can complete it, and the ephemeral Diffie-Hellman gives each connection keys of its
//! own (forward secrecy). The stream is cut into Noise transport messages of at most
//! 64 KiB, each `u16 length | ciphertext + 16-byte tag`, as the Noise specification
//! frames them over TCP (§3 of noiseprotocol.org/noise.html); any tampered, replayed
//! or reordered message fails its tag and closes the connection.
//!
//! [`Channel`] is what every connection is after the handshake: the plain stream, or
//! this encrypted one.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Why the Noise handshake did not complete: the connection's i/o, or Noise itself. The
/// mutual handshake, which runs this one after its own, reports either as its own error
/// (`handshake::HandshakeError`), so that a caller meets one error type.
#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Noise(String),
}

/// The Noise protocol name: no static keys (the handshake before it authenticated both
/// sides), the session key as PSK, X25519, ChaCha20-Poly1305, BLAKE2s.
const NOISE_PARAMS: &str = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s";

/// The largest Noise message (ciphertext and tag).
const MAX_RECORD: usize = 65535;

/// The authentication tag ChaCha20-Poly1305 appends.
const TAG_LEN: usize = 16;

/// The most plaintext one record carries.
const MAX_PLAIN: usize = MAX_RECORD - TAG_LEN;

/// Records sealed per write call, so that a large write costs one system call per
/// quarter MiB rather than per record.
const RECORDS_PER_WRITE: usize = 4;

/// A connection after the handshake.
pub enum Channel<S> {
    Plain(S),
    Encrypted(Box<NoiseStream<S>>),
}

impl<S> std::fmt::Debug for Channel<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_encrypted() { "Channel::Encrypted" } else { "Channel::Plain" })
    }
}

impl<S> Channel<S> {
    /// Whether every byte on it is sealed.
    pub fn is_encrypted(&self) -> bool {
        matches!(self, Channel::Encrypted(_))
    }
}

/// Runs the initiator's side of the Noise handshake keyed by `session_key`.
pub async fn initiate<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    session_key: &[u8; 32],
) -> Result<Box<NoiseStream<S>>, EncryptionError> {
    let mut noise = builder(session_key)?.build_initiator().map_err(noise_error)?;
    let mut message = vec![0; MAX_RECORD];
    let len = noise.write_message(&[], &mut message).map_err(noise_error)?; // -> psk, e
    write_record(&mut stream, &message[..len]).await?;
    let reply = read_record(&mut stream).await?; // <- e, ee
    noise.read_message(&reply, &mut message).map_err(noise_error)?;
    let transport = noise.into_transport_mode().map_err(noise_error)?;
    Ok(Box::new(NoiseStream::new(stream, transport)))
}

/// Runs the responder's side of the Noise handshake keyed by `session_key`.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    session_key: &[u8; 32],
) -> Result<Box<NoiseStream<S>>, EncryptionError> {
    let mut noise = builder(session_key)?.build_responder().map_err(noise_error)?;
    let mut message = vec![0; MAX_RECORD];
    let first = read_record(&mut stream).await?;
    noise.read_message(&first, &mut message).map_err(noise_error)?;
    let len = noise.write_message(&[], &mut message).map_err(noise_error)?;
    write_record(&mut stream, &message[..len]).await?;
    let transport = noise.into_transport_mode().map_err(noise_error)?;
    Ok(Box::new(NoiseStream::new(stream, transport)))
}

fn builder(session_key: &[u8; 32]) -> Result<snow::Builder<'_>, EncryptionError> {
    let params = NOISE_PARAMS.parse().map_err(noise_error)?;
    snow::Builder::new(params).psk(0, session_key).map_err(noise_error)
}

fn noise_error(error: snow::Error) -> EncryptionError {
    EncryptionError::Noise(error.to_string())
}

async fn write_record<S: AsyncWrite + Unpin>(stream: &mut S, record: &[u8]) -> Result<(), EncryptionError> {
    let mut out = Vec::with_capacity(2 + record.len());
    out.extend_from_slice(&(record.len() as u16).to_be_bytes());
    out.extend_from_slice(record);
    stream.write_all(&out).await?;
    stream.flush().await?;
    Ok(())
}

async fn read_record<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Vec<u8>, EncryptionError> {
    let len = stream.read_u16().await? as usize;
    let mut record = vec![0; len];
    stream.read_exact(&mut record).await?;
    Ok(record)
}

/// A byte stream whose every byte travels sealed in Noise transport messages.
pub struct NoiseStream<S> {
    inner: S,
    transport: snow::TransportState,
    /// Received bytes not yet opened (part of a record, or several).
    sealed_in: BytesMut,
    /// Opened bytes not yet read.
    opened: BytesMut,
    /// Sealed records not yet written, and how much of them is out.
    sealed_out: Vec<u8>,
    written: usize,
    /// Plaintext gathered from a vectored write before it is sealed.
    gathered: Vec<u8>,
}

impl<S> NoiseStream<S> {
    fn new(inner: S, transport: snow::TransportState) -> Self {
        NoiseStream {
            inner,
            transport,
            sealed_in: BytesMut::with_capacity(2 * MAX_RECORD),
            opened: BytesMut::new(),
            sealed_out: Vec::with_capacity(RECORDS_PER_WRITE * (MAX_RECORD + 2)),
            written: 0,
            gathered: Vec::with_capacity(MAX_PLAIN),
        }
    }

    /// Seals `plain` (at most `MAX_PLAIN` bytes) as one record after those waiting.
    fn seal(&mut self, plain: &[u8]) -> std::io::Result<()> {
        let start = self.sealed_out.len();
        self.sealed_out.resize(start + 2 + plain.len() + TAG_LEN, 0);
        let len = self
            .transport
            .write_message(plain, &mut self.sealed_out[start + 2..])
            .map_err(|e| std::io::Error::other(format!("sealing a record: {e}")))?;
        self.sealed_out[start..start + 2].copy_from_slice(&(len as u16).to_be_bytes());
        self.sealed_out.truncate(start + 2 + len);
        Ok(())
    }

    /// Opens the first whole record of `sealed_in`, if there is one, into `out` when it
    /// fits there, else into `opened`; returns how many bytes went into `out`.
    fn open_record(&mut self, out: &mut ReadBuf<'_>) -> std::io::Result<Option<usize>> {
        if self.sealed_in.len() < 2 {
            return Ok(None);
        }
        let len = u16::from_be_bytes([self.sealed_in[0], self.sealed_in[1]]) as usize;
        if len < TAG_LEN {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a sealed record shorter than its tag"));
        }
        if self.sealed_in.len() < 2 + len {
            return Ok(None);
        }
        let plain_len = len - TAG_LEN;
        let record = &self.sealed_in[2..2 + len];
        let unsealed = |e: snow::Error| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("a record failed its authentication: {e}"))
        };
        let direct = out.remaining() >= plain_len;
        let into_out = if direct {
            // Only the record's length is initialised: a large destination (a whole
            // payload) is not zeroed again for every 64 KiB record.
            let place = out.initialize_unfilled_to(plain_len);
            let n = self.transport.read_message(record, place).map_err(unsealed)?;
            out.advance(n);
            n
        } else {
            let start = self.opened.len();
            self.opened.resize(start + plain_len, 0);
            let n = self.transport.read_message(record, &mut self.opened[start..]).map_err(unsealed)?;
            self.opened.truncate(start + n);
            0
        };
        self.sealed_in.advance(2 + len);
        Ok(Some(into_out))
    }
}

impl<S: AsyncWrite + Unpin> NoiseStream<S> {
    /// Writes out the sealed records waiting.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.written < self.sealed_out.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.sealed_out[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.sealed_out.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Seals what `fill` gathers, up to `RECORDS_PER_WRITE` records, and starts writing.
    fn poll_seal_and_send(
        &mut self,
        cx: &mut Context<'_>,
        total: usize,
        mut fill: impl FnMut(&mut Vec<u8>, usize, usize),
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_drain(cx))?;
        let take = total.min(RECORDS_PER_WRITE * MAX_PLAIN);
        let mut done = 0;
        while done < take {
            let chunk = (take - done).min(MAX_PLAIN);
            let mut gathered = std::mem::take(&mut self.gathered);
            gathered.clear();
            fill(&mut gathered, done, chunk);
            let sealed = self.seal(&gathered);
            self.gathered = gathered;
            sealed?;
            done += chunk;
        }
        // The bytes are taken; what the socket does not take now goes out on the next
        // write or flush.
        if let Poll::Ready(Err(error)) = self.poll_drain(cx) {
            return Poll::Ready(Err(error));
        }
        Poll::Ready(Ok(take))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for NoiseStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.opened.is_empty() {
                let n = this.opened.len().min(buf.remaining());
                buf.put_slice(&this.opened[..n]);
                this.opened.advance(n);
                return Poll::Ready(Ok(()));
            }
            match this.open_record(buf)? {
                Some(0) => continue,
                Some(_) => return Poll::Ready(Ok(())),
                None => {}
            }
            this.sealed_in.reserve(MAX_RECORD + 2);
            let n = ready!(tokio_util::io::poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.sealed_in))?;
            if n == 0 {
                return if this.sealed_in.is_empty() {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the connection ended inside a sealed record",
                    )))
                };
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for NoiseStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        self.get_mut()
            .poll_seal_and_send(cx, data.len(), |out, from, len| out.extend_from_slice(&data[from..from + len]))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        slices: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let total = slices.iter().map(|s| s.len()).sum();
        self.get_mut().poll_seal_and_send(cx, total, |out, from, len| gather(slices, from, len, out))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// Appends bytes `from..from + len` of the concatenated `slices` to `out`.
fn gather(slices: &[IoSlice<'_>], mut from: usize, mut len: usize, out: &mut Vec<u8>) {
    for slice in slices {
        if len == 0 {
            break;
        }
        if from >= slice.len() {
            from -= slice.len();
            continue;
        }
        let n = (slice.len() - from).min(len);
        out.extend_from_slice(&slice[from..from + n]);
        from = 0;
        len -= n;
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Channel<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Channel::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Channel::Encrypted(noise) => Pin::new(noise.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Channel<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Channel::Plain(stream) => Pin::new(stream).poll_write(cx, data),
            Channel::Encrypted(noise) => Pin::new(noise.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        slices: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Channel::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, slices),
            Channel::Encrypted(noise) => Pin::new(noise.as_mut()).poll_write_vectored(cx, slices),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Channel::Plain(stream) => stream.is_write_vectored(),
            Channel::Encrypted(noise) => noise.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Channel::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Channel::Encrypted(noise) => Pin::new(noise.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Channel::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Channel::Encrypted(noise) => Pin::new(noise.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair(
        key_a: [u8; 32],
        key_b: [u8; 32],
    ) -> Result<(Channel<tokio::io::DuplexStream>, Channel<tokio::io::DuplexStream>), EncryptionError> {
        let (a, b) = tokio::io::duplex(1 << 20);
        let (a, b) = tokio::join!(initiate(a, &key_a), accept(b, &key_b));
        Ok((Channel::Encrypted(a?), Channel::Encrypted(b?)))
    }

    #[tokio::test]
    async fn large_and_vectored_writes_arrive_whole_and_in_order() {
        let (mut a, mut b) = pair([1; 32], [1; 32]).await.unwrap();
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let expected = [b"head".as_slice(), &big, b"tail"].concat();
        let writer = tokio::spawn(async move {
            let slices = [b"head".as_slice(), &big, b"tail"];
            crate::transport::stream::write_all_slices(&mut a, &slices, usize::MAX).await.unwrap();
            a.flush().await.unwrap();
            a
        });
        let mut got = vec![0; expected.len()];
        b.read_exact(&mut got).await.unwrap();
        assert!(got == expected);
        let _a = writer.await.unwrap();
    }

    #[tokio::test]
    async fn a_wrong_session_key_fails_the_handshake() {
        assert!(pair([1; 32], [2; 32]).await.is_err());
    }

    #[tokio::test]
    async fn a_tampered_byte_closes_the_connection() {
        let (a, mut wire) = tokio::io::duplex(1 << 20);
        let (c, d) = tokio::io::duplex(1 << 20);
        // The initiator talks to `a`; a relay copies its bytes to `c`, flipping one.
        let (initiated, accepted) = tokio::join!(
            async {
                let mut a = initiate(a, &[5; 32]).await.unwrap();
                a.write_all(&[42; 1000]).await.unwrap();
                a.flush().await.unwrap();
                a
            },
            async {
                let mut c = c;
                let mut handshake = vec![0; 2 + 48];
                wire.read_exact(&mut handshake).await.unwrap();
                c.write_all(&handshake).await.unwrap();
                let (accepted, ()) = tokio::join!(accept(d, &[5; 32]), async {
                    let mut reply = vec![0; 2 + 48];
                    c.read_exact(&mut reply).await.unwrap();
                    wire.write_all(&reply).await.unwrap();
                });
                let mut record = vec![0; 2 + 1000 + TAG_LEN];
                wire.read_exact(&mut record).await.unwrap();
                record[500] ^= 1;
                c.write_all(&record).await.unwrap();
                (accepted.unwrap(), c)
            }
        );
        let _keep = initiated;
        let (mut accepted, _c) = accepted;
        let mut got = vec![0; 1000];
        let error = accepted.read_exact(&mut got).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
    }
}
