//! A result assembled in place: one buffer, allocated once at its final length, whose
//! parts arrive from the links straight into their places (MPI's receive into the
//! user's buffer). Without it, a collective that ends with the concatenation of what it
//! received (all-gather, gather) copies every byte once more at the end; with it, a
//! message that finds its place waiting is read from the socket into the result and the
//! last copy never happens.
//!
//! An algorithm claims each part once: its own data with [`Assembly::copy_in`], each
//! expected message with [`Assembly::place`] (handed to `Comm::post_into`, which the link
//! reader fills if the message arrives after it was posted, and which is filled by a copy
//! otherwise). Every part comes back as a `Bytes` view of the result, to be sent on
//! without a copy; [`Assembly::finish`] hands over the whole once every byte is filled.
//!
//! Safety rests on three rules the types keep: a range is claimed at most once (claims
//! never overlap), a range is written only through its claim, and no byte is visible
//! (as a view or the whole) before it has been written.

// A result assembled in place is one buffer that every part's `Place` writes its own
// range of, through a pointer (no lock, no copy): the module's unsafe code, each block
// with its SAFETY argument, and the one module that may have it.
#![allow(unsafe_code)]

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use bytes::buf::UninitSlice;

/// Why an assembly cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    #[error("part {start}..{end} of a {len}-byte result overlaps a part claimed before, or lies outside it")]
    BadClaim { start: usize, end: usize, len: usize },
    #[error("{got} bytes arrived for a {expected}-byte part of the result")]
    WrongLength { got: usize, expected: usize },
    #[error("the result is incomplete: {missing} of its {len} bytes never arrived")]
    Incomplete { missing: usize, len: usize },
    #[error("a lengths-only result was given {len} bytes of data")]
    DataInLengthsOnly { len: usize },
}

/// A result being assembled (see the module docs).
pub struct Assembly {
    buffer: Arc<Buffer>,
    /// Claimed ranges, in claim order (disjoint).
    claimed: Vec<Range<usize>>,
}

/// The memory of an assembly: `len` bytes, written part by part — or, in a lengths-only
/// simulation, `len` known zeros (`crate::zeros`) that no part writes.
struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    /// Bytes written so far (the parts that are complete).
    filled: AtomicUsize,
    /// The buffer is known zeros: nothing allocated, parts are counted, not copied.
    zeros: bool,
}

// SAFETY: the buffer is plain memory; parts are written through disjoint claims only
// (one writer each) and read only once written (see the module docs).
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Buffer {
    fn new(len: usize, lengths_only: bool) -> Self {
        if lengths_only && let Some(zeros) = crate::zeros::zeros(len) {
            let ptr = NonNull::new(zeros.as_ptr().cast_mut()).expect("a slice's pointer is never null");
            return Buffer { ptr, len, filled: AtomicUsize::new(0), zeros: true };
        }
        let mut memory = std::mem::ManuallyDrop::new(Vec::<u8>::with_capacity(len));
        let ptr = NonNull::new(memory.as_mut_ptr()).expect("a vector's pointer is never null");
        Buffer { ptr, len, filled: AtomicUsize::new(0), zeros: false }
    }

    /// The written bytes of `range`.
    ///
    /// # Safety
    /// Every byte of `range` must have been written.
    unsafe fn slice(&self, range: Range<usize>) -> &[u8] {
        // SAFETY: in bounds (claims are checked) and initialised (the caller's promise).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(range.start), range.len()) }
    }

    fn add_filled(&self, bytes: usize) {
        // Release: the bytes of a part are written before it counts as filled.
        self.filled.fetch_add(bytes, Ordering::Release);
    }

    fn filled(&self) -> usize {
        self.filled.load(Ordering::Acquire)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.zeros {
            return;
        }
        // SAFETY: `ptr` and `len` come from `Vec::with_capacity(len)`; length 0 drops no
        // elements (u8 has no destructor anyway).
        unsafe { drop(Vec::from_raw_parts(self.ptr.as_ptr(), 0, self.len)) }
    }
}

