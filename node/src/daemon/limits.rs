//! The operating system's limits a daemon (and a coordinator starting many of them)
//! runs into, and deadlines that saturate instead of overflowing.
//!
//! * `RLIMIT_NOFILE` (getrlimit(2)): the most file descriptors a process may hold open;
//!   every link and control connection is one. The soft limit is often 1024 while the
//!   hard limit is far higher; an unprivileged process may raise its soft limit up to
//!   the hard one, which [`raise_open_file_limit`] does at start-up (as Ray and etcd do).
//! * `RLIMIT_NPROC`: the most processes and threads the user may have at once.

use std::time::Duration;

use tokio::time::Instant;

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit and returns the soft
/// limit in force afterwards (`u64::MAX` for no limit; the old soft limit if the raise
/// is refused, 1024 — the usual default — where the limit cannot be read).
#[allow(unsafe_code)] // getrlimit and setrlimit, the C interface to the process's limits.
pub fn raise_open_file_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit and setrlimit only read and write the struct passed in.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return 1024;
            }
            if limit.rlim_cur < limit.rlim_max {
                let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit = raised;
                }
            }
        }
        rlim_to_u64(limit.rlim_cur)
    }
    #[cfg(not(unix))]
    {
        1024
    }
}

/// The soft `RLIMIT_NPROC` of this process: how many processes and threads its user may
/// have at once (`u64::MAX` for no limit, `None` where it cannot be read).
#[allow(unsafe_code)] // getrlimit, the C interface to the process's limits.
pub fn process_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit only writes the struct passed in.
        let read = unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) };
        (read == 0).then(|| rlim_to_u64(limit.rlim_cur))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(unix)]
#[allow(clippy::useless_conversion)] // rlim_t is u64 on Linux, not on every Unix.
fn rlim_to_u64(limit: libc::rlim_t) -> u64 {
    if limit == libc::RLIM_INFINITY { u64::MAX } else { u64::try_from(limit).unwrap_or(u64::MAX) }
}

/// `wait` after `from`, or — for a wait too long for the clock to represent — a
/// deadline about thirty years ahead, which no run outlives.
pub fn deadline_after(from: Instant, wait: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);
    from.checked_add(wait).or_else(|| from.checked_add(FAR)).unwrap_or(from)
}

#[allow(unsafe_code)] // getrlimit, to read back the limit a test raised.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_open_file_limit_is_raised_to_the_hard_limit() {
        let soft = raise_open_file_limit();
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit only writes the struct passed in.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
        assert_eq!(soft, rlim_to_u64(limit.rlim_cur));
        assert_eq!(limit.rlim_cur, limit.rlim_max);
        // Calling it again changes nothing.
        assert_eq!(raise_open_file_limit(), soft);
    }

    #[test]
    fn this_machine_allows_some_processes() {
        assert!(process_limit().is_some_and(|limit| limit > 1));
    }

    #[test]
    fn deadlines_saturate() {
        let now = Instant::now();
        assert_eq!(deadline_after(now, Duration::from_secs(5)), now + Duration::from_secs(5));
        let far = deadline_after(now, Duration::MAX);
        assert!(far > now + Duration::from_secs(365 * 24 * 60 * 60), "{far:?}");
    }
}
