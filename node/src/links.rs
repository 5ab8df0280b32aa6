//! The tasks behind one neighbour link: a reader that cuts the byte stream into
//! length-delimited frames and hands them to the router, and a writer that sends the
//! router's frames with one vectored write of length + header and payload (the payload
//! is never copied into a codec buffer). Works over any byte stream: TCP in the daemon,
//! in-memory pipes in tests.

use std::io::IoSlice;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
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
    let codec = LengthDelimitedCodec::builder().max_frame_length(max_frame).new_codec();
    let mut frames = std::pin::pin!(FramedRead::new(reader, codec));
    loop {
        let body = match frames.next().await {
            Some(Ok(body)) => body,
            Some(Err(error)) => return format!("link to node {peer}: bad frame: {error}"),
            None => return format!("link to node {peer} was closed by the peer"),
        };
        let frame = match Frame::parse(body.freeze()) {
            Ok(frame) => frame,
            Err(error) => return format!("link to node {peer}: malformed frame: {error}"),
        };
        if let Err(error) = router.on_frame(peer, frame) {
            return format!("link to node {peer}: {error}");
        }
    }
}

/// Writes frames until the router drops the queue, at the pace `link_free_at` sets under
/// emulation. Deadlines come from that schedule, not from when the previous write
/// happened to finish, so timing errors do not add up.
async fn write_frames<W: AsyncWrite>(
    writer: W,
    mut frames: mpsc::UnboundedReceiver<Outgoing>,
    router: &Router,
) -> std::io::Result<()> {
    let mut writer = std::pin::pin!(writer);
    let clock = router.clock();
    let mut free_at = Instant::now();
    while let Some(Outgoing { frame, queued_at }) = frames.recv().await {
        let header = &frame.header;
        if let Some(model) = router.emulation().filter(|_| header.tag < SYSTEM_TAG_BASE) {
            free_at = link_free_at(&model, clock, &frame, queued_at, free_at);
            clock.wait_until(free_at).await;
        }
        let mut head = BytesMut::with_capacity(4 + FrameHeader::ENCODED_LEN);
        head.put_u32(frame.body_len() as u32);
        head.extend_from_slice(&frame.header.encode());
        write_all_vectored(&mut writer, head.freeze(), frame.payload).await?;
    }
    writer.shutdown().await
}

/// When an emulated link, free from `free_at`, has carried `frame` (queued at `queued_at`):
///
/// * a frame (a message, or one packet of it) occupies the link for t_w · bytes, plus
///   t_h on a message's first packet, plus t_s when its source sends it; it starts when
///   it is queued or when the link frees up, whichever is later (one transfer at a time);
/// * cut-through without packets: a message an intermediate node passes on has its head
///   here t_w · m before its tail was queued, so it leaves t_h after the tail arrived —
///   unless the link is busy, in which case the head waits and the whole message with it.
pub fn link_free_at(model: &LinkModel, clock: Clock, frame: &Frame, queued_at: Instant, free_at: Instant) -> Instant {
    let header = &frame.header;
    let transfer = clock.duration(model.transfer_ns(frame.payload.len()));
    let mut busy = transfer;
    if header.packet == 0 {
        busy += clock.duration(model.th_ns);
        if header.hops == 0 {
            busy += clock.duration(model.ts_ns);
        }
    }
    let ready = if model.cuts_through_whole() && header.hops > 0 {
        queued_at.checked_sub(transfer).unwrap_or(queued_at)
    } else {
        queued_at
    };
    free_at.max(ready) + busy
}

/// Writes `head` then `payload` with vectored writes until both are out.
pub async fn write_all_vectored<W: AsyncWrite + Unpin>(
    writer: &mut W,
    head: Bytes,
    payload: Bytes,
) -> std::io::Result<()> {
    let mut buf = head.chain(payload);
    while buf.has_remaining() {
        let mut slices = [IoSlice::new(&[]); 2];
        let count = buf.chunks_vectored(&mut slices);
        let written = writer.write_vectored(&slices[..count]).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf.advance(written);
    }
    Ok(())
}
