//! Schedules users bring instead of a built-in algorithm, as they cross the wire inside a
//! `RunSpec`: an MSCCL-IR program (the XML that MSCCLang and msccl-tools write, parsed on
//! the coordinator into the typed [`Program`] below) or a GOAL schedule ([`Goal`], the
//! text LogGOPSim reads). Both are bounded ([`MAX_STEPS`], [`MAX_BLOCKS`], ...) and
//! checked on arrival ([`Program::check`], [`Goal::check`]), so a node never trusts what it
//! is sent: an index out of range is refused, never followed.
//!
//! An MSCCL-IR program says, per rank (`gpu`), which thread blocks (`tb`) run, each a
//! sequential list of steps over chunks of three buffers (input, output, scratch); a
//! block sends to at most one peer and receives from at most one, on a channel (`chan`)
//! that separates concurrent streams between the same two ranks. [`Program::dry_run`]
//! plays it with no data, every send buffered as the real nodes buffer them, and finds
//! what would hang (a dependency cycle, a receive nothing sends) and what would be left
//! over (a send no receive takes), naming the blocks.
//!
//! The parts, by concern (their names re-exported here): `msccl` the program's types,
//! `check` its structural check, `layout` how its chunks fall on the buffers, `interpret`
//! the dry run, `goal` the GOAL schedule and its check; here, the [`Schedule`] that holds
//! either, its bounds and its error.

mod check;
mod goal;
mod interpret;
mod layout;
mod msccl;

pub use goal::{Goal, GoalKind, GoalOp, GoalRank};
pub use layout::Layout;
pub use msccl::{Block, Buffer, Chunks, Gpu, KNOWN_COLLECTIVES, Program, Step, StepKind, collective_named};

use serde::{Deserialize, Serialize};

use crate::names::{Collective, Dtype};

/// The most steps a program may hold, over all ranks (about 8 MiB on the wire).
pub const MAX_STEPS: usize = 1 << 18;
/// The most thread blocks one rank may run.
pub const MAX_BLOCKS: usize = 1024;
/// The most channels a program may use (each a tag stream per pair of ranks).
pub const MAX_CHANNELS: u32 = 256;
/// The most chunks one buffer may be cut into.
pub const MAX_CHUNKS: u32 = 1 << 20;
/// The most operations a GOAL schedule may hold, over all ranks.
pub const MAX_GOAL_OPS: usize = 1 << 20;
/// The most bytes one GOAL message may carry: 1 TiB, the region of known zeros a
/// lengths-only message is a slice of (the simulator's, `topocomm_collectives::zeros`).
/// What a node can hold is for the memory check to say ([`Schedule::bytes_held`]): this
/// bound only keeps every size and every sum of sizes far inside 64 bits
/// ([`MAX_GOAL_OPS`] × this is 2^60).
pub const MAX_GOAL_MESSAGE_BYTES: u64 = 1 << 40;
/// GOAL tags must fit in the 24 bits a message tag gives a phase's steps.
pub const MAX_GOAL_TAG: u32 = (1 << 24) - 1;

/// A schedule a run executes instead of a built-in algorithm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Schedule {
    /// An MSCCL-IR program: data moves and is reduced as it says, and every node's result
    /// is verified against the reference of its collective.
    Msccl(Program),
    /// A GOAL schedule: sizes only, nothing can be verified.
    Goal(Goal),
}

impl Schedule {
    /// The number of ranks the schedule is written for.
    pub fn ranks(&self) -> usize {
        match self {
            Schedule::Msccl(program) => program.gpus.len(),
            Schedule::Goal(goal) => goal.ranks.len(),
        }
    }

    /// Checks the schedule's structure for `p` nodes (see [`Program::check`], [`Goal::check`]).
    pub fn check(&self, p: usize) -> Result<(), ScheduleError> {
        if self.ranks() != p {
            return Err(ScheduleError::Ranks { ranks: self.ranks(), p });
        }
        match self {
            Schedule::Msccl(program) => program.check(),
            Schedule::Goal(goal) => goal.check(),
        }
    }

