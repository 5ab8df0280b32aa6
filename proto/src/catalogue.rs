//! Which algorithms serve which collective: for each, the topology it is made for, the
//! node counts it serves, its step count and its source; the default algorithm of each
//! (collective, topology) pair and the size-based choice of `auto`. `topocomm list`
//! prints this table, and the node refuses a pair that is not in it.

use crate::frame::CUT_FRAMES_UP_TO;
use crate::spec::{Algorithm, Collective, RunSpec};
use crate::topology::TopologyKind;
use std::ops::RangeInclusive;

/// One algorithm of one collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub collective: Collective,
    pub algorithm: Algorithm,
    /// The topologies whose edges carry every message of the algorithm.
    pub made_for: MadeFor,
    /// Node counts the algorithm serves.
    pub nodes: &'static str,
    /// Communication steps, as a formula in p: the longest chain of messages on the
    /// topology it is made for (what `run` and `explain` count), except that the linear
    /// schedules of a root count its p-1 one-port sends (each a chain of one).
    pub steps: Steps,
    /// Where the algorithm comes from.
    pub source: &'static str,
}

/// The topologies an algorithm is made for: on these its messages cross one link each
/// (with `routing` where it needs one to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MadeFor {
    /// The shapes, the first the one it is usually shown on; empty: any shape, none in
    /// particular.
    pub shapes: &'static [TopologyKind],
    /// How routes must run for it, where that matters ("cut-through", "E-cube").
    pub routing: Option<&'static str>,
}

impl MadeFor {
    /// The shape to show the algorithm on: its first, or a hypercube for any.
    pub fn first(&self) -> TopologyKind {
        self.shapes.first().copied().unwrap_or(TopologyKind::Hypercube)
    }

    /// Whether `topology` is one the algorithm is made for, so that each of its messages
    /// crosses one link there (never for an algorithm made for any shape: its partners
    /// are whoever the user names).
    pub fn includes(&self, topology: TopologyKind) -> bool {
        self.shapes.contains(&topology)
    }
}

impl std::fmt::Display for MadeFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.shapes.is_empty() {
            return f.write_str("any");
        }
        let names: Vec<&str> = self.shapes.iter().map(|&shape| shape.into()).collect();
        f.write_str(&names.join(", "))?;
        match self.routing {
            Some(routing) => write!(f, " ({routing})"),
            None => Ok(()),
        }
    }
}

/// An algorithm's step count as a formula in p (and the shift q): the longest chain of
/// messages of its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steps {
    /// A fixed number (a ping-pong's 2).
    Exactly(u64),
    /// p - 1.
    PMinusOne,
    /// ⌊p/2⌋.
    HalfDown,
    /// ⌈p/2⌉.
    HalfUp,
    /// 2(p - 1).
    TwicePMinusOne,
    /// ⌈log p⌉.
    Log,
    /// log p on a power of two, where extra nodes never fold.
    PowerLog,
    /// log p on a power of two; ⌊log p⌋ + 2 where extra nodes fold into partners.
    LogFolded,
    /// 2⌈log p⌉.
    TwiceLog,
    /// 2⌈log p⌉, plus 2 where extra nodes fold.
    TwiceLogPlusFolding,
    /// 2 log p on a power of two; 2⌊log p⌋ + 2 folded.
    TwiceLogFolded,
    /// 2⌈log p⌉ - 1.
    TwiceLogMinusOne,
    /// At most 2⌈log p⌉.
    AtMostTwiceLog,
    /// 2^⌈log p⌉ - 1.
    PowerMinusOne,
    /// 2⌊√p/2⌋ on a square torus.
    TorusHalfSides,
    /// 2(√p - 1) on a square grid.
    TwiceSideMinusOne,
    /// min(q, p - q) for a shift by q.
    ShortWay,
    /// Phases along the grid's dimensions, each as long as its line: no one number.
    Phases(&'static str),
    /// p - 1 chains of k segments each: no one number.
    Segmented,
}

