//! All-to-all personalized: node i ends with block i of every node.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use crate::comm::{Comm, CommError};

/// Runs the alltoall `algorithm` names; `blocks` holds p blocks of `block` bytes.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    blocks: Bytes,
    block: usize,
) -> Result<Bytes, CommError> {
    let _ = (blocks, block);
    Err(super::unsupported(comm, Collective::Alltoall, algorithm))
}
