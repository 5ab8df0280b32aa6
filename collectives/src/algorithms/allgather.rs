//! All-to-all broadcast (all-gather): every node ends with every node's block, in node
//! order.
//!
//! Six schedules: the ring of Algorithm 4.4, the mesh of Algorithm 4.6 (rows, then
//! columns, then layers), the hypercube of Algorithm 4.7 — which is also recursive
//! doubling ([Thakur 2005]), so the two catalogue names run one schedule, folded for
//! any p (see [`super::folding`]) — Bruck's ⌈log p⌉-step schedule for any p
//! ([Bruck 1997]), and the neighbour exchange's p/2 steps on a ring of even p
//! ([Chen 2005]), and the two-level one of [`super::two_level`]. Costs are for store-and-forward routing on the topology each
//! schedule was made for: t_s start-up, t_w per byte, m bytes per block.
//!
//! Every schedule is layout-general ([`allgather_layout`]): node i brings block i of a
//! [`BlockLayout`], whatever its length, and every node ends with all blocks in layout
//! order. [`run`] is the uniform case. The building blocks other collectives reuse are
//! public: [`allgather_ring_along`] (Algorithm 4.4 on any ring order),
//! [`allgather_along`] (a row or column of a grid) and [`doubling`] (the core of
//! Algorithm 4.7 on virtual ids).
//!
//! Tags: the `ALLGATHER_*` phases of [`super::phases`], apart from every other
//! family's, so that a caller composing an all-gather with another collective in one
//! iteration (a scatter before it) never shares a tag with it.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use super::blocks::{BlockLayout, concat};
use super::folding::{CoreBlocks, Fold, Part, expect_layout_len, expect_one_block_per_node};
use super::hierarchy::Hierarchy;
use super::patterns::{Grid, LineGroup, RingOrder};
use super::phases::{
    self, ALLGATHER_BRUCK, ALLGATHER_DOUBLING, ALLGATHER_FOLD, ALLGATHER_NEIGHBOUR_EXCHANGE, ALLGATHER_RING, Phase,
};
use super::two_level;
use crate::comm::{Comm, CommError};

/// Runs the all-gather `algorithm` names: every node brings one block of the same length
/// and returns all p blocks in node order.
pub async fn run(comm: &Comm, algorithm: Algorithm, block: Bytes) -> Result<Bytes, CommError> {
    let layout = BlockLayout::uniform(comm.p(), block.len());
    allgather_layout(comm, algorithm, &layout, block).await
}

/// The all-gather of blocks laid out by `layout` (one block per node, of any lengths):
/// node i brings block i (`mine`, of `layout.len(i)` bytes) and every node returns the
/// `layout.total()` bytes of all blocks in layout order. Every all-gather algorithm
/// (ring, mesh, hypercube, recursive doubling, Bruck, neighbour exchange, two-level) is
/// served.
pub async fn allgather_layout(
    comm: &Comm,
    algorithm: Algorithm,
    layout: &BlockLayout,
    mine: Bytes,
) -> Result<Bytes, CommError> {
    expect_one_block_per_node(comm, layout, "allgather")?;
    expect_layout_len(comm, &mine, layout.len(comm.id()))?;
    match algorithm {
        // Each algorithm's future in a box of its own size (see `super::run`).
        Algorithm::Ring => Box::pin(ring(comm, mine)).await,
        Algorithm::Mesh => Box::pin(mesh(comm, mine)).await,
        Algorithm::Hypercube | Algorithm::RecursiveDoubling => Box::pin(recursive_doubling(comm, layout, mine)).await,
        Algorithm::Bruck => Box::pin(bruck(comm, layout, mine)).await,
        Algorithm::NeighbourExchange => Box::pin(neighbour_exchange(comm, layout, mine)).await,
        Algorithm::TwoLevel => Box::pin(two_level::allgather(comm, Hierarchy::of(comm.topology()), layout, mine)).await,
        other => Err(super::unsupported(comm, Collective::Allgather, other)),
    }
}

/// Ring all-gather: Algorithm 4.4 (ALL_TO_ALL_BC_RING) on the ring 0, 1, ..., p-1.
///
/// ```text
/// result := allgather_ring_along(0, 1, ..., p-1)   /* see allgather_ring_along */
/// ```
///
/// Steps: p - 1. Cost (t_s + t_w m)(p - 1).
pub async fn ring(comm: &Comm, mine: Bytes) -> Result<Bytes, CommError> {
    let parts = allgather_ring_parts(comm, &LineGroup::ring(comm.p()).ring_order(), mine, ALLGATHER_RING).await?;
    Ok(concat(&parts))
}

