//! All-to-all broadcast (all-gather): every node ends with every node's block.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use crate::comm::{Comm, CommError};

/// Runs the all-gather `algorithm` names.
pub async fn run(comm: &Comm, algorithm: Algorithm, block: Bytes) -> Result<Bytes, CommError> {
    let _ = block;
    Err(super::unsupported(comm, Collective::Allgather, algorithm))
}
