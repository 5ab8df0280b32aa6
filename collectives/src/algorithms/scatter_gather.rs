//! One-to-all personalized (scatter) and its dual, all-to-one personalized (gather).
//!
//! Four schedules each, one per [`Algorithm`]: the naive linear one, the
//! store-and-forward ring and mesh schedules, and the hypercube schedule of [GGKK 4.4]
//! (log p steps, half of the remaining data each step). Every algorithm is written for
//! a general [`BlockLayout`] (block i for node i, any lengths, zero included), so
//! [`scatter_layout`] and [`gather_layout`] serve the large-message broadcast and
//! reduction too; [`scatter`] and [`gather`] are the equal-block collectives over them.
//!
//! Costs are for store-and-forward routing when the schedule runs on the topology it was
//! made for (every message crosses one link): t_s start-up, t_w per byte, m bytes per
//! block. On another topology the same schedule still works; its messages then travel
//! the topology's routes and share links.
//!
//! Shared pieces (the hand of keyed blocks, the passes along a line) live in
//! [`super::personalized`]; grids and relabelling in [`super::patterns`]; tags in
//! [`super::phases`].

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::spec::{Algorithm, Collective};

use super::blocks::{BlockLayout, concat};
use super::folding::expect_one_block_per_node;
use super::patterns::{Grid, LineGroup};
use super::personalized::{Hand, expect_input, expect_message_len, gather_along, scatter_along};
use super::phases::{self, Phase, SINGLE};
use super::tree::{BinomialTree, TreeEdge};
use crate::comm::{Comm, CommError};

/// Runs the scatter `algorithm` names: the root's p blocks of `block` bytes, block i to node i.
pub async fn scatter(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    blocks: Bytes,
    block: usize,
) -> Result<Bytes, CommError> {
    let layout = BlockLayout::uniform(comm.p(), block);
    scatter_layout(comm, algorithm, root, &layout, blocks).await
}

/// Runs the gather `algorithm` names: every node's block to the root, in node order.
pub async fn gather(comm: &Comm, algorithm: Algorithm, root: NodeId, block: Bytes) -> Result<Bytes, CommError> {
    let layout = BlockLayout::uniform(comm.p(), block.len());
    gather_layout(comm, algorithm, root, &layout, block).await
}

/// Scatter of any block layout: the root holds `layout.total()` bytes, block i of
/// `layout` for node i (other nodes pass an empty buffer); node i returns its block,
/// `layout.len(i)` bytes. Every algorithm of [`scatter`] runs here.
pub async fn scatter_layout(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    layout: &BlockLayout,
    blocks: Bytes,
) -> Result<Bytes, CommError> {
    check_root(comm, root)?;
    expect_one_block_per_node(comm, layout, "personalized")?;
    if comm.id() == root {
        expect_input(comm, &blocks, layout.total())?;
    }
    match algorithm {
        // Each algorithm's future in a box of its own size (see `super::run`).
        Algorithm::Linear => Box::pin(linear_scatter(comm, root, layout, blocks)).await,
        Algorithm::Ring => Box::pin(ring_scatter(comm, root, layout, blocks)).await,
        Algorithm::Mesh => Box::pin(mesh_scatter(comm, root, layout, blocks)).await,
        Algorithm::Hypercube => Box::pin(hypercube_scatter(comm, root, layout, blocks)).await,
        other => Err(super::unsupported(comm, Collective::Scatter, other)),
    }
}

/// Gather of any block layout: node i holds block i of `layout` (`layout.len(i)` bytes);
/// the root returns all `layout.total()` bytes in node order, every other node an empty
/// buffer. Every algorithm of [`gather`] runs here.
pub async fn gather_layout(
    comm: &Comm,
    algorithm: Algorithm,
    root: NodeId,
    layout: &BlockLayout,
    mine: Bytes,
) -> Result<Bytes, CommError> {
    check_root(comm, root)?;
    expect_one_block_per_node(comm, layout, "personalized")?;
    expect_input(comm, &mine, layout.len(comm.id()))?;
    match algorithm {
        // Each algorithm's future in a box of its own size (see `super::run`).
        Algorithm::Linear => Box::pin(linear_gather(comm, root, layout, mine)).await,
        Algorithm::Ring => Box::pin(ring_gather(comm, root, layout, mine)).await,
        Algorithm::Mesh => Box::pin(mesh_gather(comm, root, layout, mine)).await,
        Algorithm::Hypercube => Box::pin(hypercube_gather(comm, root, layout, mine)).await,
        other => Err(super::unsupported(comm, Collective::Gather, other)),
    }
}

