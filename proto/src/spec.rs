//! The names users type: collectives, algorithms, reduction operators, element types,
//! and the run specification the coordinator hands every node.

use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, EnumString, IntoStaticStr, VariantNames};

use crate::schedule::{Schedule, ScheduleError};
use crate::topology::NodeId;

/// A basic communication operation (Grama et al., "Basic Communication Operations").
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Collective {
    /// One-to-all broadcast: the root's message ends on every node.
    Broadcast,
    /// All-to-one reduction: the element-wise reduction of every node's vector ends on the root.
    Reduce,
    /// All-to-all broadcast: every node ends with every node's block, in node order.
    Allgather,
    /// All-to-all reduction: node i ends with the reduction of every node's block i.
    ReduceScatter,
    /// Every node ends with the element-wise reduction of every node's vector.
    Allreduce,
    /// Prefix sums: node i ends with the reduction of the vectors of nodes 0..=i
    /// (0..i with `exclusive`; node 0 then ends with nothing).
    Scan,
    /// One-to-all personalized: node i ends with block i of the root's p blocks.
    Scatter,
    /// All-to-one personalized: the root ends with every node's block, in node order.
    Gather,
    /// All-to-all personalized: node i ends with block i of every node, in node order.
    Alltoall,
    /// Circular q-shift: node (i + q) mod p ends with node i's vector.
    Shift,
    /// No node leaves before every node has arrived; no data.
    Barrier,
    /// The root sends its vector to node root + q mod p (`--shift Q`), which sends it
    /// back: both end with it (the OSU latency test; `topocomm calibrate` uses it).
    PingPong,
}

impl Collective {
    /// Whether the collective has a root (`--root`).
    pub const fn has_root(self) -> bool {
        matches!(
            self,
            Collective::Broadcast
                | Collective::Reduce
                | Collective::Scatter
                | Collective::Gather
                | Collective::PingPong
        )
    }

    /// Whether the collective combines elements with a reduction operator (`--op`).
    pub const fn reduces(self) -> bool {
        matches!(self, Collective::Reduce | Collective::ReduceScatter | Collective::Allreduce | Collective::Scan)
    }
}

/// An algorithm for a collective. Each is written once, in `node::collectives`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// The root talks to every other node directly: p - 1 messages (the naive baseline).
    Linear,
    /// Store-and-forward along a ring of the ids.
    Ring,
    /// Ring (or line) phases along rows, then columns (and layers, in 3-D).
    Mesh,
    /// Dimension by dimension, on a hypercube of the ids (Algorithms 4.1-4.10).
    Hypercube,
    /// Distances doubling (or halving) each step: log p steps, any p.
    RecursiveDoubling,
    /// Recursive halving of the data or the distance: log p steps, any p.
    RecursiveHalving,
    /// Reduce-scatter by recursive halving, then all-gather by recursive doubling.
    HalvingDoubling,
    /// Reduce to the root, then broadcast from it.
    ReduceBroadcast,
    /// Broadcast as a scatter followed by an all-gather (large messages).
    ScatterAllgather,
    /// Reduction as a reduce-scatter followed by a gather (large messages).
    ReduceScatterGather,
    /// Bruck et al.: ⌈log p⌉ steps at distances 2^k, then a local rotation.
    Bruck,
    /// Step i exchanges with (id + i) and (id - i) mod p: p - 1 steps, any p.
    Pairwise,
    /// Step i exchanges with id XOR i (Algorithm 4.10, E-cube routes).
    PairwiseXor,
    /// Each step with one ring neighbour, the left and the right by turns, passing on
    /// what came from the other: p/2 steps on an even p (Chen et al. 2005).
    NeighbourExchange,
    /// Dissemination barrier: round k signals id + 2^k.
    Dissemination,
    /// The message cut into segments that follow one another down a chain of the nodes
    /// (large messages: every node works on one segment while the next works on the one
    /// before).
    Pipeline,
    /// Up a binomial tree and back down (Brent-Kung prefix sums): 2 log p - 1 steps,
    /// every message between ids that differ in one bit.
    Tree,
    /// Pick by collective, topology, p and size (the output names what ran).
    Auto,
}

/// An associative, commutative element-wise reduction operator.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum ReduceOp {
    Sum,
    Prod,
    Min,
    Max,
}

/// The element type of the vectors a collective moves and reduces (little-endian).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Dtype {
    I32,
    I64,
    F32,
    F64,
}

impl Dtype {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Dtype::I32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::F64 => 8,
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(self, Dtype::F32 | Dtype::F64)
    }
}

/// How a message crosses intermediate nodes ([GGKK 2.5.1]; [KGGK94 3.2] for the
/// figures).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Store-and-forward: each hop receives the whole message, then sends it on.
    Sf,
    /// Cut-through: the message moves in packets that each hop passes on as they arrive.
    Ct,
}

