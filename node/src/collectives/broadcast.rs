//! One-to-all broadcast: the root's message ends on every node.

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::spec::Algorithm;

use crate::comm::{Comm, CommError};

/// Runs the broadcast `algorithm` names.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    message: Bytes,
) -> Result<Bytes, CommError> {
    match algorithm {
        _ => linear(comm, root, message).await,
    }
}

/// Linear broadcast: the root sends the message to every other node in turn.
pub async fn linear(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    if comm.id() == root {
        for dst in (0..comm.p()).filter(|&n| n != root) {
            comm.send(dst, 0, message.clone()).await?;
        }
        Ok(message)
    } else {
        comm.recv(root, 0).await
    }
}
