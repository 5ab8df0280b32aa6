//! The collectives' tag space: the `Phase` type (a tag's high byte) and every phase any
//! algorithm tags its messages with, named in one place.
//!
//! A tag is `phase << 24 | step` ([`Phase::tag`]). A node matches a message by its
//! sender and tag within one iteration of one run, so two phases may share a number
//! unless one call of one collective can have both in flight between the same two nodes.
//! The runtime's tags start at `SYSTEM_TAG_BASE` (0xFFFF_0000, inside phase 0xFF), so
//! phases run 0x00..=0xFE. The whole space:
//!
//! ```text
//! phase         name                           in flight in the same call with
//! 0x00          SINGLE                         nothing else of its schedule
//! 0x00..=0x02   grid_dimension(i)              one another (mesh broadcast, reduce,
//!                                              scatter, gather and all-to-all)
//! 0x00..=0x05   mesh_shift_carry(i) = 2i,      one another (mesh shift)
//!               mesh_shift(i) = 2i + 1
//! 0x00..=0x03   ALLTOALL_FOLD_IN, _EXCHANGE,   one another (hypercube all-to-all)
//!               _UNFOLD, _PASS_ON
//! 0x00..=0x01   BARRIER_BUTTERFLY, _FOLD       one another (hypercube barrier)
//! 0x06          SCHEDULE                       nothing else (a schedule users bring)
//! 0x07, 0x08    TWO_LEVEL_GROUPS, _LEADERS     one another (the two-level schedules)
//! 0x09, 0x0A    TWO_LEVEL_LEADERS_RING
//! 0x0B          MULTI_LEADER_FOLD              one another (the multi-leader
//! 0x0C, 0x0D    MULTI_LEADER_GROUPS            all-reduce)
//! 0x0E, 0x0F    MULTI_LEADER_LANES
//! ------------  below 0x20: schedules that run alone, or beside phases from 0x20 up
//! 0x20          BROADCAST_LENGTH               the scatter (SINGLE) and the all-gather
//!                                              of the scatter-allgather broadcast
//! 0x40          ALLGATHER_RING                 the length broadcast and the scatter
//! 0x41..=0x43   allgather_grid_dimension(i)    (SINGLE) before it in the
//! 0x44          ALLGATHER_FOLD                 scatter-allgather broadcast
//! 0x45          ALLGATHER_DOUBLING
//! 0x46          ALLGATHER_BRUCK
//! 0x47          ALLGATHER_NEIGHBOUR_EXCHANGE
//! 0x50          REDUCE_SCATTER_RING            the gather (SINGLE) after it in the
//! 0x51          REDUCE_SCATTER_FOLD            reduce-scatter-gather reduction
//! 0x52          REDUCE_SCATTER_HALVING
//! 0x53          REDUCE_SCATTER_PAIRWISE
//! 0x60          ALLREDUCE_FOLD                 one another (the all-reduce runs the
//! 0x61          ALLREDUCE_DOUBLING             all-gather's and the reduce-scatter's
//! 0x62          ALLREDUCE_HALVING              pieces on its own phases)
//! 0x63          ALLREDUCE_GATHER
//! 0x64, 0x65    ALLREDUCE_RING
//! 0x66..=0x6B   allreduce_grid_dimension(i)
//! the rest     free: 0x10..=0x1F, 0x21..=0x3F, 0x48..=0x4F, 0x54..=0x5F, 0x6C..=0xFE
//! 0xFF          never: its last steps are the runtime's tags
//! ```
//!
//! Every phase from 0x20 up belongs to one schedule and differs from every other phase,
//! so no composition can make two of them collide. One composition shares a phase on
//! purpose: the reduce-broadcast all-reduce runs the hypercube reduction and then the
//! hypercube broadcast, both on [`SINGLE`]; every message of the one goes up the tree
//! and every message of the other down it, so no (sender, receiver, tag) repeats. The
//! two-level all-reduce and all-gather do the same with [`TWO_LEVEL_GROUPS`] and
//! [`TWO_LEVEL_LEADERS`] (up the trees, then down them).

use topocomm_proto::frame::Tag;

