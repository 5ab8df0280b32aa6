//! The run specification the coordinator hands every node: the `RunSpec` with its
//! validation and memory estimate. The link physics (`link`) and time dilation
//! (`dilation`) are in their own files, and the names users type (collectives,
//! algorithms, reduction operators, element types) are `crate::names`; all are
//! re-exported here, where every user of the contract has always found them.

mod dilation;
pub(crate) mod link;

use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

pub use crate::names::{Algorithm, Collective, Dtype, ReduceOp};
use crate::schedule::{Schedule, ScheduleError};
use crate::topology::NodeId;
pub use dilation::{Dilation, DilationError};
pub use link::{ClassPhysics, LinkModel, Ports, Routing, UnknownClass, class_models};

/// Why a run specification cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("size {size} bytes is not a whole number of {dtype} elements ({elem} bytes each); try {below} or {above}")]
    SizeNotWholeElements { size: u64, dtype: Dtype, elem: usize, below: u64, above: u64 },
    #[error("root {root} is not a node of this {p}-node cluster (valid roots: 0..={last})", last = p.saturating_sub(1))]
    RootOutOfRange { root: NodeId, p: usize },
    #[error("at least one timed iteration is needed")]
    NoIterations,
    #[error("the timeout must be more than 0 ms: it bounds every wait of an iteration")]
    ZeroTimeout,
    #[error("timeout {timeout_ms} ms exceeds the limit of one day ({MAX_TIMEOUT_MS} ms) per iteration")]
    TimeoutTooLong { timeout_ms: u64 },
    #[error("warmup {warmup} + iterations {iterations} exceeds the limit of {} iterations per run (u32)", u32::MAX)]
    TooManyIterations { warmup: u32, iterations: u32 },
    #[error("the run's deadline, timeout {timeout_ms} ms × {iterations} iterations, does not fit in a duration")]
    DeadlineOverflow { timeout_ms: u64, iterations: u32 },
    #[error(
        "--size {size} B on {p} nodes gives a node {blocks} × {size} B to hold, more than any buffer can be \
         (at most {MAX_BUFFER_BYTES} B)"
    )]
    SizeTooLarge { size: u64, p: usize, blocks: usize },
    #[error("the memory the nodes need for {size} bytes on {p} nodes does not fit in 64 bits")]
    MemoryOverflow { size: u64, p: usize },
    #[error("the run needs about {} at {holder}; {} available", ByteSize(*needed), ByteSize(*available))]
    TooMuchMemory { needed: u64, available: u64, holder: String },
    #[error(transparent)]
    Dilation(#[from] DilationError),
    #[error("a dilation of {0} needs emulated links: raw links run at the machine's own speed and are never dilated")]
    RawLinksDilated(Dilation),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

/// The largest buffer a node may be asked to hold, `isize::MAX` bytes: no allocation can
/// be larger, and every length below it fits `usize` and `u64` with room to add to it.
pub const MAX_BUFFER_BYTES: u64 = isize::MAX as u64;

/// The longest `timeout_ms` a spec may have: one day per iteration. Longer waits are no
/// use to anyone watching a run, and the cap keeps every deadline derived from it
/// (× the iterations, + grace periods) far inside what `Duration` and `Instant` hold.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// [`MAX_TIMEOUT_MS`] as a duration.
pub const MAX_TIMEOUT: Duration = Duration::from_millis(MAX_TIMEOUT_MS);

/// Everything a node needs to take part in one run (warm-up + timed iterations).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Unique per coordinator: frames of another run are dropped.
    pub run: u64,
    pub collective: Collective,
    pub algorithm: Algorithm,
    pub root: NodeId,
    /// Bytes per node (see the README for each collective's layout).
    pub size_bytes: u64,
    pub dtype: Dtype,
    pub op: ReduceOp,
    /// Inputs are generated from (seed, node id).
    pub seed: u64,
    pub warmup: u32,
    pub iterations: u32,
    /// Every wait of the run ends by this deadline, counted from the start of the run.
    pub timeout_ms: u64,
    /// Send each node's input and output of the last iteration back with its report.
    pub dump: bool,
    /// Shift: how many places data moves (`--shift Q`, from node i to node i + Q mod p).
    pub shift: usize,
    /// Scan: exclusive prefix (node i reduces 0..i) instead of inclusive (0..=i).
    pub exclusive: bool,
    /// Emulated link physics; `None` runs the links at full speed.
    pub emulation: Option<LinkModel>,
    /// Classes of links with physics of their own (`--class`), over `emulation` (or, in
    /// the simulator, the model it runs): empty, every link alike.
    pub classes: Vec<ClassPhysics>,
    /// How many times slower than the wall clock the emulated links run ([`Dilation`]);
    /// [`Dilation::NONE`] without emulation.
    pub dilation: Dilation,
    /// Instead of the collective, the dilation probe's two steps: every node exchanges
    /// one vector of `size_bytes` with its partner in a matching of the topology's edges,
    /// all at the same instant, then sends back what it got (`node::probe`), so that
    /// their time shows what the software adds when every node sends at once.
    pub probe: bool,
    /// Record the message flow of the last iteration and send it back with the report.
    pub trace: bool,
    /// Each node's clock minus the coordinator's, in ns, by node id (filled in by the
    /// coordinator). When present, every iteration starts at one common instant, as
    /// the cost model assumes, instead of when each node leaves the barrier.
    pub clock_offsets_ns: Vec<i64>,
    /// A schedule the user brought (`--schedule`, `--goal`), run instead of `algorithm`.
    pub schedule: Option<Box<Schedule>>,
}

