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

use std::collections::{HashMap, VecDeque};

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

    fn name(self) -> &'static str {
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
    fn chunks(&self, buffer: Buffer) -> u32 {
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

/// Where in a program: `gpu 3 tb 1 step 4 (rrc)`.
fn at(gpu: usize, block: &Block, step: Option<(usize, &Step)>) -> String {
    match step {
        Some((index, step)) => format!("gpu {gpu} tb {} step {index} ({})", block.id, step.kind.name()),
        None => format!("gpu {gpu} tb {}", block.id),
    }
}

/// How a collective lays out a node's buffers, in multiples of `--size` (bytes per node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of one chunk.
    pub chunk_bytes: usize,
    /// Bytes of the input buffer and of the output buffer.
    pub input_bytes: usize,
    pub output_bytes: usize,
}

/// The collectives a program may name, with the multiples of `--size` their input and
/// output buffers hold on p nodes (topocomm's data layouts: the reference's).
fn buffer_multiples(collective: Collective, p: usize) -> Option<(usize, usize)> {
    match collective {
        Collective::Allreduce | Collective::Broadcast | Collective::Reduce => Some((1, 1)),
        Collective::Allgather => Some((1, p)),
        Collective::ReduceScatter => Some((p, 1)),
        Collective::Alltoall => Some((p, p)),
        _ => None,
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

impl Program {
    /// Checks the structure: sizes within the limits, every chunk index inside its
    /// buffer, every peer a rank other than its own, every dependency a step that
    /// exists, no two blocks of a rank sending (or receiving) to the same peer on the
    /// same channel, sends only from blocks with a send peer and receives only into
    /// blocks with a receive peer.
    pub fn check(&self) -> Result<(), ScheduleError> {
        let ranks = self.gpus.len();
        let steps: usize = self.gpus.iter().flat_map(|gpu| &gpu.blocks).map(|block| block.steps.len()).sum();
        if steps > MAX_STEPS {
            return Err(ScheduleError::TooLarge { what: format!("{steps} steps"), limit: MAX_STEPS });
        }
        if self.channels > MAX_CHANNELS {
            return Err(ScheduleError::TooLarge {
                what: format!("{} channels", self.channels),
                limit: MAX_CHANNELS as usize,
            });
        }
        if self.chunks_per_loop == 0 || self.chunks_per_loop > MAX_CHUNKS {
            return Err(ScheduleError::Invalid {
                at: "the algo".into(),
                reason: format!("nchunksperloop {} is not 1 to {MAX_CHUNKS}", self.chunks_per_loop),
            });
        }
        for (g, gpu) in self.gpus.iter().enumerate() {
            if gpu.blocks.len() > MAX_BLOCKS {
                return Err(ScheduleError::TooLarge {
                    what: format!("gpu {g} has {} blocks", gpu.blocks.len()),
                    limit: MAX_BLOCKS,
                });
            }
            for buffer in [Buffer::Input, Buffer::Output, Buffer::Scratch] {
                if gpu.chunks(buffer) > MAX_CHUNKS {
                    return Err(ScheduleError::TooLarge {
                        what: format!("gpu {g} has {} {} chunks", gpu.chunks(buffer), buffer.name()),
                        limit: MAX_CHUNKS as usize,
                    });
                }
            }
            let mut streams: HashMap<(bool, u32, u32), u32> = HashMap::new();
            for block in &gpu.blocks {
                let invalid = |reason: String| ScheduleError::Invalid { at: at(g, block, None), reason };
                if block.channel >= self.channels {
                    return Err(invalid(format!("channel {} is not below nchannels {}", block.channel, self.channels)));
                }
                for (sending, peer) in [(true, block.send), (false, block.recv)] {
                    let Some(peer) = peer else { continue };
                    let role = if sending { "send" } else { "recv" };
                    if peer as usize >= ranks || peer as usize == g {
                        return Err(invalid(format!("{role} peer {peer} is not another of the {ranks} ranks")));
                    }
                    if let Some(other) = streams.insert((sending, peer, block.channel), block.id) {
                        return Err(invalid(format!(
                            "tb {other} already {role}s with rank {peer} on channel {}: one block per peer and channel",
                            block.channel
                        )));
                    }
                }
                for (s, step) in block.steps.iter().enumerate() {
                    let invalid = |reason: String| ScheduleError::Invalid { at: at(g, block, Some((s, step))), reason };
                    if step.kind.sends() && block.send.is_none() {
                        return Err(invalid("sends, but its block has no send peer (send=\"-1\")".into()));
                    }
                    if step.kind.receives() && block.recv.is_none() {
                        return Err(invalid("receives, but its block has no receive peer (recv=\"-1\")".into()));
                    }
                    if step.kind != StepKind::Nop && step.count == 0 {
                        return Err(invalid("moves 0 chunks (cnt must be at least 1)".into()));
                    }
                    let mut touched = Vec::new();
                    if step.kind.reads_src() {
                        touched.push(("src", step.src));
                    }
                    if step.kind.writes_dst() || step.kind == StepKind::Reduce {
                        touched.push(("dst", step.dst));
                    }
                    for (role, chunks) in touched {
                        let available = gpu.chunks(chunks.buffer);
                        let end = u64::from(chunks.index) + u64::from(step.count);
                        if end > u64::from(available) {
                            return Err(invalid(format!(
                                "{role} chunks {}..{end} of the {} buffer ({}) are out of range: it has {available} chunks",
                                chunks.index,
                                chunks.buffer.name(),
                                chunks.buffer.letter(),
                            )));
                        }
                    }
                    if let Some((dep_block, dep_step)) = step.after {
                        let Some(target) = gpu.blocks.get(dep_block as usize) else {
                            return Err(invalid(format!("depends on a block this rank does not have ({dep_block})")));
                        };
                        if dep_step as usize >= target.steps.len() {
                            return Err(invalid(format!(
                                "depends on step {dep_step} of tb {}, which has {} steps",
                                target.id,
                                target.steps.len()
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// How the program's chunks fall on `p` nodes of `size_bytes` each (`--size`, with
    /// the collective's layout) of `dtype`: the larger buffer is cut into
    /// `nchunksperloop` chunks, each a whole number of elements; every rank's input and
    /// output chunks must make exactly the collective's buffers (in place, a buffer may
    /// declare none: it is the other's). A size that does not
    /// divide is refused naming the nearest sizes that do.
    pub fn layout(&self, p: usize, size_bytes: u64, dtype: Dtype) -> Result<Layout, ScheduleError> {
        let Some((in_mult, out_mult)) = buffer_multiples(self.collective, p) else {
            return Err(ScheduleError::Layout(format!(
                "MSCCL-IR programs for {} are not supported (supported: {KNOWN_COLLECTIVES})",
                self.collective
            )));
        };
        let whole_mult = in_mult.max(out_mult);
        // Every buffer must be addressable: p × --size within usize.
        let Some(size) = usize::try_from(size_bytes).ok().filter(|size| size.checked_mul(whole_mult).is_some()) else {
            return Err(ScheduleError::Layout(format!(
                "--size {size_bytes} B on {p} nodes makes buffers of {} × {size_bytes} B, more than a node can address",
                whole_mult
            )));
        };
        let chunks = self.chunks_per_loop as usize;
        // --size must make whole_mult × size a multiple of chunks × element size.
        let unit_whole = chunks * dtype.size();
        let unit = unit_whole / gcd(whole_mult, unit_whole);
        if size == 0 || !size.is_multiple_of(unit) {
            let below = size / unit * unit;
            let nearest = match below {
                0 => format!("{unit}"),
                _ => format!("{below} or {}", below + unit),
            };
            return Err(ScheduleError::Layout(format!(
                "--size {size} B does not cut into the program's {chunks} chunks of whole {dtype} elements \
                 ({whole_mult} × {size} B = {} B over {chunks} chunks); sizes that do are multiples of {unit} B: try {nearest}",
                whole_mult * size
            )));
        }
        let chunk_bytes = whole_mult * size / chunks;
        let layout = Layout { chunk_bytes, input_bytes: in_mult * size, output_bytes: out_mult * size };
        for (g, gpu) in self.gpus.iter().enumerate() {
            for (buffer, declared, needed) in [
                (Buffer::Input, gpu.input_chunks, layout.input_bytes),
                (Buffer::Output, gpu.output_chunks, layout.output_bytes),
            ] {
                // In place, MSCCL's tools declare no chunks for the buffer that aliases the other.
                let aliased = self.inplace && declared == 0;
                if !aliased && (declared as usize).checked_mul(chunk_bytes) != Some(needed) {
                    return Err(ScheduleError::Layout(format!(
                        "gpu {g} declares {declared} {} chunks of {chunk_bytes} B, but {}'s {} buffer holds {needed} B at --size {size} B on {p} nodes ({} chunks)",
                        buffer.name(),
                        self.collective,
                        buffer.name(),
                        needed / chunk_bytes
                    )));
                }
            }
        }
        Ok(layout)
    }

    /// Plays the program with no data, every send buffered until its receive takes it
    /// (as the nodes' mailboxes hold messages), blocks in any order: a program that
    /// cannot finish this way cannot finish on any network. Refuses a program with a
    /// block that waits forever (a dependency cycle, a receive that no send feeds, a
    /// count that differs between a send and its receive) or a send that no receive
    /// takes, naming the blocks involved.
    pub fn dry_run(&self) -> Result<(), ScheduleError> {
        // The position of each block: its next step.
        let mut next: Vec<Vec<usize>> = self.gpus.iter().map(|gpu| vec![0; gpu.blocks.len()]).collect();
        // Messages in flight per (from, to, channel): (chunks, sender's block, step).
        let mut in_flight: HashMap<(usize, u32, u32), VecDeque<InFlight>> = HashMap::new();
        let mut progress = true;
        while progress {
            progress = false;
            for (g, gpu) in self.gpus.iter().enumerate() {
                for (b, block) in gpu.blocks.iter().enumerate() {
                    while let Some(step) = block.steps.get(next[g][b]) {
                        if let Some((dep_block, dep_step)) = step.after
                            && next[g][dep_block as usize] <= dep_step as usize
                        {
                            break;
                        }
                        if step.kind.receives() {
                            let from = block.recv.expect("checked: a receiving block has a peer");
                            let key = (from as usize, g as u32, block.channel);
                            let Some(&(count, sender, sender_step)) =
                                in_flight.get(&key).and_then(|queue| queue.front())
                            else {
                                break;
                            };
                            if count != step.count {
                                let sender_block = &self.gpus[from as usize].blocks[sender as usize];
                                let sent = &sender_block.steps[sender_step];
                                return Err(ScheduleError::Stuck(format!(
                                    "{} receives {} chunks, but the message it matches, from {}, carries {count}",
                                    at(g, block, Some((next[g][b], step))),
                                    step.count,
                                    at(from as usize, sender_block, Some((sender_step, sent))),
                                )));
                            }
                            in_flight.get_mut(&key).map(VecDeque::pop_front);
                        }
                        if step.kind.sends() {
                            let to = block.send.expect("checked: a sending block has a peer");
                            in_flight
                                .entry((g, to, block.channel))
                                .or_default()
                                .push_back((step.count, b as u32, next[g][b]));
                        }
                        next[g][b] += 1;
                        progress = true;
                    }
                }
            }
        }
        let waiting = self.describe_waits(&next);
        if !waiting.is_empty() {
            return Err(ScheduleError::Stuck(waiting));
        }
        let mut left: Vec<_> = in_flight.iter().filter(|(_, queue)| !queue.is_empty()).collect();
        left.sort_by_key(|(key, _)| **key);
        if let Some(&(&(from, to, channel), queue)) = left.first() {
            let (count, sender, sender_step) = queue[0];
            let block = &self.gpus[from].blocks[sender as usize];
            return Err(ScheduleError::Unmatched(format!(
                "{} sends {count} chunks to gpu {to} on channel {channel}, and no block of gpu {to} receives them{}",
                at(from, block, Some((sender_step, &block.steps[sender_step]))),
                if left.len() > 1 || queue.len() > 1 { " (and more after it)" } else { "" }
            )));
        }
        Ok(())
    }

    /// What every unfinished block waits for, a dependency cycle first if there is one;
    /// empty when every block finished.
    fn describe_waits(&self, next: &[Vec<usize>]) -> String {
        let mut lines = Vec::new();
        let mut cycle = None;
        for (g, gpu) in self.gpus.iter().enumerate() {
            for (b, block) in gpu.blocks.iter().enumerate() {
                let Some(step) = block.steps.get(next[g][b]) else { continue };
                let here = at(g, block, Some((next[g][b], step)));
                if let Some((dep_block, dep_step)) = step.after
                    && next[g][dep_block as usize] <= dep_step as usize
                {
                    let target = &gpu.blocks[dep_block as usize];
                    lines.push(format!("{here} waits for tb {} step {dep_step}", target.id));
                    if cycle.is_none() {
                        cycle = self.dependency_cycle(g, b, next);
                    }
                } else {
                    let from = block.recv.unwrap_or_default();
                    lines.push(format!("{here} waits for a message from gpu {from} on channel {}", block.channel));
                }
            }
        }
        if lines.is_empty() {
            return String::new();
        }
        const SHOWN: usize = 8;
        let more = lines.len().saturating_sub(SHOWN);
        lines.truncate(SHOWN);
        let mut text = match cycle {
            Some(cycle) => format!("a dependency cycle: {cycle}; "),
            None => "every block left waits on another (a receive no send feeds, or a deadlock): ".to_owned(),
        };
        text.push_str(&lines.join("; "));
        if more > 0 {
            text.push_str(&format!("; and {more} more"));
        }
        text
    }

    /// The cycle of dependencies (within gpu `g`) that the block `b` waits on, if it is
    /// on one: "tb 1 → tb 2 → tb 1".
    fn dependency_cycle(&self, g: usize, b: usize, next: &[Vec<usize>]) -> Option<String> {
        let blocks = &self.gpus[g].blocks;
        let waits_on = |block: usize| -> Option<usize> {
            let step = blocks[block].steps.get(next[g][block])?;
            let (dep_block, dep_step) = step.after?;
            (next[g][dep_block as usize] <= dep_step as usize).then_some(dep_block as usize)
        };
        let mut path = vec![b];
        let mut current = b;
        for _ in 0..=blocks.len() {
            current = waits_on(current)?;
            if let Some(start) = path.iter().position(|&seen| seen == current) {
                let names: Vec<String> =
                    path[start..].iter().chain([&current]).map(|&i| format!("tb {}", blocks[i].id)).collect();
                return Some(format!("gpu {g} {}", names.join(" → ")));
            }
            path.push(current);
        }
        None
    }
}

/// A message of the dry run, in flight: (chunks, sender's block, sender's step).
type InFlight = (u32, u32, usize);

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// One operation of a GOAL schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GoalKind {
    /// `send Nb to R tag T`.
    Send { bytes: u64, peer: u32, tag: u32 },
    /// `recv Nb from R tag T`.
    Recv { bytes: u64, peer: u32, tag: u32 },
    /// `calc N`: N nanoseconds of local work.
    Calc { ns: u64 },
}

/// A GOAL operation and the operations of its rank it waits for (by position).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalOp {
    pub kind: GoalKind,
    /// `requires`: these must be done before this one starts.
    pub requires: Vec<u32>,
    /// `irequires`: these must have started before this one starts.
    pub irequires: Vec<u32>,
}

/// A rank of a GOAL schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalRank {
    pub ops: Vec<GoalOp>,
}

/// A GOAL schedule: per rank, operations and their dependencies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goal {
    pub ranks: Vec<GoalRank>,
}

impl Goal {
    /// Checks sizes, peers, tags and dependencies (every one an earlier-or-later
    /// operation of the same rank that exists, none on itself).
    pub fn check(&self) -> Result<(), ScheduleError> {
        let ops: usize = self.ranks.iter().map(|rank| rank.ops.len()).sum();
        if ops > MAX_GOAL_OPS {
            return Err(ScheduleError::TooLarge { what: format!("{ops} operations"), limit: MAX_GOAL_OPS });
        }
        let ranks = self.ranks.len();
        for (r, rank) in self.ranks.iter().enumerate() {
            for (i, op) in rank.ops.iter().enumerate() {
                let invalid = |reason: String| ScheduleError::Invalid { at: format!("rank {r} operation {i}"), reason };
                if let GoalKind::Send { peer, tag, bytes } | GoalKind::Recv { peer, tag, bytes } = op.kind {
                    if bytes > MAX_GOAL_MESSAGE_BYTES {
                        return Err(invalid(format!(
                            "a message of {bytes} B, over the {MAX_GOAL_MESSAGE_BYTES} B (1 TiB) a GOAL message may carry"
                        )));
                    }
                    if peer as usize >= ranks || peer as usize == r {
                        return Err(invalid(format!("peer {peer} is not another of the {ranks} ranks")));
                    }
                    if tag > MAX_GOAL_TAG {
                        return Err(invalid(format!("tag {tag} is over {MAX_GOAL_TAG}")));
                    }
                }
                for &dep in op.requires.iter().chain(&op.irequires) {
                    if dep as usize >= rank.ops.len() || dep as usize == i {
                        return Err(invalid(format!(
                            "depends on operation {dep}, which is not another of the rank's {}",
                            rank.ops.len()
                        )));
                    }
                }
            }
        }
        // Every receive needs a send: count them per (from, to, tag).
        let mut counts: HashMap<(u32, u32, u32), (usize, usize)> = HashMap::new();
        for (r, rank) in self.ranks.iter().enumerate() {
            for op in &rank.ops {
                match op.kind {
                    GoalKind::Send { peer, tag, .. } => counts.entry((r as u32, peer, tag)).or_default().0 += 1,
                    GoalKind::Recv { peer, tag, .. } => counts.entry((peer, r as u32, tag)).or_default().1 += 1,
                    GoalKind::Calc { .. } => {}
                }
            }
        }
        let mut unmatched: Vec<_> = counts.into_iter().filter(|(_, (sends, recvs))| sends != recvs).collect();
        unmatched.sort();
        if let Some(&((from, to, tag), (sends, recvs))) = unmatched.first() {
            return Err(ScheduleError::Unmatched(format!(
                "rank {to} receives {recvs} messages from rank {from} with tag {tag}, and rank {from} sends {sends}"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: StepKind, index: u32, after: Option<(u32, u32)>) -> Step {
        let chunks = Chunks { buffer: Buffer::Input, index };
        Step { kind, src: chunks, dst: chunks, count: 1, after }
    }

    fn block(id: u32, send: Option<u32>, recv: Option<u32>, steps: Vec<Step>) -> Block {
        Block { id, send, recv, channel: 0, steps }
    }

    fn program(gpus: Vec<Vec<Block>>) -> Program {
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

    #[test]
    fn a_matched_exchange_finishes() {
        let p = program(vec![
            vec![block(0, Some(1), Some(1), vec![step(StepKind::Send, 0, None), step(StepKind::Recv, 1, None)])],
            vec![block(0, Some(0), Some(0), vec![step(StepKind::Send, 1, None), step(StepKind::Recv, 0, None)])],
        ]);
        p.check().unwrap();
        p.dry_run().unwrap();
    }

    #[test]
    fn a_dependency_cycle_is_named() {
        let p = program(vec![
            vec![
                block(0, None, None, vec![step(StepKind::Nop, 0, Some((1, 0)))]),
                block(1, None, None, vec![step(StepKind::Nop, 0, Some((0, 0)))]),
            ],
            vec![],
        ]);
        p.check().unwrap();
        let error = p.dry_run().unwrap_err().to_string();
        assert!(error.contains("a dependency cycle: gpu 0 tb 0 → tb 1 → tb 0"), "{error}");
    }

    #[test]
    fn a_send_nobody_receives_is_named() {
        let p = program(vec![vec![block(0, Some(1), None, vec![step(StepKind::Send, 0, None)])], vec![]]);
        let error = p.dry_run().unwrap_err().to_string();
        assert_eq!(
            error,
            "a send with no matching receive: gpu 0 tb 0 step 0 (s) sends 1 chunks to gpu 1 on channel 0, and no block of gpu 1 receives them"
        );
    }

    #[test]
    fn sizes_that_do_not_divide_name_the_nearest_that_do() {
        let p = program(vec![vec![], vec![]]);
        let error = p.layout(2, 20, Dtype::F64).unwrap_err().to_string();
        assert!(error.contains("multiples of 16 B: try 16 or 32"), "{error}");
        assert_eq!(p.layout(2, 32, Dtype::F64).unwrap().chunk_bytes, 16);
    }
}
