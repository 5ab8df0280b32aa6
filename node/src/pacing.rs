//! Clocks for emulated links. `Clock::Virtual` waits on tokio's clock, which tests and
//! the cost model pause and let jump, so a run takes exactly its emulated time; since
//! tokio's timer wheel ticks in milliseconds, one emulated nanosecond lasts one tokio
//! millisecond there (`Clock::duration` and `Clock::nanos` convert). `Clock::Real`
//! waits on the wall clock at microsecond accuracy: tokio's timer ticks in milliseconds, so
//! the last stretch of every wait goes to one pacer thread per process that sleeps with a
//! 1 ns timer slack and wakes the waiting task a little early; the task waits out the final
//! microseconds itself (yielding the processor, then keeping it for the last few), so no
//! thread wake-up lands after the deadline. `late_us` says how late a wait came out.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// Waits longer than this start on tokio's timer, which may wake up to a tick late.
const COARSE_MARGIN: Duration = Duration::from_millis(2);

/// The pacer spins (instead of sleeping) for at most this long before a deadline.
const SPIN: Duration = Duration::from_micros(5);

/// The pacer wakes a waiting task this long before its deadline, and the task waits out
/// the rest itself, yielding the processor between looks at the clock: the cross-thread
/// wake-up then happens before the deadline instead of after it, and other processes
/// (often the ones about to receive) still get the CPU.
const EARLY_WAKE: Duration = Duration::from_micros(150);

/// A waiting task keeps the processor for this last stretch before its deadline: a
/// yield that lets other processes run could cost tens of microseconds.
const LAST_SPIN: Duration = Duration::from_micros(20);

/// Which clock emulated delays are measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// The wall clock, at microsecond accuracy (the daemon).
    #[default]
    Real,
    /// tokio's clock, which a paused runtime advances instantly (tests, the cost model).
    Virtual,
}

impl Clock {
    /// How long `ns` emulated nanoseconds last on this clock.
    pub fn duration(self, ns: u64) -> Duration {
        match self {
            Clock::Real => Duration::from_nanos(ns),
            Clock::Virtual => Duration::from_millis(ns),
        }
    }

    /// The emulated nanoseconds in `span` of this clock.
    pub fn nanos(self, span: Duration) -> u64 {
        match self {
            Clock::Real => span.as_nanos() as u64,
            Clock::Virtual => span.as_millis() as u64,
        }
    }

    /// Returns at `deadline` (at once if it has passed).
    pub async fn wait_until(self, deadline: Instant) {
        match self {
            Clock::Virtual => tokio::time::sleep_until(deadline).await,
            Clock::Real => {
                let now = Instant::now();
                if deadline <= now {
                    return;
                }
                if deadline - now > COARSE_MARGIN + COARSE_MARGIN {
                    tokio::time::sleep_until(deadline - COARSE_MARGIN).await;
                }
                let (done, wake) = oneshot::channel();
                let early = deadline.checked_sub(EARLY_WAKE).unwrap_or(deadline);
                if pacer().send((early.into_std(), done)).is_ok() {
                    let _ = wake.await;
                } else {
                    tokio::time::sleep_until(early).await;
                }
                loop {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    if deadline - now > LAST_SPIN {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
    }
}

/// How long after `due` it is now, in microseconds (0 if `due` is still ahead): what the
/// trace lines of held frames log.
pub fn late_us(due: Instant) -> f64 {
    Instant::now().saturating_duration_since(due).as_secs_f64() * 1e6
}

/// Instants as nanoseconds on the cluster's common timeline, the way frames carry them
/// (`FrameHeader::due_ns`): the coordinator's clock for real daemons (each node adds the
/// offset the coordinator estimated for it), or one shared base for the nodes of an
/// in-memory cluster on tokio's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeline {
    /// The wall clock of `timebase`, less this node's offset from the coordinator.
    Real { offset_ns: i64 },
    /// tokio's clock, counted from `base` (every node of the cluster shares it).
    Virtual { base: Instant },
}

/// Where a virtual timeline's base sits, so that instants a little before it still
/// have a reading (0 means "no time" in a frame).
const VIRTUAL_BASE_NS: u64 = 1 << 40;

impl Timeline {
    /// The timeline of a node that measures emulated delays on `clock`; a virtual one
    /// counts from `base`.
    pub fn of(clock: Clock, base: Instant) -> Self {
        match clock {
            Clock::Real => Timeline::Real { offset_ns: 0 },
            Clock::Virtual => Timeline::Virtual { base },
        }
    }

    /// The clock behind this timeline.
    pub fn clock(self) -> Clock {
        match self {
            Timeline::Real { .. } => Clock::Real,
            Timeline::Virtual { .. } => Clock::Virtual,
        }
    }

    /// This timeline for a node whose clock is `offset_ns` ahead of the coordinator's.
    pub fn with_offset(self, offset_ns: i64) -> Self {
        match self {
            Timeline::Real { .. } => Timeline::Real { offset_ns },
            virtual_timeline => virtual_timeline,
        }
    }

    /// The reading of `at` on this timeline.
    pub fn ns(self, at: Instant) -> u64 {
        match self {
            Timeline::Real { offset_ns } => crate::timebase::ns_at(at.into_std()).saturating_add_signed(-offset_ns),
            Timeline::Virtual { base } => match at.checked_duration_since(base) {
                Some(after) => VIRTUAL_BASE_NS + Clock::Virtual.nanos(after),
                None => VIRTUAL_BASE_NS.saturating_sub(Clock::Virtual.nanos(base - at)),
            },
        }
    }

    /// The instant whose reading on this timeline is `ns`.
    pub fn instant(self, ns: u64) -> Instant {
        match self {
            Timeline::Real { offset_ns } => {
                Instant::from_std(crate::timebase::instant_at(ns.saturating_add_signed(offset_ns)))
            }
            Timeline::Virtual { base } => match ns.checked_sub(VIRTUAL_BASE_NS) {
                Some(after) => base + Clock::Virtual.duration(after),
                None => base.checked_sub(Clock::Virtual.duration(VIRTUAL_BASE_NS - ns)).unwrap_or(base),
            },
        }
    }
}

type Request = (std::time::Instant, oneshot::Sender<()>);

/// The process's pacer thread, started on first use.
fn pacer() -> &'static std_mpsc::Sender<Request> {
    static PACER: OnceLock<std_mpsc::Sender<Request>> = OnceLock::new();
    PACER.get_or_init(|| {
        let (requests, incoming) = std_mpsc::channel();
        std::thread::Builder::new()
            .name("topocomm-pacer".into())
            .spawn(move || pace(incoming))
            .expect("starting the pacer thread");
        requests
    })
}

/// A pending wake-up, ordered by deadline (then by arrival, so equal deadlines keep order).
struct Pending {
    deadline: std::time::Instant,
    order: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.order) == (other.deadline, other.order)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.order).cmp(&(other.deadline, other.order))
    }
}

