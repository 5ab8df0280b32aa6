//! One-to-all broadcast: the root's message ends on every node.
//!
//! Four schedules, one per [`Algorithm`]: the naive linear one, the store-and-forward
//! ring and mesh broadcasts of seed 002, and the hypercube broadcast of Algorithm 4.2.
//! Costs are for store-and-forward routing when the schedule runs on the topology it
//! was made for (every message crosses one link): t_s start-up, t_w per byte, m bytes.
//! On another topology the same schedule still works; its messages then travel the
//! topology's routes and share links.
//!
//! The building blocks (line groups, grids, relabelling, tags) live in
//! [`super::patterns`] and are shared with the dual, [`super::reduce`].

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::spec::{Algorithm, Collective};

use super::patterns::{Grid, LineGroup, Phase, Relabelling, broadcast_along, hypercube_dimension};
use crate::comm::{Comm, CommError};

/// Runs the broadcast `algorithm` names. Non-roots pass an empty `message`; every node
/// returns the root's.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    message: Bytes,
) -> Result<Bytes, CommError> {
    if root >= comm.p() {
        return Err(CommError::NoSuchPeer {
            me: comm.id(),
            peer: root,
            p: comm.p(),
        });
    }
    match algorithm {
        Algorithm::Linear => linear(comm, root, message).await,
        Algorithm::Ring => ring(comm, root, message).await,
        Algorithm::Mesh => mesh(comm, root, message).await,
        Algorithm::Hypercube => hypercube(comm, root, message).await,
        other => Err(super::unsupported(comm, Collective::Broadcast, other)),
    }
}

/// Linear broadcast: the root sends the message to every other node in turn (the naive
/// p - 1 step baseline of seed 002).
///
/// ```text
/// if my_id = root then
///     for k := 1 to p - 1 do send X to (root + k) mod p
/// else
///     receive X from root
/// ```
///
/// Steps: p - 1, all from the root. Cost (p - 1)(t_s + t_w m) on a fully connected
/// network; elsewhere each message crosses l links, (t_s + t_w m l) each.
pub async fn linear(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = Phase(0);
    if my_id == root {
        for k in 1..p {
            comm.send((root + k) % p, phase.tag(k), message.clone())
                .await?;
        }
        Ok(message)
    } else {
        let k = (my_id + p - root) % p;
        comm.recv(root, phase.tag(k)).await
    }
}

/// Ring broadcast (seed 002, "Store-and-forward Routing on Ring"): the root sends the
/// message both ways round the ring 0, 1, ..., p-1; the clockwise half gets distances
/// 1..=⌊p/2⌋, the counter-clockwise half 1..=⌊(p-1)/2⌋, and every node receives from its
/// predecessor and passes the message on if it must go further.
///
/// ```text
/// broadcast X along the ring of all nodes from root   /* see broadcast_along */
/// ```
///
/// Steps: ⌈p/2⌉ (the root's two sends take the first two). Cost (t_s + t_w m)⌈p/2⌉.
pub async fn ring(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    broadcast_along(comm, &LineGroup::ring(comm.p()), root, message, Phase(0)).await
}

/// Mesh broadcast (seed 002, "Store-and-forward Routing on 2d Torus"): a ring (torus) or
/// line (mesh) broadcast along the root's row, then every node of that row broadcasts
/// along its column; on a 3-D grid a third phase runs along the last remaining
/// dimension. The grid is the topology's own on a mesh, torus, mesh3d or torus3d, the
/// squarest 2-D grid of p otherwise; lines wrap only on a torus or torus3d.
///
/// ```text
/// for dim := last downto 0 do          /* 2-D: the row (dim 1), then the columns (dim 0) */
///     if my coordinates before dim equal the root's then   /* I hold X by now, or get it */
///         X := broadcast X along my line of dim from the root's coordinate in dim
/// ```
///
/// Steps: Σ over dims of ⌈k/2⌉ on a torus of extents k (2⌈√p/2⌉ for √p x √p), at most
/// Σ (k - 1) on a mesh. Cost (t_s + t_w m) times the steps.
pub async fn mesh(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    let grid = Grid::of(comm.topology());
    let (my_coords, root_coords) = (grid.coords(comm.id()), grid.coords(root));
    let mut x = message;
    for (phase, dim) in (0..grid.dims().len()).rev().enumerate() {
        if my_coords[..dim] == root_coords[..dim] {
            let line = grid.line(comm.id(), dim);
            x = broadcast_along(comm, &line, root_coords[dim], x, Phase(phase as u8)).await?;
        }
    }
    Ok(x)
}

/// Hypercube broadcast: Algorithm 4.2 (GENERAL_ONE_TO_ALL_BC), line by line, with
/// d = log2 p and virtual id = my_id XOR source when p is a power of two.
///
/// For any other p this is its MPI-style extension, the binomial tree: virtual id =
/// (my_id - root) mod p, d = ⌈log2 p⌉, and a send to a virtual partner ≥ p is skipped
/// (that node does not exist; nobody waits for it).
///
/// Steps: d = ⌈log2 p⌉. Cost (t_s + t_w m) log p.
pub async fn hypercube(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let d = hypercube_dimension(p);
    let labels = Relabelling::new(root, p);
    let phase = Phase(0);
    let mut x = message;
    let my_virtual_id = labels.to_virtual(my_id);
    let mut mask = (1usize << d) - 1;
    for i in (0..d).rev() {
        mask ^= 1 << i;
        if my_virtual_id & mask == 0 {
            if my_virtual_id & (1 << i) == 0 {
                let virtual_dest = my_virtual_id ^ (1 << i);
                if virtual_dest < p {
                    comm.send(labels.to_physical(virtual_dest), phase.tag(i), x.clone())
                        .await?;
                }
            } else {
                let virtual_source = my_virtual_id ^ (1 << i);
                x = comm
                    .recv(labels.to_physical(virtual_source), phase.tag(i))
                    .await?;
            }
        }
    }
    Ok(x)
}
