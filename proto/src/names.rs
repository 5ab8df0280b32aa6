//! The names users type: the collectives, the algorithms, the reduction operators and
//! the element types. The run specification (`spec`) and the schedules users bring
//! (`schedule`) both speak them, so they sit beneath both.

use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, EnumString, IntoStaticStr, VariantNames};

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
    /// Two levels: inside each group of ranks (a machine's cores, a switch's hosts; a
    /// direct network's grid rows), then among the groups' leaders, then inside again
    /// (Open MPI's `han`, Luo et al. 2020; the multi-leader all-gather, Kandalla et al. 2009).
    TwoLevel,
    /// Two levels with a ring among the leaders: reduce inside each group, the ring
    /// all-reduce among the groups' leaders, broadcast inside (`han`'s "simple"
    /// all-reduce; large vectors).
    TwoLevelRing,
    /// Many leaders a group (the hierarchical, or 2-D ring, all-reduce): a ring
    /// reduce-scatter inside each group leaves its j-th rank the group's sum of shard j,
    /// the j-th ranks of all groups ring all-reduce shard j, all shards at once, and a
    /// ring all-gather inside hands every rank the whole vector (Kandalla et al. 2009's
    /// multi-leader design; Mikami et al. 2018's 2D-Torus all-reduce).
    MultiLeader,
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