fn check_root(comm: &Comm, root: NodeId) -> Result<(), CommError> {
    if root < comm.p() {
        return Ok(());
    }
    Err(CommError::NoSuchPeer { me: comm.id(), peer: root, p: comm.p() })
}

/// Linear scatter: the root sends every other node its block directly (the naive p - 1
/// step baseline of [GGKK 4.4]).
///
/// ```text
/// if my_id = root then
///     for k := 1 to p - 1 do send block (root + k) mod p to node (root + k) mod p
///     keep block root
/// else
///     receive my block from root
/// ```
///
/// Steps: p - 1, all from the root. Cost (p - 1)(t_s + t_w m) on a fully connected
/// network; elsewhere each message crosses l links.
pub async fn linear_scatter(
    comm: &Comm,
    root: NodeId,
    layout: &BlockLayout,
    blocks: Bytes,
) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    if my_id == root {
        for k in 1..p {
            let dst = (root + k) % p;
            comm.send(dst, phase.tag(k), layout.slice(&blocks, dst..dst + 1)).await?;
        }
        Ok(layout.slice(&blocks, root..root + 1))
    } else {
        let k = (my_id + p - root) % p;
        let x = comm.recv(root, phase.tag(k)).await?;
        expect_message_len(comm, root, &x, layout.len(my_id))?;
        Ok(x)
    }
}

/// Linear gather: the root receives every other node's block directly (dual of the
/// linear scatter).
///
/// ```text
/// if my_id = root then
///     for k := 1 to p - 1 do receive block (root + k) mod p from node (root + k) mod p
///     return the blocks in node order
/// else
///     send my block to root
/// ```
///
/// Steps: p - 1, all into the root. Cost (p - 1)(t_s + t_w m) on a fully connected
/// network; elsewhere each message crosses l links.
pub async fn linear_gather(comm: &Comm, root: NodeId, layout: &BlockLayout, mine: Bytes) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    if my_id == root {
        let mut blocks = vec![Bytes::new(); p];
        blocks[root] = mine;
        for k in 1..p {
            let src = (root + k) % p;
            let x = comm.recv(src, phase.tag(k)).await?;
            expect_message_len(comm, src, &x, layout.len(src))?;
            blocks[src] = x;
        }
        Ok(concat(&blocks))
    } else {
        let k = (my_id + p - root) % p;
        comm.send(root, phase.tag(k), mine).await?;
        Ok(Bytes::new())
    }
}

/// Ring scatter ([GGKK 4.4], store-and-forward on a ring, as the ring broadcast but
/// personalized): the root sends the clockwise half (distances 1..=⌊p/2⌋) and the
/// counter-clockwise half (1..=⌊(p-1)/2⌋) each the blocks that half needs, nearest
/// first; every node keeps its block and passes the rest on.
///
/// ```text
/// scatter the blocks along the ring of all nodes from root   /* see scatter_along */
/// ```
///
/// Steps: ⌈p/2⌉. Messages shrink by one block a hop: cost about
/// t_s⌈p/2⌉ + t_w m ⌊p/2⌋(⌊p/2⌋ + 1)/2.
pub async fn ring_scatter(comm: &Comm, root: NodeId, layout: &BlockLayout, blocks: Bytes) -> Result<Bytes, CommError> {
    let p = comm.p();
    let parcels = if comm.id() == root { layout.cut(&blocks, 0..p) } else { Vec::new() };
    let ring = LineGroup::ring(p);
    scatter_along(comm, &ring, root, parcels, |j| layout.len(j), SINGLE).await
}

