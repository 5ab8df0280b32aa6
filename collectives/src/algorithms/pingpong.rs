//! Ping-pong: one message there and back, the latency test of the OSU micro-benchmarks
//! and the probe `topocomm calibrate` fits the links' t_s, t_h and t_w with.

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::spec::{Algorithm, Collective};

use super::phases::SINGLE;
use crate::comm::{Comm, CommError};

/// Runs the ping-pong `algorithm` names between `root` and node root + q mod p.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    message: Bytes,
    q: usize,
) -> Result<Bytes, CommError> {
    match algorithm {
        Algorithm::Linear => linear(comm, root, message, q).await,
        other => Err(super::unsupported(comm, Collective::PingPong, other)),
    }
}

/// The root sends to its partner, which sends the message straight back.
///
/// ```text
/// partner := (root + q) mod p
/// if my_id = root then send X to partner; receive X from partner
/// else if my_id = partner then receive X from root; send X to root
/// ```
///
/// Steps: 2. Cost over l hops: 2 (t_s + l (t_h + t_w m)) store-and-forward.
pub async fn linear(comm: &Comm, root: NodeId, message: Bytes, q: usize) -> Result<Bytes, CommError> {
    let p = comm.p();
    if root >= p {
        return Err(CommError::NoSuchPeer { me: comm.id(), peer: root, p });
    }
    let partner = (root + q) % p;
    let me = comm.id();
    if partner == root {
        return Ok(message);
    }
    if me == root {
        comm.send(partner, SINGLE.tag(0), message).await?;
        comm.recv(partner, SINGLE.tag(1)).await
    } else if me == partner {
        let message = comm.recv(root, SINGLE.tag(0)).await?;
        comm.send(root, SINGLE.tag(1), message.clone()).await?;
        Ok(message)
    } else {
        Ok(Bytes::new())
    }
}
