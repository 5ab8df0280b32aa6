//! All-reduce: every node ends with the element-wise reduction of every node's vector.
//!
//! Eight schedules, built from the pieces of the other families: a reduction to node 0
//! then a broadcast from it ([GGKK 4.3], over [`super::reduce::hypercube`] and
//! [`super::broadcast::hypercube`]); recursive doubling of the whole vector
//! ([GGKK 4.3], [Thakur 2005]); recursive halving then doubling of its pieces
//! ([Rabenseifner 2004]); the ring reduce-scatter then ring all-gather of its pieces;
//! the mesh one, a ring all-reduce along each row, then each column (then each
//! layer); and the three two-level ones of [`super::two_level`] (trees, a ring of leaders,
//! and many leaders a group). The power-of-two schedules
//! fold for any p (see [`super::folding`]). Costs are for store-and-forward routing on
//! the topology each schedule was made for: t_s start-up, t_w per byte, m bytes per
//! vector, plus the combines.
//!
//! The piece-wise schedules cut the vector into element-aligned pieces
//! ([`BlockLayout::split`]); a vector that is not a whole number of elements fails the
//! run with `CommError::Elements`, as does one of another length than its peers'.
//!
//! Tags: the `ALLREDUCE_*` phases of [`super::phases`], apart from every other family's
//! (the reduce-broadcast schedule uses those of the reduction and the broadcast it
//! calls).

use bytes::Bytes;
use topocomm_proto::elements::{ElementsError, element_count};
use topocomm_proto::spec::{Algorithm, Collective};

use super::Running;
use super::blocks::{BlockLayout, PlacedBlocks};
use super::folding::{CoreBlocks, Fold, Part};
use super::hierarchy::Hierarchy;
use super::patterns::{Grid, LineGroup, Reduction, RingOrder};
use super::phases::{
    self, ALLREDUCE_DOUBLING, ALLREDUCE_FOLD, ALLREDUCE_GATHER, ALLREDUCE_HALVING, ALLREDUCE_RING, Phase,
};
use super::{allgather, broadcast, reduce, reduce_scatter, two_level};
use crate::comm::{Comm, CommError};

/// Runs the all-reduce `algorithm` names: every node returns the reduction of every
/// node's `vector`.
pub fn run(comm: &Comm, algorithm: Algorithm, vector: Bytes, reduction: Reduction) -> Running<'_> {
    match algorithm {
        // Each algorithm's future in a box of its own size, handed to the caller (see `super::run`).
        Algorithm::ReduceBroadcast => Box::pin(reduce_broadcast(comm, vector, reduction)),
        Algorithm::RecursiveDoubling => Box::pin(recursive_doubling(comm, vector, reduction)),
        Algorithm::HalvingDoubling => Box::pin(halving_doubling(comm, vector, reduction)),
        Algorithm::Ring => Box::pin(ring(comm, vector, reduction)),
        Algorithm::Mesh => Box::pin(mesh(comm, vector, reduction)),
        Algorithm::TwoLevel => Box::pin(two_level::allreduce(comm, Hierarchy::of(comm.topology()), vector, reduction)),
        Algorithm::TwoLevelRing => {
            Box::pin(two_level::allreduce_ring(comm, Hierarchy::of(comm.topology()), vector, reduction))
        }
        Algorithm::MultiLeader => {
            Box::pin(two_level::allreduce_multi_leader(comm, Hierarchy::of(comm.topology()), vector, reduction))
        }
        other => super::failed(super::unsupported(comm, Collective::Allreduce, other)),
    }
}

/// Reduce, then broadcast ([GGKK 4.3]: an all-to-one reduction, then a one-to-all
/// broadcast of the sum): the binomial-tree reduction to node 0 (Algorithm 4.3), then
/// the broadcast from node 0 over the same tree in reverse (Algorithm 4.2).
///
/// ```text
/// sum := ALL_TO_ONE_REDUCE(my_msg, root 0)
/// result := ONE_TO_ALL_BC(sum, root 0)
/// ```
///
/// Steps: 2⌈log p⌉. Cost 2(t_s + t_w m)⌈log p⌉ plus ⌈log p⌉ combines.
pub async fn reduce_broadcast(comm: &Comm, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let sum = reduce::hypercube(comm, 0, vector, reduction).await?;
    broadcast::hypercube(comm, 0, sum).await
}

