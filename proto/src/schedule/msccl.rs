//! The MSCCL-IR program, typed: its buffers, chunks, step kinds, steps, thread blocks and
//! ranks, the collectives a program may name, and how a place in a program is named.

use serde::{Deserialize, Serialize};

use crate::names::Collective;

/// One of the three buffers a rank's chunks live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Buffer {
    Input,
    Output,
    Scratch,
}

impl Buffer {
    /// The letter MSCCL-IR writes: `i`, `o`, `s`.
    pub fn letter(self) -> &'static str {
        match self {
            Buffer::Input => "i",
            Buffer::Output => "o",
            Buffer::Scratch => "s",
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Buffer::Input => "input",
            Buffer::Output => "output",
            Buffer::Scratch => "scratch",
        }
    }
}

/// `count` chunks of `buffer` from chunk `index` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunks {
    pub buffer: Buffer,
    pub index: u32,
}

/// What a step does, with MSCCL's executor semantics (`src` and `dst` are this rank's
/// chunks; "receive" takes the next message of the block's receive peer on its channel,
/// "send" sends to the block's send peer on its channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StepKind {
    /// `s`: send `src`.
    Send,
    /// `r`: receive into `dst`.
    Recv,
    /// `rcs`: receive into `dst` and send what came on.
    RecvCopySend,
    /// `rrc`: receive, reduce with `src`, store in `dst`.
    RecvReduceCopy,
    /// `rrs`: receive, reduce with `src`, send the result (not stored).
    RecvReduceSend,
    /// `rrcs`: receive, reduce with `src`, store in `dst` and send the result.
    RecvReduceCopySend,
    /// `cpy`: copy `src` to `dst`.
    Copy,
    /// `re`: reduce `src` into `dst`.
    Reduce,
    /// `nop`: nothing but its dependency.
    Nop,
}

impl StepKind {
    /// Every kind with the name MSCCL-IR gives it.
    pub const ALL: [(StepKind, &'static str); 9] = [
        (StepKind::Send, "s"),
        (StepKind::Recv, "r"),
        (StepKind::RecvCopySend, "rcs"),
        (StepKind::RecvReduceCopy, "rrc"),
        (StepKind::RecvReduceSend, "rrs"),
        (StepKind::RecvReduceCopySend, "rrcs"),
        (StepKind::Copy, "cpy"),
        (StepKind::Reduce, "re"),
        (StepKind::Nop, "nop"),
    ];

    /// The kind MSCCL-IR names `name`.
    pub fn from_name(name: &str) -> Option<StepKind> {
        Self::ALL.iter().find(|(_, known)| *known == name).map(|&(kind, _)| kind)
    }

    /// The name MSCCL-IR gives it.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(kind, _)| *kind == self).map(|&(_, name)| name).unwrap_or("?")
    }

    /// Whether the step takes a message from the block's receive peer.
    pub fn receives(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopySend
        )
    }

    /// Whether the step sends a message to the block's send peer.
    pub fn sends(self) -> bool {
        matches!(
            self,
            StepKind::Send | StepKind::RecvCopySend | StepKind::RecvReduceSend | StepKind::RecvReduceCopySend
        )
    }

    /// Whether the step reads its `src` chunks.
    pub fn reads_src(self) -> bool {
        matches!(
            self,
            StepKind::Send
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }

    /// Whether the step writes its `dst` chunks.
    pub fn writes_dst(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }

    /// Whether the step combines elements with the reduction operator.
    pub fn reduces(self) -> bool {
        matches!(
            self,
            StepKind::RecvReduceCopy | StepKind::RecvReduceSend | StepKind::RecvReduceCopySend | StepKind::Reduce
        )
    }
}

/// A step of a thread block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub kind: StepKind,
    pub src: Chunks,
    pub dst: Chunks,
    /// How many consecutive chunks the step moves (at least 1, except for `nop`).
    pub count: u32,
    /// The step of another block of this rank that must be done first: (block, step),
    /// by position.
    pub after: Option<(u32, u32)>,
}

/// A thread block: a sequential stream of steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// The block's id in the file (its `depid` name).
    pub id: u32,
    /// The rank its sends go to.
    pub send: Option<u32>,
    /// The rank its receives come from.
    pub recv: Option<u32>,
    pub channel: u32,
    pub steps: Vec<Step>,
}

/// One rank of a program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    pub input_chunks: u32,
    pub output_chunks: u32,
    pub scratch_chunks: u32,
    pub blocks: Vec<Block>,
}

impl Gpu {
    pub(super) fn chunks(&self, buffer: Buffer) -> u32 {
        match buffer {
            Buffer::Input => self.input_chunks,
            Buffer::Output => self.output_chunks,
            Buffer::Scratch => self.scratch_chunks,
        }
    }
}

/// An MSCCL-IR program, typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    pub name: String,
    /// The collective `coll` names: it decides the reference every result is held to.
    pub collective: Collective,
    /// Whether the output buffer overlaps the input, as the collective lays them out.
    pub inplace: bool,
    /// `proto` (LL, LL128, Simple): reported, changes nothing here.
    pub protocol: String,
    /// The chunks the larger of the collective's buffers is cut into.
    pub chunks_per_loop: u32,
    /// The channels the blocks use (one more than the largest `chan`).
    pub channels: u32,
    /// Rank r's part is `gpus[r]`.
    pub gpus: Vec<Gpu>,
}

/// Where in a program: `gpu 3 tb 1 step 4 (rrc)`.
pub(super) fn at(gpu: usize, block: &Block, step: Option<(usize, &Step)>) -> String {
    match step {
        Some((index, step)) => format!("gpu {gpu} tb {} step {index} ({})", block.id, step.kind.name()),
        None => format!("gpu {gpu} tb {}", block.id),
    }
}

/// The collectives MSCCL-IR files name that topocomm holds a reference for.
pub fn collective_named(coll: &str) -> Option<Collective> {
    match coll.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
        "allreduce" => Some(Collective::Allreduce),
        "allgather" => Some(Collective::Allgather),
        "reducescatter" => Some(Collective::ReduceScatter),
        "alltoall" => Some(Collective::Alltoall),
        "broadcast" => Some(Collective::Broadcast),
        "reduce" => Some(Collective::Reduce),
        _ => None,
    }
}

/// The names [`collective_named`] knows, for error messages.
pub const KNOWN_COLLECTIVES: &str = "allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce";

#[cfg(test)]
pub(super) mod fixtures {
    //! Small programs the unit tests of `check`, `layout` and `interpret` are built from.
    use super::*;

    pub(crate) fn step(kind: StepKind, index: u32, after: Option<(u32, u32)>) -> Step {
        let chunks = Chunks { buffer: Buffer::Input, index };
        Step { kind, src: chunks, dst: chunks, count: 1, after }
    }

    pub(crate) fn block(id: u32, send: Option<u32>, recv: Option<u32>, steps: Vec<Step>) -> Block {
        Block { id, send, recv, channel: 0, steps }
    }

    pub(crate) fn program(gpus: Vec<Vec<Block>>) -> Program {
        Program {
            name: "test".into(),
            collective: Collective::Allreduce,
            inplace: true,
            protocol: "Simple".into(),
            chunks_per_loop: 2,
            channels: 1,
            gpus: gpus
                .into_iter()
                .map(|blocks| Gpu { input_chunks: 2, output_chunks: 2, scratch_chunks: 0, blocks })
                .collect(),
        }
    }
}
