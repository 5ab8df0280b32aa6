//! Transparent huge pages for the simulator's large arrays (every node's state, the
//! network's events and letters): the kernel is asked to back them with 2 MiB pages
//! before they are first written, so that a run of millions of nodes takes one page
//! fault where it took 512, and the processor's translation caches cover 512 times the
//! memory (docs/PERFORMANCE-NOTES.md, part six).

use std::mem::MaybeUninit;

/// The size of a transparent huge page on x86-64 (and of the smallest on arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

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

/// Asks the kernel to back every aligned 2 MiB run of `memory` with a huge page (on Linux;
/// elsewhere, or where the system has them off, nothing happens).
#[allow(unsafe_code)] // madvise on pages of an allocation this module owns.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A vector of three huge pages' worth holds what it was given, and the aligned part
    /// of it is advised: the kernel lists the mapping that holds it with the flag `hg`.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_array_is_advised_into_huge_pages() {
        let setting = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        if setting.is_empty() || setting.contains("[never]") {
            // On CI the feature is a requirement (.ci/run turns it on where it can): a
            // pass that checked nothing must not read as one there.
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true, but this system has transparent huge pages off ({setting:?}), so this test cannot check \
                 that large arrays are advised into them: enable them (echo madvise > \
                 /sys/kernel/mm/transparent_hugepage/enabled, as root) or run without CI=true to skip"
            );
            eprintln!("SKIPPED: this system has transparent huge pages off ({setting:?}); under CI=true this fails");
            return;
        }
        let items: Vec<u64> = vec_of(3 * HUGE_PAGE / 8, |at| at as u64);
        assert!(items.iter().enumerate().all(|(at, &item)| item == at as u64));
        let advised = items.as_ptr().addr().next_multiple_of(HUGE_PAGE);
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("this process's mappings");
        let mut lines = smaps.lines();
        let mut flags = None;
        while let Some(line) = lines.next() {
            let range = line.split_whitespace().next().and_then(|range| range.split_once('-'));
            let Some((start, end)) = range.and_then(|(start, end)| {
                Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
            }) else {
                continue;
            };
            if (start..end).contains(&advised) {
                flags = lines.by_ref().find_map(|line| line.strip_prefix("VmFlags:")).map(str::to_owned);
                break;
            }
        }
        let flags = flags.expect("the mapping that holds the vector");
        assert!(flags.split_whitespace().any(|flag| flag == "hg"), "not advised: VmFlags {flags}");
    }

    /// Memory too small to hold an aligned huge page is left as it is.
    #[test]
    fn a_small_array_is_left_alone() {
        let items = vec_of(100, |at| at as u8);
        assert_eq!(items, (0..100).collect::<Vec<u8>>());
    }
}