/// The physics emulated links give every message: start-up time t_s (paid once, when the
/// source sends), per-hop time t_h and per-byte time t_w, and the routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinkModel {
    pub ts_ns: u64,
    pub th_ns: u64,
    /// Per-byte time in picoseconds (10 ns/byte = 10_000).
    pub tw_ps: u64,
    pub routing: Routing,
    /// Cut-through packet size in bytes; 0 (the default) emulates cut-through in the limit
    /// of small packets without cutting frames: each further hop passes a message on t_h
    /// after its tail arrived. Store-and-forward sends whole messages either way.
    pub packet_bytes: u32,
}

impl LinkModel {
    /// A small cut-through packet, for runs that ask for real packets.
    pub const DEFAULT_PACKET: u32 = 1024;

    /// Whether messages travel as real packets (cut-through with a packet size).
    pub fn packetized(&self) -> bool {
        self.routing == Routing::Ct && self.packet_bytes > 0
    }

    /// Whether messages cut through as whole frames (cut-through without a packet size).
    pub fn cuts_through_whole(&self) -> bool {
        self.routing == Routing::Ct && self.packet_bytes == 0
    }

    /// t_w · bytes, in nanoseconds.
    pub fn transfer_ns(&self, bytes: usize) -> u64 {
        (bytes as u128 * self.tw_ps as u128 / 1000) as u64
    }

    /// Bytes a message travels per packet under this routing.
    pub fn packet_len(&self, message: usize) -> usize {
        match self.routing {
            Routing::Ct if self.packet_bytes > 0 => (self.packet_bytes as usize).min(message.max(1)),
            Routing::Sf | Routing::Ct => message.max(1),
        }
    }
}

/// Time dilation of an emulated run, after time-warped network emulation ([Gupta 2006],
/// [DieCast 2008]): the emulated world runs `K` times slower than the wall clock. Every
/// emulated t_s, t_h, t_w and due time lasts K times longer on the wall clock, so the
/// software's own costs (waking up, reading, writing, combining) shrink by K against
/// the emulated times; every time a run reports is emulated time (wall time / K).
/// K is held in thousandths: 1 to 1000, to three decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dilation {
    milli: u32,
}

/// Why a dilation factor cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DilationError {
    #[error("a dilation of {text} is not a number (give a factor from 1 to 1000, e.g. 4 or 2.5, or `auto`)")]
    NotANumber { text: String },
    #[error(
        "a dilation of {factor} is out of range: the emulated world runs 1 to 1000 times slower than the wall clock"
    )]
    OutOfRange { factor: String },
}

impl Dilation {
    /// No dilation: emulated time is wall time.
    pub const NONE: Dilation = Dilation { milli: 1000 };
    /// The largest factor, ×1000: a 1 ms emulated run then takes a second.
    pub const MAX: Dilation = Dilation { milli: 1_000_000 };

    /// K = `milli` / 1000, if it lies in 1..=1000.
    pub fn from_milli(milli: u32) -> Result<Self, DilationError> {
        let dilation = Dilation { milli };
        dilation.check()?;
        Ok(dilation)
    }

    /// The smallest dilation of at least `factor`, to three decimals, if it lies in
    /// 1..=1000.
    pub fn at_least(factor: f64) -> Result<Self, DilationError> {
        let out = || DilationError::OutOfRange { factor: format!("{factor}") };
        if !factor.is_finite() || factor > 1000.0 {
            return Err(out());
        }
        // Rounded up, less a hair of floating-point noise (2.5 must stay 2500).
        let milli = (factor * 1000.0 - 1e-6).ceil();
        if milli < 1000.0 {
            return Err(out());
        }
        Self::from_milli(milli as u32)
    }

    /// Refuses a factor outside 1..=1000 (one that came over the wire, say).
    pub fn check(self) -> Result<(), DilationError> {
        if (Self::NONE.milli..=Self::MAX.milli).contains(&self.milli) {
            Ok(())
        } else {
            Err(DilationError::OutOfRange { factor: format!("{}", f64::from(self.milli) / 1000.0) })
        }
    }

    /// K in thousandths.
    pub fn milli(self) -> u32 {
        self.milli
    }

    /// K.
    pub fn factor(self) -> f64 {
        f64::from(self.milli) / 1000.0
    }

    /// Whether the emulated world runs slower than the wall clock (K > 1).
    pub fn dilates(self) -> bool {
        self.milli > Self::NONE.milli
    }

    /// How many wall nanoseconds `emulated_ns` last (saturating).
    pub fn wall_ns(self, emulated_ns: u64) -> u64 {
        u64::try_from(u128::from(emulated_ns) * u128::from(self.milli) / 1000).unwrap_or(u64::MAX)
    }

    /// How many emulated nanoseconds `wall_ns` are (rounded down).
    pub fn emulated_ns(self, wall_ns: u64) -> u64 {
        (u128::from(wall_ns) * 1000 / u128::from(self.milli.max(1))) as u64
    }

    /// `wall` in emulated time.
    pub fn emulated(self, wall: Duration) -> Duration {
        wall.mul_f64(1000.0 / f64::from(self.milli.max(1)))
    }