impl RunSpec {
    /// A spec with everyday defaults (no data, one timed iteration, f64 sum, seed 1,
    /// a 30 s deadline), to be refined with struct update syntax.
    pub fn new(collective: Collective, algorithm: Algorithm) -> Self {
        RunSpec {
            run: 1,
            collective,
            algorithm,
            root: 0,
            size_bytes: 0,
            dtype: Dtype::F64,
            op: ReduceOp::Sum,
            seed: 1,
            warmup: 0,
            iterations: 1,
            timeout_ms: 30_000,
            dump: false,
            shift: 1,
            exclusive: false,
            emulation: None,
            classes: Vec::new(),
            dilation: Dilation::NONE,
            probe: false,
            trace: false,
            clock_offsets_ns: Vec::new(),
            schedule: None,
        }
    }

    /// Number of elements of `dtype` in `size_bytes`.
    pub fn elements(&self) -> usize {
        self.size_bytes as usize / self.dtype.size()
    }

    /// Checks the parts of the spec that do not depend on the topology.
    pub fn validate(&self, p: usize) -> Result<(), SpecError> {
        let elem = self.dtype.size() as u64;
        if !self.size_bytes.is_multiple_of(elem) {
            let below = self.size_bytes / elem * elem;
            return Err(SpecError::SizeNotWholeElements {
                size: self.size_bytes,
                dtype: self.dtype,
                elem: elem as usize,
                below,
                above: below + elem,
            });
        }
        // The p blocks an all-gather's or all-to-all's node holds (one for a vector) must
        // be a length a buffer can have: a size past it is this line, not an overflow.
        let blocks = match self.collective {
            Collective::Allgather
            | Collective::Gather
            | Collective::Scatter
            | Collective::Alltoall
            | Collective::ReduceScatter => p.max(1),
            _ => 1,
        };
        if u64::try_from(blocks)
            .ok()
            .and_then(|blocks| self.size_bytes.checked_mul(blocks))
            .is_none_or(|bytes| bytes > MAX_BUFFER_BYTES)
        {
            return Err(SpecError::SizeTooLarge { size: self.size_bytes, p, blocks });
        }
        if self.collective.has_root() && self.root >= p {
            return Err(SpecError::RootOutOfRange { root: self.root, p });
        }
        if self.iterations == 0 {
            return Err(SpecError::NoIterations);
        }
        self.dilation.check()?;
        if self.emulation.is_none() && self.dilation != Dilation::NONE {
            return Err(SpecError::RawLinksDilated(self.dilation));
        }
        self.validate_schedule(p)?;
        self.validate_timing()
    }

    /// Whether the spec runs a GOAL schedule (sizes only: no result can be verified).
    pub fn runs_goal(&self) -> bool {
        matches!(self.schedule.as_deref(), Some(Schedule::Goal(_)))
    }

    /// The collective a report names: "goal" for a GOAL schedule, which has none (the
    /// collective a command was given is not what ran), else the collective's name.
    pub fn what_collective(&self) -> String {
        match self.runs_goal() {
            true => "goal".to_owned(),
            false => self.collective.to_string(),
        }
    }

    /// What runs: the algorithm's name, or the schedule's.
    pub fn what_runs(&self) -> String {
        match &self.schedule {
            None => self.algorithm.to_string(),
            Some(schedule) => schedule.describe(),
        }
    }