/// Recursive doubling ([GGKK 4.3], the all-to-all broadcast pattern with messages that
/// keep their size; [Thakur 2005]: nodes i and i + k exchange and add, k = 1, 2, ...,
/// p/2): log p exchanges of the whole vector, the partner at distance 2^i being my_id
/// XOR 2^i, on the folded core of [`super::folding`]. Partners combine the same two
/// partial sums, so every node ends with the same bits.
///
/// ```text
/// fold in:  an extra node sends my_msg to its partner, which combines it in
/// core:     sum := my_msg                              /* on virtual ids */
///           for i := 0 to d - 1 do
///               partner := my_id XOR 2^i
///               send sum to partner
///               receive x from partner
///               sum := sum + x
/// unfold:   a partner sends sum to its extra node
/// ```
///
/// Steps: log p on 2^d nodes; ⌊log p⌋ + 2 otherwise. Cost (t_s + t_w m) log p plus
/// log p combines on a hypercube; folding adds 2(t_s + t_w m) and one combine. On raw
/// links a long vector goes in segments, each combined as it comes
/// ([`Comm::exchange_combining`]): a node holds its input, its sum and about two
/// segments of its partner's, not a whole second vector.
pub async fn recursive_doubling(comm: &Comm, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let fold = Fold::new(comm.p());
    let combine = |own: Bytes, extra: Bytes| reduction.combine(comm, own, &extra);
    match fold.fold_in(comm, ALLREDUCE_FOLD.tag(0), vector, combine).await? {
        Part::Folded { partner } => comm.recv(partner, ALLREDUCE_FOLD.tag(1)).await,
        Part::Core { virtual_id, extra, data } => {
            let mut sum = comm.segments(data);
            let combine = |own, x| reduction.combine_segment(comm, own, x);
            for i in 0..fold.dimension() {
                let partner = fold.physical(virtual_id ^ (1 << i));
                sum = comm.exchange_combining(partner, ALLREDUCE_DOUBLING.tag(i), sum, combine).await?;
            }
            let sum = sum.into_bytes();
            fold.unfold(comm, extra, ALLREDUCE_FOLD.tag(1), sum.clone()).await?;
            Ok(sum)
        }
    }
}

/// Halving-doubling (Rabenseifner's all-reduce: [Rabenseifner 2004], [Thakur 2005]): a
/// reduce-scatter by recursive halving leaves each core node one fully reduced piece,
/// and an all-gather by recursive doubling — the same exchanges in reverse — hands
/// every piece to every node. It runs on the folded core of [`super::folding`], so the
/// vector is cut into q = 2^⌊log p⌋ element-aligned pieces, one per core node (pieces
/// for all p nodes would give the core nodes with an extra twice the load of the
/// others).
///
/// ```text
/// fold in:  an extra node sends my_msg to its partner, which combines it in
/// core:     cut my_msg into q pieces                   /* on virtual ids */
///           piece := halving(my_msg)                   /* Algorithm 4.8 */
///           result := doubling(piece)                  /* Algorithm 4.7 */
/// unfold:   a partner sends result to its extra node
/// ```
///
/// Steps: 2 log p on 2^d nodes; 2⌊log p⌋ + 2 otherwise. Cost 2t_s log p +
/// 2t_w m(p - 1)/p plus the combines of m(p - 1)/p bytes on a hypercube; folding adds
/// 2(t_s + t_w m) and one combine of m.
pub async fn halving_doubling(comm: &Comm, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    whole_elements(comm, &vector, reduction)?;
    let fold = Fold::new(comm.p());
    let combine = |own: Bytes, extra: Bytes| reduction.combine(comm, own, &extra);
    match fold.fold_in(comm, ALLREDUCE_FOLD.tag(0), vector, combine).await? {
        Part::Folded { partner } => comm.recv(partner, ALLREDUCE_FOLD.tag(1)).await,
        Part::Core { virtual_id, extra, data } => {
            let pieces = BlockLayout::split(data.len(), fold.q(), reduction.dtype.size());
            let blocks = CoreBlocks::identity(&pieces);
            let piece =
                reduce_scatter::halving(comm, &fold, virtual_id, &blocks, data, reduction, ALLREDUCE_HALVING).await?;
            let result = allgather::doubling(comm, &fold, virtual_id, &blocks, piece, ALLREDUCE_GATHER).await?;
            fold.unfold(comm, extra, ALLREDUCE_FOLD.tag(1), result.clone()).await?;
            Ok(result)
        }
    }
}

/// Ring all-reduce: the ring reduce-scatter (Algorithm 4.5) of the vector cut into p
/// element-aligned pieces, then the ring all-gather (Algorithm 4.4) of the reduced
/// pieces, on the ring 0, 1, ..., p-1.
///
/// ```text
/// result := allreduce_ring_along(0, 1, ..., p-1, my_msg)   /* see allreduce_ring_along */
/// ```
///
/// Steps: 2(p - 1). Cost 2(p - 1)(t_s + t_w m/p), plus p - 1 combines of m/p bytes.
pub async fn ring(comm: &Comm, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    allreduce_ring_along(comm, &LineGroup::ring(comm.p()).ring_order(), vector, reduction, ALLREDUCE_RING).await
}

