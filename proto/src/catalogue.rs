//! Which algorithms serve which collective: for each, the topology it is made for, the
//! node counts it serves, its step count, its source, what a node of it holds and the
//! textbook's closed form of its time where one applies; and the default algorithm of
//! each (collective, topology) pair: what a topology is. `topocomm list` prints this
//! table, and the node refuses a pair that is not in it. What `auto` picks by size and p
//! is tuning, not contract: the coordinator keeps it as data (`collectives/src/tuning/`).
//!
//! [`ENTRIES`] is the one place an algorithm is added (the recipe is in
//! docs/ARCHITECTURE.md, "Adding an algorithm"): the node tests, the phase check, the
//! closed forms, the simulator's memory estimate and docs/running.md read it, and each
//! has a test that fails when it is out of step with it.

use crate::spec::{Algorithm, Collective, Ports, Routing};
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
    /// topology it is made for (what `run` and `explain` count), under the port model
    /// [`Entry::steps_hold_under`] names (either, where it names none; one-port, a node's
    /// messages through its one port are a chain).
    pub steps: Steps,
    /// Where the algorithm comes from.
    pub source: &'static str,
    /// What a node holds while it runs, beyond its data (the simulator's memory
    /// estimate reads it).
    pub holds: Holds,
    /// The textbook's closed form of its time, where one applies.
    pub closed_form: Option<ClosedForm>,
}

impl Entry {
    /// The port model [`Entry::steps`] holds under ([`Ports`]): `None` where it holds
    /// under either, as on every schedule whose nodes use one link at a time. The linear
    /// schedules of a root count its p - 1 sends (or receives) one after the other, as
    /// [GGKK 4.1]'s one-port nodes make them; the ring's and the grid's broadcast and
    /// reduction start both ways around at once ([KGGK94 3.2]: "source sends message on
    /// both outgoing links"), a step more one-port on an odd ring; the ring's scatter and
    /// gather count their root's two halves one after the other, a step fewer all-port on
    /// an odd ring; the broadcast by scatter and all-gather counts its all-gather's steps
    /// from where each node's scatter left it, which one-port is later. The tests hold each
    /// count under its model, and under the other where it names one, to a different one.
    pub fn steps_hold_under(&self) -> Option<Ports> {
        match (self.collective, self.algorithm) {
            (C::Broadcast | C::Reduce | C::Scatter | C::Gather, A::Linear) => Some(Ports::One),
            (C::Broadcast | C::Reduce, A::Ring | A::Mesh) => Some(Ports::All),
            (C::Scatter | C::Gather, A::Ring) => Some(Ports::One),
            (C::Broadcast, A::ScatterAllgather) => Some(Ports::All),
            // Counted all-port: one-port chains two more steps on a hypercube of 64 (22
            // against 20), where a leader's ring and its group's tree share its ports.
            // Counted all-port: one-port chains two more steps on a hypercube of 16 (14
            // against 12), where a core's shard ring and its machine's rings share its ports.
            (C::Allreduce, A::TwoLevelRing | A::MultiLeader) => Some(Ports::All),
            _ => None,
        }
    }

    /// [`Entry::steps`] as `topocomm list` prints it: the formula, and the port model
    /// it holds under where only one.
    pub fn steps_text(&self) -> String {
        match self.steps_hold_under() {
            Some(ports) => format!("{} ({})", self.steps, ports.describe()),
            None => self.steps.to_string(),
        }
    }
}

/// What a node of an algorithm holds while it runs, beyond its input, its result and
/// the messages in flight: what the simulator's memory estimate adds up
/// (`coordinator/src/tools/memory.rs` gives each its bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// Its future and its state, all run.
    Future,
    /// A node of a rooted tree: no future while it waits for its message.
    TreeNode,
    /// Its future, and a part for each of the p blocks it exchanges (an all-to-all).
    ExchangedBlocks,
    /// Its future, and a part for each of the p blocks it gathers before it joins them.
    GatheredBlocks,
    /// Its future, and a part for each block of its grid's longest line.
    LineBlocks,
}

