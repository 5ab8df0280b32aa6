//! The collective algorithms, one file per operation family, each algorithm one async
//! fn over `Comm` that reads like its pseudocode and cites it. `run` picks the one a
//! run specification names.

pub mod barrier;
pub mod broadcast;
pub mod patterns;
pub mod reduce;

use bytes::Bytes;
use topocomm_proto::spec::{Collective, RunSpec};

use crate::comm::{Comm, CommError};

/// Runs this node's part of the collective `spec` names, from `input`; returns what the
/// node ends with (see `topocomm_proto::reference` for what that must be).
pub async fn run(comm: &Comm, spec: &RunSpec, input: Bytes) -> Result<Bytes, CommError> {
    match spec.collective {
        Collective::Broadcast => broadcast::run(comm, spec.algorithm, spec.root, input).await,
        Collective::Reduce => {
            reduce::run(comm, spec.algorithm, spec.root, input, spec.dtype, spec.op).await
        }
    }
}
