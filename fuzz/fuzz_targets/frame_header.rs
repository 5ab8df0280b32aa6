//! Fuzzes the data-plane header decoders, `FrameHeader::decode` and `Frame::parse`: no
//! input panics, and a header that decodes re-encodes to exactly the bytes it came from.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use topocomm_proto::frame::{Frame, FrameHeader};

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = FrameHeader::decode(data) {
        assert_eq!(data.len(), FrameHeader::ENCODED_LEN, "a header decoded from {} bytes", data.len());
        assert_eq!(header.encode(), data, "{header:?} re-encodes differently");
    }
    match Frame::parse(Bytes::copy_from_slice(data)) {
        Ok(frame) => {
            assert_eq!(frame.header.encode(), &data[..FrameHeader::ENCODED_LEN]);
            assert_eq!(&frame.payload[..], &data[FrameHeader::ENCODED_LEN..]);
            assert_eq!(FrameHeader::ENCODED_LEN + frame.payload.len(), data.len());
        }
        Err(_) => assert!(
            data.len() < FrameHeader::ENCODED_LEN || FrameHeader::decode(&data[..FrameHeader::ENCODED_LEN]).is_err(),
            "Frame::parse refused a body whose header decodes"
        ),
    }
});