/// A closed form of the textbook's for an algorithm's time, on the one topology and
/// routing it holds for (every message crossing one link, no two sharing one at once):
/// `coordinator/src/tools/closed_form.rs` evaluates each, and its test holds the
/// simulator to every one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClosedForm {
    /// [GGKK 4.1.1]: recursive doubling on a cut-through ring (small packets).
    CutThroughRingDoubling,
    /// [KGGK94 3.2]: the two halves of a ring at once.
    RingTree,
    /// [GGKK 4.1.2]: a ring broadcast along a row, then along every column.
    TorusTree,
    /// [GGKK 4.1.3]: one link a step, log p steps.
    HypercubeTree,
    /// [GGKK 4.2.1]: p - 1 steps of one block.
    RingGather,
    /// [GGKK 4.2.2]: the rows, then the columns with a row's blocks.
    TorusGather,
    /// [GGKK 4.2.3], [GGKK 4.4]: log p steps, the blocks doubling (or halving).
    HypercubeGather,
    /// [Chen 2005]: p/2 steps with one neighbour each, two blocks from the second on.
    RingNeighbourExchange,
    /// [GGKK 4.3]: log p exchanges of the whole vector.
    HypercubeExchange,
    /// [GGKK 4.5.1]: p - 1 steps, the message shrinking by one block a step.
    RingPersonalized,
    /// [GGKK 4.5.2]: the rows, then the columns, half of a node's blocks a step.
    TorusPersonalized,
    /// [GGKK 4.5.3]: log p steps of half a node's blocks.
    HypercubePersonalized,
    /// Brent-Kung: up the tree and down, 2 log p - 1 messages of the whole vector.
    TreeScan,
}

impl ClosedForm {
    /// The topology the form holds on.
    pub fn topology(self) -> TopologyKind {
        use ClosedForm as F;
        match self {
            F::CutThroughRingDoubling
            | F::RingTree
            | F::RingGather
            | F::RingNeighbourExchange
            | F::RingPersonalized => TopologyKind::Ring,
            F::TorusTree | F::TorusGather | F::TorusPersonalized => TopologyKind::Torus,
            F::HypercubeTree | F::HypercubeGather | F::HypercubeExchange | F::HypercubePersonalized | F::TreeScan => {
                TopologyKind::Hypercube
            }
        }
    }

    /// The port model the form holds under: `None` for either. The ring's and the
    /// torus's broadcast tree send both ways at once from the root ([KGGK94 3.2]): one-port,
    /// an odd ring's second half starts a message later.
    pub fn ports(self) -> Option<Ports> {
        match self {
            ClosedForm::RingTree | ClosedForm::TorusTree => Some(Ports::All),
            _ => None,
        }
    }

    /// The routing the form holds under.
    pub fn routing(self) -> Routing {
        match self {
            ClosedForm::CutThroughRingDoubling => Routing::Ct,
            _ => Routing::Sf,
        }
    }