impl Steps {
    /// The formula as the catalogue prints it.
    pub fn formula(&self) -> &'static str {
        match self {
            Steps::Exactly(2) => "2",
            Steps::Exactly(_) => "a constant",
            Steps::PMinusOne => "p-1",
            Steps::HalfDown => "⌊p/2⌋",
            Steps::HalfUp => "⌈p/2⌉",
            Steps::TwicePMinusOne => "2(p-1)",
            Steps::Log => "⌈log p⌉",
            Steps::PowerLog => "log p",
            Steps::LogFolded => "log p; ⌊log p⌋+2 folded",
            Steps::TwiceLog => "2⌈log p⌉",
            Steps::TwiceLogPlusFolding => "2⌈log p⌉ (+2 folded)",
            Steps::TwiceLogFolded => "2 log p; 2⌊log p⌋+2 folded",
            Steps::TwiceLogMinusOne => "2⌈log p⌉-1",
            Steps::AtMostTwiceLog => "≤ 2⌈log p⌉",
            Steps::PowerMinusOne => "2^⌈log p⌉ - 1",
            Steps::TorusHalfSides => "2⌊√p/2⌋ (torus)",
            Steps::TwiceSideMinusOne => "2(√p-1)",
            Steps::ShortWay => "min(q, p-q)",
            Steps::Phases(phases) => phases,
            Steps::Segmented => "p-1, of k segments each",
        }
    }

    /// The longest chain of messages on `p` nodes, p a power of four (a hypercube and a
    /// square torus, where nothing folds), for a shift by `shift`; `None` where the
    /// formula counts no one number.
    pub fn chain(&self, p: u64, shift: u64) -> Option<RangeInclusive<u64>> {
        let log = u64::from(p.ilog2());
        let side = p.isqrt();
        let steps = match self {
            Steps::Exactly(n) => *n,
            Steps::PMinusOne | Steps::PowerMinusOne => p - 1,
            Steps::HalfDown => p / 2,
            Steps::HalfUp => p.div_ceil(2),
            Steps::TwicePMinusOne => 2 * (p - 1),
            Steps::Log | Steps::PowerLog | Steps::LogFolded => log,
            Steps::TwiceLog | Steps::TwiceLogPlusFolding | Steps::TwiceLogFolded => 2 * log,
            Steps::TwiceLogMinusOne => 2 * log - 1,
            Steps::AtMostTwiceLog => return Some(0..=2 * log),
            Steps::TorusHalfSides => 2 * (side / 2),
            Steps::TwiceSideMinusOne => 2 * (side - 1),
            Steps::ShortWay => shift.min(p - shift),
            Steps::Phases(_) | Steps::Segmented => return None,
        };
        Some(steps..=steps)
    }
}

impl std::fmt::Display for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.formula())
    }
}

const fn entry(
    collective: Collective,
    algorithm: Algorithm,
    made_for: MadeFor,
    nodes: &'static str,
    steps: Steps,
    source: &'static str,
) -> Entry {
    Entry { collective, algorithm, made_for, nodes, steps, source }
}

use Algorithm as A;
use Collective as C;

use TopologyKind as T;

const ANY: &str = "any p";
const FULL: MadeFor = MadeFor { shapes: &[T::Full], routing: None };
const RING: MadeFor = MadeFor { shapes: &[T::Ring], routing: None };
const CT_RING: MadeFor = MadeFor { shapes: &[T::Ring], routing: Some("cut-through") };
const GRIDS: MadeFor = MadeFor { shapes: &[T::Mesh, T::Torus, T::Mesh3d, T::Torus3d], routing: None };
const GRIDS_2D: MadeFor = MadeFor { shapes: &[T::Mesh, T::Torus], routing: None };
const HYPERCUBE: MadeFor = MadeFor { shapes: &[T::Hypercube], routing: None };
const E_CUBE: MadeFor = MadeFor { shapes: &[T::Hypercube], routing: Some("E-cube") };
const ANY_SHAPE: MadeFor = MadeFor { shapes: &[], routing: None };
const FOLDS: &str = "any p (extra nodes fold into partners)";

