//! The tasks behind one neighbour link: a reader that cuts the byte stream into
//! `u32 length | header | payload` frames and hands them to the router, and a writer
//! that sends the router's frames with vectored writes of length prefixes, headers and
//! payload parts. No payload is ever copied into a codec buffer: the writer names the
//! sender's buffers, several queued frames per system call; the reader leaves a short
//! payload in its read-ahead buffer and reads a long one, once its receive is posted
//! (`Router::admit`, a rendezvous), straight into a buffer of its own — or into the
//! place that receive offers for it (see `assembly`). Works over any byte stream: TCP
//! in the daemon, in-memory pipes in tests.

use std::io::IoSlice;
use std::sync::Arc;

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use topocomm_proto::NodeId;
use topocomm_proto::frame::{Frame, FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::LinkModel;

use crate::pacing::Clock;
use crate::router::{Outgoing, Router};

/// Starts the reader and writer tasks of the link to `peer`.
pub fn spawn<S>(
    peer: NodeId,
    stream: S,
    frames: mpsc::UnboundedReceiver<Outgoing>,
    router: Arc<Router>,
    max_frame: usize,
    cancel: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(stream);
    let write_cancel = cancel.clone();
    let write_router = router.clone();
    tokio::spawn(async move {
        tokio::select! {
            result = write_frames(writer, frames, &write_router) => {
                if let Err(error) = result {
                    let reason = format!("link to node {peer}: write failed: {error}");
                    tracing::warn!(peer, %error, "link write failed");
                    write_router.link_failed(reason);
                }
            }
            _ = write_cancel.cancelled() => {}
        }
    });
    tokio::spawn(async move {
        tokio::select! {
            reason = read_frames(reader, peer, &router, max_frame) => {
                tracing::warn!(peer, %reason, "link closed");
                router.link_failed(reason);
            }
            _ = cancel.cancelled() => {}
        }
        // Whatever ended the reader ends the writer too, so the connection closes.
        cancel.cancel();
    });
}

/// Reads frames until the stream fails; returns why it stopped.
async fn read_frames<R: AsyncRead>(reader: R, peer: NodeId, router: &Router, max_frame: usize) -> String {
    let mut reader = std::pin::pin!(reader);
    let mut buffer = BytesMut::with_capacity(READ_AHEAD);
    loop {
        let frame = match next_frame(&mut reader, &mut buffer, max_frame, router, peer).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return format!("link to node {peer} was closed by the peer"),
            Err(FrameError::Io(error)) => return format!("link to node {peer}: bad frame: {error}"),
            Err(FrameError::Malformed(reason)) => return format!("link to node {peer}: malformed frame: {reason}"),
        };
        // An emulated frame for this node travelled ahead of its time: it is delivered
        // when its link model says its tail arrives, as a network emulator releases a
        // packet. One to forward goes on at once: its next link is scheduled from its due
        // time, so no hop adds its real latency to the emulated one.
        let header = &frame.header;
        if header.due_ns > 0 && header.tag < SYSTEM_TAG_BASE && header.dst() == router.id() {
            let timeline = router.timeline();
            let due = timeline.instant(frame.header.due_ns);
            // A frame due after the run's deadline is no frame of this run (or a forged
            // one): refused, not held in memory until then.
            if let Some(horizon) = router.due_horizon()
                && Instant::now().checked_add(horizon).is_none_or(|latest| due > latest)
            {
                return format!(
                    "link to node {peer}: a frame due {:.1} s from now, beyond the run's deadline of {horizon:?}",
                    due.saturating_duration_since(Instant::now()).as_secs_f64()
                );
            }
            timeline.clock().wait_until(due).await;
            tracing::trace!(late_us = crate::pacing::late_us(due), "released");
        }
        if let Err(error) = router.on_frame(peer, frame) {
            return format!("link to node {peer}: {error}");
        }
    }
}

/// Bytes the reader asks the stream for at a time (several small frames per read).
const READ_AHEAD: usize = 64 * 1024;

/// Payloads longer than this are read straight into a buffer of their own, allocated
/// once at their exact length (a shorter one shares the read-ahead buffer), and only
/// once their receive is posted (`Router::admit`): Open MPI's TCP transport sends
/// messages up to 64 KiB eagerly too, and longer ones after a rendezvous.
pub const RENDEZVOUS_ABOVE: usize = 64 * 1024;

/// Why a frame could not be read.
enum FrameError {
    /// The stream failed, or a length prefix is over the limit.
    Io(std::io::Error),
    /// The bytes do not make a frame.
    Malformed(String),
}

impl From<std::io::Error> for FrameError {
    fn from(error: std::io::Error) -> Self {
        FrameError::Io(error)
    }
}

