//! Frames as bytes over any byte stream: TCP (raw, or encrypted by `security::encryption`) in the
//! daemon, an in-memory duplex pipe in tests and the cost model. A reader cuts the stream
//! into `u32 length | header | payload` frames and hands them to the endpoint; a writer
//! sends the outbox with vectored writes of length prefixes, headers and payload parts.
//! No payload is ever copied into a codec buffer: the writer names the sender's buffers,
//! several queued frames per system call (at most 512 KiB per call while the frames are
//! 1 MiB or shorter, see [`CUT_FRAMES_UP_TO`]); the reader leaves a short payload in its
//! read-ahead buffer and reads a long one, once its receive is posted
//! ([`Endpoint::admit`], a rendezvous), straight into a buffer of its own — or into the
//! place that receive offers for it (see `assembly`).

use std::io::IoSlice;
use std::sync::Arc;

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use topocomm_proto::NodeId;
use topocomm_proto::frame::{Frame, FrameHeader};

use super::departures::Departures;
use topocomm_collectives::comm::LinkCapabilities;
use topocomm_collectives::comm::fault::LinkFault;

use super::{Endpoint, Link, Outbox, Outgoing};

/// A link over the byte stream `S`, refusing frames longer than `max_frame` bytes.
pub struct StreamLink<S> {
    stream: S,
    max_frame: usize,
}

impl<S> StreamLink<S> {
    /// The link over `stream` (already handshaken), taking frames of up to `max_frame`
    /// bytes (header and payload).
    pub fn new(stream: S, max_frame: usize) -> Self {
        StreamLink { stream, max_frame }
    }
}

impl<S: AsyncRead + AsyncWrite + Send + 'static> Link for StreamLink<S> {
    /// Starts a writer and a reader task.
    fn start<E: Endpoint>(self, peer: NodeId, outbox: Outbox, endpoint: Arc<E>, cancel: CancellationToken) {
        let (reader, writer) = tokio::io::split(self.stream);
        let write_cancel = cancel.clone();
        let write_endpoint = endpoint.clone();
        tokio::spawn(async move {
            tokio::select! {
                result = write_frames(writer, peer, outbox, &*write_endpoint) => {
                    if let Err(error) = result {
                        tracing::warn!(peer, %error, "link write failed");
                        write_endpoint.link_failed(LinkFault::WriteFailed { peer, reason: error.to_string() });
                    }
                }
                _ = write_cancel.cancelled() => {}
            }
        });
        let max_frame = self.max_frame;
        tokio::spawn(async move {
            tokio::select! {
                fault = read_frames(reader, peer, &*endpoint, max_frame) => {
                    tracing::warn!(peer, %fault, "link closed");
                    endpoint.link_failed(fault);
                }
                _ = cancel.cancelled() => {}
            }
            // Whatever ended the reader ends the writer too, so the connection closes.
            cancel.cancel();
        });
    }
}

/// Reads frames until the stream fails; returns why it stopped.
async fn read_frames<R: AsyncRead, E: Endpoint>(reader: R, peer: NodeId, endpoint: &E, max_frame: usize) -> LinkFault {
    let mut reader = std::pin::pin!(reader);
    let mut buffer = BytesMut::with_capacity(READ_AHEAD);
    loop {
        let frame = match next_frame(&mut reader, &mut buffer, max_frame, endpoint, peer).await {
            Ok(Read::Frame(frame)) => frame,
            Ok(Read::Skipped) => continue,
            Ok(Read::End) => return LinkFault::ClosedByPeer { peer },
            Err(FrameError::Io(error)) => return LinkFault::from_io(peer, &error),
            Err(FrameError::Malformed(reason)) => return LinkFault::Malformed { peer, reason: reason.to_string() },
            Err(FrameError::Refused(fault)) => return fault,
        };
        if let Err(fault) = endpoint.arrive(peer, frame).await {
            return fault;
        }
    }
}

