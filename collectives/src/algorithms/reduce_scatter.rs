//! All-to-all reduction (reduce-scatter): node i ends with the reduction of every node's
//! block i.
//!
//! Three schedules: the ring of Algorithm 4.5; the hypercube of Algorithm 4.8, which is
//! also recursive halving ([Thakur 2005], [Rabenseifner 2004]), so the two catalogue
//! names run one schedule, folded for any p (see [`super::folding`]); and the pairwise
//! exchange of MPI libraries ([Thakur 2005]). Each is the dual of an all-gather in
//! [`super::allgather`]: the same messages in reverse, each node combining what it
//! receives into its partial sums. Costs are for store-and-forward routing on the
//! topology each schedule was made for: t_s start-up, t_w per byte, m bytes per block,
//! plus the combines.
//!
//! Every schedule is layout-general ([`reduce_scatter_layout`]): the vector is cut into
//! the blocks of a [`BlockLayout`], whatever their lengths, and node i ends with the
//! reduction of every node's block i. [`run`] is the uniform case. The building blocks
//! other collectives reuse are public: [`reduce_scatter_ring_along`] (Algorithm 4.5 on
//! any ring order) and [`halving`] (the core of Algorithm 4.8 on virtual ids).
//!
//! Combining goes through [`Reduction::combine`]; a block that cannot be combined
//! (lengths differ, partial elements) fails the run with `CommError::Elements`.
//!
//! Tags: the `REDUCE_SCATTER_*` phases of [`super::phases`], apart from every other
//! family's.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use super::blocks::BlockLayout;
use super::folding::{CoreBlocks, Fold, Part, expect_layout_len, expect_one_block_per_node};
use super::patterns::{LineGroup, Reduction, RingOrder};
use super::phases::{Phase, REDUCE_SCATTER_FOLD, REDUCE_SCATTER_HALVING, REDUCE_SCATTER_PAIRWISE, REDUCE_SCATTER_RING};
use crate::comm::{Comm, CommError};

/// Runs the reduce-scatter `algorithm` names; `blocks` holds p blocks of `block` bytes,
/// and node i returns the reduction of every node's block i.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    blocks: Bytes,
    block: usize,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let layout = BlockLayout::uniform(comm.p(), block);
    reduce_scatter_layout(comm, algorithm, &layout, blocks, reduction).await
}

/// The reduce-scatter of a vector cut by `layout` (one block per node, of any lengths):
/// every node brings a `vector` of `layout.total()` bytes, and node i returns the
/// reduction of every node's block i (`layout.len(i)` bytes). Every reduce-scatter
/// algorithm (ring, hypercube, recursive halving, pairwise) is served.
pub async fn reduce_scatter_layout(
    comm: &Comm,
    algorithm: Algorithm,
    layout: &BlockLayout,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    expect_one_block_per_node(comm, layout, "reduce-scatter")?;
    expect_layout_len(comm, &vector, layout.total())?;
    match algorithm {
        // Each algorithm's future in a box of its own size (see `super::run`).
        Algorithm::Ring => Box::pin(ring(comm, layout, vector, reduction)).await,
        Algorithm::Hypercube | Algorithm::RecursiveHalving => {
            Box::pin(recursive_halving(comm, layout, vector, reduction)).await
        }
        Algorithm::Pairwise => Box::pin(pairwise(comm, layout, vector, reduction)).await,
        other => Err(super::unsupported(comm, Collective::ReduceScatter, other)),
    }
}

/// Ring reduce-scatter: Algorithm 4.5 (ALL_TO_ALL_RED_RING) on the ring 0, 1, ..., p-1.
///
/// ```text
/// result := reduce_scatter_ring_along(0, 1, ..., p-1)   /* see reduce_scatter_ring_along */
/// ```
///
/// Steps: p - 1. Cost (t_s + t_w m)(p - 1), plus p - 1 combines of m bytes.
pub async fn ring(comm: &Comm, layout: &BlockLayout, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let ring = LineGroup::ring(comm.p()).ring_order();
    reduce_scatter_ring_along(comm, &ring, layout, vector, reduction, REDUCE_SCATTER_RING).await
}

/// Hypercube reduce-scatter, which is also recursive halving: Algorithm 4.8
/// (ALL_TO_ALL_RED_HCUBE) on the folded core of [`super::folding`]. [Thakur 2005]
/// states the same schedule as halving the vector each step with the partner at
/// distance p/2, p/4, ..., 1: the partner at distance 2^i is my_id XOR 2^i.
///
/// ```text
/// fold in:  an extra node sends its whole vector to its partner, which combines it in
/// core:     result := halving(my virtual id, msg)   /* Algorithm 4.8, see halving */
///           /* a partner's result covers its own block and its extra node's */
/// unfold:   a partner sends the extra node's block to it
/// ```
///
/// Steps: log p on 2^d nodes; ⌊log p⌋ + 2 otherwise. Cost t_s log p + t_w m(p - 1) on a
/// hypercube, plus the combines; folding adds 2t_s + t_w m(p + 1) and one combine of pm.
pub async fn recursive_halving(
    comm: &Comm,
    layout: &BlockLayout,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let fold = Fold::new(comm.p());
    let combine = |own: Bytes, extra: Bytes| reduction.combine(comm, own, &extra);
    match fold.fold_in(comm, REDUCE_SCATTER_FOLD.tag(0), vector, combine).await? {
        Part::Folded { partner } => {
            let result = comm.recv(partner, REDUCE_SCATTER_FOLD.tag(1)).await?;
            expect_layout_len(comm, &result, layout.len(comm.id()))?;
            Ok(result)
        }
        Part::Core { virtual_id, extra, data } => {
            let blocks = fold.core_blocks(layout);
            let result = halving(comm, &fold, virtual_id, &blocks, data, reduction, REDUCE_SCATTER_HALVING).await?;
            let own = layout.len(comm.id());
            fold.unfold(comm, extra, REDUCE_SCATTER_FOLD.tag(1), result.slice(own..)).await?;
            Ok(result.slice(..own))
        }
    }
}

