//! Runs an MSCCL-IR program on one node over `Comm`, with the MSCCL executor's ([MSCCL])
//! semantics: the node is rank `comm.id()`; each of its thread blocks is a sequential
//! task, all of them run at once (`try_join_all`); a step starts once the block's
//! previous step is done and, if it has one, the step of another block it depends on
//! (`depid`/`deps`). A block's sends go to its send peer and its receives come from its
//! receive peer; the k-th message a block sends on its channel is the k-th its peer's
//! receiving block takes there, matched by tag (`phases::SCHEDULE`, the step counting
//! messages per channel), so channels between the same pair never mix. A peer that is
//! not a neighbour is reached hop by hop by the router, as every message is.
//!
//! The buffers: the collective's input and output (`--size` per node with topocomm's
//! data layout, the larger cut into `nchunksperloop` chunks) and the scratch chunks,
//! laid in one arena. In place, the output overlaps the input as MSCCL lays them: the
//! same region for equal sizes, the input as this rank's block of an all-gather's
//! output, the output as this rank's block of a reduce-scatter's input.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::Notify;
use topocomm_proto::elements::combine;
use topocomm_proto::schedule::{Block, Buffer, Chunks, Layout, Program, Step, StepKind};
use topocomm_proto::spec::{Collective, RunSpec};

use crate::algorithms::patterns::Reduction;
use crate::algorithms::phases::{Phase, SCHEDULE};
use crate::comm::{Comm, CommError, MessageError};

/// Runs this node's part of `program` from `input`; returns its output buffer (nothing
/// at a reduction's non-roots, as the reference says).
pub async fn run(comm: &Comm, spec: &RunSpec, program: &Program, input: Bytes) -> Result<Bytes, CommError> {
    let me = comm.id();
    let refuse = |reason: String| CommError::Unsupported { me, algorithm: "schedule".into(), reason };
    let layout = program.layout(comm.p(), spec.size_bytes, spec.dtype).map_err(|error| refuse(error.to_string()))?;
    let gpu = program.gpus.get(me).ok_or_else(|| refuse(format!("the program has no gpu {me}")))?;
    let memory = Memory::new(program, me, layout, gpu.scratch_chunks as usize, &input)
        .map_err(|error| refuse(error.to_string()))?;
    let done: Vec<AtomicUsize> = gpu.blocks.iter().map(|_| AtomicUsize::new(0)).collect();
    let state = State {
        comm,
        program,
        reduction: Reduction { dtype: spec.dtype, op: spec.op },
        memory,
        done,
        notify: Notify::new(),
    };
    futures::future::try_join_all(gpu.blocks.iter().enumerate().map(|(b, block)| state.run_block(b, block))).await?;
    if program.collective == Collective::Reduce && me != spec.root {
        return Ok(Bytes::new());
    }
    Ok(state.memory.output())
}

/// What every block of this node shares.
struct State<'a> {
    comm: &'a Comm,
    program: &'a Program,
    reduction: Reduction,
    memory: Memory,
    /// Steps done, per block.
    done: Vec<AtomicUsize>,
    /// Woken whenever a block finishes a step.
    notify: Notify,
}

impl State<'_> {
    /// Runs `block` (number `b`) step by step.
    async fn run_block(&self, b: usize, block: &Block) -> Result<(), CommError> {
        let (mut sent, mut received) = (0usize, 0usize);
        for (s, step) in block.steps.iter().enumerate() {
            if let Some((dep_block, dep_step)) = step.after {
                self.wait_for(dep_block as usize, dep_step as usize).await;
            }
            let incoming = match step.kind.receives() {
                true => {
                    let from = block.recv.expect("checked: a receiving block has a peer") as usize;
                    let tag = self.tag(block, received)?;
                    received += 1;
                    let message = self.comm.recv(from, tag).await?;
                    let expected = step.count as usize * self.memory.layout.chunk_bytes;
                    if message.len() != expected {
                        let reason = format!(
                            "tb {} step {s} received {} B from node {from}, not the {expected} B of its {} chunks",
                            block.id,
                            message.len(),
                            step.count
                        );
                        return Err(CommError::Link { me: self.comm.id(), cause: MessageError::Malformed(reason) });
                    }
                    Some(message)
                }
                false => None,
            };
            let outgoing = self.apply(step, incoming)?;
            if let Some(message) = outgoing {
                let to = block.send.expect("checked: a sending block has a peer") as usize;
                let tag = self.tag(block, sent)?;
                sent += 1;
                self.comm.send(to, tag, message).await?;
            }
            self.done[b].store(s + 1, Ordering::Release);
            self.notify.notify_waiters();
        }
        Ok(())
    }

    /// What `step` does to the buffers with the message it received; returns what it sends.
    fn apply(&self, step: &Step, incoming: Option<Bytes>) -> Result<Option<Bytes>, CommError> {
        let memory = &self.memory;
        let count = step.count as usize;
        let reduce = |src: Chunks, with: &[u8]| -> Result<Bytes, CommError> {
            let mut acc = memory.read(src, count).to_vec();
            combine(self.reduction.dtype, self.reduction.op, &mut acc, with)
                .map_err(|error| self.comm.elements_error(error))?;
            Ok(Bytes::from(acc))
        };
        let message = || incoming.clone().expect("a receiving step has its message");
        Ok(match step.kind {
            StepKind::Send => Some(memory.read(step.src, count)),
            StepKind::Recv => {
                memory.write(step.dst, &message());
                None
            }
            StepKind::RecvCopySend => {
                memory.write(step.dst, &message());
                Some(message())
            }
            StepKind::RecvReduceCopy => {
                memory.write(step.dst, &reduce(step.src, &message())?);
                None
            }
            StepKind::RecvReduceSend => Some(reduce(step.src, &message())?),
            StepKind::RecvReduceCopySend => {
                let reduced = reduce(step.src, &message())?;
                memory.write(step.dst, &reduced);
                Some(reduced)
            }
            StepKind::Copy => {
                memory.write(step.dst, &memory.read(step.src, count));
                None
            }
            StepKind::Reduce => {
                let other = memory.read(step.src, count);
                memory.write(step.dst, &reduce(step.dst, &other)?);
                None
            }
            StepKind::Nop => None,
        })
    }

    /// Waits until block `block` has done its step `step`.
    async fn wait_for(&self, block: usize, step: usize) {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.done[block].load(Ordering::Acquire) > step {
                return;
            }
            notified.await;
        }
    }

    /// The tag of the `index`-th message on `block`'s channel (sent or received).
    fn tag(&self, block: &Block, index: usize) -> Result<u32, CommError> {
        let step = index
            .checked_mul(self.program.channels as usize)
            .and_then(|base| base.checked_add(block.channel as usize))
            .filter(|&step| step < Phase::MAX_STEPS);
        step.map(|step| SCHEDULE.tag(step)).ok_or_else(|| CommError::Unsupported {
            me: self.comm.id(),
            algorithm: "schedule".into(),
            reason: format!(
                "tb {} sends or receives more messages than {} channels can tag ({} in all)",
                block.id,
                self.program.channels,
                Phase::MAX_STEPS
            ),
        })
    }
}