/// Reads the next `u32 length | header | payload` frame (`None`: the stream ended
/// between frames). The payload is never copied after the read: a short one is a slice
/// of `buffer`; a long one waits for its receive, then lands in the place that receive
/// offers for it (its part of an assembled result), or else in a buffer of its own.
async fn next_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut BytesMut,
    max_frame: usize,
    router: &Router,
    peer: NodeId,
) -> Result<Option<Frame>, FrameError> {
    if !fill(reader, buffer, 4).await? {
        if buffer.is_empty() {
            return Ok(None);
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
        return Frame::parse(body).map(Some).map_err(|error| FrameError::Malformed(error.to_string()));
    }
    expect(fill(reader, buffer, 4 + FrameHeader::ENCODED_LEN).await?)?;
    buffer.advance(4);
    let header = FrameHeader::decode(&buffer.split_to(FrameHeader::ENCODED_LEN))
        .map_err(|error| FrameError::Malformed(error.to_string()))?;
    let early = buffer.split_to(buffer.len().min(payload_len));
    router.admit(&header, peer).await;
    let payload = match router.landing(&header, payload_len) {
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
    Ok(Some(Frame { header, payload }))
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

/// Writes frames until the router drops the queue. The frames already queued go out
/// together (up to `BATCH_FRAMES`) in vectored writes: one system call for a burst of
/// small frames, and a frame's payload parts are never copied together.
///
/// Under emulation each algorithm frame is stamped with the instant `link_free_at` says
/// its tail reaches the next node (`due_ns`) and goes out at once; the reader at the other
/// end holds it until then (or, if it only passes through, sends it on at once). So the
/// real transfer and the receiver's wake-up happen while the emulated link is busy, not
/// after it, and the schedule's instants come from the link model, not from when a
/// write happened to finish: timing errors do not add up.
async fn write_frames<W: AsyncWrite>(
    writer: W,
    mut frames: mpsc::UnboundedReceiver<Outgoing>,
    router: &Router,
) -> std::io::Result<()> {
    let mut writer = std::pin::pin!(writer);
    let mut free_at = Instant::now();
    let mut batch = Vec::with_capacity(BATCH_FRAMES);
    let mut heads = Vec::with_capacity(BATCH_FRAMES * HEAD_LEN);
    while let Some(first) = frames.recv().await {
        let mut next = Some(first);
        while let Some(outgoing) = next.take() {
            let mut outgoing = outgoing;
            if let Some(model) = router.emulation().filter(|_| outgoing.header.tag < SYSTEM_TAG_BASE) {
                let (timeline, payload_len) = (router.timeline(), outgoing.payload.len());
                let header = &outgoing.header;
                free_at = link_free_at(&model, timeline.clock(), header, payload_len, outgoing.ready_at, free_at);
                // Never due before it is written (a writer that ran late delays it).
                outgoing.header.due_ns = timeline.ns(free_at.max(Instant::now()));
            }
            batch.push(outgoing);
            if batch.len() == BATCH_FRAMES {
                write_batch(&mut writer, &mut batch, &mut heads).await?;
            }
            next = frames.try_recv().ok();
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
    write_all_slices(writer, &slices).await?;
    drop(slices);
    batch.clear();
    Ok(())
}

/// Writes `slices` one after another with vectored writes until all are out.
pub async fn write_all_slices<W: AsyncWrite + Unpin>(writer: &mut W, slices: &[&[u8]]) -> std::io::Result<()> {
    let (mut first, mut offset) = (0, 0);
    while first < slices.len() {
        let end = slices.len().min(first + MAX_SLICES);
        let mut io: Vec<IoSlice> = Vec::with_capacity(end - first);
        io.push(IoSlice::new(&slices[first][offset..]));
        io.extend(slices[first + 1..end].iter().map(|slice| IoSlice::new(slice)));
        let mut written = writer.write_vectored(&io).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // Skip what went out: whole slices, then part of the next.
        while first < slices.len() && written >= slices[first].len() - offset {
            written -= slices[first].len() - offset;
            first += 1;
            offset = 0;
        }
        offset += written;
    }
    Ok(())
}

/// When an emulated link, free from `free_at`, has carried the frame `header` heads (with
/// `payload_len` bytes, ready to go at `ready_at`):
///
/// * a frame (a message, or one packet of it) occupies the link for t_w · bytes, plus
///   t_h on a message's first packet, plus t_s when its source sends it; it starts when
///   it is ready or when the link frees up, whichever is later (one transfer at a time);
/// * cut-through without packets: a message an intermediate node passes on had its head
///   here t_w · m before its tail, so it leaves t_h after the tail arrived — unless the
///   link is busy, in which case the head waits and the whole message with it.
pub fn link_free_at(
    model: &LinkModel,
    clock: Clock,
    header: &FrameHeader,
    payload_len: usize,
    ready_at: Instant,
    free_at: Instant,
) -> Instant {
    let transfer = clock.duration(model.transfer_ns(payload_len));
    let mut busy = transfer;
    if header.packet == 0 {
        busy += clock.duration(model.th_ns);
        if header.hops == 0 {
            busy += clock.duration(model.ts_ns);
        }
    }
    let ready = if model.cuts_through_whole() && header.hops > 0 {
        ready_at.checked_sub(transfer).unwrap_or(ready_at)
    } else {
        ready_at
    };
    free_at.max(ready) + busy
}
