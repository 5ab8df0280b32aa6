//! All-to-one reduction: the element-wise reduction of every node's vector ends on the root.
//!
//! Each schedule is the dual of a broadcast in [`super::broadcast`] — linear, ring, mesh
//! and hypercube of the broadcast of the same name, recursive halving of its recursive
//! doubling — the same messages in reverse order and direction, each node combining what
//! it receives into its partial result before passing that on. Costs are those of the
//! broadcast plus the combines (store-and-forward, on the topology each schedule was
//! made for, unless stated; t_s start-up, t_h per hop, t_w per byte, m bytes per
//! vector). The large-message reduce-scatter-gather composes a reduce-scatter
//! ([`super::reduce_scatter`]) and a gather ([`super::scatter_gather`]), the dual of
//! the scatter-allgather broadcast. The two-level reduction is [`super::two_level`]'s.
//!
//! Combining goes through [`topocomm_proto::elements::combine`]; a vector that cannot be
//! combined (lengths differ, partial elements) fails the run with `CommError::Elements`.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective, Dtype, ReduceOp};
use topocomm_proto::{NodeId, catalogue};

use super::Running;
use super::blocks::BlockLayout;
use super::hierarchy::Hierarchy;
use super::patterns::{Grid, LineGroup, Reduction, Relabelling, reduce_along};
use super::phases::{self, SINGLE};
use super::reduce_scatter::reduce_scatter_layout;
use super::scatter_gather::gather_layout;
use super::tree::{BinomialTree, reduce_up};
use super::two_level;
use crate::comm::{Comm, CommError};

/// Runs the reduction `algorithm` names: the root returns the reduction of every node's
/// `vector` (`dtype` elements combined with `op`), every other node an empty buffer.
pub fn run(comm: &Comm, algorithm: Algorithm, root: NodeId, vector: Bytes, dtype: Dtype, op: ReduceOp) -> Running<'_> {
    if root >= comm.p() {
        return super::failed(CommError::NoSuchPeer { me: comm.id(), peer: root, p: comm.p() });
    }
    let reduction = Reduction { dtype, op };
    match algorithm {
        // Each algorithm's future in a box of its own size, handed to the caller (see `super::run`).
        Algorithm::Linear => Box::pin(linear(comm, root, vector, reduction)),
        Algorithm::Ring => Box::pin(ring(comm, root, vector, reduction)),
        Algorithm::Mesh => Box::pin(mesh(comm, root, vector, reduction)),
        Algorithm::Hypercube => Box::pin(hypercube(comm, root, vector, reduction)),
        Algorithm::RecursiveHalving => Box::pin(recursive_halving(comm, root, vector, reduction)),
        Algorithm::ReduceScatterGather => Box::pin(reduce_scatter_gather(comm, root, vector, reduction)),
        Algorithm::TwoLevel => {
            Box::pin(two_level::reduce(comm, Hierarchy::of(comm.topology()), root, vector, reduction))
        }
        other => super::failed(super::unsupported(comm, Collective::Reduce, other)),
    }
}

/// Linear reduction: the root receives every other node's vector and combines it into
/// its own (the naive p - 1 step baseline of [GGKK 4.1], dual of the linear broadcast).
///
/// ```text
/// if my_id = root then
///     sum := X
///     for k := 1 to p - 1 do receive Y from (root + k) mod p; sum := sum op Y
/// else
///     send X to root
/// ```
///
/// Steps: p - 1, all into the root. Cost (p - 1)(t_s + t_w m) on a fully connected
/// network (plus p - 1 combines); elsewhere each message crosses l links.
pub async fn linear(comm: &Comm, root: NodeId, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    if my_id == root {
        let mut sum = vector;
        for k in 1..p {
            let y = comm.recv((root + k) % p, phase.tag(k)).await?;
            sum = reduction.combine(comm, sum, &y)?;
        }
        Ok(sum)
    } else {
        let k = (my_id + p - root) % p;
        comm.send(root, phase.tag(k), vector).await?;
        Ok(Bytes::new())
    }
}

/// Ring reduction, dual of the ring broadcast ([KGGK94 3.2]): the two halves of the
/// ring 0, 1, ..., p-1 (clockwise distances 1..=⌊p/2⌋, counter-clockwise 1..=⌊(p-1)/2⌋)
/// each pass a running reduction from their far end towards the root, every node
/// combining its own vector in on the way.
///
/// ```text
/// reduce X along the ring of all nodes to root   /* see reduce_along */
/// ```
///
/// Steps: ⌈p/2⌉. Cost (t_s + t_w m)⌈p/2⌉ plus p - 1 combines, ⌈p/2⌉ on the longest path.
pub async fn ring(comm: &Comm, root: NodeId, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let result = reduce_along(comm, &LineGroup::ring(comm.p()), root, vector, reduction, SINGLE).await?;
    Ok(result.unwrap_or_default())
}

/// Mesh reduction, dual of the mesh broadcast: every column reduces towards the root's
/// row, then the root's row reduces to the root; on a 3-D grid the first dimension goes
/// first, then the second, then the root's row. Grid and wrapping as for the broadcast
/// (the topology's own grid on mesh/torus/mesh3d/torus3d, else the squarest 2-D grid;
/// ring method only on a torus or torus3d).
///
/// ```text
/// sum := X
/// for dim := 0 to last do              /* 2-D: the columns (dim 0), then the row (dim 1) */
///     reduce sum along my line of dim to the root's coordinate in dim
///     if I am not at the root's coordinate in dim then return   /* passed it on */
/// ```
///
/// Steps and cost: those of the mesh broadcast, plus the combines.
pub async fn mesh(comm: &Comm, root: NodeId, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let grid = Grid::of(comm.topology());
    let mut sum = vector;
    for (dim, &root_coordinate) in grid.coords(root).iter().enumerate() {
        let line = grid.line(comm.id(), dim);
        match reduce_along(comm, &line, root_coordinate, sum, reduction, phases::grid_dimension(dim)).await? {
            Some(partial) => sum = partial,
            None => return Ok(Bytes::new()),
        }
    }
    Ok(sum)
}