/// Every (collective, algorithm) pair topocomm runs.
pub const ENTRIES: &[Entry] = &[
    entry(C::Broadcast, A::Linear, FULL, ANY, Steps::PMinusOne, "[GGKK 4.1] (naive)"),
    entry(C::Broadcast, A::Ring, RING, ANY, Steps::HalfDown, "[KGGK94 3.2], SF ring"),
    entry(C::Broadcast, A::Mesh, GRIDS, ANY, Steps::TorusHalfSides, "[GGKK 4.1.2]"),
    entry(C::Broadcast, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "Algorithms 4.1, 4.2"),
    entry(C::Broadcast, A::RecursiveDoubling, CT_RING, ANY, Steps::Log, "[GGKK 4.1.1], CT ring"),
    entry(C::Broadcast, A::ScatterAllgather, HYPERCUBE, ANY, Steps::TwiceLog, "textbook 4.7 (large messages)"),
    entry(C::Reduce, A::Linear, FULL, ANY, Steps::PMinusOne, "dual of linear broadcast"),
    entry(C::Reduce, A::Ring, RING, ANY, Steps::HalfDown, "dual of ring broadcast"),
    entry(C::Reduce, A::Mesh, GRIDS, ANY, Steps::TorusHalfSides, "dual of mesh broadcast"),
    entry(C::Reduce, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "Algorithm 4.3"),
    entry(C::Reduce, A::RecursiveHalving, CT_RING, ANY, Steps::Log, "dual of recursive-doubling broadcast"),
    entry(
        C::Reduce,
        A::ReduceScatterGather,
        HYPERCUBE,
        ANY,
        Steps::TwiceLogPlusFolding,
        "[GGKK 4.7], [Rabenseifner 2004] (large messages)",
    ),
    entry(C::Allgather, A::Ring, RING, ANY, Steps::PMinusOne, "Algorithm 4.4"),
    entry(C::Allgather, A::Mesh, GRIDS, ANY, Steps::TwiceSideMinusOne, "Algorithm 4.6"),
    entry(C::Allgather, A::Hypercube, HYPERCUBE, FOLDS, Steps::LogFolded, "Algorithm 4.7"),
    entry(C::Allgather, A::RecursiveDoubling, HYPERCUBE, FOLDS, Steps::LogFolded, "[Thakur 2005]"),
    entry(C::Allgather, A::Bruck, FULL, ANY, Steps::Log, "Bruck et al. 1997"),
    entry(C::ReduceScatter, A::Ring, RING, ANY, Steps::PMinusOne, "Algorithm 4.5"),
    entry(C::ReduceScatter, A::Hypercube, HYPERCUBE, FOLDS, Steps::LogFolded, "Algorithm 4.8"),
    entry(C::ReduceScatter, A::RecursiveHalving, HYPERCUBE, FOLDS, Steps::LogFolded, "[Thakur 2005]"),
    entry(C::ReduceScatter, A::Pairwise, FULL, ANY, Steps::PMinusOne, "MPI libraries"),
    entry(C::Allreduce, A::ReduceBroadcast, HYPERCUBE, ANY, Steps::TwiceLog, "[GGKK 4.3]"),
    entry(C::Allreduce, A::RecursiveDoubling, HYPERCUBE, FOLDS, Steps::LogFolded, "[GGKK 4.3], [Thakur 2005]"),
    entry(C::Allreduce, A::HalvingDoubling, HYPERCUBE, FOLDS, Steps::TwiceLogFolded, "[Rabenseifner 2004]"),
    entry(C::Allreduce, A::Ring, RING, ANY, Steps::TwicePMinusOne, "ring reduce-scatter + ring all-gather"),
    entry(C::Allreduce, A::Mesh, GRIDS, ANY, Steps::Phases("rows, then columns"), "textbook 4.3"),
    entry(C::Scan, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "Algorithm 4.9"),
    entry(C::Scan, A::Linear, RING, ANY, Steps::PMinusOne, "[GGKK 4.3], pipeline"),
    entry(C::Scan, A::Pipeline, RING, ANY, Steps::Segmented, "[Pješivac-Grbović 2007], segmented (large messages)"),
    entry(C::Scan, A::Tree, HYPERCUBE, ANY, Steps::TwiceLogMinusOne, "Brent-Kung 1982 (work-efficient)"),
    entry(C::Scatter, A::Linear, FULL, ANY, Steps::PMinusOne, "[GGKK 4.4] (naive)"),
    entry(C::Scatter, A::Ring, RING, ANY, Steps::HalfUp, "[GGKK 4.4]"),
    entry(C::Scatter, A::Mesh, GRIDS, ANY, Steps::Phases("rows, then columns"), "[GGKK 4.4]"),
    entry(C::Scatter, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "[GGKK 4.4]"),
    entry(C::Gather, A::Linear, FULL, ANY, Steps::PMinusOne, "dual of linear scatter"),
    entry(C::Gather, A::Ring, RING, ANY, Steps::HalfUp, "dual of ring scatter"),
    entry(C::Gather, A::Mesh, GRIDS, ANY, Steps::Phases("columns, then the row"), "dual of mesh scatter"),
    entry(C::Gather, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "dual of hypercube scatter"),
    entry(C::Alltoall, A::Ring, RING, ANY, Steps::PMinusOne, "[GGKK 4.5.1]"),
    entry(C::Alltoall, A::Mesh, GRIDS, ANY, Steps::TwiceSideMinusOne, "[GGKK 4.5.2]"),
    entry(C::Alltoall, A::Hypercube, HYPERCUBE, FOLDS, Steps::PowerLog, "[GGKK 4.5.3]"),
    entry(C::Alltoall, A::PairwiseXor, E_CUBE, ANY, Steps::PowerMinusOne, "Algorithm 4.10"),
    entry(C::Alltoall, A::Pairwise, FULL, ANY, Steps::PMinusOne, "MPI libraries"),
    entry(C::Alltoall, A::Bruck, FULL, ANY, Steps::Log, "Bruck et al. 1997"),
    entry(C::Shift, A::Ring, RING, ANY, Steps::ShortWay, "textbook 4.6"),
    entry(C::Shift, A::Mesh, GRIDS_2D, ANY, Steps::Phases("row shift + column shift"), "textbook 4.6"),
    entry(C::Shift, A::Hypercube, HYPERCUBE, ANY, Steps::AtMostTwiceLog, "textbook 4.6"),
    entry(C::Barrier, A::Dissemination, FULL, ANY, Steps::Log, "Hensgen, Finkel, Manber 1988"),
    entry(C::PingPong, A::Linear, ANY_SHAPE, ANY, Steps::Exactly(2), "OSU latency test"),
    entry(C::Barrier, A::Hypercube, HYPERCUBE, FOLDS, Steps::LogFolded, "butterfly barrier"),
];