/// A written range of an assembly, as the owner of a `Bytes`.
struct View {
    buffer: Arc<Buffer>,
    range: Range<usize>,
}

impl AsRef<[u8]> for View {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: views are made of written ranges only.
        unsafe { self.buffer.slice(self.range.clone()) }
    }
}

fn view(buffer: &Arc<Buffer>, range: Range<usize>) -> Bytes {
    if range.is_empty() {
        return Bytes::new();
    }
    Bytes::from_owner(View { buffer: buffer.clone(), range })
}

impl Assembly {
    /// An empty result of `len` bytes (allocated, not yet written).
    pub fn new(len: usize) -> Self {
        Assembly { buffer: Arc::new(Buffer::new(len, false)), claimed: Vec::new() }
    }

    /// An empty result of `len` bytes in a lengths-only run (`Comm::assembly`): known zeros
    /// that take no memory, every part of which must be known zeros too (allocated as by
    /// [`Assembly::new`] where no region of zeros is that long).
    pub fn lengths_only(len: usize) -> Self {
        Assembly { buffer: Arc::new(Buffer::new(len, true)), claimed: Vec::new() }
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.buffer.len
    }

    pub fn is_empty(&self) -> bool {
        self.buffer.len == 0
    }

    fn claim(&mut self, range: Range<usize>) -> Result<(), AssemblyError> {
        let bad = range.start > range.end
            || range.end > self.buffer.len
            || self.claimed.iter().any(|c| c.start < range.end && range.start < c.end);
        if bad {
            return Err(AssemblyError::BadClaim { start: range.start, end: range.end, len: self.buffer.len });
        }
        self.claimed.push(range);
        Ok(())
    }

    /// Copies `bytes` to `at`; returns the part as a view of the result.
    pub fn copy_in(&mut self, at: usize, bytes: &[u8]) -> Result<Bytes, AssemblyError> {
        let range = at..at + bytes.len();
        self.claim(range.clone())?;
        if self.buffer.zeros {
            if !crate::zeros::is_zeros(bytes) {
                return Err(AssemblyError::DataInLengthsOnly { len: bytes.len() });
            }
        } else {
            // SAFETY: the range is claimed by this call alone and in bounds.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buffer.ptr.as_ptr().add(at), bytes.len()) };
        }
        self.buffer.add_filled(bytes.len());
        Ok(view(&self.buffer, range))
    }

    /// Claims `range` for a message still to come.
    pub fn place(&mut self, range: Range<usize>) -> Result<Place, AssemblyError> {
        self.claim(range.clone())?;
        Ok(Place { buffer: self.buffer.clone(), range, written: 0 })
    }

    /// The whole result, once every byte of it has arrived.
    pub fn finish(self) -> Result<Bytes, AssemblyError> {
        let (filled, len) = (self.buffer.filled(), self.buffer.len);
        if filled != len {
            return Err(AssemblyError::Incomplete { missing: len - filled, len });
        }
        Ok(view(&self.buffer, 0..len))
    }
}

/// A claimed part of an assembly that a message will fill: written once, front to back,
/// by a link reader (as a `BufMut`) or by a copy of a message that came before it.
pub struct Place {
    buffer: Arc<Buffer>,
    range: Range<usize>,
    written: usize,
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Place({:?} of {}, {} written)", self.range, self.buffer.len, self.written)
    }
}

impl Place {
    /// Bytes the message must have.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Fills the place with a copy of `bytes` (a message that arrived before it was posted).
    pub fn fill_from(mut self, bytes: &[u8]) -> Result<Bytes, AssemblyError> {
        if bytes.len() != self.range.len() || self.written != 0 {
            return Err(AssemblyError::WrongLength { got: bytes.len(), expected: self.range.len() });
        }
        if self.buffer.zeros {
            if !crate::zeros::is_zeros(bytes) {
                return Err(AssemblyError::DataInLengthsOnly { len: bytes.len() });
            }
            self.written = bytes.len();
            return self.filled();
        }
        bytes::BufMut::put_slice(&mut self, bytes);
        self.filled()
    }