/// Ring gather, dual of the ring scatter: the far end of each half of the ring sends
/// its block towards the root; every node puts its own block in front and passes the
/// lot on.
///
/// ```text
/// gather the blocks along the ring of all nodes to root   /* see gather_along */
/// ```
///
/// Steps and cost: those of the ring scatter.
pub async fn ring_gather(comm: &Comm, root: NodeId, layout: &BlockLayout, mine: Bytes) -> Result<Bytes, CommError> {
    let ring = LineGroup::ring(comm.p());
    let parcels = gather_along(comm, &ring, root, mine, |j| layout.len(j), SINGLE).await?;
    Ok(parcels.map(|blocks| concat(&blocks)).unwrap_or_default())
}

/// Mesh scatter ([GGKK 4.4], store-and-forward on a 2-D torus, personalized): along the
/// root's row the root sends each column's blocks to that column's member, then every
/// node of that row scatters its column's blocks down its column; on a 3-D grid a third
/// phase runs along the last remaining dimension. Each phase is the ring method (torus,
/// torus3d) or the line method (mesh, mesh3d, and the squarest 2-D grid of p on any
/// other topology; `patterns::Grid`).
///
/// ```text
/// for dim := last downto 0 do          /* 2-D: the row (dim 1), then the columns (dim 0) */
///     if my coordinates before dim equal the root's then
///         parcel(j) := the blocks of the nodes whose coordinates from dim on are
///                      (j, my coordinates after dim)
///         scatter the parcels along my line of dim from the root's coordinate in dim
/// return my block
/// ```
///
/// Steps: Σ over dims of ⌈k/2⌉ on a torus of extents k (2⌈√p/2⌉ for √p x √p), at most
/// Σ (k - 1) on a mesh. Cost on a √p x √p torus, with h = ⌊√p/2⌋:
/// 2 t_s⌈√p/2⌉ + t_w m (√p + 1) h(h + 1)/2 ≈ 2 t_s⌈√p/2⌉ + t_w m p√p/8 — the row phase
/// moves parcels of √p blocks, the column phase single blocks, and each half's messages
/// shrink by one parcel a hop.
pub async fn mesh_scatter(comm: &Comm, root: NodeId, layout: &BlockLayout, blocks: Bytes) -> Result<Bytes, CommError> {
    let my_id = comm.id();
    let grid = Grid::of(comm.topology());
    let (my_coords, root_coords) = (grid.coords(my_id), grid.coords(root));
    let mut hand = if my_id == root { Hand::whole(comm, layout, blocks)? } else { Hand::empty(layout) };
    let nodes_len = |nodes: &[NodeId]| nodes.iter().map(|&n| layout.len(n)).sum::<usize>();
    for (phase, dim) in (0..grid.dims().len()).rev().enumerate() {
        if my_coords[..dim] == root_coords[..dim] {
            let line = grid.line(my_id, dim);
            let parcel = |j: usize| grid.nodes_at(my_id, dim, j);
            let parcels = if my_coords[dim] == root_coords[dim] {
                (0..line.members.len()).map(|j| hand.pack(comm, &parcel(j))).collect::<Result<Vec<_>, _>>()?
            } else {
                Vec::new()
            };
            let parcel_len = |j: usize| nodes_len(&parcel(j));
            let mine = scatter_along(comm, &line, root_coords[dim], parcels, parcel_len, phases::grid_dimension(phase))
                .await?;
            hand.unpack(comm, root, &parcel(my_coords[dim]), mine)?;
        }
    }
    hand.take(comm, my_id)
}

