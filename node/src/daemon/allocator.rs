//! How the daemon's process treats the memory of message buffers. Every frame a link
//! reads, every block an algorithm concatenates or combines, is a fresh allocation; a
//! large one (glibc: above 128 KiB to 32 MiB) would be mapped from the kernel and
//! unmapped again when dropped, so each iteration of a large collective would pay a
//! page fault and a zeroed page for every 4 KiB it touches — more than the copies
//! through the sockets themselves (the profile: docs/PERFORMANCE-NOTES.md). MPI
//! libraries avoid that by reusing the caller's buffers; here the allocator keeps what
//! is freed during a run and hands it out again, and the daemon gives it back to the
//! kernel once the run is over.
//!
//! Only the GNU C library is tuned; elsewhere (musl in the static container image)
//! both calls do nothing.

/// From now on, keep freed buffers for reuse: serve every allocation from the heap
/// (no per-buffer mappings), never trim the heap on free, and keep one heap for every
/// thread, so that what the runtime thread frees serves the input generation and the
/// reference check on the blocking threads too (with a heap per thread their peaks
/// would add up; docs/PERFORMANCE-NOTES.md). Call once, at start-up.
#[allow(unsafe_code)] // mallopt, the C allocator's tunables.
pub fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tunables; it is called before the
    // daemon's threads allocate message buffers.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Returns the memory freed since the last call to the kernel (after a run: an idle
/// daemon does not sit on the high-water mark of its last large collective).
#[allow(unsafe_code)] // malloc_trim, the C allocator's release of free memory.
pub fn release_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The memory this process may still use, in bytes: the kernel's estimate of what is
/// available without swapping (`MemAvailable`), lowered to what the process's cgroup
/// (a container's memory limit) has left. `None` where neither can be read.
pub fn available_bytes() -> Option<u64> {
    let system = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| meminfo_available(&text));
    let cgroup = cgroup_headroom();
    match (system, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The most memory this process has held resident so far (`VmHWM`), in bytes; `None`
/// where it cannot be read.
pub fn peak_resident_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// The memory this process holds resident now (`VmRSS`), in bytes; `None` where it cannot
/// be read.
pub fn resident_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// A figure in kB of `/proc/self/status` (the line starting with `field`), in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kib: u64 = line.trim_start_matches(field).trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn meminfo_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// What the cgroup (v2) of this process may still allocate: `memory.max` less
/// `memory.current`; `None` without a limit.
fn cgroup_headroom() -> Option<u64> {
    let read = |name: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{name}")).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max" (no limit) does not parse
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(meminfo_available(text), Some(20_000_000 * 1024));
        assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn this_machine_reports_some_memory() {
        assert!(available_bytes().is_some_and(|bytes| bytes > 0));
    }
}