/// The algorithms of `collective`, in table order.
pub fn algorithms(collective: Collective) -> impl Iterator<Item = &'static Entry> {
    ENTRIES.iter().filter(move |e| e.collective == collective)
}

/// The entry of a pair, if the collective has that algorithm.
pub fn find(collective: Collective, algorithm: Algorithm) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.collective == collective && e.algorithm == algorithm)
}

/// A collective asked to run with an algorithm it does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{collective} has no algorithm {algorithm}; choose one of: auto, {choices}")]
pub struct NoSuchAlgorithm {
    pub collective: Collective,
    pub algorithm: Algorithm,
    /// The collective's algorithms, comma-separated.
    pub choices: String,
}

/// Refuses a pair that is not in the table, naming the algorithms that are.
pub fn check(collective: Collective, algorithm: Algorithm) -> Result<(), NoSuchAlgorithm> {
    if algorithm == Algorithm::Auto || find(collective, algorithm).is_some() {
        return Ok(());
    }
    let names: Vec<&str> = algorithms(collective).map(|e| e.algorithm.into()).collect();
    Err(NoSuchAlgorithm { collective, algorithm, choices: names.join(", ") })
}

/// The algorithm made for `topology`: what runs when the user names none.
pub fn default_algorithm(collective: Collective, topology: TopologyKind) -> Algorithm {
    use TopologyKind as T;
    let grid = matches!(topology, T::Mesh | T::Torus | T::Mesh3d | T::Torus3d);
    match collective {
        C::PingPong => A::Linear,
        C::Barrier if topology == T::Hypercube => A::Hypercube,
        C::Barrier => A::Dissemination,
        C::Scan if topology == T::Hypercube || topology == T::Full => A::Hypercube,
        C::Scan => A::Linear,
        C::ReduceScatter if grid => A::Ring,
        C::Allreduce if topology == T::Hypercube || topology == T::Full => A::RecursiveDoubling,
        C::Alltoall if topology == T::Full => A::Pairwise,
        C::Shift if topology == T::Full => A::Ring,
        _ if topology == T::Ring => A::Ring,
        _ if grid => A::Mesh,
        _ => A::Hypercube,
    }
}

/// What `auto` picks, in one line (`topocomm list` prints it).
pub const AUTO_RULE: &str = "--algorithm auto picks halving-doubling all-reduce where the cost model, with a start-up \
     worth 128 KiB, says it beats the topology's own (from about 200-500 KiB per node on 4 or more nodes; never on a \
     ring), the reduce-then-broadcast all-reduce below that from 64 KiB on 16 or more nodes where the default is \
     recursive doubling, the segmented pipeline scan on a hypercube or a fully connected network from 256 KiB (on 4 to \
     8 nodes from 128 KiB on a hypercube, 64 KiB fully connected), the linear scatter from 64 KiB on a fully \
     connected network, and the pairwise-xor all-to-all on a \
     hypercube for blocks up to 1 MiB where a node's blocks take 4 to 16 MiB together; the topology's default \
     everywhere else; and where its pick does not fit in the nodes' memory, the pairwise-xor all-to-all instead of the \
     hypercube's";

/// What one message's start-up costs, in the bytes a node could move in that time:
/// the t_s / t_w that puts the all-reduce crossings where they were measured on a
/// local cluster (recursive doubling ahead at 256 KiB on 8 nodes, halving-doubling
/// ahead at 256 KiB on 16 and 32; docs/PERFORMANCE-NOTES.md).
pub const STARTUP_BYTES: u64 = 128 * 1024;

/// Message size from which `auto` scans by the segmented pipeline where the default is
/// Algorithm 4.9, on more than [`SMALL_CLUSTER_NODES`]: measured ahead from 256 KiB on 4
/// to 32 nodes, behind at 64 KiB on 16 and 32.
pub const LARGE_SCAN: u64 = 256 * 1024;

/// Message size from which `auto` scans by the segmented pipeline on a hypercube of 4
/// to [`SMALL_CLUSTER_NODES`] nodes, where the chain is routed (11 hops for 8 nodes):
/// measured ahead at 128 KiB on 4 and 8 nodes, ahead in 10 of 14 passes at 64 KiB.
pub const SMALL_CLUSTER_SCAN: u64 = 128 * 1024;

/// Message size from which `auto` scans by the segmented pipeline on a fully connected
/// network of 4 to [`SMALL_CLUSTER_NODES`] nodes, where the chain is p - 1 direct sends:
/// measured ahead at 64 and 128 KiB on 4, 5, 6 and 8 nodes, even or behind below.
pub const SMALL_CLUSTER_SCAN_FULL: u64 = 64 * 1024;

