//! Schedules users bring instead of a built-in algorithm (`RunSpec::schedule`): an
//! MSCCL-IR program (`msccl` reads the XML, `interpreter` runs it over `Comm`) or a GOAL
//! schedule (`goal` reads and writes the text and runs it, sizes only).

pub mod goal;
pub mod interpreter;
pub mod msccl;

use bytes::Bytes;
use topocomm_proto::schedule::Schedule;
use topocomm_proto::spec::RunSpec;

use crate::comm::{Comm, CommError};

/// Runs this node's part of `schedule` from `input`; returns what the node ends with.
pub async fn run(comm: &Comm, spec: &RunSpec, schedule: &Schedule, input: Bytes) -> Result<Bytes, CommError> {
    match schedule {
        Schedule::Msccl(program) => interpreter::run(comm, spec, program, input).await,
        Schedule::Goal(goal) => goal::run(comm, goal).await.map(|()| Bytes::new()),
    }
}

/// The largest schedule file read (a program at its step limit is well under it).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The text of the schedule file at `path` (`what` it is), through the bounded reader
/// ([`crate::files::read_text`]: a regular file of at most [`MAX_FILE_BYTES`]).
fn read_text(path: &std::path::Path, what: &'static str) -> Result<String, String> {
    crate::files::read_text(path, what, MAX_FILE_BYTES).map_err(|error| error.to_string())
}

/// Reads the MSCCL-IR program at `path` and plays it with no data
/// ([`topocomm_proto::schedule::Program::dry_run`]): a program that would hang or leave a
/// message behind is refused here, before any node runs it.
pub fn read_msccl(path: &std::path::Path) -> Result<Schedule, String> {
    let shown = path.display();
    let program = msccl::parse(&read_text(path, "MSCCL-IR file")?).map_err(|error| format!("{shown}: {error}"))?;
    program.dry_run().map_err(|error| format!("{shown}: {error}"))?;
    Ok(Schedule::Msccl(program))
}

/// Reads the GOAL schedule at `path`.
pub fn read_goal(path: &std::path::Path) -> Result<Schedule, String> {
    let goal = goal::parse(&read_text(path, "GOAL file")?).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(Schedule::Goal(goal))
}

/// What a report says about `schedule` beside its timing: its name, shape and the
/// attributes that change nothing here.
pub fn summary(schedule: &Schedule) -> String {
    match schedule {
        Schedule::Msccl(program) => {
            let blocks: usize = program.gpus.iter().map(|gpu| gpu.blocks.len()).sum();
            let steps: usize = program.gpus.iter().flat_map(|gpu| &gpu.blocks).map(|block| block.steps.len()).sum();
            format!(
                "MSCCL-IR program \"{}\": {} on {} ranks, {} chunks per loop, {} channels, {blocks} thread blocks, {steps} steps{}; protocol {} (reported only: it changes nothing here)",
                program.name,
                program.collective,
                program.gpus.len(),
                program.chunks_per_loop,
                program.channels,
                if program.inplace { ", in place" } else { "" },
                program.protocol
            )
        }
        Schedule::Goal(goal) => {
            let ops = goal.ranks.iter().flat_map(|rank| &rank.ops);
            let (mut sends, mut bytes, mut calcs, mut calc_ns) = (0u64, 0u64, 0u64, 0u64);
            for op in ops {
                match op.kind {
                    topocomm_proto::schedule::GoalKind::Send { bytes: b, .. } => {
                        sends += 1;
                        bytes = bytes.saturating_add(b);
                    }
                    topocomm_proto::schedule::GoalKind::Recv { .. } => {}
                    topocomm_proto::schedule::GoalKind::Calc { ns } => {
                        calcs += 1;
                        calc_ns = calc_ns.saturating_add(ns);
                    }
                }
            }
            format!(
                "GOAL schedule: {} ranks, {sends} messages, {bytes} B in all, {calcs} calc operations ({calc_ns} ns, taking no time here); sizes only: nothing could be verified",
                goal.ranks.len()
            )
        }
    }
}

/// Where a mismatch lies in an MSCCL-IR program's output: " (in output chunk K of N B
/// each)", so that a wrong schedule names its first wrong chunk; empty otherwise.
pub fn locate(spec: &RunSpec, p: usize, mismatch: &topocomm_proto::reference::Mismatch) -> String {
    let (Some(Schedule::Msccl(program)), topocomm_proto::reference::Mismatch::Elements { first, .. }) =
        (spec.schedule.as_deref(), mismatch)
    else {
        return String::new();
    };
    match program.layout(p, spec.size_bytes, spec.dtype) {
        Ok(layout) if layout.chunk_bytes > 0 => {
            let chunk = first * spec.dtype.size() / layout.chunk_bytes;
            format!(" (in output chunk {chunk}, chunks of {} B)", layout.chunk_bytes)
        }
        _ => String::new(),
    }
}
