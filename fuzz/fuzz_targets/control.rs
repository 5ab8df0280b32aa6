//! Fuzzes the control-message decoders (`codec::decode` of `ToCoordinator`, `ToNode`,
//! `ClientRequest`, `ClientResponse` and `Wiring`; the first input byte picks which):
//! nothing panics or allocates absurdly, and whatever decodes round-trips.

#![no_main]

use libfuzzer_sys::fuzz_target;
use topocomm_fuzz::assert_round_trips;
use topocomm_proto::codec;
use topocomm_proto::control::{ClientRequest, ClientResponse, ToCoordinator, ToNode, Wiring};

fn decodes<T>(body: &[u8])
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    if let Ok(value) = codec::decode::<T>(body) {
        assert_round_trips(body, &value, |v| codec::encode(v).unwrap(), |b| codec::decode(b).ok());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 5 {
        0 => decodes::<ToCoordinator>(body),
        1 => decodes::<ToNode>(body),
        2 => decodes::<ClientRequest>(body),
        3 => decodes::<ClientResponse>(body),
        _ => decodes::<Wiring>(body),
    }
});