/// One phase of an algorithm (a hypercube sweep, the row part of a mesh broadcast, ...),
/// numbered 0..=254. Each step of a phase gets its own tag, so messages of different
/// phases or steps between the same two nodes can never be taken for one another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase(pub u8);

impl Phase {
    /// Steps a phase can tell apart by tag (the low 24 bits of the tag).
    pub const MAX_STEPS: usize = 1 << 24;

    /// The tag of `step` in this phase: the phase in the high byte, the step below it
    /// (always under the runtime's `SYSTEM_TAG_BASE`).
    pub const fn tag(self, step: usize) -> Tag {
        debug_assert!(self.0 < u8::MAX, "phase 255 would reach the runtime's tags");
        debug_assert!(step < Self::MAX_STEPS, "the step does not fit in a tag");
        ((self.0 as Tag) << 24) | (step as Tag & 0x00FF_FFFF)
    }
}

/// The most dimensions a grid has (mesh3d, torus3d): the per-dimension phases below are
/// laid out for this many.
pub const MAX_GRID_DIMENSIONS: usize = 3;

/// The only phase of a schedule that needs one (most of them).
pub const SINGLE: Phase = Phase(0);

/// A mesh schedule's pass along the lines of one grid dimension: `index` counts the
/// dimensions in the order the schedule walks them (or is the dimension itself).
pub const fn grid_dimension(index: usize) -> Phase {
    debug_assert!(index < MAX_GRID_DIMENSIONS, "a grid has at most three dimensions");
    Phase(index as u8)
}

/// The mesh shift's carry along dimension `index` (the walk's): the vectors that
/// wrapped round the lines of the dimensions before move one place further.
pub const fn mesh_shift_carry(index: usize) -> Phase {
    debug_assert!(index < MAX_GRID_DIMENSIONS, "a grid has at most three dimensions");
    Phase(2 * index as u8)
}

/// The mesh shift's shift along dimension `index` (the walk's), after its carry.
pub const fn mesh_shift(index: usize) -> Phase {
    debug_assert!(index < MAX_GRID_DIMENSIONS, "a grid has at most three dimensions");
    Phase(2 * index as u8 + 1)
}

/// The hypercube all-to-all's fold-in: an extra node hands its blocks to its partner.
pub const ALLTOALL_FOLD_IN: Phase = Phase(0);
/// The hypercube all-to-all's exchanges across the core's dimensions.
pub const ALLTOALL_EXCHANGE: Phase = Phase(1);
/// The hypercube all-to-all's unfold: a partner hands its extra node that node's result.
pub const ALLTOALL_UNFOLD: Phase = Phase(2);
/// The hypercube all-to-all's exchanges on raw links, the part of a step's message that
/// the partner passes on (the part for the partner itself goes on `ALLTOALL_EXCHANGE`).
pub const ALLTOALL_PASS_ON: Phase = Phase(3);

/// The hypercube barrier's butterfly rounds.
pub const BARRIER_BUTTERFLY: Phase = Phase(0);
/// The hypercube barrier's fold: an extra node's signal and its release.
pub const BARRIER_FOLD: Phase = Phase(1);

/// A schedule users bring (an MSCCL-IR program, a GOAL schedule): the step is the
/// message's place in its stream (see `schedule::interpreter` and `schedule::goal`).
pub const SCHEDULE: Phase = Phase(0x06);

/// The two-level schedules' phases inside each group (a binomial tree, up or down).
pub const TWO_LEVEL_GROUPS: Phase = Phase(0x07);
/// The two-level schedules' phases among the groups' leaders (a binomial tree, or the
/// all-gather's ring).
pub const TWO_LEVEL_LEADERS: Phase = Phase(0x08);

/// The two-level all-reduce's ring among the leaders: its reduce-scatter, then its
/// all-gather.
pub const TWO_LEVEL_LEADERS_RING: [Phase; 2] = [Phase(0x09), Phase(0x0A)];