    /// The bytes node `node` of a `p`-node run of `size_bytes` per node (of `dtype`) may
    /// hold for the schedule beyond the collective's input and output, on the safe side:
    /// for a GOAL schedule, every message it sends or receives (its operations may all
    /// run at once); for an MSCCL-IR program, its scratch chunks and every message it
    /// receives (each is buffered until its step takes it). `None` where the program does
    /// not lay out at this size or the sum overflows `u64`.
    pub fn bytes_held(&self, node: usize, p: usize, size_bytes: u64, dtype: Dtype) -> Option<u64> {
        match self {
            Schedule::Goal(goal) => goal.ranks.get(node)?.ops.iter().try_fold(0u64, |sum, op| match op.kind {
                GoalKind::Send { bytes, .. } | GoalKind::Recv { bytes, .. } => sum.checked_add(bytes),
                GoalKind::Calc { .. } => Some(sum),
            }),
            Schedule::Msccl(program) => {
                let chunk = u64::try_from(program.layout(p, size_bytes, dtype).ok()?.chunk_bytes).ok()?;
                let gpu = program.gpus.get(node)?;
                let received = gpu
                    .blocks
                    .iter()
                    .flat_map(|block| &block.steps)
                    .filter(|step| step.kind.receives())
                    .try_fold(0u64, |sum, step| sum.checked_add(u64::from(step.count).checked_mul(chunk)?))?;
                u64::from(gpu.scratch_chunks).checked_mul(chunk)?.checked_add(received)
            }
        }
    }

    /// The longest message the schedule sends at `size_bytes` per node on `p` nodes, in
    /// bytes, with its sender and receiver; `None` if it sends none (or does not lay out).
    pub fn longest_message(&self, p: usize, size_bytes: u64, dtype: Dtype) -> Option<(u64, usize, usize)> {
        match self {
            Schedule::Goal(goal) => goal
                .ranks
                .iter()
                .enumerate()
                .flat_map(|(from, rank)| {
                    rank.ops.iter().filter_map(move |op| match op.kind {
                        GoalKind::Send { bytes, peer, .. } => Some((bytes, from, peer as usize)),
                        _ => None,
                    })
                })
                .max_by_key(|&(bytes, from, to)| (bytes, std::cmp::Reverse((from, to)))),
            Schedule::Msccl(program) => {
                let chunk = u64::try_from(program.layout(p, size_bytes, dtype).ok()?.chunk_bytes).ok()?;
                program
                    .gpus
                    .iter()
                    .enumerate()
                    .flat_map(|(from, gpu)| {
                        gpu.blocks.iter().flat_map(move |block| {
                            block.steps.iter().filter(|step| step.kind.sends()).filter_map(move |step| {
                                let to = block.send? as usize;
                                Some((u64::from(step.count).saturating_mul(chunk), from, to))
                            })
                        })
                    })
                    .max_by_key(|&(bytes, from, to)| (bytes, std::cmp::Reverse((from, to))))
            }
        }
    }

    /// A name for reports: the program's name, or "GOAL schedule".
    pub fn describe(&self) -> String {
        match self {
            Schedule::Msccl(program) => format!("MSCCL-IR program \"{}\"", program.name),
            Schedule::Goal(_) => "GOAL schedule".to_owned(),
        }
    }
}

/// Why a schedule cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("the schedule is written for {ranks} ranks, but the cluster has {p} nodes (give --nodes {ranks})")]
    Ranks { ranks: usize, p: usize },
    #[error("the schedule is too large: {what} (at most {limit})")]
    TooLarge { what: String, limit: usize },
    #[error("{at}: {reason}")]
    Invalid { at: String, reason: String },
    #[error("{0}")]
    Layout(String),
    #[error("the schedule cannot finish: {0}")]
    Stuck(String),
    #[error("a send with no matching receive: {0}")]
    Unmatched(String),
    #[error("the schedule is for {schedule}, but the command asks for {asked}")]
    Collective { schedule: Collective, asked: Collective },
}
