//! Fuzzes the handshake decoders (`auth::decode` of `Hello`, `Challenge`, `Answer`,
//! `Verdict`; the first input byte picks which) and the checks of the names and addresses
//! a stranger's `Hello` carries: nothing panics, whatever decodes round-trips, and what
//! `shown` makes of any text holds no control character.

#![no_main]

use libfuzzer_sys::fuzz_target;
use topocomm_fuzz::assert_round_trips;
use topocomm_proto::auth::{self, Answer, Challenge, Hello, Purpose, Verdict};

fn decodes<T>(body: &[u8]) -> Option<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let value = auth::decode::<T>(body).ok()?;
    assert!(body.len() <= auth::MAX_HANDSHAKE_MESSAGE, "decoded a {}-byte handshake message", body.len());
    assert_round_trips(body, &value, |v| auth::encode(v).unwrap(), |b| auth::decode(b).ok());
    Some(value)
}

/// `text` as a log would show it: escaped, so no control character survives.
fn check_shown(text: &str) {
    let shown = auth::shown(text);
    assert!(!shown.chars().any(char::is_control), "shown({text:?}) = {shown:?} holds a control character");
    assert!(shown.chars().count() <= 64 * 10 + 3, "shown({text:?}) is {} characters", shown.chars().count());
}

fn check_text(text: &str, check: fn(&str) -> Result<(), auth::NameError>, allowed: &str, limit: usize) {
    check_shown(text);
    match check(text) {
        Ok(()) => {
            assert!(!text.is_empty() && text.len() <= limit, "accepted {text:?}");
            assert!(text.chars().all(|c| c.is_ascii_alphanumeric() || allowed.contains(c)), "accepted {text:?}");
        }
        Err(error) => {
            let message = error.to_string();
            assert!(!message.chars().any(char::is_control), "error {message:?} holds a control character");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 4 {
        0 => {
            if let Some(Hello { purpose: Purpose::Node { name, data_addr, .. }, .. }) = decodes::<Hello>(body) {
                check_text(&name, auth::check_name, "._-", auth::MAX_NAME_LEN);
                check_text(&data_addr, auth::check_address, "._-:[]", auth::MAX_ADDRESS_LEN);
            }
        }
        1 => {
            if let Some(Challenge::Refused(reason)) = decodes::<Challenge>(body) {
                check_shown(&reason);
            }
        }
        2 => {
            decodes::<Answer>(body);
        }
        _ => {
            if let Some(Verdict::Refused(reason)) = decodes::<Verdict>(body) {
                check_shown(&reason);
            }
        }
    }
    // Any bytes at all, as a name would be shown once lossily made text.
    check_shown(&String::from_utf8_lossy(body));
});