/// Mesh all-gather: Algorithm 4.6 (ALL_TO_ALL_BC_MESH), generalised to the grid the
/// topology has (see [`Grid::of`]): an all-gather along each row, then along each column
/// with every node's row result consolidated into one message, then (3-D) along each
/// layer line with the plane results. Ids are row-major, so what a node holds after each
/// phase is a contiguous run of blocks, and the line's parts in line order are that run
/// in layout order.
///
/// ```text
/// result := my_msg
/// for dim := last downto 0 do          /* 2-D: the row (dim 1), then the column (dim 0) */
///     result := ∪ of allgather_along(my line of dim, result)   /* in line order */
/// ```
///
/// A line that wraps (torus, torus3d) runs Algorithm 4.4; one that does not runs the line
/// schedule of [`allgather_along`], which takes as many steps with one-link messages only.
///
/// Steps: Σ over dims of (k - 1) for extents k: 2(√p - 1) on a √p x √p torus.
/// Cost 2t_s(√p - 1) + t_w m(p - 1) there (the column phase moves √p blocks per message).
pub async fn mesh(comm: &Comm, mine: Bytes) -> Result<Bytes, CommError> {
    let grid = Grid::of(comm.topology());
    let mut result = mine;
    for (phase, dim) in (0..grid.dims().len()).rev().enumerate() {
        let line = grid.line(comm.id(), dim);
        let parts = allgather_along(comm, &line, result, phases::allgather_grid_dimension(phase)).await?;
        result = concat(&parts);
    }
    Ok(result)
}

/// Hypercube all-gather, which is also recursive doubling: Algorithm 4.7
/// (ALL_TO_ALL_BC_HCUBE) on the folded core of [`super::folding`]. Recursive doubling
/// ([Thakur 2005]) states the same schedule as "node i exchanges with i + k, k = 1, 2,
/// 4, ...": the partner at distance 2^i is my_id XOR 2^i.
///
/// ```text
/// fold in:  an extra node sends my_msg to its partner, which appends it to its own
/// core:     result := doubling(my virtual id, my_msg)     /* Algorithm 4.7, see doubling */
/// unfold:   a partner sends result to its extra node
/// ```
///
/// Steps: log p on 2^d nodes; ⌊log p⌋ + 2 otherwise. Cost t_s log p + t_w m(p - 1) on a
/// hypercube; folding adds 2t_s + t_w m(p + 1).
pub async fn recursive_doubling(comm: &Comm, layout: &BlockLayout, mine: Bytes) -> Result<Bytes, CommError> {
    let fold = Fold::new(comm.p());
    let append = |own: Bytes, extra: Bytes| Ok(concat([&own, &extra]));
    match fold.fold_in(comm, ALLGATHER_FOLD.tag(0), mine, append).await? {
        Part::Folded { partner } => {
            let result = comm.recv(partner, ALLGATHER_FOLD.tag(1)).await?;
            expect_layout_len(comm, &result, layout.total())?;
            Ok(result)
        }
        Part::Core { virtual_id, extra, data } => {
            let blocks = fold.core_blocks(layout);
            let result = doubling(comm, &fold, virtual_id, &blocks, data, ALLGATHER_DOUBLING).await?;
            fold.unfold(comm, extra, ALLGATHER_FOLD.tag(1), result.clone()).await?;
            Ok(result)
        }
    }
}

/// The core of Algorithm 4.7, line by line, on the q = 2^d core nodes of `fold` (virtual
/// ids; core node v holds the blocks `blocks` gives it and brings them as `my_msg`):
///
/// ```text
/// result := my_msg
/// for i := 0 to d - 1 do
///     partner := my_id XOR 2^i
///     send result to partner
///     receive msg from partner
///     result := result ∪ msg          /* msg first if partner < my_id: layout order */
/// ```
///
/// Every core node returns the blocks of all core nodes, in order. The exchange of
/// dimension i carries tag `phase.tag(i)`.
///
/// Steps: d. Cost t_s d + t_w (M - m_v) for M bytes in all (t_s log p + t_w m(p - 1)
/// for p blocks of m).
pub async fn doubling(
    comm: &Comm,
    fold: &Fold,
    my_id: usize,
    blocks: &CoreBlocks<'_>,
    my_msg: Bytes,
    phase: Phase,
) -> Result<Bytes, CommError> {
    // `result` is assembled in place: one buffer of the final length, in which every
    // receive is posted before the first send, so that each msg is read from its link
    // straight into its place whenever it comes; what a node holds so far is a list of
    // parts of that buffer in layout order, sent as they are (never copied together).
    let mut assembly = comm.assembly(blocks.len(0..fold.q()));
    let at = blocks.span(my_id..my_id + 1).start;
    let mut result = vec![assembly.copy_in(at, &my_msg).map_err(|error| comm.assembly_error(error))?];
    let mut posted = Vec::with_capacity(fold.dimension());
    for i in 0..fold.dimension() {
        let partner = my_id ^ (1 << i);
        let first = partner >> i << i;
        let place = assembly.place(blocks.span(first..first + (1 << i))).map_err(|error| comm.assembly_error(error))?;
        posted.push(comm.post_into(fold.physical(partner), phase.tag(i), place)?);
    }
    for (i, posted) in posted.into_iter().enumerate() {
        let partner = my_id ^ (1 << i);
        let to = fold.physical(partner);
        comm.send_parts(to, phase.tag(i), result.iter().cloned()).await?;
        let msg = comm.wait(posted).await?;
        if partner < my_id {
            result.insert(0, msg);
        } else {
            result.push(msg);
        }
    }
    assembly.finish().map_err(|error| comm.assembly_error(error))
}

