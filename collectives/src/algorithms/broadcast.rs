//! One-to-all broadcast: the root's message ends on every node.
//!
//! Seven schedules, one per [`Algorithm`]: the naive linear one, the store-and-forward
//! ring and mesh broadcasts of [KGGK94 3.2], the hypercube broadcast of Algorithm 4.2,
//! the cut-through ring broadcast of [GGKK 4.1.1] (recursive doubling), the
//! large-message broadcast of [GGKK 4.7] (a scatter followed by an all-gather), and the
//! two-level one of [`super::two_level`]. Costs
//! are for store-and-forward routing when the schedule runs on the topology it was made
//! for (every message crosses one link): t_s start-up, t_w per byte, m bytes. On
//! another topology the same schedule still works; its messages then travel the
//! topology's routes and share links.
//!
//! The building blocks (line groups, grids, relabelling) live in [`super::patterns`]
//! and are shared with the dual, [`super::reduce`]; the tags in [`super::phases`].

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};
use topocomm_proto::{NodeId, catalogue};

use super::Running;
use super::allgather::allgather_layout;
use super::blocks::BlockLayout;
use super::hierarchy::Hierarchy;
use super::patterns::{Grid, LineGroup, Relabelling, broadcast_along};
use super::phases::{self, BROADCAST_LENGTH, Phase, SINGLE};
use super::scatter_gather::scatter_layout;
use super::tree::{BinomialTree, broadcast_down};
use super::two_level;
use crate::comm::{Comm, CommError, MessageError};

/// Runs the broadcast `algorithm` names. Non-roots pass an empty `message`; every node
/// returns the root's.
pub fn run(comm: &Comm, algorithm: Algorithm, root: NodeId, message: Bytes) -> Running<'_> {
    if root >= comm.p() {
        return super::failed(CommError::NoSuchPeer { me: comm.id(), peer: root, p: comm.p() });
    }
    match algorithm {
        // Each algorithm's future in a box of its own size, handed to the caller (see `super::run`).
        Algorithm::Linear => Box::pin(linear(comm, root, message)),
        Algorithm::Ring => Box::pin(ring(comm, root, message)),
        Algorithm::Mesh => Box::pin(mesh(comm, root, message)),
        Algorithm::Hypercube => Box::pin(hypercube(comm, root, message)),
        Algorithm::RecursiveDoubling => Box::pin(recursive_doubling(comm, root, message)),
        Algorithm::ScatterAllgather => Box::pin(scatter_allgather(comm, root, message)),
        Algorithm::TwoLevel => Box::pin(two_level::broadcast(comm, Hierarchy::of(comm.topology()), root, message)),
        other => super::failed(super::unsupported(comm, Collective::Broadcast, other)),
    }
}

/// Linear broadcast: the root sends the message to every other node in turn (the naive
/// p - 1 step baseline of [GGKK 4.1]).
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
    let phase = SINGLE;
    if my_id == root {
        for k in 1..p {
            comm.send((root + k) % p, phase.tag(k), message.clone()).await?;
        }
        Ok(message)
    } else {
        let k = (my_id + p - root) % p;
        comm.recv(root, phase.tag(k)).await
    }
}

/// Ring broadcast ([KGGK94 3.2, Fig. 3.2], store-and-forward on a ring): the root sends
/// the message both ways round the ring 0, 1, ..., p-1; the clockwise half gets
/// distances 1..=⌊p/2⌋, the counter-clockwise half 1..=⌊(p-1)/2⌋, and every node
/// receives from its predecessor and passes the message on if it must go further.
///
/// ```text
/// broadcast X along the ring of all nodes from root   /* see broadcast_along */
/// ```
///
/// Steps: ⌈p/2⌉ (the root's two sends take the first two). Cost (t_s + t_w m)⌈p/2⌉.
pub async fn ring(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    broadcast_along(comm, &LineGroup::ring(comm.p()), root, message, SINGLE).await
}

/// Mesh broadcast ([GGKK 4.1.2], [KGGK94 Fig. 3.4], store-and-forward): a ring (torus)
/// or line (mesh) broadcast along the root's row, then every node of that row
/// broadcasts along its column; on a 3-D grid a third phase runs along the last
/// remaining dimension. The grid is the topology's own on a mesh, torus, mesh3d or
/// torus3d, the squarest 2-D grid of p otherwise; lines wrap only on a torus or
/// torus3d.
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
            x = broadcast_along(comm, &line, root_coords[dim], x, phases::grid_dimension(phase)).await?;
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
/// A node's sends go in turn ([`Comm::send_in_turn`]): up to 1 MiB, each returns once
/// its link has written the message, as the textbook's steps follow one another.
///
/// Steps: d = ⌈log2 p⌉. Cost (t_s + t_w m) log p.
pub async fn hypercube(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    hypercube_in(comm, root, message, SINGLE).await
}

/// [`hypercube`] with its messages tagged in `phase` (for a broadcast that is one part
/// of a larger schedule).
async fn hypercube_in(comm: &Comm, root: NodeId, message: Bytes, phase: Phase) -> Result<Bytes, CommError> {
    let tree = BinomialTree::new(root, comm.p(), comm.id());
    broadcast_down(comm, &tree, |id| id, message, phase).await
}