/// The multi-leader all-reduce's fold: a rank past its group's lanes hands its vector
/// to its lane's rank (step 0), which hands it the result (step 1).
pub const MULTI_LEADER_FOLD: Phase = Phase(0x0B);
/// The multi-leader all-reduce's rings inside each group: its reduce-scatter, then its
/// all-gather.
pub const MULTI_LEADER_GROUPS: [Phase; 2] = [Phase(0x0C), Phase(0x0D)];
/// The multi-leader all-reduce's rings along each lane, across the groups: the
/// reduce-scatter, then the all-gather of each lane's ring all-reduce.
pub const MULTI_LEADER_LANES: [Phase; 2] = [Phase(0x0E), Phase(0x0F)];

/// The length broadcast that opens the scatter-allgather broadcast.
pub const BROADCAST_LENGTH: Phase = Phase(0x20);

/// The ring all-gather.
pub const ALLGATHER_RING: Phase = Phase(0x40);
/// The mesh all-gather's pass along dimension `index` of its walk, rows first.
pub const fn allgather_grid_dimension(index: usize) -> Phase {
    debug_assert!(index < MAX_GRID_DIMENSIONS, "a grid has at most three dimensions");
    Phase(0x41 + index as u8)
}
/// The fold-in and unfold around the recursive-doubling all-gather's core.
pub const ALLGATHER_FOLD: Phase = Phase(0x44);
/// The recursive-doubling all-gather's core.
pub const ALLGATHER_DOUBLING: Phase = Phase(0x45);
/// Bruck's all-gather.
pub const ALLGATHER_BRUCK: Phase = Phase(0x46);
/// The neighbour-exchange all-gather.
pub const ALLGATHER_NEIGHBOUR_EXCHANGE: Phase = Phase(0x47);

/// The ring reduce-scatter.
pub const REDUCE_SCATTER_RING: Phase = Phase(0x50);
/// The fold-in and unfold around the recursive-halving reduce-scatter's core.
pub const REDUCE_SCATTER_FOLD: Phase = Phase(0x51);
/// The recursive-halving reduce-scatter's core.
pub const REDUCE_SCATTER_HALVING: Phase = Phase(0x52);
/// The pairwise reduce-scatter.
pub const REDUCE_SCATTER_PAIRWISE: Phase = Phase(0x53);

/// The fold-in and unfold around the all-reduce's power-of-two cores.
pub const ALLREDUCE_FOLD: Phase = Phase(0x60);
/// The recursive-doubling all-reduce's exchanges of whole vectors.
pub const ALLREDUCE_DOUBLING: Phase = Phase(0x61);
/// The halving-doubling all-reduce's reduce-scatter half.
pub const ALLREDUCE_HALVING: Phase = Phase(0x62);
/// The halving-doubling all-reduce's all-gather half.
pub const ALLREDUCE_GATHER: Phase = Phase(0x63);
/// The ring all-reduce: its reduce-scatter, then its all-gather.
pub const ALLREDUCE_RING: [Phase; 2] = [Phase(0x64), Phase(0x65)];
/// The mesh all-reduce's ring all-reduce along dimension `index` of its walk, rows
/// first: its reduce-scatter, then its all-gather.
pub const fn allreduce_grid_dimension(index: usize) -> [Phase; 2] {
    debug_assert!(index < MAX_GRID_DIMENSIONS, "a grid has at most three dimensions");
    let first = 0x66 + 2 * index as u8;
    [Phase(first), Phase(first + 1)]
}

#[cfg(test)]
mod tests {
    use topocomm_proto::frame::SYSTEM_TAG_BASE;

    use super::*;

    /// Phases below this belong to schedules that run alone, or beside phases from here up.
    const LENT_FROM: u8 = 0x20;

