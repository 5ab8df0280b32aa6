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
