//! Known zeros: one large read-only region of the address space that reads as zeros
//! and holds no memory (the kernel maps its untouched pages to the shared zero page),
//! so that a buffer of any length can be a slice of it at no cost. The simulator's
//! lengths-only runs give every node zero inputs from here; the data helpers
//! ([`crate::comm::payload::concat`], `Reduction::combine`, `Assembly`, a
//! payload's parts) see that their operands are known zeros and hand back another slice
//! instead of copying or combining: zeros joined or combined by sum, prod, min or max
//! are zeros. So the algorithms run unchanged while their messages carry lengths only,
//! and p × size may far exceed the machine's memory.

use std::sync::OnceLock;

use bytes::Bytes;

/// The region's length: what the largest lengths-only buffer may be.
const REGION_LEN: usize = 1 << 40;

/// The region, once mapped (`None` where the system refused it).
fn region() -> Option<&'static [u8]> {
    static REGION: OnceLock<Option<&'static [u8]>> = OnceLock::new();
    *REGION.get_or_init(map_region)
}

#[cfg(all(unix, not(miri)))]
#[allow(unsafe_code)] // the read-only zero pages are one mmap, made once.
fn map_region() -> Option<&'static [u8]> {
    // Smaller reservations where the system refuses a terabyte of address space.
    [REGION_LEN, REGION_LEN >> 4, REGION_LEN >> 8].into_iter().find_map(|len| {
        // SAFETY: a fresh anonymous private read-only mapping, never unmapped: nothing
        // else refers to it, and it stays valid (and zero) for the life of the process.
        unsafe {
            let at = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            (at != libc::MAP_FAILED).then(|| std::slice::from_raw_parts(at as *const u8, len))
        }
    })
}

/// No region off Unix, nor under Miri (which maps no read-only pages): lengths-only runs
/// are refused there, and every buffer is data.
#[cfg(any(not(unix), miri))]
fn map_region() -> Option<&'static [u8]> {
    None
}

/// `len` known zeros, or `None` when there is no region (or `len` exceeds it).
pub fn zeros(len: usize) -> Option<Bytes> {
    region().filter(|region| len <= region.len()).map(|region| Bytes::from_static(&region[..len]))
}

/// Whether `bytes` lie in the region of known zeros (an empty buffer counts).
pub fn is_zeros(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    region().is_some_and(|region| {
        let (start, end) = (region.as_ptr() as usize, region.as_ptr() as usize + region.len());
        let at = bytes.as_ptr() as usize;
        at >= start && at + bytes.len() <= end
    })
}

/// `parts` one after another, as known zeros, when every part is known zeros.
pub fn join<'a>(parts: impl IntoIterator<Item = &'a Bytes>) -> Option<Bytes> {
    let mut total = 0usize;
    for part in parts {
        if !is_zeros(part) {
            return None;
        }
        total = total.checked_add(part.len())?;
    }
    zeros(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_zeros_cost_nothing_and_join_into_known_zeros() {
        let huge = zeros(64 << 30).expect("a region of known zeros");
        assert_eq!(huge.len(), 64 << 30);
        assert!(is_zeros(&huge) && is_zeros(&huge[5..9]));
        assert_eq!(&huge[..4], &[0, 0, 0, 0]);
        let (a, b) = (zeros(3).unwrap(), zeros(5).unwrap());
        let joined = join([&a, &b]).expect("zeros join");
        assert_eq!(joined.len(), 8);
        assert!(is_zeros(&joined));
        let data = Bytes::from_static(b"xy");
        assert!(!is_zeros(&data));
        assert!(join([&a, &data]).is_none(), "data is not known zeros");
        assert!(is_zeros(&Bytes::new()));
    }
}