/// Bytes the reader asks the stream for at a time (several small frames per read).
const READ_AHEAD: usize = 64 * 1024;

/// Payloads longer than this are read straight into a buffer of their own, allocated
/// once at their exact length (a shorter one shares the read-ahead buffer), and only
/// once their receive is posted ([`Endpoint::admit`]): Open MPI's TCP transport sends
/// messages up to 64 KiB eagerly too, and longer ones after a rendezvous.
pub const RENDEZVOUS_ABOVE: usize = 64 * 1024;

/// Why a frame could not be read.
enum FrameError {
    /// The stream failed, or a length prefix is over the limit.
    Io(std::io::Error),
    /// The bytes do not make a frame.
    Malformed(String),
    /// The endpoint refused the frame's header ([`Endpoint::screen`]).
    Refused(LinkFault),
}

/// What the reader got from the stream.
enum Read {
    Frame(Frame),
    /// A long frame the endpoint does not take: its payload was read past, never kept.
    Skipped,
    /// The stream ended between frames.
    End,
}

impl From<std::io::Error> for FrameError {
    fn from(error: std::io::Error) -> Self {
        FrameError::Io(error)
    }
}

/// Reads the next `u32 length | header | payload` frame. The payload is never copied
/// after the read: a short one is a slice of `buffer`; a long one is first screened by
/// the endpoint (one it does not take is read past in pieces, never held), then waits
/// for its receive, then lands in the place that receive offers for it (its part of an
/// assembled result), or else in a buffer of its own.
async fn next_frame<R: AsyncRead + Unpin, E: Endpoint>(
    reader: &mut R,
    buffer: &mut BytesMut,
    max_frame: usize,
    endpoint: &E,
    peer: NodeId,
) -> Result<Read, FrameError> {
    if !fill(reader, buffer, 4).await? {
        if buffer.is_empty() {
            return Ok(Read::End);
        }
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
    }
    let len = u32::from_be_bytes(buffer[..4].try_into().expect("four bytes")) as usize;
    if len > max_frame {
        let message = format!("frame size too big: {len} bytes, over the {max_frame}-byte limit");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, message).into());
    }
    let payload_len = len.saturating_sub(FrameHeader::ENCODED_LEN);
    if payload_len <= RENDEZVOUS_ABOVE {
        expect(fill(reader, buffer, 4 + len).await?)?;
        buffer.advance(4);
        let body = buffer.split_to(len).freeze();
        return Frame::parse(body).map(Read::Frame).map_err(|error| FrameError::Malformed(error.to_string()));
    }
    expect(fill(reader, buffer, 4 + FrameHeader::ENCODED_LEN).await?)?;
    buffer.advance(4);
    let header = FrameHeader::decode(&buffer.split_to(FrameHeader::ENCODED_LEN))
        .map_err(|error| FrameError::Malformed(error.to_string()))?;
    let early = buffer.split_to(buffer.len().min(payload_len));
    if !endpoint.screen(peer, &header).map_err(FrameError::Refused)? {
        let rest = (payload_len - early.len()) as u64;
        let skipped = tokio::io::copy(&mut (&mut *reader).take(rest), &mut tokio::io::sink()).await?;
        expect(skipped == rest)?;
        return Ok(Read::Skipped);
    }
    endpoint.admit(&header, peer).await;
    let payload = match endpoint.landing(&header, payload_len) {
        Some(mut place) => {
            place.put_slice(&early);
            read_exactly(reader, &mut place).await?;
            place.filled().map_err(|error| FrameError::Malformed(error.to_string()))?
        }
        None => {
            let mut own = BytesMut::with_capacity(payload_len);
            own.put_slice(&early);
            let rest = payload_len - own.len();
            read_exactly(reader, &mut (&mut own).limit(rest)).await?;
            own.freeze()
        }
    };
    Ok(Read::Frame(Frame { header, payload }))
}