/// Bruck all-gather (Bruck, Ho, Kipnis, Upfal, Weathersby 1997): ⌈log p⌉ steps for any
/// p. A node collects the blocks my_id, my_id + 1, ... (mod p) in that order, doubling
/// what it holds each step, then rotates them into node order.
///
/// ```text
/// held := [my_msg]                      /* held[j] is block (my_id + j) mod p */
/// for k := 0 to ⌈log p⌉ - 1 do
///     n := min(2^k, p - 2^k)
///     send held[0 .. n-1] to (my_id - 2^k) mod p
///     receive msg from (my_id + 2^k) mod p   /* its held[0 .. n-1] */
///     held := held ∪ msg
/// result[b] := held[(b - my_id) mod p]  /* the local rotation */
/// ```
///
/// Steps: ⌈log p⌉. Cost t_s⌈log p⌉ + t_w m(p - 1) on a fully connected network; on
/// others step k's messages travel 2^k apart.
pub async fn bruck(comm: &Comm, layout: &BlockLayout, mine: Bytes) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = ALLGATHER_BRUCK;
    // Bytes of the n blocks from, from + 1, ... (mod p).
    let run_len = |from: usize, n: usize| -> usize { (0..n).map(|j| layout.len((from + j) % p)).sum() };
    let mut held = mine;
    let mut count = 1;
    let mut k = 0;
    while count < p {
        let distance = count;
        let n = distance.min(p - distance);
        let (dest, source) = ((my_id + p - distance) % p, (my_id + distance) % p);
        let outgoing = held.slice(..run_len(my_id, n));
        let msg = comm.exchange(dest, source, phase.tag(k), outgoing).await?;
        expect_layout_len(comm, &msg, run_len(source, n))?;
        held = concat([&held, &msg]);
        count += n;
        k += 1;
    }
    let wrap = layout.span(my_id..p).len();
    Ok(concat([&held.slice(wrap..), &held.slice(..wrap)]))
}

/// Neighbour-exchange all-gather (Chen et al. 2005, as Open MPI runs it:
/// `neighborexchange`): on a ring of even p, nodes 2j and 2j + 1 form pair j; each step
/// a node exchanges with one ring neighbour, the other one the next step, passing on
/// the pair of blocks it learnt last. An odd p runs the ring's schedule instead (on this
/// algorithm's phase), as Open MPI does.
///
/// ```text
/// j := my_id / 2                          /* my pair: blocks 2j and 2j + 1 */
/// partner(k) := my_id + 1 if my_id + k is even, else my_id - 1   /* mod p */
/// exchange my_msg with partner(0)          /* now I hold pair j */
/// last := pair j
/// for k := 1 to p/2 - 1 do
///     send last to partner(k)
///     receive msg from partner(k)         /* pair j ± ⌈k/2⌉ (mod p/2): + from my right */
///     result := result ∪ msg; last := msg
/// ```
///
/// Steps: p/2 on an even p (p - 1 on an odd one). Cost t_s p/2 + t_w m (p - 1) on a
/// ring: half the ring's start-ups for the same bytes.
pub async fn neighbour_exchange(comm: &Comm, layout: &BlockLayout, mine: Bytes) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = ALLGATHER_NEIGHBOUR_EXCHANGE;
    if !p.is_multiple_of(2) {
        let parts = allgather_ring_parts(comm, &LineGroup::ring(p).ring_order(), mine, phase).await?;
        return Ok(concat(&parts));
    }
    let (pairs, my_pair) = (p / 2, my_id / 2);
    let (right, left) = ((my_id + 1) % p, (my_id + p - 1) % p);
    let partner = |k: usize| if (my_id + k).is_multiple_of(2) { right } else { left };
    let mut parts = vec![Bytes::new(); p];
    let first = partner(0);
    let theirs = comm.exchange(first, first, phase.tag(0), mine.clone()).await?;
    expect_layout_len(comm, &theirs, layout.len(first))?;
    parts[my_id] = mine;
    parts[first] = theirs;
    let mut last = concat([&parts[2 * my_pair], &parts[2 * my_pair + 1]]);
    for k in 1..pairs {
        let to = partner(k);
        let distance = k.div_ceil(2);
        let pair = if to == right { (my_pair + distance) % pairs } else { (my_pair + pairs - distance) % pairs };
        let msg = comm.exchange(to, to, phase.tag(k), last).await?;
        expect_layout_len(comm, &msg, layout.span(2 * pair..2 * pair + 2).len())?;
        let split = layout.len(2 * pair);
        parts[2 * pair] = msg.slice(..split);
        parts[2 * pair + 1] = msg.slice(split..);
        last = msg;
    }
    Ok(concat(&parts))
}

