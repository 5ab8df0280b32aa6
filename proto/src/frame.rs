//! The data-plane frame: a fixed-size bincode header (run, iteration, source,
//! destination, tag, hop count) followed by payload bytes that are never re-serialised.
//!
//! On the wire a frame is `u32 length (big-endian) | header | payload`, where the
//! length counts header and payload. The length prefix is written and checked by
//! the node's link layer (`node/src/links.rs`, which reads a long payload straight into
//! its destination); this file only knows the header.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::topology::NodeId;

/// A message tag chosen by an algorithm (usually its step number).
pub type Tag = u32;

/// Tags at or above this value belong to the runtime (barriers, clock sync), never to
/// an algorithm.
pub const SYSTEM_TAG_BASE: Tag = 0xFFFF_0000;

/// The largest frame a link accepts by default (header + payload).
pub const DEFAULT_MAX_FRAME: usize = 256 * 1024 * 1024;

/// Who a frame is from and for, and how far it has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FrameHeader {
    /// The run this frame belongs to (frames of other runs are dropped).
    pub run: u64,
    /// The iteration of the run (warm-up iterations count too).
    pub iteration: u32,
    /// The node that sent the message.
    pub src: u32,
    /// The node the message is for.
    pub dst: u32,
    /// The algorithm's tag.
    pub tag: Tag,
    /// Links crossed before the one the frame is on (0 as its source sends it).
    pub hops: u16,
    /// The sender's step: one more than the deepest step it had received from when it
    /// sent (so the deepest step anyone receives is the schedule's step count).
    pub step: u16,
    /// Index of this packet within its message (cut-through moves messages in packets).
    pub packet: u32,
    /// Whether this is the message's last packet (always, under store-and-forward).
    pub last: bool,
    /// Under emulation: when the frame's tail reached the node it was sent to, in
    /// nanoseconds on the cluster's common timeline (0: not emulated). A hop schedules
    /// what the frame causes from this instant, not from when its software got to it, so
    /// software delays hide inside the emulated times instead of adding to them.
    pub due_ns: u64,
}

impl FrameHeader {
    /// The header's encoded length: fixed, because integers are fixed-width.
    pub const ENCODED_LEN: usize = 8 + 4 + 4 + 4 + 4 + 2 + 2 + 4 + 1 + 8;

    pub fn src(&self) -> NodeId {
        self.src as NodeId
    }

    pub fn dst(&self) -> NodeId {
        self.dst as NodeId
    }

    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self).expect("a frame header always encodes")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        codec::decode(bytes)
    }
}

/// A header and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub header: FrameHeader,
    pub payload: Bytes,
}

impl Frame {
    /// Splits a received frame body (header + payload, no length prefix) without copying
    /// the payload.
    pub fn parse(mut body: Bytes) -> Result<Self, CodecError> {
        if body.len() < FrameHeader::ENCODED_LEN {
            return Err(CodecError::Decode(format!(
                "frame of {} bytes is shorter than its {}-byte header",
                body.len(),
                FrameHeader::ENCODED_LEN
            )));
        }
        let header_bytes = body.split_to(FrameHeader::ENCODED_LEN);
        let header = FrameHeader::decode(&header_bytes)?;
        Ok(Frame { header, payload: body })
    }

    /// Header plus payload length: what the length prefix says.
    pub fn body_len(&self) -> usize {
        FrameHeader::ENCODED_LEN + self.payload.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> FrameHeader {
        FrameHeader {
            run: 9,
            iteration: 3,
            src: 1,
            dst: 6,
            tag: 42,
            hops: 2,
            step: 1,
            packet: 0,
            last: true,
            due_ns: 7,
        }
    }

    #[test]
    fn header_has_its_fixed_length() {
        assert_eq!(header().encode().len(), FrameHeader::ENCODED_LEN);
    }

    #[test]
    fn parse_keeps_payload_without_copy() {
        let mut body = header().encode();
        body.extend_from_slice(b"payload");
        let body = Bytes::from(body);
        let frame = Frame::parse(body.clone()).unwrap();
        assert_eq!(frame.header, header());
        assert_eq!(&frame.payload[..], b"payload");
        // Same allocation: the payload points into the received body.
        assert_eq!(frame.payload.as_ptr(), body[FrameHeader::ENCODED_LEN..].as_ptr());
    }

    #[test]
    fn short_body_is_an_error() {
        assert!(Frame::parse(Bytes::from_static(b"abc")).is_err());
    }
}