    /// How long `emulated` lasts on the wall clock (saturating).
    pub fn wall(self, emulated: Duration) -> Duration {
        Duration::try_from_secs_f64(emulated.as_secs_f64() * self.factor()).unwrap_or(Duration::MAX)
    }
}

impl Default for Dilation {
    fn default() -> Self {
        Self::NONE
    }
}

/// `4`, `2.5`, `12.125`: K with no trailing zeros.
impl std::fmt::Display for Dilation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, thousandths) = (self.milli / 1000, self.milli % 1000);
        if thousandths == 0 {
            return write!(f, "{whole}");
        }
        let decimals = format!("{thousandths:03}");
        write!(f, "{whole}.{}", decimals.trim_end_matches('0'))
    }
}

/// A factor as people write it: `4`, `2.5`, `x4` or `×4`.
impl std::str::FromStr for Dilation {
    type Err = DilationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let number = trimmed.strip_prefix(['x', 'X', '×']).unwrap_or(trimmed);
        let plain = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.');
        let factor: f64 = match number.parse() {
            Ok(factor) if plain => factor,
            _ => return Err(DilationError::NotANumber { text: text.to_owned() }),
        };
        if number.split_once('.').is_some_and(|(_, decimals)| decimals.len() > 3) {
            return Err(DilationError::NotANumber { text: text.to_owned() });
        }
        Self::at_least(factor).map_err(|_| DilationError::OutOfRange { factor: number.to_owned() })
    }
}

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
        let spec = RunSpec {
            run: 1,
            collective: Collective::Reduce,
            algorithm: Algorithm::Ring,
            root: 0,
            size_bytes: 10,
            dtype: Dtype::F64,
            op: ReduceOp::Sum,
            seed: 1,
            warmup: 0,
            iterations: 1,
            timeout_ms: 1000,
            dump: false,
            shift: 1,
            exclusive: false,
            emulation: None,
            dilation: Dilation::NONE,
            probe: false,
            trace: false,
            clock_offsets_ns: Vec::new(),
            schedule: None,
        };
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
    fn dilations_read_and_print_as_people_write_them() {
        for (text, milli, shown) in [
            ("4", 4000, "4"),
            ("2.5", 2500, "2.5"),
            ("x12.125", 12125, "12.125"),
            ("×1", 1000, "1"),
            ("1000", 1_000_000, "1000"),
        ] {
            let dilation: Dilation = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(dilation.milli(), milli, "{text}");
            assert_eq!(dilation.to_string(), shown, "{text}");
        }
        for bad in ["", "auto", "-2", "0.5", "1001", "2.0001", "1e3", "nan", "inf", " x "] {
            assert!(bad.parse::<Dilation>().is_err(), "{bad:?} was taken");
        }
        let error = "0.5".parse::<Dilation>().unwrap_err().to_string();
        assert!(error.contains("1 to 1000"), "{error}");
    }

    #[test]
    fn dilation_converts_both_ways() {
        let k = Dilation::from_milli(3000).unwrap();
        assert_eq!(k.wall_ns(1_000), 3_000);
        assert_eq!(k.emulated_ns(3_000), 1_000);
        assert_eq!(k.emulated_ns(k.wall_ns(123_456_789)), 123_456_789);
        assert_eq!(k.emulated(Duration::from_millis(3)), Duration::from_millis(1));
        assert_eq!(k.wall(Duration::from_millis(2)), Duration::from_millis(6));
        // Absolute readings of the wall clock (ns since 1970) stay exact, far from u64's end.
        let now_ns = 1_800_000_000_000_000_000u64;
        assert_eq!(Dilation::MAX.emulated_ns(Dilation::MAX.wall_ns(now_ns / 1000)), now_ns / 1000);
        assert_eq!(Dilation::MAX.wall_ns(u64::MAX), u64::MAX, "saturates");
        assert_eq!(Dilation::at_least(2.5).unwrap().milli(), 2500);
        assert_eq!(Dilation::at_least(2.5001).unwrap().milli(), 2501);
        assert!(Dilation::at_least(0.99).is_err() && Dilation::at_least(f64::NAN).is_err());
        assert!(!Dilation::NONE.dilates() && k.dilates());
    }

    #[test]
    fn only_emulated_links_are_dilated_and_only_within_range() {
        let spec = RunSpec::new(Collective::Allreduce, Algorithm::Ring);
        let k = Dilation::from_milli(4000).unwrap();
        let err = RunSpec { dilation: k, ..spec.clone() }.validate(4).unwrap_err();
        assert_eq!(err, SpecError::RawLinksDilated(k));
        assert!(err.to_string().contains("never dilated"), "{err}");
        let links = LinkModel { ts_ns: 1, th_ns: 0, tw_ps: 0, routing: Routing::Sf, packet_bytes: 0 };
        assert_eq!(RunSpec { dilation: k, emulation: Some(links), ..spec.clone() }.validate(4), Ok(()));
        // A factor out of range (from the wire) is refused, never used.
        let forged = RunSpec { dilation: Dilation { milli: 7 }, emulation: Some(links), ..spec };
        assert!(matches!(forged.validate(4), Err(SpecError::Dilation(_))));
    }
}