    /// Every phase a schedule of one family may run beside another family's in one call.
    fn lent() -> Vec<(String, Phase)> {
        let mut phases: Vec<(String, Phase)> = [
            ("BROADCAST_LENGTH", BROADCAST_LENGTH),
            ("ALLGATHER_RING", ALLGATHER_RING),
            ("ALLGATHER_FOLD", ALLGATHER_FOLD),
            ("ALLGATHER_DOUBLING", ALLGATHER_DOUBLING),
            ("ALLGATHER_BRUCK", ALLGATHER_BRUCK),
            ("ALLGATHER_NEIGHBOUR_EXCHANGE", ALLGATHER_NEIGHBOUR_EXCHANGE),
            ("REDUCE_SCATTER_RING", REDUCE_SCATTER_RING),
            ("REDUCE_SCATTER_FOLD", REDUCE_SCATTER_FOLD),
            ("REDUCE_SCATTER_HALVING", REDUCE_SCATTER_HALVING),
            ("REDUCE_SCATTER_PAIRWISE", REDUCE_SCATTER_PAIRWISE),
            ("ALLREDUCE_FOLD", ALLREDUCE_FOLD),
            ("ALLREDUCE_DOUBLING", ALLREDUCE_DOUBLING),
            ("ALLREDUCE_HALVING", ALLREDUCE_HALVING),
            ("ALLREDUCE_GATHER", ALLREDUCE_GATHER),
            ("ALLREDUCE_RING[0]", ALLREDUCE_RING[0]),
            ("ALLREDUCE_RING[1]", ALLREDUCE_RING[1]),
        ]
        .into_iter()
        .map(|(name, phase)| (name.to_owned(), phase))
        .collect();
        for i in 0..MAX_GRID_DIMENSIONS {
            phases.push((format!("allgather_grid_dimension({i})"), allgather_grid_dimension(i)));
            let [reduce_scatter, allgather] = allreduce_grid_dimension(i);
            phases.push((format!("allreduce_grid_dimension({i})[0]"), reduce_scatter));
            phases.push((format!("allreduce_grid_dimension({i})[1]"), allgather));
        }
        phases
    }

    /// The phases of each schedule that runs alone (or beside lent phases only), one
    /// list per schedule: within a list they are in flight together.
    fn alone() -> Vec<Vec<(String, Phase)>> {
        let named = |list: &[(&str, Phase)]| list.iter().map(|&(name, phase)| (name.to_owned(), phase)).collect();
        let grid = (0..MAX_GRID_DIMENSIONS).map(|i| (format!("grid_dimension({i})"), grid_dimension(i))).collect();
        let shift = (0..MAX_GRID_DIMENSIONS)
            .flat_map(|i| {
                [(format!("mesh_shift_carry({i})"), mesh_shift_carry(i)), (format!("mesh_shift({i})"), mesh_shift(i))]
            })
            .collect();
        vec![
            named(&[("SINGLE", SINGLE)]),
            named(&[("SCHEDULE", SCHEDULE)]),
            grid,
            shift,
            named(&[
                ("ALLTOALL_FOLD_IN", ALLTOALL_FOLD_IN),
                ("ALLTOALL_EXCHANGE", ALLTOALL_EXCHANGE),
                ("ALLTOALL_UNFOLD", ALLTOALL_UNFOLD),
                ("ALLTOALL_PASS_ON", ALLTOALL_PASS_ON),
            ]),
            named(&[("BARRIER_BUTTERFLY", BARRIER_BUTTERFLY), ("BARRIER_FOLD", BARRIER_FOLD)]),
            named(&[
                ("TWO_LEVEL_GROUPS", TWO_LEVEL_GROUPS),
                ("TWO_LEVEL_LEADERS", TWO_LEVEL_LEADERS),
                ("TWO_LEVEL_LEADERS_RING[0]", TWO_LEVEL_LEADERS_RING[0]),
                ("TWO_LEVEL_LEADERS_RING[1]", TWO_LEVEL_LEADERS_RING[1]),
            ]),
            named(&[
                ("MULTI_LEADER_FOLD", MULTI_LEADER_FOLD),
                ("MULTI_LEADER_GROUPS[0]", MULTI_LEADER_GROUPS[0]),
                ("MULTI_LEADER_GROUPS[1]", MULTI_LEADER_GROUPS[1]),
                ("MULTI_LEADER_LANES[0]", MULTI_LEADER_LANES[0]),
                ("MULTI_LEADER_LANES[1]", MULTI_LEADER_LANES[1]),
            ]),
        ]
    }