/// Reads until `into` has no room left (`remaining_mut` must be exact: a `Place`, or a
/// `limit`ed buffer), never past it: the next frame stays in the stream.
async fn read_exactly<R: AsyncRead + Unpin, B: BufMut>(reader: &mut R, into: &mut B) -> std::io::Result<()> {
    while into.remaining_mut() > 0 {
        let rest = into.remaining_mut() as u64;
        if (&mut *reader).take(rest).read_buf(into).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

/// Reads until `buffer` holds at least `n` bytes; false if the stream ends first.
async fn fill<R: AsyncRead + Unpin>(reader: &mut R, buffer: &mut BytesMut, n: usize) -> std::io::Result<bool> {
    while buffer.len() < n {
        buffer.reserve((n - buffer.len()).max(READ_AHEAD));
        if reader.read_buf(buffer).await? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A stream that ends inside a frame is an error.
fn expect(filled: bool) -> Result<(), FrameError> {
    if filled { Ok(()) } else { Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()) }
}

/// Writes frames to `peer` until the router drops the queue. The frames whose turn has
/// come ([`Departures`]) go out together (up to `BATCH_FRAMES`) in vectored writes: one
/// system call for a burst of small frames, and a frame's payload parts are never copied
/// together. Each frame passes the link physics as its turn comes ([`Endpoint::depart`]).
async fn write_frames<W: AsyncWrite, E: Endpoint>(
    writer: W,
    peer: NodeId,
    outbox: Outbox,
    endpoint: &E,
) -> std::io::Result<()> {
    let mut writer = std::pin::pin!(writer);
    let mut departures = Departures::new(outbox);
    let mut batch = Vec::with_capacity(BATCH_FRAMES);
    let mut heads = Vec::with_capacity(BATCH_FRAMES * HEAD_LEN);
    while let Some(first) = departures.next(peer, endpoint).await {
        let mut next = Some(first);
        while let Some(outgoing) = next.take() {
            batch.push(outgoing);
            if batch.len() == BATCH_FRAMES {
                write_batch(&mut writer, &mut batch, &mut heads).await?;
            }
            next = departures.next_now(peer, endpoint);
        }
        write_batch(&mut writer, &mut batch, &mut heads).await?;
        // Nothing more is queued: what a stream holds back (an encrypted link's last
        // sealed record) goes out now, not with the next frame. A no-op on raw TCP.
        writer.flush().await?;
    }
    writer.shutdown().await
}

/// Frames one vectored write may carry.
const BATCH_FRAMES: usize = 32;

/// Buffers one vectored write may name (Linux allows 1024).
const MAX_SLICES: usize = 512;

/// Length prefix and header of a frame on the wire.
const HEAD_LEN: usize = 4 + FrameHeader::ENCODED_LEN;

/// Writes `batch` back to back: each frame's length prefix and header (encoded into
/// `heads`, reused from batch to batch), then its payload parts, uncopied.
async fn write_batch<W: AsyncWrite + Unpin>(
    writer: &mut W,
    batch: &mut Vec<Outgoing>,
    heads: &mut Vec<u8>,
) -> std::io::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    heads.clear();
    for outgoing in batch.iter() {
        heads.put_u32((FrameHeader::ENCODED_LEN + outgoing.payload.len()) as u32);
        heads.extend_from_slice(&outgoing.header.encode());
    }
    let mut slices: Vec<&[u8]> = Vec::with_capacity(batch.len() * 2);
    for (outgoing, head) in batch.iter().zip(heads.chunks(HEAD_LEN)) {
        slices.push(head);
        slices.extend(outgoing.payload.parts().iter().map(|part| &part[..]).filter(|part| !part.is_empty()));
    }
    write_all_slices(writer, &slices, max_write(batch)).await?;
    drop(slices);
    batch.clear();
    Ok(())
}

/// Writes `slices` one after another with vectored writes until all are out, each
/// system call naming at most `MAX_SLICES` buffers and carrying at most `max_write`
/// bytes, or a quarter more rather than leave a tail that short for a call of its own
/// (a 512 KiB segment and its 34-byte head go together).
pub async fn write_all_slices<W: AsyncWrite + Unpin>(
    writer: &mut W,
    slices: &[&[u8]],
    max_write: usize,
) -> std::io::Result<()> {
    let mut rest = Unwritten::new(slices, max_write);
    let mut io = Vec::with_capacity(MAX_SLICES);
    while !rest.is_empty() {
        rest.next_write(&mut io);
        let written = writer.write_vectored(&io).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        rest.advance(written);
    }
    Ok(())
}

/// Bytes one vectored write carries, at most, of a batch of frames no longer than
/// [`CUT_FRAMES_UP_TO`] each: a 1 MiB frame goes out in two writes, not one.
pub const MAX_WRITE: usize = 512 * 1024;

/// The longest frame (payload bytes) whose batch a link cuts into writes of 512 KiB
/// ([`MAX_WRITE`]); a batch with a longer frame goes out in
/// as few writes as the socket takes. Cutting the 1 MiB messages of a fan-out (the full
/// topology's scatter and all-to-all, the trees' sends) took a fifth to a half off their
/// time; cutting 8 MiB frames came out anywhere from 0.93x to 1.26x
/// (docs/PERFORMANCE-NOTES.md, "How much one write may carry"). Open MPI's TCP transport
/// writes fragments of at most 128 KiB. `auto`'s built-in all-to-all rule counts on it
/// too (its blocks of at most 1 MiB: collectives/src/tuning/default.json).
pub const CUT_FRAMES_UP_TO: usize = 1024 * 1024;

/// What an algorithm may count on from stream links ([`LinkCapabilities`]): they are raw,
/// read a message longer than [`RENDEZVOUS_ABOVE`] straight into its place, and cut frames
/// of up to [`CUT_FRAMES_UP_TO`] into writes that take turns.
pub const STREAM_LINKS: LinkCapabilities = LinkCapabilities {
    raw: true,
    reads_in_place_above: Some(RENDEZVOUS_ABOVE),
    cuts_into_writes_up_to: CUT_FRAMES_UP_TO,
};

/// Whether a frame of `len` payload bytes is one a link cuts into writes of
/// [`MAX_WRITE`] (the rule [`STREAM_LINKS`] tells `Comm::send_in_turn`).
pub fn cuts_frame(len: usize) -> bool {
    len <= CUT_FRAMES_UP_TO
}

/// The most bytes one write of `batch` carries: [`MAX_WRITE`] unless a frame of it is
/// longer than [`CUT_FRAMES_UP_TO`].
fn max_write(batch: &[Outgoing]) -> usize {
    match batch.iter().all(|outgoing| cuts_frame(outgoing.payload.len())) {
        true => MAX_WRITE,
        false => usize::MAX,
    }
}

/// What is left to write of a list of buffers: the first unwritten buffer, how much of
/// it is out, the bytes left in all, and the most one write may carry.
struct Unwritten<'a> {
    slices: &'a [&'a [u8]],
    first: usize,
    offset: usize,
    left: usize,
    max_write: usize,
}