/// Mesh gather, dual of the mesh scatter: every column gathers towards the root's row,
/// then the root's row gathers to the root; on a 3-D grid the first dimension goes
/// first, then the second, then the root's row. Grid and wrapping as for the scatter.
///
/// ```text
/// hold my block
/// for dim := 0 to last do              /* 2-D: the columns (dim 0), then the row (dim 1) */
///     parcel(j) := the blocks of the nodes whose coordinates from dim on are
///                  (j, my coordinates after dim)      /* what member j holds by now */
///     gather the parcels along my line of dim to the root's coordinate in dim
///     if I am not at the root's coordinate in dim then return nothing  /* passed it on */
/// return the blocks in node order
/// ```
///
/// Steps and cost: those of the mesh scatter.
pub async fn mesh_gather(comm: &Comm, root: NodeId, layout: &BlockLayout, mine: Bytes) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let grid = Grid::of(comm.topology());
    let mut hand = Hand::empty(layout);
    hand.put(my_id, mine);
    let nodes_len = |nodes: &[NodeId]| nodes.iter().map(|&n| layout.len(n)).sum::<usize>();
    for (dim, &root_coordinate) in grid.coords(root).iter().enumerate() {
        let line = grid.line(my_id, dim);
        let parcel = |j: usize| grid.nodes_at(my_id, dim, j);
        let my_parcel = hand.pack(comm, &parcel(grid.coords(my_id)[dim]))?;
        let parcel_len = |j: usize| nodes_len(&parcel(j));
        let phase = phases::grid_dimension(dim);
        match gather_along(comm, &line, root_coordinate, my_parcel, parcel_len, phase).await? {
            Some(parcels) => {
                for (j, x) in parcels.into_iter().enumerate() {
                    hand.unpack(comm, line.members.at(j), &parcel(j), x)?;
                }
            }
            None => return Ok(Bytes::new()),
        }
    }
    hand.pack(comm, &(0..p).collect::<Vec<_>>())
}

/// Hypercube scatter ([GGKK 4.4], store-and-forward on a hypercube): in the i-th step
/// every node that holds blocks sends half of them — those of the subcube across
/// dimension i — to its neighbour across dimension i, most significant dimension first;
/// the loop is that of Algorithm 4.2 with the relabelling that makes any node the root
/// (virtual id = my_id XOR root for p a power of two).
///
/// ```text
/// my_virtual_id := my_id XOR root
/// mask := 2^d - 1
/// for i := d - 1 downto 0 do
///     mask := mask XOR 2^i
///     if (my_virtual_id AND mask) = 0 then
///         if (my_virtual_id AND 2^i) = 0 then
///             virtual_dest := my_virtual_id XOR 2^i
///             send the blocks of virtual ids virtual_dest .. virtual_dest + 2^i - 1
///                 to (virtual_dest XOR root)
///         else
///             virtual_source := my_virtual_id XOR 2^i
///             receive the blocks of virtual ids my_virtual_id .. my_virtual_id + 2^i - 1
///                 from (virtual_source XOR root)
/// return my block
/// ```
///
/// For any other p this is the binomial tree (MPI's scatter): virtual id =
/// (my_id - root) mod p, d = ⌈log2 p⌉, virtual ids ≥ p hold nothing and get no message.
/// A node's sends go in turn ([`Comm::send_in_turn`]): up to 1 MiB, each returns once
/// its link has written the message, as the textbook's steps follow one another.
///
/// Steps: d = ⌈log2 p⌉. Cost t_s log p + t_w m (p - 1) (messages of p/2, p/4, ..., 1 blocks).
pub async fn hypercube_scatter(
    comm: &Comm,
    root: NodeId,
    layout: &BlockLayout,
    blocks: Bytes,
) -> Result<Bytes, CommError> {
    let my_id = comm.id();
    let tree = BinomialTree::new(root, comm.p(), my_id);
    let phase = SINGLE;
    let mut hand = if my_id == root { Hand::whole(comm, layout, blocks)? } else { Hand::empty(layout) };
    for edge in tree.top_down() {
        match edge {
            TreeEdge::Parent { node, step, subtree } => {
                let x = comm.recv(node, phase.tag(step)).await?;
                hand.unpack(comm, node, &tree.nodes(subtree), x)?;
            }
            TreeEdge::Child { node, step, subtree } => {
                let x = hand.pack_parts(comm, &tree.nodes(subtree))?;
                comm.send_in_turn(node, phase.tag(step), x).await?;
            }
        }
    }
    hand.take(comm, my_id)
}

