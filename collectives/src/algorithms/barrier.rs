//! Barriers: no node leaves before every node has arrived.
//!
//! Two schedules of zero-byte signals: the dissemination barrier (any p) and the
//! butterfly barrier of the hypercube; the runtime's own barrier before every iteration
//! is one of them (`runtime`). A signal costs t_s + t_h l (l links, no payload).

use bytes::Bytes;
use topocomm_proto::TopologyKind;
use topocomm_proto::frame::{SYSTEM_TAG_BASE, Tag};
use topocomm_proto::spec::{Algorithm, Collective};

use super::phases::{BARRIER_BUTTERFLY, BARRIER_FOLD, SINGLE};
use crate::comm::{Comm, CommError};

/// Tag of the `barrier` collective's own rounds (below the runtime's range).
const BARRIER_TAG: Tag = SINGLE.tag(0);

/// Runs the barrier `algorithm` names.
pub async fn run(comm: &Comm, algorithm: Algorithm) -> Result<(), CommError> {
    match algorithm {
        // Each algorithm's future in a box of its own size (see `super::run`).
        Algorithm::Dissemination => Box::pin(dissemination(comm, BARRIER_TAG)).await,
        Algorithm::Hypercube => Box::pin(hypercube(comm)).await,
        other => Err(super::unsupported(comm, Collective::Barrier, other)),
    }
}

/// Tags of the runtime's own barrier (before every iteration), out of the algorithms' range.
pub const RUNTIME_BARRIER_TAG: Tag = SYSTEM_TAG_BASE;

/// The runtime's own barrier (before every iteration, on system tags that are never
/// emulated or counted): on a hypercube the butterfly, whose every round crosses one
/// link, so the nodes leave it within about a hop's time of one another and no node is
/// left forwarding barrier signals for others when the timed collective starts; on any
/// other topology dissemination (its signals may be forwarded).
pub async fn runtime(comm: &Comm) -> Result<(), CommError> {
    if comm.topology().kind() == TopologyKind::Hypercube {
        let tags = ButterflyTags {
            rounds: RUNTIME_BARRIER_TAG,
            signal: RUNTIME_BARRIER_TAG + 0x40,
            release: RUNTIME_BARRIER_TAG + 0x41,
        };
        butterfly_with(comm, tags).await
    } else {
        dissemination(comm, RUNTIME_BARRIER_TAG).await
    }
}

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
        comm.exchange(to, from, tag_base + round, Bytes::new()).await?;
        distance *= 2;
        round += 1;
    }
    Ok(())
}

/// Butterfly barrier on the hypercube: the communication pattern of the all-to-all
/// broadcast of Algorithm 4.7 with empty messages. After exchange k a node has heard,
/// directly or through earlier exchanges, from every node of its (k+1)-dimensional
/// subcube, so after log q exchanges every core node has heard from all q.
///
/// For p not a power of two the core is the largest power of two q ≤ p; each extra node
/// e ≥ q folds into its partner e - q: it signals the partner before the partner's first
/// exchange and is released by it after the last.
///
/// ```text
/// q := 2^⌊log2 p⌋                          /* the core: nodes 0..q-1 */
/// if my_id ≥ q then                         /* an extra node */
///     send signal to my_id - q
///     receive release from my_id - q
/// else
///     if my_id + q < p then receive signal from my_id + q
///     for k := 0 to log2 q - 1 do
///         send signal to my_id XOR 2^k
///         receive signal from my_id XOR 2^k
///     if my_id + q < p then send release to my_id + q
/// ```
///
/// Steps: log2 p when p is a power of two, ⌊log2 p⌋ + 2 otherwise. Cost
/// (t_s + t_h l) per step, l = 1 on a hypercube.
pub async fn hypercube(comm: &Comm) -> Result<(), CommError> {
    let (butterfly, fold) = (BARRIER_BUTTERFLY, BARRIER_FOLD);
    butterfly_with(comm, ButterflyTags { rounds: butterfly.tag(0), signal: fold.tag(0), release: fold.tag(1) }).await
}

/// The tags of one butterfly barrier: round k uses `rounds + k`.
struct ButterflyTags {
    rounds: Tag,
    signal: Tag,
    release: Tag,
}

/// [`hypercube`] on the given tags.
async fn butterfly_with(comm: &Comm, tags: ButterflyTags) -> Result<(), CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let q = 1 << p.ilog2(); // p ≥ 1
    let ButterflyTags { rounds, signal, release } = tags;
    if my_id >= q {
        comm.send(my_id - q, signal, Bytes::new()).await?;
        comm.recv(my_id - q, release).await?;
        return Ok(());
    }
    let extra = (my_id + q < p).then_some(my_id + q);
    if let Some(extra) = extra {
        comm.recv(extra, signal).await?;
    }
    for k in 0..q.trailing_zeros() as usize {
        let partner = my_id ^ (1 << k);
        comm.exchange(partner, partner, rounds + k as Tag, Bytes::new()).await?;
    }
    if let Some(extra) = extra {
        comm.send(extra, release, Bytes::new()).await?;
    }
    Ok(())
}