/// The most nodes on which `auto` scans by the pipeline from [`SMALL_CLUSTER_SCAN`]
/// (hypercube) or [`SMALL_CLUSTER_SCAN_FULL`] (fully connected) rather than from
/// [`LARGE_SCAN`].
pub const SMALL_CLUSTER_NODES: usize = 8;

/// Message size from which `auto` scans by the segmented pipeline on p nodes of
/// `topology`, where the default is Algorithm 4.9 ([`LARGE_SCAN`]; on small clusters
/// [`SMALL_CLUSTER_SCAN`] and [`SMALL_CLUSTER_SCAN_FULL`]).
pub fn pipeline_scan_from(topology: TopologyKind, p: usize) -> u64 {
    match topology {
        _ if p > SMALL_CLUSTER_NODES => LARGE_SCAN,
        TopologyKind::Full => SMALL_CLUSTER_SCAN_FULL,
        _ => SMALL_CLUSTER_SCAN,
    }
}

/// Vector size from which `auto` all-reduces by a reduce then a broadcast, on 16 nodes
/// or more, where the default is recursive doubling and halving-doubling does not pay
/// yet ([`auto`]).
pub const TREE_ALLREDUCE: u64 = 64 * 1024;

/// Nodes from which `auto` all-reduces by a reduce then a broadcast ([`TREE_ALLREDUCE`]).
pub const TREE_ALLREDUCE_NODES: usize = 16;

/// Block size from which `auto` scatters by the root's direct sends on a fully
/// connected network.
pub const LARGE_SCATTER: u64 = 64 * 1024;

/// The bytes a node's p blocks take together, from and up to which `auto` runs Algorithm
/// 4.10 on a hypercube ([`pairwise_xor_pays`]): measured ahead of the hypercube schedule in
/// every pass from 4 MiB (256 KiB blocks on 16 nodes, 512 KiB on 8, 1 MiB on 4) to 16 MiB
/// (1 MiB on 16, 512 KiB on 32); behind at 2 MiB (256 KiB on 8 nodes) and even at 32 MiB
/// (1 MiB on 32; docs/PERFORMANCE-NOTES.md).
pub const PAIRWISE_XOR_NODE_BYTES: RangeInclusive<u64> = (4 << 20)..=(16 << 20);

/// Whether Algorithm 4.10's p - 1 direct (E-cube routed) sends of `block_bytes` beat the
/// hypercube all-to-all's log p exchanges of p/2 blocks on p nodes: where its blocks are
/// frames a link cuts into writes ([`CUT_FRAMES_UP_TO`]: each of its p - 1 messages goes
/// out in cut writes, the schedule's p/2-block messages do not) and a node's blocks
/// together are in [`PAIRWISE_XOR_NODE_BYTES`]. Both move the same block-hops; the fewer, larger messages
/// win while start-ups count, the cut writes of many messages once the bytes do.
pub fn pairwise_xor_pays(p: usize, block_bytes: u64) -> bool {
    block_bytes <= CUT_FRAMES_UP_TO as u64 && PAIRWISE_XOR_NODE_BYTES.contains(&(p as u64 * block_bytes))
}

/// Whether halving-doubling all-reduce beats recursive doubling for `size_bytes` per
/// node on p nodes, by the cost model with t_s = [`STARTUP_BYTES`] t_w ([Thakur 2005]):
/// recursive doubling takes log p (t_s + t_w m), halving-doubling 2 log p t_s +
/// 2 (p - 1)/p t_w m, on the power-of-two core the extra nodes fold into.
pub fn halving_doubling_pays(p: usize, size_bytes: u64) -> bool {
    let Some(dimension) = p.checked_ilog2() else { return false };
    let core = 1u64 << dimension;
    let steps = f64::from(dimension);
    let bytes_saved = steps - 2.0 * (core - 1) as f64 / core as f64;
    bytes_saved > 0.0 && size_bytes as f64 * bytes_saved >= STARTUP_BYTES as f64 * steps
}