    /// The form as the textbook writes it (R x C: a torus's extents).
    pub fn formula(self) -> &'static str {
        use ClosedForm as F;
        match self {
            F::CutThroughRingDoubling => "t_s log p + t_w m log p + t_h (p-1)",
            F::RingTree => "(t_s + t_w m) ⌊p/2⌋",
            F::TorusTree => "(t_s + t_w m)(⌊R/2⌋ + ⌊C/2⌋)",
            F::HypercubeTree | F::HypercubeExchange => "(t_s + t_w m) log p",
            F::RingGather => "(t_s + t_w m)(p-1)",
            F::TorusGather => "t_s (R+C-2) + t_w m (p-1)",
            F::HypercubeGather => "t_s log p + t_w m (p-1)",
            F::RingNeighbourExchange => "t_s p/2 + t_w m (p-1), even p",
            F::RingPersonalized => "(t_s + ½ t_w m p)(p-1)",
            F::TorusPersonalized => "(t_s + ½ t_w m p)(R+C-2)",
            F::HypercubePersonalized => "(t_s + ½ t_w m p) log p",
            F::TreeScan => "(t_s + t_w m)(2 log p - 1)",
        }
    }
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
    /// p/2 on an even p; p - 1 on an odd one (where the schedule is the ring's).
    HalfOnEven,
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
    /// A binomial tree among the g groups' leaders and one inside each group of c:
    /// ⌈log g⌉ + ⌈log c⌉ (log p on a √p x √p grid of groups).
    LeadersAndGroups,
    /// Two of those trees, up and back down: 2(⌈log g⌉ + ⌈log c⌉).
    TwiceLeadersAndGroups,
    /// A binomial tree inside each group of c, a ring reduce-scatter and all-gather among
    /// the g leaders, the tree again: 2⌈log c⌉ + 2(g - 1) (log p + 2(√p - 1) on a
    /// √p x √p grid of groups).
    GroupTreesAndLeaderRings,
    /// A binomial tree inside each group of c, a ring among the g leaders, the tree
    /// again: 2⌈log c⌉ + g - 1 (log p + √p - 1 on a √p x √p grid of groups).
    GroupTreesAndLeaderRing,
    /// A ring reduce-scatter inside each group over its first c ranks (c the smallest
    /// group's size), a ring all-reduce along each of the c lanes of g, a ring all-gather
    /// inside: 2(c - 1) + 2(g - 1), plus 2 where larger groups fold their other ranks in
    /// (4(√p - 1) on a √p x √p grid of groups).
    GroupRingsAndLaneRings,
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
            Steps::HalfOnEven => "p/2; p-1 odd",
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
            Steps::LeadersAndGroups => "⌈log g⌉+⌈log c⌉ (g groups of c)",
            Steps::TwiceLeadersAndGroups => "2(⌈log g⌉+⌈log c⌉)",
            Steps::GroupTreesAndLeaderRing => "2⌈log c⌉+g-1",
            Steps::GroupTreesAndLeaderRings => "2⌈log c⌉+2(g-1)",
            Steps::GroupRingsAndLaneRings => "2(c-1)+2(g-1) (+2 folded)",
        }
    }

    /// The longest chain of messages on `p` nodes, p a power of four (a hypercube and a
    /// square torus, where nothing folds, and whose groups are √p rows of √p), for a
    /// shift by `shift`; `None` where the formula counts no one number.
    pub fn chain(&self, p: u64, shift: u64) -> Option<RangeInclusive<u64>> {
        let log = u64::from(p.ilog2());
        let side = p.isqrt();
        let steps = match self {
            Steps::Exactly(n) => *n,
            Steps::PMinusOne | Steps::PowerMinusOne => p - 1,
            Steps::HalfDown => p / 2,
            Steps::HalfUp => p.div_ceil(2),
            Steps::HalfOnEven if p.is_multiple_of(2) => p / 2,
            Steps::HalfOnEven => p - 1,
            Steps::TwicePMinusOne => 2 * (p - 1),
            Steps::Log | Steps::PowerLog | Steps::LogFolded | Steps::LeadersAndGroups => log,
            Steps::TwiceLog | Steps::TwiceLogPlusFolding | Steps::TwiceLogFolded => 2 * log,
            Steps::TwiceLeadersAndGroups => 2 * log,
            Steps::GroupTreesAndLeaderRing => log + side - 1,
            Steps::GroupTreesAndLeaderRings => log + 2 * (side - 1),
            Steps::GroupRingsAndLaneRings => 4 * (side - 1),
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

/// One row of [`ENTRIES`]: every column is an argument, so that no entry can leave one
/// out (the reason for the allowance).
#[allow(clippy::too_many_arguments)]
const fn entry(
    collective: Collective,
    algorithm: Algorithm,
    made_for: MadeFor,
    nodes: &'static str,
    steps: Steps,
    source: &'static str,
    holds: Holds,
    closed_form: Option<ClosedForm>,
) -> Entry {
    Entry { collective, algorithm, made_for, nodes, steps, source, holds, closed_form }
}

use Algorithm as A;
use Collective as C;

use ClosedForm as F;
use Holds as H;
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
    entry(C::Broadcast, A::Linear, FULL, ANY, Steps::PMinusOne, "[GGKK 4.1] (naive)", H::TreeNode, None),
    entry(C::Broadcast, A::Ring, RING, ANY, Steps::HalfDown, "[KGGK94 3.2], SF ring", H::TreeNode, Some(F::RingTree)),
    entry(C::Broadcast, A::Mesh, GRIDS, ANY, Steps::TorusHalfSides, "[GGKK 4.1.2]", H::TreeNode, Some(F::TorusTree)),
    entry(
        C::Broadcast,
        A::Hypercube,
        HYPERCUBE,
        ANY,
        Steps::Log,
        "Algorithms 4.1, 4.2",
        H::TreeNode,
        Some(F::HypercubeTree),
    ),
    entry(
        C::Broadcast,
        A::RecursiveDoubling,
        CT_RING,
        ANY,
        Steps::Log,
        "[GGKK 4.1.1], CT ring",
        H::TreeNode,
        Some(F::CutThroughRingDoubling),
    ),
    entry(
        C::Broadcast,
        A::ScatterAllgather,
        HYPERCUBE,
        ANY,
        Steps::TwiceLog,
        "textbook 4.7 (large messages)",
        H::Future,
        None,
    ),
    entry(
        C::Broadcast,
        A::TwoLevel,
        ANY_SHAPE,
        ANY,
        Steps::LeadersAndGroups,
        "[HAN 2020], unsegmented",
        H::TreeNode,
        None,
    ),
    entry(C::Reduce, A::Linear, FULL, ANY, Steps::PMinusOne, "dual of linear broadcast", H::TreeNode, None),
    entry(C::Reduce, A::Ring, RING, ANY, Steps::HalfDown, "dual of ring broadcast", H::TreeNode, Some(F::RingTree)),
    entry(
        C::Reduce,
        A::Mesh,
        GRIDS,
        ANY,
        Steps::TorusHalfSides,
        "dual of mesh broadcast",
        H::TreeNode,
        Some(F::TorusTree),
    ),
    entry(C::Reduce, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "Algorithm 4.3", H::TreeNode, Some(F::HypercubeTree)),
    entry(
        C::Reduce,
        A::RecursiveHalving,
        CT_RING,
        ANY,
        Steps::Log,
        "dual of recursive-doubling broadcast",
        H::TreeNode,
        None,
    ),
    entry(
        C::Reduce,
        A::ReduceScatterGather,
        HYPERCUBE,
        ANY,
        Steps::TwiceLogPlusFolding,
        "[GGKK 4.7], [Rabenseifner 2004] (large messages)",
        H::Future,
        None,
    ),
    entry(
        C::Reduce,
        A::TwoLevel,
        ANY_SHAPE,
        ANY,
        Steps::LeadersAndGroups,
        "[HAN 2020], unsegmented",
        H::TreeNode,
        None,
    ),
    entry(C::Allgather, A::Ring, RING, ANY, Steps::PMinusOne, "Algorithm 4.4", H::GatheredBlocks, Some(F::RingGather)),
    entry(
        C::Allgather,
        A::Mesh,
        GRIDS,
        ANY,
        Steps::TwiceSideMinusOne,
        "Algorithm 4.6",
        H::LineBlocks,
        Some(F::TorusGather),
    ),
    entry(
        C::Allgather,
        A::Hypercube,
        HYPERCUBE,
        FOLDS,
        Steps::LogFolded,
        "Algorithm 4.7",
        H::Future,
        Some(F::HypercubeGather),
    ),
    entry(C::Allgather, A::RecursiveDoubling, HYPERCUBE, FOLDS, Steps::LogFolded, "[Thakur 2005]", H::Future, None),
    entry(C::Allgather, A::Bruck, FULL, ANY, Steps::Log, "Bruck et al. 1997", H::Future, None),
    entry(
        C::Allgather,
        A::NeighbourExchange,
        RING,
        "any p (an odd p runs the ring)",
        Steps::HalfOnEven,
        "Chen et al. 2005",
        H::GatheredBlocks,
        Some(F::RingNeighbourExchange),
    ),
    entry(
        C::Allgather,
        A::TwoLevel,
        ANY_SHAPE,
        ANY,
        Steps::GroupTreesAndLeaderRing,
        "[Kandalla 2009], one leader a group",
        H::GatheredBlocks,
        None,
    ),
    entry(C::ReduceScatter, A::Ring, RING, ANY, Steps::PMinusOne, "Algorithm 4.5", H::Future, Some(F::RingGather)),
    entry(
        C::ReduceScatter,
        A::Hypercube,
        HYPERCUBE,
        FOLDS,
        Steps::LogFolded,
        "Algorithm 4.8",
        H::Future,
        Some(F::HypercubeGather),
    ),
    entry(C::ReduceScatter, A::RecursiveHalving, HYPERCUBE, FOLDS, Steps::LogFolded, "[Thakur 2005]", H::Future, None),
    entry(C::ReduceScatter, A::Pairwise, FULL, ANY, Steps::PMinusOne, "MPI libraries", H::Future, None),
    entry(C::Allreduce, A::ReduceBroadcast, HYPERCUBE, ANY, Steps::TwiceLog, "[GGKK 4.3]", H::Future, None),
    entry(
        C::Allreduce,
        A::RecursiveDoubling,
        HYPERCUBE,
        FOLDS,
        Steps::LogFolded,
        "[GGKK 4.3], [Thakur 2005]",
        H::Future,
        Some(F::HypercubeExchange),
    ),
    entry(
        C::Allreduce,
        A::HalvingDoubling,
        HYPERCUBE,
        FOLDS,
        Steps::TwiceLogFolded,
        "[Rabenseifner 2004]",
        H::Future,
        None,
    ),
    entry(
        C::Allreduce,
        A::Ring,
        RING,
        ANY,
        Steps::TwicePMinusOne,
        "ring reduce-scatter + ring all-gather",
        H::Future,
        None,
    ),
    entry(C::Allreduce, A::Mesh, GRIDS, ANY, Steps::Phases("rows, then columns"), "textbook 4.3", H::Future, None),
    entry(
        C::Allreduce,
        A::TwoLevel,
        ANY_SHAPE,
        ANY,
        Steps::TwiceLeadersAndGroups,
        "[HAN 2020], unsegmented",
        H::Future,
        None,
    ),
    entry(
        C::Allreduce,
        A::TwoLevelRing,
        ANY_SHAPE,
        ANY,
        Steps::GroupTreesAndLeaderRings,
        "[HAN 2020] (simple), ring of leaders",
        H::Future,
        None,
    ),
    entry(
        C::Allreduce,
        A::MultiLeader,
        ANY_SHAPE,
        ANY,
        Steps::GroupRingsAndLaneRings,
        "[Mikami 2018], [Kandalla 2009]",
        H::Future,
        None,
    ),
    entry(C::Scan, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "Algorithm 4.9", H::Future, None),
    entry(C::Scan, A::Linear, RING, ANY, Steps::PMinusOne, "[GGKK 4.3], pipeline", H::Future, None),
    entry(
        C::Scan,
        A::Pipeline,
        RING,
        ANY,
        Steps::Segmented,
        "[Pješivac-Grbović 2007], segmented (large messages)",
        H::Future,
        None,
    ),
    entry(
        C::Scan,
        A::Tree,
        HYPERCUBE,
        ANY,
        Steps::TwiceLogMinusOne,
        "Brent-Kung 1982 (work-efficient)",
        H::Future,
        Some(F::TreeScan),
    ),
    entry(C::Scatter, A::Linear, FULL, ANY, Steps::PMinusOne, "[GGKK 4.4] (naive)", H::TreeNode, None),
    entry(C::Scatter, A::Ring, RING, ANY, Steps::HalfUp, "[GGKK 4.4]", H::TreeNode, None),
    entry(C::Scatter, A::Mesh, GRIDS, ANY, Steps::Phases("rows, then columns"), "[GGKK 4.4]", H::TreeNode, None),
    entry(C::Scatter, A::Hypercube, HYPERCUBE, ANY, Steps::Log, "[GGKK 4.4]", H::TreeNode, Some(F::HypercubeGather)),
    entry(C::Gather, A::Linear, FULL, ANY, Steps::PMinusOne, "dual of linear scatter", H::TreeNode, None),
    entry(C::Gather, A::Ring, RING, ANY, Steps::HalfUp, "dual of ring scatter", H::TreeNode, None),
    entry(
        C::Gather,
        A::Mesh,
        GRIDS,
        ANY,
        Steps::Phases("columns, then the row"),
        "dual of mesh scatter",
        H::TreeNode,
        None,
    ),
    entry(
        C::Gather,
        A::Hypercube,
        HYPERCUBE,
        ANY,
        Steps::Log,
        "dual of hypercube scatter",
        H::TreeNode,
        Some(F::HypercubeGather),
    ),
    entry(
        C::Alltoall,
        A::Ring,
        RING,
        ANY,
        Steps::PMinusOne,
        "[GGKK 4.5.1]",
        H::ExchangedBlocks,
        Some(F::RingPersonalized),
    ),
    entry(
        C::Alltoall,
        A::Mesh,
        GRIDS,
        ANY,
        Steps::TwiceSideMinusOne,
        "[GGKK 4.5.2]",
        H::ExchangedBlocks,
        Some(F::TorusPersonalized),
    ),
    entry(
        C::Alltoall,
        A::Hypercube,
        HYPERCUBE,
        FOLDS,
        Steps::PowerLog,
        "[GGKK 4.5.3]",
        H::ExchangedBlocks,
        Some(F::HypercubePersonalized),
    ),
    entry(C::Alltoall, A::PairwiseXor, E_CUBE, ANY, Steps::PowerMinusOne, "Algorithm 4.10", H::ExchangedBlocks, None),
    entry(C::Alltoall, A::Pairwise, FULL, ANY, Steps::PMinusOne, "MPI libraries", H::ExchangedBlocks, None),
    entry(C::Alltoall, A::Bruck, FULL, ANY, Steps::Log, "Bruck et al. 1997", H::ExchangedBlocks, None),
    entry(C::Shift, A::Ring, RING, ANY, Steps::ShortWay, "textbook 4.6", H::Future, None),
    entry(C::Shift, A::Mesh, GRIDS_2D, ANY, Steps::Phases("row shift + column shift"), "textbook 4.6", H::Future, None),
    entry(C::Shift, A::Hypercube, HYPERCUBE, ANY, Steps::AtMostTwiceLog, "textbook 4.6", H::Future, None),
    entry(C::Barrier, A::Dissemination, FULL, ANY, Steps::Log, "Hensgen, Finkel, Manber 1988", H::Future, None),
    entry(C::PingPong, A::Linear, ANY_SHAPE, ANY, Steps::Exactly(2), "OSU latency test", H::Future, None),
    entry(C::Barrier, A::Hypercube, HYPERCUBE, FOLDS, Steps::LogFolded, "butterfly barrier", H::Future, None),
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
    // On a switched network every rank reaches every other through the switches: its
    // defaults are those of the fully connected network.
    let topology = if topology.is_switched() { T::Full } else { topology };
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

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn every_collective_has_algorithms_and_its_defaults_are_in_the_table() {
        for collective in Collective::iter() {
            assert!(algorithms(collective).count() >= 1, "{collective}");
            for topology in TopologyKind::iter() {
                let default = default_algorithm(collective, topology);
                assert!(find(collective, default).is_some(), "{collective} on {topology}: {default}");
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
}
