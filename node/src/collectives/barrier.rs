//! Barriers: no node leaves before every node has arrived.

use bytes::Bytes;
use topocomm_proto::frame::{SYSTEM_TAG_BASE, Tag};
use topocomm_proto::spec::{Algorithm, Collective};

use crate::comm::{Comm, CommError};

/// Tag of the `barrier` collective's own rounds (below the runtime's range).
const BARRIER_TAG: Tag = 0;

/// Runs the barrier `algorithm` names.
pub async fn run(comm: &Comm, algorithm: Algorithm) -> Result<(), CommError> {
    match algorithm {
        Algorithm::Dissemination => dissemination(comm, BARRIER_TAG).await,
        other => Err(super::unsupported(comm, Collective::Barrier, other)),
    }
}

/// Tags of the runtime's own barrier (before every iteration), out of the algorithms' range.
pub const RUNTIME_BARRIER_TAG: Tag = SYSTEM_TAG_BASE;

/// Dissemination barrier (Hensgen, Finkel and Manber, 1988), any p.
///
/// ```text
/// for k := 0 while 2^k < p do
///     send signal to (my_id + 2^k) mod p
///     receive signal from (my_id - 2^k) mod p
/// ```
///
/// Steps: ⌈log2 p⌉, each a zero-byte message; cost ⌈log p⌉ (t_s + t_h l).
pub async fn dissemination(comm: &Comm, tag_base: Tag) -> Result<(), CommError> {
    let (me, p) = (comm.id(), comm.p());
    let mut distance = 1;
    let mut round = 0;
    while distance < p {
        let to = (me + distance) % p;
        let from = (me + p - distance) % p;
        comm.exchange(to, from, tag_base + round, Bytes::new())
            .await?;
        distance *= 2;
        round += 1;
    }
    Ok(())
}
