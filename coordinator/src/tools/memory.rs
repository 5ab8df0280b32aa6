//! What a simulation costs in memory, for `simulate` and `explain` alike (the lab calls
//! them): the estimate before it starts, by what its algorithm (or the schedule a user
//! brought) holds a node, and the watcher of the process's resident memory (and, for
//! `explain`, of the messages it records) that stops the engine past the limit.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use topocomm_collectives::simulator::LiveCounts;
use topocomm_proto::catalogue::{self, Holds};
use topocomm_proto::schedule::Schedule;
use topocomm_proto::spec::{Collective, RunSpec};
use topocomm_proto::{Topology, reference};

use crate::render::progress::ticking_while;

/// The simulator's bytes per node beyond the data, for a node that holds its future all
/// run: its futures and its state (measured: up to 4.3 KiB at 4,096 nodes, lengths only).
const STATE_PER_NODE: u64 = 4096;

/// The same for a node of a rooted tree (broadcast, scatter, reduce, gather), which holds
/// no future while it waits for its message (measured: at most 560 bytes).
const STATE_PER_TREE_NODE: u64 = 1024;

/// What a node holds for each of the p blocks of an all-to-all, or of the ring
/// all-gather (of a grid line's blocks in the mesh all-gather), while it exchanges them,
/// even with lengths only (measured: up to 154 bytes a block for the pairwise
/// all-to-all, 33 for the ring all-gather, about 40 for the mesh's).
const STATE_PER_BLOCK: u64 = 256;
const STATE_PER_RING_BLOCK: u64 = 64;

/// The simulator's bytes a node of `spec` on `topology` holds, beyond the data, on the safe
/// side of what `--payload lengths` runs of every algorithm took (peak resident memory,
/// p = 512 to 65,536: docs/PERFORMANCE-NOTES.md, "Simulating at scale, part five", the memory estimate):
/// what the catalogue says a node of its algorithm holds (a pair it lacks, a schedule's,
/// holds its future).
pub(crate) fn state_per_node(spec: &RunSpec, topology: &Topology) -> u64 {
    let p = topology.p() as u64;
    let holds = catalogue::find(spec.collective, spec.algorithm).map_or(Holds::Future, |entry| entry.holds);
    match holds {
        Holds::Future => STATE_PER_NODE,
        Holds::TreeNode => STATE_PER_TREE_NODE,
        Holds::ExchangedBlocks => STATE_PER_NODE.saturating_add(STATE_PER_BLOCK.saturating_mul(p)),
        Holds::GatheredBlocks => STATE_PER_NODE.saturating_add(STATE_PER_RING_BLOCK.saturating_mul(p)),
        Holds::LineBlocks => {
            let longest_line = topology.dims().iter().max().map_or(p, |&extent| extent as u64);
            STATE_PER_NODE.saturating_add(STATE_PER_RING_BLOCK.saturating_mul(longest_line))
        }
    }
}

/// What the simulator holds for each operation of a GOAL schedule (the operation, its
/// task's future, its places and flags), on the safe side of the 200-300 bytes they take.
const STATE_PER_GOAL_OP: u64 = 512;