/// The core of Algorithm 4.8, line by line, on the q = 2^d core nodes of `fold` (virtual
/// ids; `msg` is the whole vector, core node v's part of it the blocks `blocks` gives v).
/// The pseudocode's recloc/senloc bookkeeping is the range `held` of core nodes whose
/// blocks `msg` still holds: those that agree with my_id above bit i.
///
/// ```text
/// held := 0 .. q - 1
/// for i := d - 1 downto 0 do
///     partner := my_id XOR 2^i
///     split held into the half whose bit i is mine (recloc) and the other (senloc)
///     send msg[senloc] to partner
///     receive temp from partner                     /* its msg[recloc] */
///     msg := msg[recloc] + temp; held := recloc
/// result := msg                                      /* = msg[my_id] */
/// ```
///
/// Every core node returns the reduction, over all core nodes, of its own blocks. The
/// exchange of dimension i carries tag `phase.tag(i)`.
///
/// Steps: d. Cost t_s d + t_w (M - m_v) for M bytes in all (t_s log p + t_w m(p - 1) for
/// p blocks of m), plus the combines.
pub async fn halving(
    comm: &Comm,
    fold: &Fold,
    my_id: usize,
    blocks: &CoreBlocks<'_>,
    msg: Bytes,
    reduction: Reduction,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let mut held = 0..fold.q();
    let mut msg = msg;
    for i in (0..fold.dimension()).rev() {
        let partner = my_id ^ (1 << i);
        let middle = held.start + (1 << i);
        let (recloc, senloc) = if my_id < middle {
            (held.start..middle, middle..held.end)
        } else {
            (middle..held.end, held.start..middle)
        };
        let base = blocks.span(held.clone()).start;
        let part = |nodes| {
            let span = blocks.span(nodes);
            msg.slice(span.start - base..span.end - base)
        };
        let to = fold.physical(partner);
        let temp = comm.exchange(to, to, phase.tag(i), part(senloc)).await?;
        msg = reduction.combine(comm, temp, &part(recloc.clone()))?;
        held = recloc;
    }
    Ok(msg)
}

/// Pairwise reduce-scatter (MPI libraries): step i sends block (my_id + i) mod p to the
/// node it belongs to and receives this node's block from (my_id - i) mod p.
///
/// ```text
/// result := msg[my_id]
/// for i := 1 to p - 1 do
///     send msg[(my_id + i) mod p] to (my_id + i) mod p
///     receive temp from (my_id - i) mod p
///     result := result + temp
/// ```
///
/// Steps: p - 1. Cost (t_s + t_w m)(p - 1) on a fully connected network, plus p - 1
/// combines; elsewhere step i's messages travel i apart.
pub async fn pairwise(comm: &Comm, layout: &BlockLayout, msg: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let mut result = layout.slice(&msg, my_id..my_id + 1);
    for i in 1..p {
        let (dest, source) = ((my_id + i) % p, (my_id + p - i) % p);
        let block = layout.slice(&msg, dest..dest + 1);
        let temp = comm.exchange(dest, source, REDUCE_SCATTER_PAIRWISE.tag(i), block).await?;
        result = reduction.combine(comm, temp, &result)?;
    }
    Ok(result)
}

/// Algorithm 4.5 (ALL_TO_ALL_RED_RING), line by line, on the ring `ring` (every member
/// calls it; neighbours in the ring order, and the last and the first, are left and right).
/// Block j of `layout` belongs to the member at position j; every member returns the
/// reduction of every member's block of its own position.
///
/// ```text
/// left := ring[k - 1]; right := ring[k + 1]   /* k: my position, mod n */
/// recv := 0
/// for i := 1 to n - 1 do
///     j := (k + i) mod n
///     temp := msg[j] + recv
///     send temp to left
///     receive recv from right
/// result := msg[k] + recv
/// ```
///
/// Step i carries tag `phase.tag(i)`. Steps: n - 1. Cost (t_s + t_w m)(n - 1), plus
/// n - 1 combines of m bytes.
pub async fn reduce_scatter_ring_along(
    comm: &Comm,
    ring: &RingOrder<'_>,
    layout: &BlockLayout,
    msg: Bytes,
    reduction: Reduction,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let (n, k) = (ring.len(), ring.my_position(comm)?);
    let left = ring.at((k + n - 1) % n);
    let right = ring.at((k + 1) % n);
    // msg[j] + recv, where recv = 0 before the first receive.
    let plus = |j: usize, recv: Option<Bytes>| {
        let block = layout.slice(&msg, j..j + 1);
        match recv {
            None => Ok(block),
            Some(recv) => reduction.combine(comm, recv, &block),
        }
    };
    let mut recv = None;
    for i in 1..n {
        let j = (k + i) % n;
        let temp = plus(j, recv)?;
        comm.send(left, phase.tag(i), temp).await?;
        recv = Some(comm.recv(right, phase.tag(i)).await?);
    }
    plus(k, recv)
}
