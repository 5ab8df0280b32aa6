//! Transparent huge pages for the simulator's large arrays (every node's state, the
//! network's events and letters): the kernel is asked to back them with 2 MiB pages
//! before they are first written, so that a run of millions of nodes takes one page
//! fault where it took 512, and the processor's translation caches cover 512 times the
//! memory (docs/PERFORMANCE-NOTES.md, part six).

use std::mem::MaybeUninit;

/// The size of a transparent huge page on x86-64 (and of the smallest on arm64 with 4 KiB pages).
pub(super) const HUGE_PAGE: usize = 2 << 20;

/// `len` items made by `item` from their index, in memory advised for huge pages
/// before the items are written.
pub(super) fn vec_of<T>(len: usize, item: impl FnMut(usize) -> T) -> Vec<T> {
    let mut items = with_capacity(len);
    items.extend((0..len).map(item));
    items
}

/// An empty vector with room for `capacity` items, in memory advised for huge pages.
pub(super) fn with_capacity<T>(capacity: usize) -> Vec<T> {
    let mut items = Vec::with_capacity(capacity);
    advise(items.spare_capacity_mut());
    items
}

/// Asks the kernel to back the huge pages that lie wholly inside `memory` with huge
/// pages (on Linux; elsewhere, or where the system has them off, nothing happens).
pub(super) fn advise<T>(memory: &mut [MaybeUninit<T>]) {
    let start = memory.as_ptr().addr();
    let (first, end) = (start.next_multiple_of(HUGE_PAGE), start + size_of_val(memory));
    let last = end - end % HUGE_PAGE;
    #[cfg(target_os = "linux")]
    if first < last {
        // SAFETY: whole pages of memory this slice holds, which the caller has not written
        // yet; the advice changes how the kernel backs them, never what they hold. A
        // refusal (huge pages off) leaves them as they were, which is fine.
        unsafe { libc::madvise(std::ptr::without_provenance_mut(first), last - first, libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (first, last);
}
