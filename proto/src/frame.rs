//! The data-plane frame: a fixed-size header (run, iteration, source, destination, tag,
//! hop count, ...) followed by payload bytes that are never re-serialised.
//!
//! On the wire a frame is `u32 length (big-endian) | header | payload`, where the
//! length counts header and payload. The length prefix is written and checked by
//! the node's stream link (`node/src/transport/stream.rs`, which reads a long payload
//! straight into its destination); this file only knows the header. The header's 41
//! bytes are its fields in order, little-endian, `last` as one byte 0 or 1 (the layout
//! bincode's fixed-int encoding gives it), written into an array: no allocation per frame.

use bytes::{Buf, BufMut, Bytes};
use serde::{Deserialize, Serialize};

use crate::codec::CodecError;
use crate::topology::{Flow, NodeId};

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
    /// nanoseconds on the cluster's common timeline, undilated (0: not emulated). A hop schedules
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

    /// The flow the frame is of (source, destination, tag), which its route is.
    pub fn flow(&self) -> Flow {
        Flow::new(self.src(), self.dst(), self.tag)
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut bytes = [0; Self::ENCODED_LEN];
        let mut out = &mut bytes[..];
        out.put_u64_le(self.run);
        out.put_u32_le(self.iteration);
        out.put_u32_le(self.src);
        out.put_u32_le(self.dst);
        out.put_u32_le(self.tag);
        out.put_u16_le(self.hops);
        out.put_u16_le(self.step);
        out.put_u32_le(self.packet);
        out.put_u8(u8::from(self.last));
        out.put_u64_le(self.due_ns);
        bytes
    }

    /// The header in `bytes`, which must be exactly [`FrameHeader::ENCODED_LEN`] long.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != Self::ENCODED_LEN {
            return Err(CodecError::Decode(format!(
                "a frame header is {} bytes, not {}",
                Self::ENCODED_LEN,
                bytes.len()
            )));
        }
        let mut at = bytes;
        let header = FrameHeader {
            run: at.get_u64_le(),
            iteration: at.get_u32_le(),
            src: at.get_u32_le(),
            dst: at.get_u32_le(),
            tag: at.get_u32_le(),
            hops: at.get_u16_le(),
            step: at.get_u16_le(),
            packet: at.get_u32_le(),
            last: match at.get_u8() {
                0 => false,
                1 => true,
                other => return Err(CodecError::Decode(format!("invalid boolean value {other} for `last`"))),
            },
            due_ns: at.get_u64_le(),
        };
        Ok(header)
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
    fn parse_keeps_payload_without_copy() {
        let mut body = header().encode().to_vec();
        body.extend_from_slice(b"payload");
        let body = Bytes::from(body);
        let frame = Frame::parse(body.clone()).unwrap();
        assert_eq!(frame.header, header());
        assert_eq!(&frame.payload[..], b"payload");
        // Same allocation: the payload points into the received body.
        assert_eq!(frame.payload.as_ptr(), body[FrameHeader::ENCODED_LEN..].as_ptr());
    }

    #[test]
    fn the_header_is_laid_out_as_bincode_lays_it_out() {
        // The layout is the one bincode's fixed-int little-endian encoding gives, so
        // frames of earlier builds read the same.
        let config = bincode::config::standard().with_fixed_int_encoding().with_little_endian();
        let by_bincode = bincode::serde::encode_to_vec(header(), config).unwrap();
        assert_eq!(by_bincode.len(), FrameHeader::ENCODED_LEN, "the fixed length is what bincode writes");
        assert_eq!(header().encode().to_vec(), by_bincode);
        assert_eq!(FrameHeader::decode(&by_bincode).unwrap(), header());
    }

    #[test]
    fn a_header_of_the_wrong_length_or_flag_is_an_error() {
        let bytes = header().encode();
        assert!(FrameHeader::decode(&bytes[..40]).is_err());
        assert!(FrameHeader::decode(&[&bytes[..], &[0]].concat()).is_err());
        let mut bad_flag = bytes;
        bad_flag[32] = 2;
        assert!(FrameHeader::decode(&bad_flag).is_err());
    }

    #[test]
    fn short_body_is_an_error() {
        assert!(Frame::parse(Bytes::from_static(b"abc")).is_err());
    }
}
