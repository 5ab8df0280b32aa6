//! One-to-all personalized (scatter) and its dual, all-to-one personalized (gather).

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::spec::{Algorithm, Collective};

use crate::comm::{Comm, CommError};

/// Runs the scatter `algorithm` names: the root's p blocks of `block` bytes, block i to node i.
pub async fn scatter(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    blocks: Bytes,
    block: usize,
) -> Result<Bytes, CommError> {
    let _ = (root, blocks, block);
    Err(super::unsupported(comm, Collective::Scatter, algorithm))
}

/// Runs the gather `algorithm` names: every node's block to the root, in node order.
pub async fn gather(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    block: Bytes,
) -> Result<Bytes, CommError> {
    let _ = (root, block);
    Err(super::unsupported(comm, Collective::Gather, algorithm))
}