/// The memory a simulation of `spec` on `p` nodes needs, estimated: (with data, with
/// lengths only). Each node holds its futures and state ([`state_per_node`]), and with
/// data its input, its result and the messages in flight (taken as its input and result
/// again). A schedule the user brought adds its own: a GOAL schedule its operations'
/// state (its messages are lengths only, known zeros); an MSCCL-IR program, data or
/// not, its buffers (an arena of input, output and scratch on every node) and the
/// messages each node receives ([`Schedule::bytes_held`]).
pub(crate) fn estimate(spec: &RunSpec, topology: &Topology) -> (u64, u64) {
    let p = topology.p();
    let overhead = (p as u64).saturating_mul(state_per_node(spec, topology));
    let size = spec.size_bytes;
    let result = match spec.collective {
        Collective::Allgather | Collective::Gather | Collective::Alltoall => size.saturating_mul(p as u64),
        Collective::Barrier => 0,
        _ => size,
    };
    let data: u64 = (0..p)
        .map(|node| (reference::input_len(spec, p, node) as u64).saturating_add(result).saturating_mul(2))
        .fold(0u64, u64::saturating_add);
    let schedule = match spec.schedule.as_deref() {
        None => 0,
        Some(Schedule::Goal(goal)) => {
            let ops: usize = goal.ranks.iter().map(|rank| rank.ops.len()).sum();
            (ops as u64).saturating_mul(STATE_PER_GOAL_OP)
        }
        Some(schedule @ Schedule::Msccl(_)) => (0..p)
            .map(|node| {
                let buffers = (reference::input_len(spec, p, node) as u64).saturating_add(result);
                schedule.bytes_held(node, p, size, spec.dtype).unwrap_or(u64::MAX).saturating_add(buffers)
            })
            .fold(0u64, u64::saturating_add),
    };
    let overhead = overhead.saturating_add(schedule);
    (overhead.saturating_add(data), overhead)
}

/// How often the watcher reads the process's resident memory.
const MEMORY_READ_EVERY: Duration = Duration::from_millis(10);

/// The memory limit when none is given: what the process holds now plus nine tenths of
/// what the machine has available (`None` where either cannot be read: no limit).
pub(crate) fn default_memory_limit() -> Option<u64> {
    let resident = topocomm_node::daemon::allocator::resident_bytes()?;
    let available = topocomm_node::daemon::allocator::available_bytes()?;
    Some(resident.saturating_add(available / 10 * 9))
}

/// What a watched simulation may not pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The process's resident bytes (`None`: not watched).
    pub memory: Option<u64>,
    /// The messages sent (`None`: any number): `explain` records every one.
    pub messages: Option<u64>,
}

/// Which limit a simulation passed, with the figure that passed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exceeded {
    /// The process held this many resident bytes.
    Memory(u64),
    /// This many messages had been sent.
    Messages(u64),
}

/// Watches the process's resident memory (and the messages sent) while a simulation
/// runs, and stops the simulation ([`LiveCounts::stop`]) when it passes a limit: the
/// estimate before a run is a table of measured figures with a margin, and a run it
/// falls short for must end with an error that names the figures, not in the kernel's
/// out-of-memory killer.
#[derive(Default)]
pub(crate) struct MemoryWatch {
    /// The resident bytes seen over the limit (0: never).
    memory: AtomicU64,
    /// The messages seen over the limit (0: never).
    messages: AtomicU64,
}

impl MemoryWatch {
    /// Runs `work` (the simulation behind `live`), watching it against `limits` every
    /// [`MEMORY_READ_EVERY`] until it returns.
    pub(crate) fn during<R>(&self, live: &LiveCounts, limits: Limits, work: impl FnOnce() -> R) -> R {
        if limits == Limits::default() {
            return work();
        }
        let check = || {
            let resident = limits.memory.map(|_| topocomm_node::daemon::allocator::resident_bytes().unwrap_or(0));
            let sent = live.messages.load(Ordering::Relaxed);
            if let (Some(resident), Some(limit)) = (resident, limits.memory)
                && resident > limit
            {
                self.memory.store(resident, Ordering::Relaxed);
            } else if limits.messages.is_some_and(|most| sent > most) {
                self.messages.store(sent, Ordering::Relaxed);
            } else {
                return ControlFlow::Continue(());
            }
            live.stop.store(true, Ordering::Relaxed);
            ControlFlow::Break(())
        };
        ticking_while(MEMORY_READ_EVERY, check, work)
    }

    /// The limit passed, if one was.
    pub(crate) fn exceeded(&self) -> Option<Exceeded> {
        match (self.memory.load(Ordering::Relaxed), self.messages.load(Ordering::Relaxed)) {
            (0, 0) => None,
            (0, sent) => Some(Exceeded::Messages(sent)),
            (resident, _) => Some(Exceeded::Memory(resident)),
        }
    }
}
