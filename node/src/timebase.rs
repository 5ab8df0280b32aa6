//! The node's clock for traces: nanoseconds since the Unix epoch as the process saw it
//! at start-up, advanced by the monotonic clock (so it never jumps). The coordinator
//! estimates each node's offset from its own clock over the control link.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn anchor() -> (Instant, u64) {
    static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
    *ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        (Instant::now(), wall)
    })
}

/// The clock reading of `instant`.
pub fn ns_at(instant: Instant) -> u64 {
    let (base, wall) = anchor();
    match instant.checked_duration_since(base) {
        Some(after) => wall + after.as_nanos() as u64,
        None => wall.saturating_sub(base.duration_since(instant).as_nanos() as u64),
    }
}

/// The instant whose clock reading is `ns`.
pub fn instant_at(ns: u64) -> Instant {
    let (base, wall) = anchor();
    if ns >= wall {
        base + std::time::Duration::from_nanos(ns - wall)
    } else {
        base - std::time::Duration::from_nanos(wall - ns)
    }
}

/// The clock reading now.
pub fn now_ns() -> u64 {
    ns_at(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_advance_with_the_monotonic_clock() {
        let before = Instant::now();
        let a = ns_at(before);
        let b = ns_at(before + std::time::Duration::from_micros(250));
        assert_eq!(b - a, 250_000);
        assert!(now_ns() >= a);
        assert_eq!(ns_at(instant_at(a + 1_000)), a + 1_000);
    }
}