/// What `auto` runs: the large-message algorithm where it was measured ahead of the
/// topology's default on a local cluster, the default everywhere else ([`AUTO_RULE`]).
///
/// Broadcast by scatter-allgather and reduction by reduce-scatter-gather are not
/// picked: with the nodes sharing the machine's cores, the bytes copied through TCP
/// decide, and those move 1.2-2 times the binomial tree's; they were behind it on 8, 16
/// and 32 nodes at 1 and 8 MiB (docs/PERFORMANCE-NOTES.md). Nor is the pipeline scan on
/// a ring or grid, whose default is already a chain.
pub fn auto(collective: Collective, topology: TopologyKind, p: usize, size_bytes: u64) -> Algorithm {
    use TopologyKind as T;
    let textbook = default_algorithm(collective, topology);
    match collective {
        C::Allreduce if topology != T::Ring && halving_doubling_pays(p, size_bytes) => A::HalvingDoubling,
        // Recursive doubling sends the whole vector log p times, p log p vectors in all;
        // the tree sends 2 (p - 1), in twice the steps. With the nodes sharing the
        // machine's cores the bytes decide from 64 KiB on 16 and 32 nodes (measured ahead
        // at 64 and 128 KiB on 16, 32 and 64 KiB on 32; behind at 32 KiB on 16, even on 8;
        // README, "Fully connected, p = 16 and p = 32").
        C::Allreduce
            if textbook == A::RecursiveDoubling && p >= TREE_ALLREDUCE_NODES && size_bytes >= TREE_ALLREDUCE =>
        {
            A::ReduceBroadcast
        }
        // The chain moves the vector p - 1 times in all, Algorithm 4.9 p log p times: on 4
        // to 8 nodes the chain's bytes win over its length from 64 KiB where its sends are
        // direct, from 128 KiB where they are routed over a hypercube; on 16 and 32 nodes
        // only from 256 KiB (docs/PERFORMANCE-NOTES.md).
        C::Scan if textbook == A::Hypercube && p >= 4 && size_bytes >= pipeline_scan_from(topology, p) => A::Pipeline,
        // The root's direct sends, as Open MPI scatters large blocks: the binomial tree
        // saves only p - 1 - log p start-ups on a fully connected network, and its relays
        // pass on blocks again (12 block transfers against 7 for p = 8; the measurement:
        // docs/PERFORMANCE-NOTES.md).
        C::Scatter if topology == T::Full && p >= 4 && size_bytes >= LARGE_SCATTER => A::Linear,
        // Not on a hypercube: there the direct sends cross the same block-hops as the
        // tree's relays, and with the links unpaced they were even with the tree on 16
        // and 32 nodes (docs/PERFORMANCE-NOTES.md).
        // Algorithm 4.10 on the same hypercube, made for it: the same block-hops in p - 1
        // messages of one block rather than log p of p/2 blocks ([`pairwise_xor_pays`]).
        C::Alltoall if textbook == A::Hypercube && pairwise_xor_pays(p, size_bytes) => A::PairwiseXor,
        _ => textbook,
    }
}

/// The algorithm `auto` turns to where its pick ([`auto`]) would need more memory than
/// the nodes have: one of the same collective that holds less. The hypercube's
/// all-to-all keeps every message it receives until the last step (about 3.5 times a
/// node's p blocks on 32 nodes); Algorithm 4.10, made for the same hypercube, sends and
/// receives one block at a time (2.2 times; docs/PERFORMANCE-NOTES.md, "The all-to-all of
/// 8 MiB on 32 nodes").
pub fn leaner(collective: Collective, picked: Algorithm) -> Option<Algorithm> {
    match (collective, picked) {
        (C::Alltoall, A::Hypercube) => Some(A::PairwiseXor),
        _ => None,
    }
}

/// `spec` with `auto` resolved ([`resolve`]) and held to `check` (the memory its nodes
/// have): `auto`'s pick when it passes, else its [`leaner`] alternative when that
/// passes, else the pick's refusal. A named algorithm is checked as named.
pub fn resolve_checked<E>(
    spec: &RunSpec,
    topology: TopologyKind,
    p: usize,
    check: impl Fn(&RunSpec) -> Result<(), E>,
) -> Result<RunSpec, E> {
    let with = |algorithm| RunSpec { algorithm, ..spec.clone() };
    let picked = with(resolve(spec.collective, spec.algorithm, topology, p, spec.size_bytes));
    let Err(refusal) = check(&picked) else { return Ok(picked) };
    let lean = match spec.algorithm {
        Algorithm::Auto => leaner(spec.collective, picked.algorithm).map(with),
        _ => None,
    };
    match lean {
        Some(lean) if check(&lean).is_ok() => Ok(lean),
        _ => Err(refusal),
    }
}

