//! Clocks for emulated links. `Clock::Virtual` waits on tokio's clock, which tests and
//! the cost model pause and let jump, so a run takes exactly its emulated time; since
//! tokio's timer wheel ticks in milliseconds, one emulated nanosecond lasts one tokio
//! millisecond there (`Clock::duration` and `Clock::nanos` convert). `Clock::Real`
//! waits on the wall clock at microsecond accuracy: tokio's timer ticks in milliseconds, so
//! the last stretch of every wait goes to one pacer thread per process that sleeps with a
//! 1 ns timer slack and wakes the waiting task a little early; the task waits out the final
//! microseconds itself (yielding the processor, then keeping it for the last few), so no
//! thread wake-up lands after the deadline. `late_us` says how late a wait came out.
//!
//! Time dilation ([`Dilation`]): an emulated nanosecond may last K of the clock's own.
//! The real clock takes K from the run in progress in this process ([`dilate_wall_clock`],
//! set by `run::execute` from the spec: a daemon takes part in one run at a time, as it
//! has one pacer thread); a virtual clock carries its K ([`Clock::DilatedVirtual`]).
//! Every conversion between emulated nanoseconds and instants goes through `Clock` and
//! `Timeline` here, so the link physics and the router know nothing of dilation.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use topocomm_proto::spec::Dilation;

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

/// The dilation of this process's wall clock, in thousandths (see [`dilate_wall_clock`]).
static WALL_DILATION_MILLI: AtomicU32 = AtomicU32::new(1000);

/// Stretches this process's real clock by `dilation` from now on: every emulated
/// nanosecond on [`Clock::Real`] and [`Timeline::Real`] lasts K wall nanoseconds.
/// `run::execute` sets it from each run's spec before any emulated frame of the run.
pub fn dilate_wall_clock(dilation: Dilation) {
    WALL_DILATION_MILLI.store(dilation.milli(), Ordering::Release);
}

/// The dilation of this process's real clock.
pub fn wall_clock_dilation() -> Dilation {
    Dilation::from_milli(WALL_DILATION_MILLI.load(Ordering::Acquire)).unwrap_or(Dilation::NONE)
}

/// Which clock emulated delays are measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// The wall clock, at microsecond accuracy (the daemon), dilated as the run in
    /// progress in this process says ([`dilate_wall_clock`]).
    #[default]
    Real,
    /// tokio's clock, which a paused runtime advances instantly (tests, the cost model):
    /// one emulated nanosecond per tokio millisecond.
    Virtual,
    /// tokio's clock dilated by K: one emulated nanosecond per K tokio milliseconds, so
    /// a run on a paused runtime still takes exactly its emulated time (K times over,
    /// exactly for a whole K). The tests run dilated and undilated runs side by side.
    DilatedVirtual(Dilation),
}

impl Clock {
    /// The virtual clock dilated by `dilation` ([`Clock::Virtual`] when it is none).
    pub fn virtual_dilated(dilation: Dilation) -> Self {
        if dilation.dilates() { Clock::DilatedVirtual(dilation) } else { Clock::Virtual }
    }

    /// Whether this is the wall clock.
    pub fn is_real(self) -> bool {
        self == Clock::Real
    }

    /// How many times longer than one of the clock's own units (a wall ns, a tokio ms)
    /// an emulated nanosecond lasts.
    pub fn dilation(self) -> Dilation {
        match self {
            Clock::Real => wall_clock_dilation(),
            Clock::Virtual => Dilation::NONE,
            Clock::DilatedVirtual(dilation) => dilation,
        }
    }

    /// How long `ns` emulated nanoseconds last on this clock.
    pub fn duration(self, ns: u64) -> Duration {
        let dilation = self.dilation();
        match self {
            Clock::Real => Duration::from_nanos(dilation.wall_ns(ns)),
            // K ms per emulated ns = K·1000 µs, and K·1000 is the dilation in thousandths.
            Clock::Virtual | Clock::DilatedVirtual(_) => {
                Duration::from_micros(ns.saturating_mul(u64::from(dilation.milli())))
            }
        }
    }