/// Algorithm 4.4 (ALL_TO_ALL_BC_RING), line by line, on the ring `ring` (every member
/// calls it; neighbours in the ring order, and the last and the first, are left and right):
///
/// ```text
/// left := ring[k - 1]; right := ring[k + 1]   /* k: my position, mod n */
/// result := my_msg
/// msg := result
/// for i := 1 to n - 1 do
///     send msg to right
///     receive msg from left              /* the block of position k - i */
///     result := result ∪ msg
/// ```
///
/// `result ∪ msg` is `keep(position, msg)`: every member's message goes to `keep` with
/// its position in the ring as it comes (mine first), for the caller to hold as it
/// needs ([`allgather_ring_parts`] keeps each; the ring all-reduce copies each to its
/// place). Step i carries tag `phase.tag(i)`. Steps: n - 1. Cost (t_s + t_w m)(n - 1).
pub async fn allgather_ring_along(
    comm: &Comm,
    ring: &RingOrder<'_>,
    my_msg: Bytes,
    phase: Phase,
    mut keep: impl FnMut(usize, Bytes) -> Result<(), CommError>,
) -> Result<(), CommError> {
    let (n, k) = (ring.len(), ring.my_position(comm)?);
    let left = ring.at((k + n - 1) % n);
    let right = ring.at((k + 1) % n);
    keep(k, my_msg.clone())?;
    let mut msg = my_msg;
    for i in 1..n {
        comm.send(right, phase.tag(i), msg).await?;
        msg = comm.recv(left, phase.tag(i)).await?;
        keep((k + n - i) % n, msg.clone())?;
    }
    Ok(())
}

/// [`allgather_ring_along`], returning every member's message in ring order.
pub async fn allgather_ring_parts(
    comm: &Comm,
    ring: &RingOrder<'_>,
    my_msg: Bytes,
    phase: Phase,
) -> Result<Vec<Bytes>, CommError> {
    let mut parts = vec![Bytes::new(); ring.len()];
    allgather_ring_along(comm, ring, my_msg, phase, |at, msg| {
        parts[at] = msg;
        Ok(())
    })
    .await?;
    Ok(parts)
}

/// An all-gather along one line of a grid: Algorithm 4.4 when the line wraps, otherwise
/// the line schedule, where each node passes blocks both ways, one hop per step:
///
/// ```text
/// result[k] := my_msg                     /* k: my position on the line of n */
/// for s := 1 to n - 1 do
///     if k + 1 < n and k + 1 ≥ s then send result[k - s + 1] to my right neighbour
///     if k ≥ 1 and k + s - 1 < n then send result[k + s - 1] to my left neighbour
///     if k ≥ s then receive result[k - s] from my left neighbour
///     if k + s < n then receive result[k + s] from my right neighbour
/// ```
///
/// Returns every member's message, in line order. On a line, step s carries tags
/// `phase.tag(2s)` rightwards and `phase.tag(2s + 1)` leftwards. Steps: n - 1 either
/// way; on a line a node sends up to two messages per step, each over one link.
pub async fn allgather_along(
    comm: &Comm,
    line: &LineGroup<'_>,
    my_msg: Bytes,
    phase: Phase,
) -> Result<Vec<Bytes>, CommError> {
    if line.wraps {
        return allgather_ring_parts(comm, &line.ring_order(), my_msg, phase).await;
    }
    let members = line.members;
    let (n, k) = (members.len(), members.my_position(comm)?);
    let mut result = vec![Bytes::new(); n];
    result[k] = my_msg;
    for s in 1..n {
        if k + 1 < n && k + 1 >= s {
            let block = result[k + 1 - s].clone();
            comm.send(members.at(k + 1), phase.tag(2 * s), block).await?;
        }
        if k >= 1 && k + s - 1 < n {
            let block = result[k + s - 1].clone();
            comm.send(members.at(k - 1), phase.tag(2 * s + 1), block).await?;
        }
        if k >= s {
            result[k - s] = comm.recv(members.at(k - 1), phase.tag(2 * s)).await?;
        }
        if k + s < n {
            result[k + s] = comm.recv(members.at(k + 1), phase.tag(2 * s + 1)).await?;
        }
    }
    Ok(result)
}