    /// Checks the schedule the spec carries, if any, for `p` nodes: its structure, and
    /// for an MSCCL-IR program its collective and how `size_bytes` cuts into its chunks.
    pub fn validate_schedule(&self, p: usize) -> Result<(), SpecError> {
        let Some(schedule) = &self.schedule else { return Ok(()) };
        schedule.check(p)?;
        if let Schedule::Msccl(program) = schedule.as_ref() {
            if program.collective != self.collective {
                return Err(ScheduleError::Collective { schedule: program.collective, asked: self.collective }.into());
            }
            program.layout(p, self.size_bytes, self.dtype)?;
        }
        Ok(())
    }

    /// Checks the timeout and the iteration counts, which do not depend on the cluster:
    /// a timeout of 1 ms to [`MAX_TIMEOUT_MS`], `warmup + iterations` within `u32`, and a
    /// whole-run deadline ([`RunSpec::run_deadline`]) that fits in a `Duration`.
    pub fn validate_timing(&self) -> Result<(), SpecError> {
        if self.timeout_ms == 0 {
            return Err(SpecError::ZeroTimeout);
        }
        if self.timeout_ms > MAX_TIMEOUT_MS {
            return Err(SpecError::TimeoutTooLong { timeout_ms: self.timeout_ms });
        }
        let iterations = self
            .total_iterations()
            .ok_or(SpecError::TooManyIterations { warmup: self.warmup, iterations: self.iterations })?;
        match self.run_deadline() {
            Some(_) => Ok(()),
            None => Err(SpecError::DeadlineOverflow { timeout_ms: self.timeout_ms, iterations }),
        }
    }

    /// The deadline of every wait of one iteration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Warm-up and timed iterations together; `None` if they overflow `u32`.
    pub fn total_iterations(&self) -> Option<u32> {
        self.warmup.checked_add(self.iterations)
    }