    /// The emulated nanoseconds in `span` of this clock.
    pub fn nanos(self, span: Duration) -> u64 {
        let dilation = self.dilation();
        match self {
            Clock::Real => dilation.emulated_ns(u64::try_from(span.as_nanos()).unwrap_or(u64::MAX)),
            Clock::Virtual | Clock::DilatedVirtual(_) => {
                u64::try_from(span.as_micros() / u128::from(dilation.milli())).unwrap_or(u64::MAX)
            }
        }
    }

    /// Returns at `deadline` (at once if it has passed).
    pub async fn wait_until(self, deadline: Instant) {
        match self {
            Clock::Virtual | Clock::DilatedVirtual(_) => tokio::time::sleep_until(deadline).await,
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

/// Instants as nanoseconds on the cluster's common timeline (frames carry them as
/// [`Timeline::stamp`]s): the coordinator's clock for real daemons (each node adds the
/// offset the coordinator estimated for it), or one shared base for the nodes of an
/// in-memory cluster on tokio's clock. Under dilation the timeline is emulated time: a
/// reading is the coordinator's wall clock divided by K (every node of a run divides by
/// the same K, so readings compare across nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeline {
    /// The wall clock of `timebase`, less this node's offset from the coordinator,
    /// dilated as this process's real clock is ([`dilate_wall_clock`]).
    Real { offset_ns: i64 },
    /// tokio's clock, counted from `base` (every node of the cluster shares it), on
    /// the virtual `clock` (undilated or dilated).
    Virtual { base: Instant, clock: Clock },
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
            Clock::Virtual | Clock::DilatedVirtual(_) => Timeline::Virtual { base, clock },
        }
    }

    /// The clock behind this timeline.
    pub fn clock(self) -> Clock {
        match self {
            Timeline::Real { .. } => Clock::Real,
            Timeline::Virtual { clock, .. } => clock,
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
            Timeline::Real { offset_ns } => real_reading(at, offset_ns, wall_clock_dilation()),
            Timeline::Virtual { base, clock } => match at.checked_duration_since(base) {
                Some(after) => VIRTUAL_BASE_NS + clock.nanos(after),
                None => VIRTUAL_BASE_NS.saturating_sub(clock.nanos(base - at)),
            },
        }
    }

    /// The instant whose reading on this timeline is `ns`.
    pub fn instant(self, ns: u64) -> Instant {
        match self {
            Timeline::Real { offset_ns } => real_instant(ns, offset_ns, wall_clock_dilation()),
            Timeline::Virtual { base, clock } => match ns.checked_sub(VIRTUAL_BASE_NS) {
                Some(after) => base + clock.duration(after),
                None => base.checked_sub(clock.duration(VIRTUAL_BASE_NS - ns)).unwrap_or(base),
            },
        }
    }

    /// How a frame carries `at` (`FrameHeader::due_ns`): on a real timeline, the
    /// coordinator's wall clock then, undilated. Nodes switch to a run's dilation each as
    /// its start reaches it, so for a moment a node still on the last run's K may pass on
    /// a frame of the next run; a wall instant means the same on both sides. Within one
    /// virtual cluster every node shares one clock, so there it is the reading itself.
    pub fn stamp(self, at: Instant) -> u64 {
        match self {
            Timeline::Real { offset_ns } => real_reading(at, offset_ns, Dilation::NONE),
            Timeline::Virtual { .. } => self.ns(at),
        }
    }

    /// The instant a frame's stamp ([`Timeline::stamp`]) stands for.
    pub fn stamped(self, stamp: u64) -> Instant {
        match self {
            Timeline::Real { offset_ns } => real_instant(stamp, offset_ns, Dilation::NONE),
            Timeline::Virtual { .. } => self.instant(stamp),
        }
    }
}

/// The reading of `at` on the real timeline of a node `offset_ns` ahead of the
/// coordinator, dilated by `dilation`: the coordinator's wall clock then, divided by K.
fn real_reading(at: Instant, offset_ns: i64, dilation: Dilation) -> u64 {
    dilation.emulated_ns(crate::timebase::ns_at(at.into_std()).saturating_add_signed(-offset_ns))
}

