//! A long vector held in segments for `Comm::exchange_combining`: each segment can be
//! lent to a link to be sent and, once the link is done with it, written again in place
//! (a reduction combines the partner's segment into it); the whole is joined at the end
//! without a copy when every segment came back. This is what lets recursive doubling
//! hold its input, its sum and a couple of segments, where a whole received vector
//! beside the sum would make three vectors.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use smallvec::{SmallVec, smallvec};

/// A vector's segments: one (a vector exchanged whole) is held inline.
pub type SegmentList = SmallVec<[Segment; 1]>;

/// A vector in segments (see the module docs).
#[derive(Debug)]
pub struct Segments {
    parts: SegmentList,
}

/// One segment of a [`Segments`].
#[derive(Debug)]
pub enum Segment {
    /// Ours to write: a part of the vector's one allocation.
    Own(BytesMut),
    /// Read-only: the whole vector when it is not cut (it may be shared, as a node's
    /// input is), or a segment another holder still had when it came back.
    Shared(Bytes),
}

impl Segments {
    /// `vector` as one segment, as it is (it may be shared).
    pub fn whole(vector: Bytes) -> Self {
        Segments::from(Segment::Shared(vector))
    }

    /// `vector` in pieces of `segment_len` bytes (the last one shorter), cut from one
    /// allocation of its own — `vector`'s if no one else holds it, else a copy, as MPI
    /// copies the send buffer into the one it reduces in. A vector of one piece stays
    /// [`Segments::whole`].
    pub fn cut(vector: Bytes, segment_len: usize) -> Self {
        if vector.len() <= segment_len {
            return Segments::whole(vector);
        }
        let mut rest = vector.try_into_mut().unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        let mut parts = SegmentList::with_capacity(rest.len().div_ceil(segment_len));
        while rest.len() > segment_len {
            parts.push(Segment::Own(rest.split_to(segment_len)));
        }
        parts.push(Segment::Own(rest));
        Segments { parts }
    }

    /// The one segment, if the vector is in one; else the vector back.
    pub fn into_whole(mut self) -> Result<Segment, Segments> {
        match self.parts.len() {
            1 => Ok(self.parts.pop().expect("one segment")),
            _ => Err(self),
        }
    }

    /// The segments, in order.
    pub fn into_parts(self) -> SegmentList {
        self.parts
    }

    /// The segments `parts`, in order.
    pub fn from_parts(parts: SegmentList) -> Self {
        Segments { parts }
    }

    /// How many segments.
    pub fn count(&self) -> usize {
        self.parts.len()
    }

    /// The whole vector: the segments joined back into their allocation without a copy
    /// when each is its own and they lie in order, else copied together (each dropped
    /// once copied).
    pub fn into_bytes(self) -> Bytes {
        let mut parts = self.parts.into_iter();
        let Some(first) = parts.next() else { return Bytes::new() };
        let mut whole = match first {
            Segment::Shared(only) if parts.len() == 0 => return only,
            Segment::Own(first) => first,
            Segment::Shared(first) => BytesMut::from(&first[..]),
        };
        for part in parts {
            match part {
                // O(1) when `part` follows `whole` in the same allocation.
                Segment::Own(next) => whole.unsplit(next),
                Segment::Shared(next) => whole.extend_from_slice(&next),
            }
        }
        whole.freeze()
    }
}

impl From<Segment> for Segments {
    fn from(only: Segment) -> Self {
        Segments { parts: smallvec![only] }
    }
}

/// A segment this short is sent as a copy of its own: one small allocation, where lending
/// it would take two (the shared owner and its handle) and leave the segment shared, to be
/// copied again when it is combined (recursive doubling's 8-byte vectors on the simulator:
/// a shared count in another node's memory touched by both partners every step).
pub const COPIED_UP_TO: usize = 512;

impl Segment {
    /// The segment's bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Segment::Own(segment) => segment,
            Segment::Shared(bytes) => bytes,
        }
    }

    /// The bytes to send, and the loan to [`Loan::settle`] once the link is done with them.
    pub fn lend(self) -> (Bytes, Loan) {
        match self {
            // Known zeros (lengths only) are shared at no cost: they stay unallocated.
            Segment::Shared(bytes) if crate::zeros::is_zeros(&bytes) => (bytes.clone(), Loan::Shared(bytes)),
            short if short.as_slice().len() <= COPIED_UP_TO => {
                (Bytes::copy_from_slice(short.as_slice()), Loan::Kept(short))
            }
            Segment::Own(segment) => {
                let kept = Arc::new(segment);
                (Bytes::from_owner(Lent(kept.clone())), Loan::Own(kept))
            }
            Segment::Shared(bytes) => (bytes.clone(), Loan::Shared(bytes)),
        }
    }
}