/// A node's buffers in one arena: where each starts, and the chunk size.
struct Memory {
    arena: Mutex<Vec<u8>>,
    layout: Layout,
    input_at: usize,
    output_at: usize,
    scratch_at: usize,
}

/// Why a node cannot hold a program's buffers.
#[derive(Debug, thiserror::Error)]
enum MemoryError {
    #[error("{scratch_chunks} scratch chunks of {chunk_bytes} B overflow")]
    Overflow { scratch_chunks: usize, chunk_bytes: usize },
    #[error("the program's buffers need {total} B, which this node cannot have ({source})")]
    Unavailable { total: usize, source: std::collections::TryReserveError },
    #[error("the node's input is {got} B, but the program's input buffer is {expected} B")]
    Input { got: usize, expected: usize },
}

impl Memory {
    /// The arena for rank `me` of `program`, its input copied in (a node that starts with
    /// nothing, a broadcast's non-root, starts with zeros).
    fn new(
        program: &Program,
        me: usize,
        layout: Layout,
        scratch_chunks: usize,
        input: &[u8],
    ) -> Result<Self, MemoryError> {
        let (input_len, output_len) = (layout.input_bytes, layout.output_bytes);
        let (len, input_at, output_at) = match (program.inplace, program.collective) {
            (false, _) => (input_len + output_len, 0, input_len),
            (true, Collective::Allgather) => (output_len, me * input_len, 0),
            (true, Collective::ReduceScatter) => (input_len, 0, me * output_len),
            (true, _) => (input_len.max(output_len), 0, 0),
        };
        // The scratch chunks are the program's to size: an arena that cannot be had is
        // refused, not allowed to abort the node.
        let total = scratch_chunks.checked_mul(layout.chunk_bytes).and_then(|scratch| scratch.checked_add(len));
        let total = total.ok_or(MemoryError::Overflow { scratch_chunks, chunk_bytes: layout.chunk_bytes })?;
        let mut arena = Vec::new();
        arena.try_reserve_exact(total).map_err(|source| MemoryError::Unavailable { total, source })?;
        arena.resize(total, 0);
        match input.len() {
            0 => {}
            n if n == input_len => arena[input_at..input_at + n].copy_from_slice(input),
            n => return Err(MemoryError::Input { got: n, expected: input_len }),
        }
        Ok(Memory { arena: Mutex::new(arena), layout, input_at, output_at, scratch_at: len })
    }

    /// The byte range of `count` chunks from `chunks` (checked to lie in their buffer).
    fn range(&self, chunks: Chunks, count: usize) -> std::ops::Range<usize> {
        let base = match chunks.buffer {
            Buffer::Input => self.input_at,
            Buffer::Output => self.output_at,
            Buffer::Scratch => self.scratch_at,
        };
        let start = base + chunks.index as usize * self.layout.chunk_bytes;
        start..start + count * self.layout.chunk_bytes
    }

    fn read(&self, chunks: Chunks, count: usize) -> Bytes {
        let arena = self.arena.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Bytes::copy_from_slice(&arena[self.range(chunks, count)])
    }

    fn write(&self, chunks: Chunks, data: &[u8]) {
        let count = data.len() / self.layout.chunk_bytes;
        let mut arena = self.arena.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        arena[self.range(chunks, count)].copy_from_slice(data);
    }

    /// The output buffer.
    fn output(&self) -> Bytes {
        let arena = self.arena.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Bytes::copy_from_slice(&arena[self.output_at..self.output_at + self.layout.output_bytes])
    }
}