    /// Fails naming the first two entries of `phases` that share a phase.
    fn assert_distinct(phases: &[(String, Phase)]) {
        for (i, (a, phase_a)) in phases.iter().enumerate() {
            for (b, phase_b) in &phases[i + 1..] {
                assert_ne!(phase_a, phase_b, "{a} and {b} share a phase");
            }
        }
    }

    #[test]
    fn lent_phases_differ_from_every_other_phase() {
        let lent = lent();
        assert_distinct(&lent);
        for (name, phase) in &lent {
            assert!(phase.0 >= LENT_FROM, "{name} ({:#04x}) is below {LENT_FROM:#04x}", phase.0);
        }
        for (name, phase) in alone().iter().flatten() {
            assert!(phase.0 < LENT_FROM, "{name} ({:#04x}) is not below {LENT_FROM:#04x}", phase.0);
        }
    }

    #[test]
    fn the_phases_of_one_schedule_differ() {
        for schedule in alone() {
            assert_distinct(&schedule);
        }
    }

    #[test]
    fn every_step_of_every_phase_stays_below_the_runtime_tags() {
        let all = lent().into_iter().chain(alone().into_iter().flatten());
        for (name, phase) in all {
            assert!(phase.0 < u8::MAX, "{name}");
            assert!(phase.tag(Phase::MAX_STEPS - 1) < SYSTEM_TAG_BASE, "{name}");
        }
    }

    /// Every algorithm of the catalogue, run on the simulator on shapes that fold, wrap
    /// and do not, tags its messages only with phases the lists above name: a new
    /// algorithm's phase that the lists leave out (so that nothing checks it for
    /// collisions) fails here, naming the algorithm and the phase.
    #[test]
    fn every_phase_the_catalogue_s_algorithms_send_on_is_listed() {
        use crate::simulator::Options;
        use crate::simulator::spec::{Inputs, run};
        use topocomm_proto::catalogue::ENTRIES;
        use topocomm_proto::spec::{LinkModel, Ports, Routing, RunSpec};
        use topocomm_proto::{Topology, TopologyKind};

        let listed: Vec<u8> =
            lent().into_iter().chain(alone().into_iter().flatten()).map(|(_, phase)| phase.0).collect();
        let shapes = [
            Topology::new(TopologyKind::Ring, 6, None),
            Topology::new(TopologyKind::Ring, 7, None),
            Topology::new(TopologyKind::Torus3d, 12, Some(&[2, 2, 3])),
            Topology::new(TopologyKind::Mesh, 6, Some(&[2, 3])),
            Topology::new(TopologyKind::Hypercube, 8, None),
        ];
        let links = LinkModel {
            ts_ns: 1_000,
            th_ns: 0,
            tw_ps: 1_000,
            routing: Routing::Sf,
            packet_bytes: 0,
            ports: Ports::All,
        };
        let mut messages = 0;
        for topology in shapes.into_iter().map(|shape| shape.expect("a valid shape")) {
            for entry in ENTRIES {
                let spec = RunSpec { size_bytes: 48, shift: 1, ..RunSpec::new(entry.collective, entry.algorithm) };
                let options = Options { record: true, ..Options::default() };
                let simulated = run(&spec, &topology, links, Inputs::Zeros, options)
                    .unwrap_or_else(|error| panic!("{} {} on {topology}: {error}", entry.collective, entry.algorithm));
                for event in &simulated.events {
                    let phase = (event.tag >> 24) as u8;
                    assert!(
                        listed.contains(&phase),
                        "{} {} on {topology} sends on phase {phase:#04x}, which no list above names",
                        entry.collective,
                        entry.algorithm
                    );
                    messages += 1;
                }
            }
        }
        assert!(messages > 1000, "only {messages} messages recorded");
    }

    #[test]
    fn a_tag_is_the_phase_above_the_step() {
        assert_eq!(Phase(0).tag(3), 3);
        assert_eq!(Phase(2).tag(1), (2 << 24) | 1);
        assert_eq!(ALLGATHER_RING.tag(0x12_3456), 0x4012_3456);
        assert!(Phase(u8::MAX - 1).tag(Phase::MAX_STEPS - 1) < SYSTEM_TAG_BASE);
    }
}