impl<'a> Unwritten<'a> {
    fn new(slices: &'a [&'a [u8]], max_write: usize) -> Self {
        let left = slices.iter().map(|slice| slice.len()).sum();
        let mut rest = Unwritten { slices, first: 0, offset: 0, left, max_write };
        rest.advance(0);
        rest
    }

    fn is_empty(&self) -> bool {
        self.first == self.slices.len()
    }

    /// Fills `io` with the next write: up to `MAX_SLICES` buffers and `max_write` bytes,
    /// the last buffer cut at the byte limit unless what would be left of the whole is
    /// under a quarter of it.
    fn next_write(&self, io: &mut Vec<IoSlice<'a>>) {
        io.clear();
        let left = self.left;
        let budget = if left <= self.max_write.saturating_add(self.max_write / 4) { left } else { self.max_write };
        let mut taken = 0;
        let mut offset = self.offset;
        for slice in &self.slices[self.first..] {
            if taken == budget || io.len() == MAX_SLICES {
                break;
            }
            let part = &slice[offset..slice.len().min(offset + budget - taken)];
            offset = 0;
            if !part.is_empty() {
                taken += part.len();
                io.push(IoSlice::new(part));
            }
        }
    }

    /// Marks `written` more bytes as out (and any empty buffers after them).
    fn advance(&mut self, written: usize) {
        self.left -= written;
        self.offset += written;
        while self.first < self.slices.len() && self.offset >= self.slices[self.first].len() {
            self.offset -= self.slices[self.first].len();
            self.first += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Buffer lengths around the limits: empty, small, and up to three writes' worth.
    fn lengths() -> impl Strategy<Value = Vec<usize>> {
        prop::collection::vec(
            prop_oneof![Just(0usize), 1usize..100, Just(HEAD_LEN), (MAX_WRITE - 64)..(3 * MAX_WRITE)],
            0..12,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every byte goes out once and in order, whatever part of each write the stream
        /// takes; no write carries more than the limit and its quarter, nor more than
        /// `MAX_SLICES` buffers; a write is cut at the limit only when more than a quarter
        /// of it would be left.
        #[test]
        fn writes_carry_every_byte_once_within_the_limit(
            lengths in lengths(),
            takes in prop::collection::vec(1usize..=100, 1..16),
        ) {
            let buffers: Vec<Vec<u8>> = lengths
                .iter()
                .enumerate()
                .map(|(i, &len)| (0..len).map(|j| (i * 31 + j) as u8).collect())
                .collect();
            let slices: Vec<&[u8]> = buffers.iter().map(Vec::as_slice).collect();
            let expected: Vec<u8> = buffers.concat();
            let mut rest = Unwritten::new(&slices, MAX_WRITE);
            let mut io = Vec::new();
            let mut out = Vec::new();
            let mut calls = 0;
            while !rest.is_empty() {
                rest.next_write(&mut io);
                let offered: usize = io.iter().map(|slice| slice.len()).sum();
                let left = expected.len() - out.len();
                prop_assert!(offered > 0);
                prop_assert!(io.len() <= MAX_SLICES);
                prop_assert!(offered <= MAX_WRITE + MAX_WRITE / 4);
                prop_assert!(offered == left || offered == MAX_WRITE, "{offered} of {left} left");
                // The stream takes a share of what is offered (at least one byte).
                let take = (offered * takes[calls % takes.len()]).div_ceil(100);
                let mut to_take = take;
                for slice in &io {
                    let n = slice.len().min(to_take);
                    out.extend_from_slice(&slice[..n]);
                    to_take -= n;
                }
                rest.advance(take);
                calls += 1;
            }
            prop_assert_eq!(out, expected);
        }
    }

    #[test]
    fn frames_up_to_the_limit_are_cut() {
        assert!(cuts_frame(CUT_FRAMES_UP_TO) && !cuts_frame(CUT_FRAMES_UP_TO + 1));
    }

    #[tokio::test]
    async fn a_long_frame_goes_out_whole_through_a_pipe() {
        let big: Vec<u8> = (0..3 * MAX_WRITE + 77).map(|i| (i % 251) as u8).collect();
        let head = [7u8; HEAD_LEN];
        let (mut a, mut b) = tokio::io::duplex(64 * 1024);
        let slices: Vec<&[u8]> = vec![&head, &[], &big];
        let expected = [&head[..], &big[..]].concat();
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; expected.len()];
            b.read_exact(&mut got).await.map(|_| got == expected)
        });
        write_all_slices(&mut a, &slices, MAX_WRITE).await.expect("written");
        assert!(reader.await.expect("reader").expect("read"));
    }
}