/// The pacer thread: wakes every request at its deadline, until the process ends.
fn pace(incoming: std_mpsc::Receiver<Request>) {
    precise_timer_slack();
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut accept = |pending: &mut BinaryHeap<Reverse<Pending>>, (deadline, wake): Request| {
        order += 1;
        pending.push(Reverse(Pending { deadline, order, wake }));
    };
    loop {
        let now = std::time::Instant::now();
        while pending.peek().is_some_and(|next| next.0.deadline <= now) {
            let Reverse(due) = pending.pop().expect("peeked");
            let _ = due.wake.send(());
        }
        let Some(next) = pending.peek().map(|next| next.0.deadline) else {
            match incoming.recv() {
                Ok(request) => accept(&mut pending, request),
                Err(_) => return,
            }
            continue;
        };
        let wait = next - now;
        if wait > SPIN {
            match incoming.recv_timeout(wait - SPIN) {
                Ok(request) => accept(&mut pending, request),
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
        } else {
            while std::time::Instant::now() < next {
                if let Ok(request) = incoming.try_recv() {
                    accept(&mut pending, request);
                }
                std::hint::spin_loop();
            }
        }
    }
}

/// Asks the kernel to wake this thread's timed sleeps on time (the default slack is 50 µs).
fn precise_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_virtual_clock_waits_exactly() {
        let start = Instant::now();
        Clock::Virtual.wait_until(start + Clock::Virtual.duration(12_345)).await;
        assert_eq!(Clock::Virtual.nanos(Instant::now() - start), 12_345);
    }

    #[tokio::test(start_paused = true)]
    async fn timelines_read_instants_back() {
        let base = Instant::now();
        let later = base + Clock::Virtual.duration(700);
        for timeline in
            [Timeline::Virtual { base }, Timeline::Real { offset_ns: -5_000 }, Timeline::Real { offset_ns: 0 }]
        {
            let (a, b) = (timeline.ns(base), timeline.ns(later));
            assert_eq!(timeline.clock().nanos(later - base), b - a);
            assert_eq!(timeline.instant(a), base);
            assert_eq!(timeline.instant(b), later);
        }
        // A node ahead of the coordinator reads the same instant later on its own clock.
        let ahead = Timeline::Real { offset_ns: 1_000 };
        assert_eq!(ahead.ns(base) + 1_000, Timeline::Real { offset_ns: 0 }.ns(base));
    }

    #[tokio::test]
    async fn the_real_clock_never_wakes_early() {
        for micros in [0u64, 15, 150, 2500] {
            let deadline = Instant::now() + Duration::from_micros(micros);
            Clock::Real.wait_until(deadline).await;
            assert!(Instant::now() >= deadline, "woke before a {micros} µs deadline");
        }
    }
}