/// The instant whose [`real_reading`] is `ns` (to within K wall nanoseconds).
fn real_instant(ns: u64, offset_ns: i64, dilation: Dilation) -> Instant {
    Instant::from_std(crate::timebase::instant_at(dilation.wall_ns(ns).saturating_add_signed(offset_ns)))
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
#[allow(unsafe_code)] // prctl sets this thread's timer slack.
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
        for timeline in [
            Timeline::of(Clock::Virtual, base),
            Timeline::of(Clock::virtual_dilated(Dilation::from_milli(7000).unwrap()), base),
            Timeline::Real { offset_ns: -5_000 },
            Timeline::Real { offset_ns: 0 },
        ] {
            let (a, b) = (timeline.ns(base), timeline.ns(later));
            assert_eq!(timeline.clock().nanos(later - base), b - a);
            assert_eq!(timeline.instant(a), base);
            assert_eq!(timeline.instant(b), later);
        }
        // A node ahead of the coordinator reads the same instant later on its own clock.
        let ahead = Timeline::Real { offset_ns: 1_000 };
        assert_eq!(ahead.ns(base) + 1_000, Timeline::Real { offset_ns: 0 }.ns(base));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dilated_virtual_clock_stretches_every_emulated_nanosecond() {
        let k = Dilation::from_milli(3000).unwrap();
        let dilated = Clock::virtual_dilated(k);
        assert_eq!(dilated, Clock::DilatedVirtual(k));
        assert_eq!(Clock::virtual_dilated(Dilation::NONE), Clock::Virtual);
        assert_eq!(dilated.duration(12_345), Clock::Virtual.duration(12_345) * 3);
        let start = Instant::now();
        dilated.wait_until(start + dilated.duration(12_345)).await;
        assert_eq!(Instant::now() - start, Duration::from_millis(3 * 12_345));
        assert_eq!(dilated.nanos(Instant::now() - start), 12_345);
        assert_eq!(Clock::Virtual.nanos(Instant::now() - start), 3 * 12_345);
    }

    #[test]
    fn a_dilated_real_timeline_reads_the_coordinators_clock_divided_by_k() {
        let k = Dilation::from_milli(4000).unwrap();
        let at = std::time::Instant::now();
        let wall = crate::timebase::ns_at(at);
        let at = Instant::from_std(at);
        assert_eq!(real_reading(at, 0, Dilation::NONE), wall);
        assert_eq!(real_reading(at, 0, k), wall / 4);
        // A node 1 µs ahead of the coordinator reads the same emulated instant.
        let later = at + Duration::from_micros(1);
        assert_eq!(real_reading(later, 1_000, k), real_reading(at, 0, k));
        // 1 ms of wall time is 250 µs of emulated time, and back.
        let ms_later = at + Duration::from_millis(1);
        assert_eq!(real_reading(ms_later, 0, k) - real_reading(at, 0, k), 250_000);
        let back = real_instant(real_reading(ms_later, 0, k), 0, k);
        assert!(back <= ms_later && ms_later - back < Duration::from_nanos(4), "{:?}", ms_later - back);
    }

    #[test]
    fn a_frames_stamp_names_one_instant_whatever_k_either_side_runs() {
        let at = Instant::now() + Duration::from_millis(5);
        let timeline = Timeline::Real { offset_ns: 1_000 };
        // The stamp is the wall clock, undilated, whatever this process's K.
        let stamp = timeline.stamp(at);
        assert_eq!(stamp, real_reading(at, 1_000, Dilation::NONE));
        let back = timeline.stamped(stamp);
        assert!(back <= at && at - back < Duration::from_nanos(2), "{:?}", at - back);
        // What it replaces: an emulated reading taken at one K and read back at another
        // names an instant years away (a node still on the last run's K passing a frame on).
        let k = Dilation::from_milli(323_000).unwrap();
        let misread = real_instant(real_reading(at, 1_000, Dilation::NONE), 1_000, k);
        assert!(misread.saturating_duration_since(at) > Duration::from_secs(365 * 86_400));
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