/// Mesh all-reduce: a ring all-reduce along each row, then along each column of the row
/// sums (then, in 3-D, along each layer line), on the grid the topology has (see
/// [`Grid::of`]). A line that wraps (torus, torus3d) is its own ring; a line that does
/// not is walked as the ring 0, 2, 4, ..., 5, 3, 1 of its positions, whose every hop
/// spans at most two links and whose n hops use each link direction once
/// ([`LineGroup::ring_order`]).
///
/// ```text
/// sum := my_msg
/// for dim := last downto 0 do          /* 2-D: the row (dim 1), then the column (dim 0) */
///     sum := allreduce_ring_along(ring order of my line of dim, sum)
/// ```
///
/// Steps: Σ over dims of 2(k - 1) for extents k: 4(√p - 1) on a √p x √p torus. Cost
/// Σ 2(k - 1)(t_s + t_w m/k) there (twice the hop time per step on a mesh line).
pub async fn mesh(comm: &Comm, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let grid = Grid::of(comm.topology());
    let mut sum = vector;
    for (phase, dim) in (0..grid.dims().len()).rev().enumerate() {
        let line = grid.line(comm.id(), dim);
        let line_phases = phases::allreduce_grid_dimension(phase);
        sum = allreduce_ring_along(comm, &line.ring_order(), sum, reduction, line_phases).await?;
    }
    Ok(sum)
}

/// A ring all-reduce among the members of `ring` (every member calls it): the vector is
/// cut into one element-aligned piece per member, the ring reduce-scatter leaves the
/// member at position j the reduced piece j, and the ring all-gather hands every piece
/// to every member.
///
/// ```text
/// result := allreduce_ring_around(ring, my_msg, piece ↦ piece)   /* see allreduce_ring_around */
/// ```
///
/// The two halves carry the tags of `phases[0]` and `phases[1]`. Steps: 2(n - 1).
/// Cost 2(n - 1)(t_s + t_w m/n), plus n - 1 combines of m/n bytes.
pub async fn allreduce_ring_along(
    comm: &Comm,
    ring: &RingOrder<'_>,
    vector: Bytes,
    reduction: Reduction,
    phases: [Phase; 2],
) -> Result<Bytes, CommError> {
    allreduce_ring_around(comm, ring, vector, reduction, phases, async |piece| Ok(piece)).await
}

/// The ring all-reduce's two halves with `between` in the middle: the ring
/// reduce-scatter among the members of `ring` leaves the member at position j its
/// ring's sum of piece j, `between` turns that into the piece it hands on (the identity
/// for the ring all-reduce; an all-reduce of the piece with the j-th members of other
/// rings for the multi-leader all-reduce of [`super::two_level`]), and the ring
/// all-gather puts every member's piece in its place at every member.
///
/// ```text
/// cut my_msg into n pieces
/// piece := reduce_scatter::reduce_scatter_ring_along(ring, my_msg)     /* Algorithm 4.5 */
/// piece := between(piece)                                              /* same length */
/// result := ∪ of allgather::allgather_ring_along(ring, piece)     /* Algorithm 4.4, each piece to its place */
/// ```
///
/// The two halves carry the tags of `phases[0]` and `phases[1]`. Steps: 2(n - 1) and
/// those of `between`. A piece `between` returns at another length fails the run
/// (`CommError::Elements`) at the members it reaches.
pub async fn allreduce_ring_around(
    comm: &Comm,
    ring: &RingOrder<'_>,
    vector: Bytes,
    reduction: Reduction,
    phases: [Phase; 2],
    between: impl AsyncFnOnce(Bytes) -> Result<Bytes, CommError>,
) -> Result<Bytes, CommError> {
    whole_elements(comm, &vector, reduction)?;
    let pieces = BlockLayout::split(vector.len(), ring.len(), reduction.dtype.size());
    let piece = reduce_scatter::reduce_scatter_ring_along(comm, ring, &pieces, vector, reduction, phases[0]).await?;
    let piece = between(piece).await?;
    let mut result = PlacedBlocks::new(pieces);
    allgather::allgather_ring_along(comm, ring, piece, phases[1], |at, piece| {
        result.put(at, &piece).map_err(|len| {
            let mismatch = ElementsError::LengthMismatch { acc: pieces.len(at), other: len };
            comm.elements_error(mismatch)
        })
    })
    .await?;
    Ok(result.finish())
}

/// Refuses a vector that is not a whole number of elements (it cannot be cut into pieces).
fn whole_elements(comm: &Comm, vector: &Bytes, reduction: Reduction) -> Result<(), CommError> {
    element_count(reduction.dtype, vector.len()).map(|_| ()).map_err(|error| comm.elements_error(error))
}
