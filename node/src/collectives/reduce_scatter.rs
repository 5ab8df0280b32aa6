//! All-to-all reduction (reduce-scatter): node i ends with the reduction of every node's block i.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use super::patterns::Reduction;
use crate::comm::{Comm, CommError};

/// Runs the reduce-scatter `algorithm` names; `blocks` holds p blocks of `block` bytes.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    blocks: Bytes,
    block: usize,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let _ = (blocks, block, reduction);
    Err(super::unsupported(
        comm,
        Collective::ReduceScatter,
        algorithm,
    ))
}
