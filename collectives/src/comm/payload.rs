//! What a message carries: its [`Payload`] (one buffer, or blocks written back to back
//! without being copied together), and the [`Written`] signal a link drops once it is done
//! with a frame, which tells the sender its buffer is free again.

use bytes::{Bytes, BytesMut};

/// A frame's payload: one buffer, or several that a link writes back to back (one
/// vectored write on a stream), so that a message made of blocks is never copied into
/// one buffer on its way out. The receiver gets one payload either way.
#[derive(Debug, Clone)]
pub enum Payload {
    One(Bytes),
    Parts(Vec<Bytes>),
}

impl Payload {
    /// The payload of `parts`, in order (a single part needs no list).
    pub fn of(parts: impl IntoIterator<Item = Bytes>) -> Self {
        // No list for a message of one part, the common case (a list is an allocation
        // per message).
        let mut parts = parts.into_iter().filter(|part| !part.is_empty());
        let Some(first) = parts.next() else { return Payload::One(Bytes::new()) };
        match parts.next() {
            None => Payload::One(first),
            Some(second) => Payload::Parts([first, second].into_iter().chain(parts).collect()),
        }
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.parts().iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffers, in order.
    pub fn parts(&self) -> &[Bytes] {
        match self {
            Payload::One(bytes) => std::slice::from_ref(bytes),
            Payload::Parts(parts) => parts,
        }
    }

    /// The payload as one buffer (copies only when it has several parts that are not
    /// all known zeros, see `crate::zeros`).
    pub fn into_bytes(self) -> Bytes {
        match self {
            Payload::One(bytes) => bytes,
            Payload::Parts(parts) if let Some(zeros) = crate::zeros::join(&parts) => zeros,
            Payload::Parts(parts) => {
                let mut whole = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
                for part in &parts {
                    whole.extend_from_slice(part);
                }
                whole.freeze()
            }
        }
    }
}

/// Held by an outgoing frame until its link is done with it, buffer included: the
/// receiver of [`Written::new`] then resolves (as a closed channel), which tells a sender
/// that its buffer's memory is free again (`Comm::exchange`).
pub struct Written {
    /// Never sent on: dropping it is the signal.
    _signal: tokio::sync::oneshot::Sender<()>,
}

impl Written {
    /// A signal and what resolves when the frame that carries it is done with.
    pub fn new() -> (Self, tokio::sync::oneshot::Receiver<()>) {
        let (signal, done) = tokio::sync::oneshot::channel();
        (Self { _signal: signal }, done)
    }
}

/// The parts one after another in one buffer (one copy; a single part is not copied,
/// and known zeros join without one, see `crate::zeros`).
pub fn concat<'a>(parts: impl IntoIterator<Item = &'a Bytes>) -> Bytes {
    let parts: Vec<&Bytes> = parts.into_iter().collect();
    if let [only] = parts.as_slice() {
        return (*only).clone();
    }
    if let Some(zeros) = crate::zeros::join(parts.iter().copied()) {
        return zeros;
    }
    let mut out = BytesMut::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.extend_from_slice(part);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Empty parts are left out; one part is the payload itself, more keep their order.
    #[test]
    fn a_payload_of_parts_keeps_the_non_empty_ones_in_order() {
        let part = |text: &'static str| Bytes::from_static(text.as_bytes());
        let of = |parts: Vec<Bytes>| Payload::of(parts);
        assert!(matches!(of(vec![]), Payload::One(bytes) if bytes.is_empty()));
        assert!(matches!(of(vec![part(""), part("")]), Payload::One(bytes) if bytes.is_empty()));
        assert!(matches!(of(vec![part(""), part("ab"), part("")]), Payload::One(bytes) if bytes == "ab"));
        let Payload::Parts(parts) = of(vec![part("a"), part(""), part("bc"), part("d")]) else {
            panic!("three parts make a list")
        };
        assert_eq!(parts, [part("a"), part("bc"), part("d")]);
    }
}