/// Hypercube gather, dual of the hypercube scatter: the loop of Algorithm 4.3
/// (ALL_TO_ONE_REDUCE), least significant dimension first, with the blocks collected
/// instead of combined, so messages double each step.
///
/// ```text
/// my_virtual_id := my_id XOR root
/// mask := 0
/// for i := 0 to d - 1 do
///     if (my_virtual_id AND mask) = 0 then
///         if (my_virtual_id AND 2^i) ≠ 0 then
///             send the blocks of virtual ids my_virtual_id .. my_virtual_id + 2^i - 1
///                 to (my_virtual_id XOR 2^i) XOR root
///         else
///             virtual_source := my_virtual_id XOR 2^i
///             receive the blocks of virtual ids virtual_source .. virtual_source + 2^i - 1
///                 from (virtual_source XOR root)
///     mask := mask XOR 2^i
/// if I am the root then return the blocks in node order
/// ```
///
/// Any other p: the binomial tree, as for the scatter. Steps: d = ⌈log2 p⌉. Cost
/// t_s log p + t_w m (p - 1).
pub async fn hypercube_gather(
    comm: &Comm,
    root: NodeId,
    layout: &BlockLayout,
    mine: Bytes,
) -> Result<Bytes, CommError> {
    let my_id = comm.id();
    let tree = BinomialTree::new(root, comm.p(), my_id);
    let phase = SINGLE;
    if my_id == root {
        return gather_at_root(comm, &tree, layout, mine, phase).await;
    }
    let mut hand = Hand::empty(layout);
    hand.put(my_id, mine);
    for edge in tree.bottom_up() {
        match edge {
            TreeEdge::Child { node, step, subtree } => {
                let x = comm.recv(node, phase.tag(step)).await?;
                hand.unpack(comm, node, &tree.nodes(subtree), x)?;
            }
            TreeEdge::Parent { node, step, subtree } => {
                let x = hand.pack_parts(comm, &tree.nodes(subtree))?;
                comm.send_parts(node, phase.tag(step), x).await?;
            }
        }
    }
    Ok(Bytes::new())
}

/// The root's part of [`hypercube_gather`]: virtual id 0 passes every test of the loop
/// and receives in every step i the blocks of virtual ids 2^i .. 2^(i+1) - 1 from virtual
/// node 2^i. The blocks are assembled in node order in one buffer, and every receive is
/// posted up front: a message whose blocks are consecutive there (always when
/// virtual ids are physical ones, root 0) is read from its link straight into place,
/// any other is cut into its blocks and copied.
async fn gather_at_root(
    comm: &Comm,
    tree: &BinomialTree,
    layout: &BlockLayout,
    mine: Bytes,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let fail = |error| comm.assembly_error(error);
    let mut result = comm.assembly(layout.total());
    result.copy_in(layout.range(comm.id()).start, &mine).map_err(fail)?;
    let mut posted = Vec::new();
    for edge in tree.bottom_up() {
        let TreeEdge::Child { node: src, step, subtree } = edge else { continue };
        let keys = tree.nodes(subtree);
        let consecutive = keys.windows(2).all(|pair| pair[1] == pair[0] + 1);
        let place = match (consecutive, keys.first(), keys.last()) {
            (true, Some(&first), Some(&last)) => Some(result.place(layout.span(first..last + 1)).map_err(fail)?),
            _ => None,
        };
        let in_place = place.is_some();
        posted.push((src, keys, in_place, comm.post_maybe_into(src, phase.tag(step), place)?));
    }
    for (src, keys, in_place, posted) in posted {
        let x = comm.wait(posted).await?;
        if !in_place {
            expect_message_len(comm, src, &x, keys.iter().map(|&key| layout.len(key)).sum())?;
            let mut at = 0;
            for key in keys {
                result.copy_in(layout.range(key).start, &x[at..at + layout.len(key)]).map_err(fail)?;
                at += layout.len(key);
            }
        }
    }
    result.finish().map_err(fail)
}