    /// The longest the whole run may take: the timeout once per iteration; `None` if the
    /// iterations or the product overflow.
    pub fn run_deadline(&self) -> Option<Duration> {
        self.timeout().checked_mul(self.total_iterations()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn names_are_kebab_case_both_ways() {
        assert_eq!(Algorithm::Hypercube.to_string(), "hypercube");
        assert_eq!(Dtype::from_str("f64").unwrap(), Dtype::F64);
        assert_eq!(ReduceOp::from_str("prod").unwrap(), ReduceOp::Prod);
        assert!(Collective::from_str("bogus").is_err());
    }

    #[test]
    fn size_must_be_whole_elements() {
        let spec = RunSpec { size_bytes: 10, timeout_ms: 1000, ..RunSpec::new(Collective::Reduce, Algorithm::Ring) };
        let err = spec.validate(4).unwrap_err();
        assert!(err.to_string().contains("try 8 or 16"), "{err}");
        assert!(RunSpec { size_bytes: 16, ..spec.clone() }.validate(4).is_ok());
        assert!(RunSpec { size_bytes: 16, root: 4, ..spec }.validate(4).is_err());
    }

    #[test]
    fn everyday_specs_validate() {
        use strum::IntoEnumIterator;
        for collective in Collective::iter() {
            let spec =
                RunSpec { size_bytes: 1 << 20, warmup: 3, iterations: 20, ..RunSpec::new(collective, Algorithm::Auto) };
            for p in [1, 8, 1024] {
                assert_eq!(spec.validate(p), Ok(()), "{collective} on {p}");
            }
        }
    }

    /// `explain --size` 2^64 - 8 B reached the simulator and panicked (`capacity
    /// overflow`); a size no buffer can have is refused here, with the figures.
    #[test]
    fn a_size_no_buffer_can_hold_is_refused() {
        let spec = |collective, size_bytes| RunSpec { size_bytes, ..RunSpec::new(collective, Algorithm::Auto) };
        let huge = u64::MAX - 7;
        let error = spec(Collective::Allreduce, huge).validate(8).unwrap_err();
        assert_eq!(error, SpecError::SizeTooLarge { size: huge, p: 8, blocks: 1 });
        assert_eq!(
            error.to_string(),
            "--size 18446744073709551608 B on 8 nodes gives a node 1 × 18446744073709551608 B to hold, more than \
             any buffer can be (at most 9223372036854775807 B)"
        );
        assert_eq!(spec(Collective::Allreduce, MAX_BUFFER_BYTES - 7).validate(8), Ok(()));
        // An all-gather's node holds p blocks.
        assert_eq!(spec(Collective::Allgather, 1 << 60).validate(4), Ok(()));
        assert!(matches!(
            spec(Collective::Allgather, 1 << 60).validate(8),
            Err(SpecError::SizeTooLarge { blocks: 8, .. })
        ));
        assert!(matches!(spec(Collective::Alltoall, 1 << 62).validate(1 << 20), Err(SpecError::SizeTooLarge { .. })));
    }

    #[test]
    fn the_timeout_is_one_ms_to_one_day() {
        let spec = RunSpec::new(Collective::Allreduce, Algorithm::Ring);
        assert_eq!(RunSpec { timeout_ms: 0, ..spec.clone() }.validate(4), Err(SpecError::ZeroTimeout));
        assert_eq!(RunSpec { timeout_ms: 1, ..spec.clone() }.validate(4), Ok(()));
        assert_eq!(RunSpec { timeout_ms: MAX_TIMEOUT_MS, ..spec.clone() }.validate(4), Ok(()));
        let err = RunSpec { timeout_ms: MAX_TIMEOUT_MS + 1, ..spec.clone() }.validate(4).unwrap_err();
        assert_eq!(err, SpecError::TimeoutTooLong { timeout_ms: MAX_TIMEOUT_MS + 1 });
        assert!(err.to_string().contains("one day"), "{err}");
        let err = RunSpec { timeout_ms: u64::MAX, ..spec }.validate(4).unwrap_err();
        assert!(matches!(err, SpecError::TimeoutTooLong { .. }), "{err}");
    }

    #[test]
    fn warmup_and_iterations_must_add_up_within_u32() {
        let spec = RunSpec::new(Collective::Barrier, Algorithm::Dissemination);
        let most = RunSpec { warmup: 1, iterations: u32::MAX - 1, ..spec.clone() };
        assert_eq!(most.total_iterations(), Some(u32::MAX));
        assert_eq!(most.validate(4), Ok(()));
        for (warmup, iterations) in [(u32::MAX, 1), (3, u32::MAX), (u32::MAX, u32::MAX)] {
            let err = RunSpec { warmup, iterations, ..spec.clone() }.validate(4).unwrap_err();
            assert_eq!(err, SpecError::TooManyIterations { warmup, iterations });
            assert!(err.to_string().contains("4294967295"), "{err}");
        }
    }

    #[test]
    fn the_run_deadline_is_the_timeout_per_iteration_and_never_overflows_once_valid() {
        let spec =
            RunSpec { warmup: 2, iterations: 3, timeout_ms: 1500, ..RunSpec::new(Collective::Reduce, Algorithm::Ring) };
        assert_eq!(spec.run_deadline(), Some(Duration::from_millis(7500)));
        let longest = RunSpec { warmup: 0, iterations: u32::MAX, timeout_ms: MAX_TIMEOUT_MS, ..spec.clone() };
        assert_eq!(longest.validate(2), Ok(()));
        assert_eq!(longest.run_deadline(), MAX_TIMEOUT.checked_mul(u32::MAX));
        // Unvalidated specs say None instead of panicking.
        let huge = RunSpec { warmup: 0, iterations: u32::MAX, timeout_ms: u64::MAX, ..spec.clone() };
        assert_eq!(huge.run_deadline(), None);
        assert_eq!(RunSpec { warmup: u32::MAX, ..spec }.run_deadline(), None);
    }

    #[test]
    fn only_emulated_links_are_dilated_and_only_within_range() {
        let spec = RunSpec::new(Collective::Allreduce, Algorithm::Ring);
        let k = Dilation::from_milli(4000).unwrap();
        let err = RunSpec { dilation: k, ..spec.clone() }.validate(4).unwrap_err();
        assert_eq!(err, SpecError::RawLinksDilated(k));
        assert!(err.to_string().contains("never dilated"), "{err}");
        let links =
            LinkModel { ts_ns: 1, th_ns: 0, tw_ps: 0, routing: Routing::Sf, packet_bytes: 0, ports: Ports::All };
        assert_eq!(RunSpec { dilation: k, emulation: Some(links), ..spec.clone() }.validate(4), Ok(()));
        // A factor out of range (from the wire) is refused, never used.
        let forged = RunSpec { dilation: Dilation { milli: 7 }, emulation: Some(links), ..spec };
        assert!(matches!(forged.validate(4), Err(SpecError::Dilation(_))));
    }
}