/// Recursive-doubling broadcast, the cut-through ring broadcast of [GGKK 4.1.1]
/// ([KGGK94 Fig. 3.6]): in step i the holders send to the node at distance p/2^i, all
/// messages flowing the same way round the ring, so no two of a step share a link.
///
/// Virtual ids v = (my_id - root) mod p put the root at 0. For any p the distances come
/// from interval halving: the holder of the interval [lo, hi) (it sits at lo) hands the
/// upper part [mid, hi), mid = lo + ⌈(hi - lo)/2⌉, to node mid and keeps [lo, mid);
/// when p is a power of two, mid - lo is p/2^i in step i, as in the textbook.
///
/// ```text
/// v := (my_id - root) mod p
/// lo := 0; hi := p                     /* the interval I am in; its holder sits at lo */
/// for i := 1 while hi - lo > 1 do
///     mid := lo + ⌈(hi - lo)/2⌉
///     if v = lo then send X to mid     /* a distance of p/2^i */
///     else if v = mid then receive X from lo
///     if v < mid then hi := mid else lo := mid
/// ```
///
/// Steps: ⌈log2 p⌉. Cost t_s log p + t_w m log p + t_h (p - 1) with cut-through routing
/// on a ring (the distances on the way to the last node add up to p - 1 hops); with
/// store-and-forward, where a message over l links costs t_s + l (t_h + t_w m), it is
/// t_s log p + (t_h + t_w m)(p - 1). The ring's routes take the shorter way, so on an
/// odd ring the first message may go round the other way; it travels alone, so links
/// are still never shared. A holder's sends go in turn ([`Comm::send_in_turn`]).
pub async fn recursive_doubling(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let labels = Relabelling::Rotate { root, p };
    let phase = SINGLE;
    let v = labels.to_virtual(my_id);
    let mut x = message;
    let (mut lo, mut hi) = (0, p);
    let mut i = 1;
    while hi - lo > 1 {
        let mid = lo + (hi - lo).div_ceil(2);
        if v == lo {
            comm.send_in_turn(labels.to_physical(mid), phase.tag(i), [x.clone()]).await?;
        } else if v == mid {
            x = comm.recv(labels.to_physical(lo), phase.tag(i)).await?;
        }
        if v < mid {
            hi = mid;
        } else {
            lo = mid;
        }
        i += 1;
    }
    Ok(x)
}

/// Scatter-allgather broadcast for large messages ([GGKK 4.7], as in MPI libraries:
/// [Thakur 2005]): the root cuts its message into p pieces, scatters them, and an
/// all-gather hands every node every piece; the busiest node then sends about 2m bytes
/// instead of the m log p of the binomial tree.
///
/// Non-roots do not know the message's length, and the scatter and all-gather need the
/// same cut on every node, so the root first broadcasts the length (8 bytes, binomial
/// tree): ⌈log p⌉ extra small messages, ⌈log p⌉ (t_s + 8 t_w). The pieces are
/// `BlockLayout::split(n, p, a)` with a the largest of 8, 4, 1 dividing n, so that no
/// element of any dtype is cut in two (the broadcast itself does not know the dtype).
///
/// ```text
/// n := broadcast the length of X from root        /* hypercube (binomial) broadcast */
/// layout := n bytes cut into p near-equal aligned pieces; piece i for node i
/// piece := scatter the pieces of X from root      /* hypercube (binomial) scatter */
/// X := all-gather the pieces      /* the topology's: Algorithm 4.4 on a ring, 4.6 on
///                                    a grid, 4.7 (recursive doubling) elsewhere */
/// ```
///
/// The all-gather is the one made for the topology, so that its every message crosses
/// one link (the ring of ids would cross up to log p on a hypercube).
///
/// Steps (the longest chain of messages): the length runs down the same binomial tree
/// as the scatter, one message ahead of it, so the two together take ⌈log p⌉; then the
/// all-gather's: p - 1 on a ring, log p on a hypercube, so ⌈log p⌉ + p - 1 and 2 log p.
/// Cost on a ring ⌈log p⌉ (t_s + 8 t_w) + t_s log p + t_w m (p-1)/p +
/// (p - 1)(t_s + t_w m/p) = t_s (2 log p + p - 1) + 2 t_w m (p-1)/p + 8 t_w log p; on a
/// hypercube, where each link carries the length just before the scatter's piece, one
/// message time more than the chain: (2 log p + 1)(t_s + t_h) + 2 t_w m (p-1)/p + 8 t_w
/// (store-and-forward, the pieces of equal size; what the cost model computes).
pub async fn scatter_allgather(comm: &Comm, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    let length = Bytes::copy_from_slice(&(message.len() as u64).to_le_bytes());
    let length = hypercube_in(comm, root, length, BROADCAST_LENGTH).await?;
    let n = decode_length(comm, &length)?;
    let alignment = [8, 4, 1].into_iter().find(|a| n % a == 0).unwrap_or(1);
    let layout = BlockLayout::split(n, comm.p(), alignment);
    let piece = scatter_layout(comm, Algorithm::Hypercube, root, &layout, message).await?;
    let allgather = catalogue::default_algorithm(Collective::Allgather, comm.topology().kind());
    allgather_layout(comm, allgather, &layout, piece).await
}

/// The message length the root broadcast, as 8 little-endian bytes.
fn decode_length(comm: &Comm, length: &[u8]) -> Result<usize, CommError> {
    let malformed = |reason: String| CommError::Link { me: comm.id(), cause: MessageError::Malformed(reason) };
    let bytes: [u8; 8] = length
        .try_into()
        .map_err(|_| malformed(format!("the broadcast length is {} bytes long, not 8", length.len())))?;
    usize::try_from(u64::from_le_bytes(bytes))
        .map_err(|_| malformed("the broadcast length does not fit in memory".into()))
}
