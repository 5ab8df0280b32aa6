//! The one place that knows the binary encoding of headers and control messages
//! (bincode 2 through serde). Swapping the encoding (postcard is the drop-in) touches
//! only this file.

use serde::{Serialize, de::DeserializeOwned};

/// An encoding or decoding failure, with the encoder's own words.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("cannot encode: {0}")]
    Encode(String),
    #[error("cannot decode: {0}")]
    Decode(String),
    #[error("{trailing} trailing bytes after a decoded value")]
    Trailing { trailing: usize },
}

/// The most a decoded value may claim to hold. A hostile length prefix beyond it is an
/// error, not an allocation (without a limit bincode would try, and abort on overflow).
pub const DECODE_LIMIT: usize = 1 << 30;

/// Fixed-width integers, so that a frame header always has the same length; at most
/// `LIMIT` bytes claimed by the value decoded.
fn config<const LIMIT: usize>() -> impl bincode::config::Config {
    bincode::config::standard().with_fixed_int_encoding().with_little_endian().with_limit::<LIMIT>()
}

/// Encodes a value into a fresh vector.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    bincode::serde::encode_to_vec(value, config::<DECODE_LIMIT>()).map_err(|e| CodecError::Encode(e.to_string()))
}

/// Decodes a value that must take up all of `bytes`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (value, read) = decode_prefix(bytes)?;
    if read != bytes.len() {
        return Err(CodecError::Trailing { trailing: bytes.len() - read });
    }
    Ok(value)
}

/// Decodes a value from the start of `bytes`, returning it and how many bytes it took.
///
/// A value can hold no more than the bytes it is decoded from (integers are fixed-width,
/// so every byte it claims is a byte read), so bincode's limit is the smallest of a few
/// steps that covers `bytes`: a 17-byte message claiming a 300 MiB string is refused
/// instead of reserving 300 MiB before finding the bytes missing (found by fuzzing).
pub fn decode_prefix<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, usize), CodecError> {
    const KIB: usize = 1 << 10;
    match bytes.len() {
        n if n <= 4 * KIB => decode_within::<T, { 4 * KIB }>(bytes),
        n if n <= 256 * KIB => decode_within::<T, { 256 * KIB }>(bytes),
        n if n <= 16 * KIB * KIB => decode_within::<T, { 16 * KIB * KIB }>(bytes),
        n if n <= 256 * KIB * KIB => decode_within::<T, { 256 * KIB * KIB }>(bytes),
        _ => decode_within::<T, DECODE_LIMIT>(bytes),
    }
}

fn decode_within<T: DeserializeOwned, const LIMIT: usize>(bytes: &[u8]) -> Result<(T, usize), CodecError> {
    bincode::serde::decode_from_slice(bytes, config::<LIMIT>()).map_err(|e| CodecError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Sample {
        a: u32,
        b: String,
        c: Vec<u8>,
    }

    #[test]
    fn round_trips() {
        let s = Sample { a: 7, b: "x".into(), c: vec![1, 2, 3] };
        let bytes = encode(&s).unwrap();
        assert_eq!(decode::<Sample>(&bytes).unwrap(), s);
    }

    #[test]
    fn refuses_truncated_and_trailing_input() {
        let bytes = encode(&Sample { a: 7, b: "xyz".into(), c: vec![9; 4] }).unwrap();
        assert!(decode::<Sample>(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(decode::<Sample>(&longer), Err(CodecError::Trailing { trailing: 1 })));
    }

    #[test]
    fn a_claimed_length_beyond_the_input_is_refused_and_real_values_still_decode() {
        // A 300 MiB string claimed by a 17-byte input.
        let mut claim = vec![7, 0, 0, 0];
        claim.extend_from_slice(&(300u64 << 20).to_le_bytes());
        claim.extend_from_slice(&[1, 2, 3, 4, 5]);
        assert!(decode::<Sample>(&claim).is_err());
        // Values just over each step of the limit still decode.
        for len in [4096, 4097, 300 << 10, (16 << 20) + 1] {
            let s = Sample { a: 1, b: "x".repeat(len), c: vec![] };
            assert_eq!(decode::<Sample>(&encode(&s).unwrap()).unwrap(), s);
        }
    }

    /// Junk of every length up to 64 is refused, as a decoding error: shorter than 12
    /// bytes it ends inside the fixed fields, longer it claims a string of more bytes
    /// than it has. Whatever decodes must re-encode to the very bytes it came from.
    #[test]
    fn refuses_garbage_without_panicking() {
        for len in 0..64 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            match decode::<Sample>(&junk) {
                Err(CodecError::Decode(_)) => {}
                Ok(value) => panic!("{len} bytes of junk decoded to {value:?}"),
                Err(other) => panic!("{len} bytes of junk: {other} (not a decoding error)"),
            }
        }
        // Bytes that do decode re-encode to themselves (the encoding is canonical).
        for seed in 0u8..=255 {
            let mut bytes = vec![seed, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, b'a' + seed % 26, 2, 0, 0, 0, 0, 0, 0, 0];
            bytes.extend([seed, seed.wrapping_mul(7)]);
            let value = decode::<Sample>(&bytes).unwrap_or_else(|error| panic!("seed {seed}: {error}"));
            assert_eq!(encode(&value).unwrap(), bytes, "{value:?}");
        }
    }
}
