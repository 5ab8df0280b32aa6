//! Schedules users bring instead of a built-in algorithm (`RunSpec::schedule`): an
//! MSCCL-IR program (`msccl` reads the XML, `interpreter` runs it over `Comm`) or a GOAL
//! schedule (`goal` reads and writes the text and runs it, sizes only).

pub mod goal;
pub mod interpreter;
pub mod msccl;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use topocomm_proto::schedule::{Schedule, ScheduleError};
use topocomm_proto::spec::RunSpec;

use crate::comm::{Comm, CommError};
use crate::files::FileError;

/// Runs this node's part of `schedule` from `input`; returns what the node ends with.
pub async fn run(comm: &Comm, spec: &RunSpec, schedule: &Schedule, input: Bytes) -> Result<Bytes, CommError> {
    match schedule {
        Schedule::Msccl(program) => interpreter::run(comm, spec, program, input).await,
        Schedule::Goal(goal) => goal::run(comm, goal).await.map(|()| Bytes::new()),
    }
}

/// The largest schedule file read (a program at its step limit is well under it).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Why a schedule file could not be read: the file itself, or what it says (each with
/// its cause; the file's path leads the text).
#[derive(Debug, thiserror::Error)]
pub enum ScheduleFileError {
    /// The file could not be read (missing, not a regular file, too large, not text).
    #[error("{0}")]
    Read(#[source] FileError),
    /// An MSCCL-IR file that is not a program (malformed XML, with its line and column).
    #[error("{}: {source}", path.display())]
    Msccl { path: PathBuf, source: msccl::ParseError },
    /// A GOAL file that is not a schedule (with its line and column).
    #[error("{}: {source}", path.display())]
    Goal { path: PathBuf, source: goal::ParseError },
    /// A program that would hang or leave a message behind ([`topocomm_proto::schedule::Program::dry_run`]).
    #[error("{}: {source}", path.display())]
    DryRun { path: PathBuf, source: ScheduleError },
}

/// The text of the schedule file at `path` (`what` it is), through the bounded reader
/// ([`crate::files::read_text`]: a regular file of at most [`MAX_FILE_BYTES`]).
fn read_text(path: &Path, what: &'static str) -> Result<String, ScheduleFileError> {
    crate::files::read_text(path, what, MAX_FILE_BYTES).map_err(ScheduleFileError::Read)
}

/// Reads the MSCCL-IR program at `path` and plays it with no data
/// ([`topocomm_proto::schedule::Program::dry_run`]): a program that would hang or leave a
/// message behind is refused here, before any node runs it.
pub fn read_msccl(path: &Path) -> Result<Schedule, ScheduleFileError> {
    let program = msccl::parse(&read_text(path, "MSCCL-IR file")?)
        .map_err(|source| ScheduleFileError::Msccl { path: path.to_owned(), source })?;
    program.dry_run().map_err(|source| ScheduleFileError::DryRun { path: path.to_owned(), source })?;
    Ok(Schedule::Msccl(program))
}

/// Reads the GOAL schedule at `path`.
pub fn read_goal(path: &Path) -> Result<Schedule, ScheduleFileError> {
    let goal = goal::parse(&read_text(path, "GOAL file")?)
        .map_err(|source| ScheduleFileError::Goal { path: path.to_owned(), source })?;
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

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    /// A file that is not XML is refused with its path, and the parser's error (with the
    /// line) is kept as the cause, not flattened into text.
    #[test]
    fn a_malformed_file_is_refused_with_the_parsers_error_as_its_cause() {
        let path = std::env::temp_dir().join(format!("topocomm-malformed-{}.xml", std::process::id()));
        std::fs::write(&path, "<algo name=\"x\">\n<gpu\n").expect("a temporary file");
        let error = read_msccl(&path).expect_err("not XML");
        std::fs::remove_file(&path).ok();
        assert!(matches!(&error, ScheduleFileError::Msccl { source: msccl::ParseError::Xml { .. }, .. }), "{error:?}");
        assert!(error.to_string().starts_with(&format!("{}: malformed XML at line ", path.display())), "{error}");
        let cause = error.source().and_then(|cause| cause.downcast_ref::<msccl::ParseError>());
        assert!(matches!(cause, Some(msccl::ParseError::Xml { .. })), "{cause:?}");
        let missing = read_goal(&path).expect_err("no such file");
        assert!(matches!(missing, ScheduleFileError::Read(_)) && missing.source().is_some(), "{missing:?}");
    }
}