    /// The part, once completely written, as a view of the result.
    pub fn filled(self) -> Result<Bytes, AssemblyError> {
        if self.written != self.range.len() {
            return Err(AssemblyError::WrongLength { got: self.written, expected: self.range.len() });
        }
        self.buffer.add_filled(self.written);
        Ok(view(&self.buffer, self.range.clone()))
    }
}

// SAFETY: `chunk_mut` hands out only the unwritten rest of this place's own claimed
// range, and `advance_mut` never moves past it.
unsafe impl bytes::BufMut for Place {
    fn remaining_mut(&self) -> usize {
        self.range.len() - self.written
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        assert!(cnt <= self.remaining_mut(), "advanced past the end of a place");
        self.written += cnt;
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        assert!(!self.buffer.zeros, "a lengths-only result is never read into");
        let rest = self.remaining_mut();
        // SAFETY: the unwritten rest of the claimed range: in bounds, and written by no
        // one else.
        unsafe {
            let start = self.buffer.ptr.as_ptr().add(self.range.start + self.written);
            UninitSlice::from_raw_parts_mut(start, rest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_assemble_into_one_buffer_without_a_last_copy() {
        let mut assembly = Assembly::new(10);
        let own = assembly.copy_in(4, b"abc").unwrap();
        let mut place = assembly.place(7..10).unwrap();
        bytes::BufMut::put_slice(&mut place, b"xyz");
        let landed = place.filled().unwrap();
        let early = assembly.place(0..4).unwrap().fill_from(b"0123").unwrap();
        assert_eq!((&own[..], &landed[..], &early[..]), (&b"abc"[..], &b"xyz"[..], &b"0123"[..]));
        let whole = assembly.finish().unwrap();
        assert_eq!(&whole[..], b"0123abcxyz");
        // The parts are views of the whole.
        assert_eq!(own.as_ptr(), whole[4..].as_ptr());
    }

    #[test]
    fn overlapping_claims_and_missing_parts_are_errors() {
        let mut assembly = Assembly::new(8);
        let _place = assembly.place(2..6).unwrap();
        assert!(matches!(assembly.place(5..7), Err(AssemblyError::BadClaim { .. })));
        assert!(matches!(assembly.copy_in(7, b"ab"), Err(AssemblyError::BadClaim { .. })));
        assert!(matches!(assembly.finish(), Err(AssemblyError::Incomplete { missing: 8, len: 8 })));
    }

    #[test]
    #[cfg_attr(miri, ignore = "the zero pages are a read-only mmap, which Miri does not support")]
    fn a_lengths_only_result_is_known_zeros_and_takes_no_data() {
        let mut assembly = Assembly::lengths_only(1 << 30);
        let own = assembly.copy_in(0, &crate::zeros::zeros(1 << 29).unwrap()).unwrap();
        let rest = assembly.place(1 << 29..1 << 30).unwrap().fill_from(&crate::zeros::zeros(1 << 29).unwrap()).unwrap();
        assert!(crate::zeros::is_zeros(&own) && crate::zeros::is_zeros(&rest));
        let whole = assembly.finish().unwrap();
        assert_eq!(whole.len(), 1 << 30);
        assert!(crate::zeros::is_zeros(&whole));
        let mut assembly = Assembly::lengths_only(2);
        assert!(matches!(assembly.copy_in(0, b"ab"), Err(AssemblyError::DataInLengthsOnly { len: 2 })));
        // Outside a lengths-only run the same bytes are data, and taken.
        assert_eq!(Assembly::new(2).copy_in(0, b"ab").unwrap(), &b"ab"[..]);
    }

    #[test]
    fn a_place_refuses_a_wrong_length() {
        let mut assembly = Assembly::new(4);
        let mut place = assembly.place(0..4).unwrap();
        bytes::BufMut::put_slice(&mut place, b"ab");
        assert!(matches!(place.filled(), Err(AssemblyError::WrongLength { got: 2, expected: 4 })));
        let mut assembly = Assembly::new(4);
        let place = assembly.place(0..4).unwrap();
        assert!(place.fill_from(b"abc").is_err());
    }
}