/// Hypercube reduction: Algorithm 4.3 (ALL_TO_ONE_REDUCE), line by line, with the
/// relabelling of Algorithm 4.2 so that any node can be the destination: virtual id =
/// my_id XOR root when p is a power of two (d = log2 p).
///
/// For any other p this is its MPI-style extension, the binomial tree: virtual id =
/// (my_id - root) mod p, d = ⌈log2 p⌉, and a receive from a virtual partner ≥ p is
/// skipped (that node does not exist).
///
/// Steps: d = ⌈log2 p⌉. Cost (t_s + t_w m) log p plus log p combines.
pub async fn hypercube(comm: &Comm, root: NodeId, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let tree = BinomialTree::new(root, comm.p(), comm.id());
    let combine = |sum: Bytes, x: Bytes| reduction.combine(comm, sum, &x);
    let sum = reduce_up(comm, &tree, |id| id, vector, combine, SINGLE).await?;
    Ok(sum.unwrap_or_default())
}

/// Recursive-halving reduction, the exact dual of the recursive-doubling broadcast
/// ([GGKK 4.1.1]; cut-through ring, [KGGK94 Fig. 3.6]): the same intervals in reverse
/// order, every message going the other way round the ring, the distances doubling from
/// 1 up to p/2.
///
/// Virtual ids v = (my_id - root) mod p. The broadcast splits [lo, hi) at
/// mid = lo + ⌈(hi - lo)/2⌉; here the node at mid, holding the reduction of [mid, hi),
/// sends it to the node at lo, which combines it into its reduction of [lo, mid).
///
/// ```text
/// v := (my_id - root) mod p
/// splits := the (lo, mid) the broadcast meets on its way to v, outermost first
/// sum := X
/// for (lo, mid) in splits, innermost first do
///     if v = lo then receive Y from mid; sum := sum op Y
///     else if v = mid then send sum to lo; return nothing
/// return sum                           /* only the root (v = 0) gets here */
/// ```
///
/// The combines keep node order (each appends the next higher interval), only the
/// grouping differs from the sequential reference. Steps: ⌈log2 p⌉. Cost
/// t_s log p + t_w m log p + t_h (p - 1) with cut-through routing on a ring, plus
/// log p combines.
pub async fn recursive_halving(
    comm: &Comm,
    root: NodeId,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let labels = Relabelling::Rotate { root, p };
    let phase = SINGLE;
    let v = labels.to_virtual(my_id);
    let mut splits = Vec::new();
    let (mut lo, mut hi) = (0, p);
    while hi - lo > 1 {
        let mid = lo + (hi - lo).div_ceil(2);
        splits.push((lo, mid));
        if v < mid {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut sum = vector;
    for (step, &(lo, mid)) in splits.iter().enumerate().rev() {
        let i = step + 1;
        if v == lo {
            let y = comm.recv(labels.to_physical(mid), phase.tag(i)).await?;
            sum = reduction.combine(comm, sum, &y)?;
        } else if v == mid {
            comm.send(labels.to_physical(lo), phase.tag(i), sum).await?;
            return Ok(Bytes::new());
        }
    }
    Ok(sum)
}

/// Reduce-scatter-gather reduction for large vectors ([GGKK 4.7]; [Rabenseifner 2004],
/// [Thakur 2005]: the halving of the halving-doubling all-reduce, with a gather in
/// place of the final all-gather; MPI libraries' large-message reduce): the vector is
/// cut into p element-aligned pieces, a reduce-scatter leaves the reduction of piece i
/// on node i, and a gather collects the reduced pieces on the root. The busiest node
/// then receives about 2m bytes instead of the m log p of the binomial tree, and each
/// node combines about m bytes instead of up to m log p.
///
/// ```text
/// layout := m bytes cut into p near-equal element-aligned pieces; piece i for node i
/// piece := reduce-scatter X over the pieces  /* the topology's: Algorithm 4.8
///                                              (recursive halving) on a hypercube or a
///                                              fully connected network, 4.5 (ring)
///                                              elsewhere */
/// sum := gather the pieces to root               /* hypercube (binomial) gather */
/// ```
///
/// Every node knows m (its own vector's length), so unlike the scatter-allgather
/// broadcast nothing travels ahead. The reduce-scatter is the one made for the
/// topology, so that its every message crosses one link. Steps: p - 1 + ⌈log p⌉ with
/// the ring, 2 log p with recursive halving. Cost with the ring
/// (p - 1)(t_s + t_w m/p) + t_s log p + t_w m (p-1)/p
/// = t_s (p - 1 + log p) + 2 t_w m (p-1)/p, plus (p - 1) combines of m/p bytes; with
/// recursive halving t_s 2 log p + 2 t_w m (p-1)/p, plus combines of m (p-1)/p bytes.
pub async fn reduce_scatter_gather(
    comm: &Comm,
    root: NodeId,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let layout = BlockLayout::split(vector.len(), comm.p(), reduction.dtype.size());
    let reduce_scatter = catalogue::default_algorithm(Collective::ReduceScatter, comm.topology().kind());
    let piece = reduce_scatter_layout(comm, reduce_scatter, &layout, vector, reduction).await?;
    gather_layout(comm, Algorithm::Hypercube, root, &layout, piece).await
}
