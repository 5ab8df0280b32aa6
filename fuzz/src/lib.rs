//! What the fuzz targets share: the round-trip property every decoded message must hold.

use serde::{Serialize, de::DeserializeOwned};

/// Checks a value `decode` accepted from `input`: it re-encodes to exactly `input` (the
/// encoding is canonical, so a MAC over received bytes means one message), and those
/// bytes decode again to an equal value (compared by encoding when the value holds a NaN,
/// which is not equal to itself).
pub fn assert_round_trips<T, E, D>(input: &[u8], value: &T, encode: E, decode: D)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    E: Fn(&T) -> Vec<u8>,
    D: Fn(&[u8]) -> Option<T>,
{
    let bytes = encode(value);
    assert_eq!(bytes, input, "{value:?} was decoded from bytes other than its encoding");
    let again = decode(&bytes).unwrap_or_else(|| panic!("the encoding of {value:?} does not decode"));
    if value == value {
        assert_eq!(&again, value, "decode(encode(value)) differs from value");
    } else {
        assert_eq!(encode(&again), bytes, "decode(encode(value)) re-encodes differently");
    }
}