/// The algorithm a run uses: `auto` resolved, anything else as named.
pub fn resolve(
    collective: Collective,
    algorithm: Algorithm,
    topology: TopologyKind,
    p: usize,
    size_bytes: u64,
) -> Algorithm {
    match algorithm {
        Algorithm::Auto => auto(collective, topology, p, size_bytes),
        named => named,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn auto_turns_leaner_only_where_its_pick_does_not_fit() {
        let cube = TopologyKind::Hypercube;
        let spec = |collective, algorithm| RunSpec { size_bytes: 8 << 20, ..RunSpec::new(collective, algorithm) };
        // A check that names the algorithm it refused.
        let everything = |_: &RunSpec| Ok(());
        let only_pairwise = |run: &RunSpec| if run.algorithm == A::PairwiseXor { Ok(()) } else { Err(run.algorithm) };
        let nothing = |run: &RunSpec| Err(run.algorithm);
        let ran = |resolved: Result<RunSpec, Algorithm>| resolved.map(|run| run.algorithm);
        let auto = spec(C::Alltoall, A::Auto);
        assert_eq!(ran(resolve_checked(&auto, cube, 32, everything)), Ok(A::Hypercube));
        assert_eq!(ran(resolve_checked(&auto, cube, 32, only_pairwise)), Ok(A::PairwiseXor));
        // Neither fits: the pick's refusal.
        assert_eq!(ran(resolve_checked(&auto, cube, 32, nothing)), Err(A::Hypercube));
        // A named algorithm is never swapped, nor a collective without a leaner one.
        let named = spec(C::Alltoall, A::Hypercube);
        assert_eq!(ran(resolve_checked(&named, cube, 32, only_pairwise)), Err(A::Hypercube));
        assert_eq!(ran(resolve_checked(&spec(C::Allgather, A::Auto), cube, 32, nothing)), Err(A::Hypercube));
        assert_eq!(ran(resolve_checked(&auto, TopologyKind::Ring, 32, only_pairwise)), Err(A::Ring));
        // The rest of the spec goes through untouched.
        let resolved = resolve_checked(&auto, cube, 32, only_pairwise).expect("pairwise-xor fits");
        assert_eq!(resolved, RunSpec { algorithm: A::PairwiseXor, ..auto });
    }

    #[test]
    fn every_collective_has_algorithms_and_its_defaults_are_in_the_table() {
        for collective in Collective::iter() {
            assert!(algorithms(collective).count() >= 1, "{collective}");
            for topology in TopologyKind::iter() {
                let default = default_algorithm(collective, topology);
                assert!(find(collective, default).is_some(), "{collective} on {topology}: {default}");
                for size in [8, 1 << 20] {
                    let auto = auto(collective, topology, 16, size);
                    assert!(find(collective, auto).is_some(), "{collective} auto on {topology}: {auto}");
                }
            }
        }
    }

    #[test]
    fn pairs_are_unique() {
        for (i, a) in ENTRIES.iter().enumerate() {
            for b in &ENTRIES[i + 1..] {
                assert!(!(a.collective == b.collective && a.algorithm == b.algorithm), "{a:?} twice");
            }
        }
    }

    #[test]
    fn a_wrong_pair_names_the_right_ones() {
        let error = check(Collective::Scan, Algorithm::Bruck).unwrap_err().to_string();
        assert!(error.starts_with("scan has no algorithm bruck; choose one of: auto, "), "{error}");
        assert!(error.contains("hypercube") && error.contains("linear"), "{error}");
        assert!(check(Collective::Scan, Algorithm::Auto).is_ok());
    }

    #[test]
    fn auto_picks_large_message_algorithms() {
        use Algorithm as A;
        use TopologyKind as T;
        // The measured crossings: recursive doubling ahead at 256 KiB on 8 nodes,
        // halving-doubling from 256 KiB on 16 and 32, at 64 KiB on none.
        assert_eq!(auto(C::Allreduce, T::Hypercube, 8, 256 << 10), A::RecursiveDoubling);
        assert_eq!(auto(C::Allreduce, T::Hypercube, 8, 1 << 20), A::HalvingDoubling);
        assert_eq!(auto(C::Allreduce, T::Hypercube, 16, 256 << 10), A::HalvingDoubling);
        assert_eq!(auto(C::Allreduce, T::Hypercube, 32, 256 << 10), A::HalvingDoubling);
        assert_eq!(auto(C::Allreduce, T::Hypercube, 32, 32 << 10), A::RecursiveDoubling);
        // The tree from 64 KiB on 16 nodes or more, until halving-doubling pays.
        assert_eq!(auto(C::Allreduce, T::Hypercube, 32, 64 << 10), A::ReduceBroadcast);
        assert_eq!(auto(C::Allreduce, T::Full, 16, 128 << 10), A::ReduceBroadcast);
        assert_eq!(auto(C::Allreduce, T::Hypercube, 8, 64 << 10), A::RecursiveDoubling);
        assert_eq!(auto(C::Allreduce, T::Torus, 16, 128 << 10), A::Mesh);
        assert_eq!(auto(C::Allreduce, T::Torus, 16, 1 << 20), A::HalvingDoubling);
        assert_eq!(auto(C::Allreduce, T::Torus, 16, 64 << 10), A::Mesh);
        assert_eq!(auto(C::Allreduce, T::Ring, 16, 8 << 20), A::Ring);
        // Two and three nodes: halving saves nothing.
        assert_eq!(auto(C::Allreduce, T::Full, 2, 1 << 30), A::RecursiveDoubling);
        assert_eq!(auto(C::Allreduce, T::Full, 3, 1 << 30), A::RecursiveDoubling);
        // The tree stays for broadcast and reduce at every size.
        assert_eq!(auto(C::Broadcast, T::Hypercube, 8, 8 << 20), A::Hypercube);
        assert_eq!(auto(C::Broadcast, T::Torus, 16, 8 << 20), A::Mesh);
        assert_eq!(auto(C::Reduce, T::Hypercube, 16, 8 << 20), A::Hypercube);
        assert_eq!(auto(C::Scan, T::Hypercube, 8, 1 << 20), A::Pipeline);
        assert_eq!(auto(C::Scan, T::Hypercube, 16, 64 << 10), A::Hypercube);
        assert_eq!(auto(C::Scan, T::Hypercube, 16, 128 << 10), A::Hypercube);
        assert_eq!(auto(C::Scan, T::Hypercube, 32, 256 << 10), A::Pipeline);
        assert_eq!(auto(C::Scan, T::Full, 8, 256 << 10), A::Pipeline);
        // On 4 to 8 nodes from 128 KiB on a hypercube, 64 KiB fully connected; not
        // below, nor on fewer than 4.
        assert_eq!(auto(C::Scan, T::Hypercube, 8, 128 << 10), A::Pipeline);
        assert_eq!(auto(C::Scan, T::Hypercube, 4, 128 << 10), A::Pipeline);
        assert_eq!(auto(C::Scan, T::Hypercube, 8, 64 << 10), A::Hypercube);
        assert_eq!(auto(C::Scan, T::Full, 6, 64 << 10), A::Pipeline);
        assert_eq!(auto(C::Scan, T::Full, 8, 32 << 10), A::Hypercube);
        assert_eq!(auto(C::Scan, T::Full, 3, 1 << 20), A::Hypercube);
        assert_eq!(auto(C::Scan, T::Full, 9, 128 << 10), A::Hypercube);
        assert_eq!(auto(C::Scan, T::Torus, 16, 1 << 20), A::Linear);
        assert_eq!(auto(C::Scatter, T::Full, 8, 1 << 20), A::Linear);
        assert_eq!(auto(C::Scatter, T::Full, 8, 8), A::Hypercube);
        // The tree stays on a hypercube at every size and p.
        for p in [8, 16, 32] {
            assert_eq!(auto(C::Scatter, T::Hypercube, p, 1 << 20), A::Hypercube);
            assert_eq!(auto(C::Scatter, T::Hypercube, p, 8 << 20), A::Hypercube);
        }
        assert_eq!(auto(C::Scatter, T::Torus, 16, 8 << 20), A::Mesh);
        // Algorithm 4.10 on a hypercube where a node's blocks of up to 1 MiB take 4 to
        // 16 MiB together; the hypercube schedule on either side, and elsewhere the
        // topology's own.
        assert_eq!(auto(C::Alltoall, T::Hypercube, 8, 1 << 20), A::PairwiseXor);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 8, 512 << 10), A::PairwiseXor);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 16, 256 << 10), A::PairwiseXor);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 32, 512 << 10), A::PairwiseXor);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 4, 1 << 20), A::PairwiseXor);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 8, 256 << 10), A::Hypercube);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 32, 1 << 20), A::Hypercube);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 8, 2 << 20), A::Hypercube);
        assert_eq!(auto(C::Alltoall, T::Hypercube, 16, 8 << 20), A::Hypercube);
        assert_eq!(auto(C::Alltoall, T::Full, 8, 1 << 20), A::Pairwise);
        assert_eq!(auto(C::Alltoall, T::Torus, 16, 1 << 20), A::Mesh);
    }

    #[test]
    fn pairwise_xor_pays_only_for_blocks_the_links_cut() {
        // 16 blocks of 1 MiB fit the node bytes; 8 of 2 MiB would too, but are not cut.
        assert!(pairwise_xor_pays(16, CUT_FRAMES_UP_TO as u64));
        assert!(!pairwise_xor_pays(8, 2 * CUT_FRAMES_UP_TO as u64));
        // The edges of the node bytes belong to the range.
        assert!(pairwise_xor_pays(4, 1 << 20) && pairwise_xor_pays(16, 1 << 20));
        assert!(!pairwise_xor_pays(4, (1 << 20) - 1));
        assert!(!pairwise_xor_pays(2, 1 << 20));
    }

    #[test]
    fn halving_doubling_pays_from_a_size_that_falls_with_p() {
        let crossing = |p| (1u64..).map(|kib| kib << 10).find(|&m| halving_doubling_pays(p, m)).unwrap();
        let crossings: Vec<u64> = [4, 8, 16, 32, 64].into_iter().map(crossing).collect();
        assert!(crossings.windows(2).all(|w| w[0] > w[1]), "{crossings:?}");
        // log p t_s / (log p - 2 (p-1)/p) t_w: 4 t_s/t_w on 4 nodes, 2.4 on 8.
        assert_eq!(crossings[0], 512 << 10);
        assert_eq!(crossings[1], (2.4f64 * 128.0).ceil() as u64 * 1024);
        // A folded p runs on its power-of-two core.
        assert_eq!(crossing(12), crossings[1]);
    }
}