/// A segment lent to a link.
#[derive(Debug)]
pub enum Loan {
    /// A short segment, sent as a copy: still the sender's as it was.
    Kept(Segment),
    Own(Arc<BytesMut>),
    Shared(Bytes),
}

impl Loan {
    /// The segment back: ours to write again if no one holds what was sent any more (a
    /// socket's link drops its frame once written; an in-memory link hands the very
    /// buffer to the receiver, who may still hold it), else read-only.
    pub fn settle(self) -> Segment {
        match self {
            Loan::Kept(segment) => segment,
            Loan::Own(kept) => match Arc::try_unwrap(kept) {
                Ok(segment) => Segment::Own(segment),
                Err(still_held) => Segment::Shared(Bytes::from_owner(Lent(still_held))),
            },
            Loan::Shared(bytes) => Segment::Shared(bytes),
        }
    }
}

/// What a lent segment's `Bytes` own: the segment, shared with its [`Loan`].
struct Lent(Arc<BytesMut>);

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment's length in these tests: long enough to be lent, not copied.
    const SEG: usize = 2 * COPIED_UP_TO;
    /// A vector of three such segments, the last shorter (but still lent).
    const LEN: usize = 2 * SEG + 3 * COPIED_UP_TO / 2;

    fn vector(len: usize) -> Bytes {
        (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
    }

    #[test]
    fn a_short_vector_stays_whole_and_shared() {
        let input = vector(10);
        let segments = Segments::cut(input.clone(), 16);
        assert_eq!(segments.count(), 1);
        let whole = segments.into_bytes();
        assert_eq!(whole.as_ptr(), input.as_ptr(), "not copied");
    }

    #[test]
    fn a_shared_vector_is_copied_once_then_joined_without_a_copy() {
        let input = vector(LEN);
        let segments = Segments::cut(input.clone(), SEG);
        assert_eq!(segments.count(), 3);
        let parts = segments.into_parts();
        assert!(parts.iter().all(|part| matches!(part, Segment::Own(_))));
        let first = match &parts[0] {
            Segment::Own(part) => part.as_ptr(),
            Segment::Shared(_) => unreachable!(),
        };
        assert_ne!(first, input.as_ptr(), "the input is not written");
        let whole = Segments::from_parts(parts).into_bytes();
        assert_eq!(whole, input);
        assert_eq!(whole.as_ptr(), first, "joined in its allocation");
    }

    #[test]
    fn a_segment_comes_back_writable_once_the_link_drops_it() {
        let mut parts = Segments::cut(vector(LEN), SEG).into_parts();
        let (sent, loan) = parts.remove(1).lend();
        assert_eq!(sent, vector(LEN).slice(SEG..2 * SEG));
        drop(sent);
        let Segment::Own(mut back) = loan.settle() else { panic!("not writable") };
        back[0] = 7;
        parts.insert(1, Segment::Own(back));
        let whole = Segments::from_parts(parts).into_bytes();
        assert_eq!(whole[SEG], 7);
        assert_eq!(whole[..SEG], vector(LEN)[..SEG]);
    }

    #[test]
    fn a_segment_still_held_comes_back_read_only_and_is_copied_at_the_join() {
        let mut parts = Segments::cut(vector(LEN), SEG).into_parts();
        let (sent, loan) = parts.remove(2).lend();
        let back = loan.settle();
        assert!(matches!(back, Segment::Shared(_)));
        parts.push(back);
        assert_eq!(Segments::from_parts(parts).into_bytes(), vector(LEN));
        assert_eq!(sent, vector(LEN).slice(2 * SEG..), "the holder's bytes are untouched");
    }

    #[test]
    fn a_short_segment_is_sent_as_a_copy_and_stays_the_senders() {
        let input = vector(COPIED_UP_TO);
        let (sent, loan) = Segment::Shared(input.clone()).lend();
        assert_eq!(sent, input);
        assert_ne!(sent.as_ptr(), input.as_ptr(), "a copy");
        let Segment::Shared(back) = loan.settle() else { panic!("kept as it was") };
        assert_eq!(back.as_ptr(), input.as_ptr(), "the segment itself");
        drop(input);
        assert!(back.is_unique(), "no one else holds it: it can be combined in place");
    }
}
