//! All-to-all personalized: node i ends with block i of every node.
//!
//! Six schedules, one per [`Algorithm`]: the store-and-forward ring, mesh and hypercube
//! schedules of [GGKK 4.5.1]-[GGKK 4.5.3], Algorithm 4.10 (partner = my_id XOR i), the
//! pairwise exchange of MPI libraries ([Thakur 2005]), and Bruck's log p algorithm
//! ([Bruck 1997]). Node i starts with p blocks of m bytes, M[i][j] for node j, and ends
//! with M[0][i], ..., M[p-1][i].
//!
//! Costs are for store-and-forward routing when the schedule runs on the topology it was
//! made for: t_s start-up, t_w per byte, m bytes per block. On another topology the same
//! schedule still works; its messages then travel the topology's routes and share links.
//!
//! The schedules that route blocks through other nodes (mesh, hypercube) keep them in a
//! [`Hand`] keyed by `s·p + d`, the block node s sends to node d; sender and receiver of
//! every message compute the same key list (see [`super::personalized`]).

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::frame::Tag;
use topocomm_proto::spec::{Algorithm, Collective};

use super::Running;
use super::blocks::{BlockLayout, concat};
use super::folding::{Fold, Part, Role};
use super::patterns::{Grid, LineGroup, hypercube_dimension};
use super::personalized::{Hand, alltoall_along, expect_input, expect_message_len};
use super::phases::{self, ALLTOALL_EXCHANGE, ALLTOALL_FOLD_IN, ALLTOALL_PASS_ON, ALLTOALL_UNFOLD, SINGLE};
use crate::comm::assembly::Assembly;
use crate::comm::{Comm, CommError, Posted};

/// Runs the alltoall `algorithm` names; `blocks` holds p blocks of `block` bytes.
pub fn run(comm: &Comm, algorithm: Algorithm, blocks: Bytes, block: usize) -> Running<'_> {
    if let Err(error) = expect_input(comm, &blocks, comm.p() * block) {
        return super::failed(error);
    }
    match algorithm {
        // Each algorithm's future in a box of its own size, handed to the caller (see `super::run`).
        Algorithm::Ring => Box::pin(ring(comm, blocks, block)),
        Algorithm::Mesh => Box::pin(mesh(comm, blocks, block)),
        Algorithm::Hypercube => Box::pin(hypercube(comm, blocks, block)),
        Algorithm::PairwiseXor => Box::pin(pairwise_xor(comm, blocks, block)),
        Algorithm::Pairwise => Box::pin(pairwise(comm, blocks, block)),
        Algorithm::Bruck => Box::pin(bruck(comm, blocks, block)),
        other => super::failed(super::unsupported(comm, Collective::Alltoall, other)),
    }
}

/// Ring all-to-all ([GGKK 4.5.1], store-and-forward on a ring): every node consolidates
/// the p - 1 blocks it sends into one message to the next node; in every later step
/// each node keeps the block meant for it and passes the rest on.
///
/// ```text
/// X := my blocks for my_id+1, my_id+2, ..., my_id+p-1 (mod p)
/// for k := 1 to p - 1 do
///     send X to (my_id + 1) mod p
///     receive X from (my_id - 1) mod p   /* node my_id-k's blocks for my_id, my_id+1, ... */
///     keep the first block of X; X := the rest
/// ```
///
/// (see `alltoall_along`). Steps: p - 1, messages of p-1, p-2, ..., 1 blocks.
/// Cost (t_s + ½ t_w m p)(p - 1).
pub async fn ring(comm: &Comm, blocks: Bytes, block: usize) -> Result<Bytes, CommError> {
    let p = comm.p();
    let parcels = BlockLayout::uniform(p, block).cut(&blocks, 0..p).into_iter().map(|block| vec![block]).collect();
    alltoall_along(comm, &LineGroup::ring(p), parcels, block, SINGLE).await
}

/// The blocks (s, d), as keys s·p + d, that `holder` sends to the member at coordinate
/// `j` of its line along `dim` in a mesh all-to-all phase: every s whose coordinates up
/// to dim equal the holder's (ids are row-major, so those are a run of consecutive
/// ids, as many as the nodes after dim), every d with coordinate j in dim and the
/// holder's coordinates after dim ([`Grid::nodes_at`]). s-major, ascending.
fn mesh_keys(grid: &Grid, p: usize, holder: NodeId, dim: usize, j: usize) -> Vec<usize> {
    let after: usize = grid.dims()[dim + 1..].iter().product();
    let sources = holder / after * after..(holder / after + 1) * after;
    let dests = grid.nodes_at(holder, dim, j);
    sources.flat_map(|s| dests.iter().map(move |&d| s * p + d)).collect()
}

/// Mesh all-to-all ([GGKK 4.5.2], store-and-forward on a 2-D torus): every node groups
/// its blocks by the column they go to and the ring method runs along every row; then
/// every node regroups what it holds by destination row and the ring method runs along
/// every column. A 3-D grid adds a phase. Lines wrap on a torus (one-way ring); on a
/// mesh, and on the squarest 2-D grid of p elsewhere (`patterns::Grid`), the line
/// method runs both ways (see `alltoall_along`).
///
/// ```text
/// hold my blocks (my_id, d) for every d
/// for dim := last downto 0 do           /* 2-D: the rows (dim 1), then the columns (dim 0) */
///     parcel(j) := the blocks I hold for nodes at coordinate j in dim   /* p/k blocks */
///     all-to-all the parcels along my line of dim (the ring method)
/// return the blocks (s, my_id) for s := 0 to p - 1
/// ```
///
/// After the phase of dim a node holds the blocks from every node that shares its
/// coordinates before dim, for every node that shares its coordinates from dim on.
///
/// Steps: Σ (k - 1) over the extents k; 2(√p - 1) on a √p x √p torus. Every phase moves
/// parcels of p/k blocks: cost (2 t_s + t_w m p)(√p - 1) on a √p x √p torus.
pub async fn mesh(comm: &Comm, blocks: Bytes, block: usize) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let grid = Grid::of(comm.topology());
    let pairs = BlockLayout::uniform(p * p, block);
    let mut hand = Hand::empty(&pairs);
    hand.unpack(comm, my_id, &from_node(p, my_id), blocks)?;
    for (phase, dim) in (0..grid.dims().len()).rev().enumerate() {
        let line = grid.line(my_id, dim);
        let k = line.members.len();
        let parcels = (0..k)
            .map(|j| hand.pack_parts(comm, &mesh_keys(&grid, p, my_id, dim, j)))
            .collect::<Result<Vec<_>, _>>()?;
        let parcel = p / k * block;
        let received = alltoall_along(comm, &line, parcels, parcel, phases::grid_dimension(phase)).await?;
        let mine = grid.coords(my_id)[dim];
        for (i, x) in BlockLayout::uniform(k, parcel).cut(&received, 0..k).into_iter().enumerate() {
            let from = line.members.at(i);
            hand.unpack(comm, from, &mesh_keys(&grid, p, from, dim, mine), x)?;
        }
    }
    hand.pack(comm, &to_node(p, my_id))
}

/// The core node that node `id` belongs to in `fold`: its own virtual id, or that of
/// the node it folds into.
fn core_of(fold: &Fold, id: NodeId) -> usize {
    match fold.role(id) {
        Role::Core { virtual_id, .. } => virtual_id,
        Role::Extra { partner } => core_of(fold, partner),
    }
}

/// The blocks (s, d), as keys s·p + d, that core node `v` sends across dimension `i`
/// in the hypercube all-to-all: those it holds before step i (the core of s agrees with
/// v in bits i and up, the core of d in the bits below i) whose destination's core
/// differs from v in bit i. s-major, ascending.
fn hypercube_keys(fold: &Fold, v: usize, i: usize) -> Vec<usize> {
    let p = fold.p();
    let low = (1 << i) - 1;
    let sources = (0..p).filter(|&s| core_of(fold, s) >> i == v >> i);
    let dests: Vec<NodeId> = (0..p)
        .filter(|&d| {
            let c = core_of(fold, d);
            c & low == v & low && (c ^ v) & (1 << i) != 0
        })
        .collect();
    sources.flat_map(|s| dests.iter().map(move |&d| s * p + d)).collect()
}

/// The keys s·p + d of the blocks node `s` sends, d := 0 to p - 1.
fn from_node(p: usize, s: NodeId) -> Vec<usize> {
    (0..p).map(|d| s * p + d).collect()
}

/// The keys s·p + d of the blocks node `d` ends with, s := 0 to p - 1.
fn to_node(p: usize, d: NodeId) -> Vec<usize> {
    (0..p).map(|s| s * p + d).collect()
}

/// Hypercube all-to-all ([GGKK 4.5.3], store-and-forward on a hypercube): in the i-th
/// step, least significant dimension first, every node exchanges with its neighbour
/// across dimension i the p/2 blocks it holds whose destination lies across that
/// dimension, consolidated into one message.
///
/// ```text
/// for i := 0 to d - 1 do
///     partner := my_id XOR 2^i
///     send the blocks I hold for nodes whose bit i differs from mine to partner
///     receive the blocks partner held for nodes whose bit i equals mine
/// return the blocks (s, my_id) for s := 0 to p - 1
/// ```
///
/// Any p, by folding (`super::folding`; the choice for p not a power of two): with
/// q = 2^⌊log2 p⌋ and r = p - q, node 2v + 1 < 2r first sends all its blocks to its
/// neighbour 2v, the q core nodes run the schedule above on virtual ids for themselves
/// and their extra node (a block goes to the core node of its destination), and each
/// core node finally hands its extra node that node's result.
///
/// Steps: log p (⌊log p⌋ + 2 when folded). Cost (t_s + ½ t_w m p) log p; folding adds
/// 2(t_s + t_w m p). On raw links with long blocks and p a power of two, each step's
/// message goes as two, the part for the partner itself apart ([`step_messages`]).
pub async fn hypercube(comm: &Comm, blocks: Bytes, block: usize) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let (fold_in, unfold) = (ALLTOALL_FOLD_IN, ALLTOALL_UNFOLD);
    let fold = Fold::new(p);
    let merge = |own: Bytes, extra: Bytes| {
        let partner = my_id + 1;
        expect_message_len(comm, partner, &extra, p * block)?;
        Ok(concat([&own, &extra]))
    };
    let (v, extra, data) = match fold.fold_in(comm, fold_in.tag(0), blocks, merge).await? {
        Part::Folded { partner } => {
            let x = comm.recv(partner, unfold.tag(0)).await?;
            expect_message_len(comm, partner, &x, p * block)?;
            return Ok(x);
        }
        Part::Core { virtual_id, extra, data } => (virtual_id, extra, data),
    };
    let pairs = BlockLayout::uniform(p * p, block);
    let mut hand = Hand::empty(&pairs);
    let mut held = from_node(p, my_id);
    held.extend(extra.map(|e| from_node(p, e)).unwrap_or_default());
    hand.unpack(comm, my_id, &held, data)?;
    // A message that holds only blocks for me, from a run of consecutive sources, is
    // posted before the first send and read straight into its part of the result:
    // always the last step's (unless nodes fold); on raw links with blocks long enough
    // to be read in place, every step's part for me too (see `step_messages`).
    let split = p.is_power_of_two() && comm.links().reads_in_place(block);
    let mut result = InPlaceResult::new(p, block);
    let mut to_unpack = Vec::with_capacity(fold.dimension());
    for i in 0..fold.dimension() {
        let partner_v = v ^ (1 << i);
        let partner = fold.physical(partner_v);
        let mut rest = Vec::new();
        for (tag, keys) in step_messages(&fold, partner_v, my_id, i, split) {
            if extra.is_some() || !result.post(comm, partner, tag, &keys)? {
                rest.push((tag, keys));
            }
        }
        to_unpack.push(rest);
    }
    for (i, incoming) in to_unpack.into_iter().enumerate() {
        let partner = fold.physical(v ^ (1 << i));
        for (tag, keys) in step_messages(&fold, v, partner, i, split) {
            comm.send_parts(partner, tag, hand.pack_parts(comm, &keys)?).await?;
        }
        for (tag, keys) in incoming {
            let y = comm.recv(partner, tag).await?;
            hand.unpack(comm, partner, &keys, y)?;
        }
    }
    if let Some(e) = extra {
        let part = hand.pack(comm, &to_node(p, e))?;
        fold.unfold(comm, extra, unfold.tag(0), part).await?;
    }
    result.finish(comm, &mut hand).await
}

/// The messages core node `v` sends to `receiver` in step `i` of the hypercube
/// all-to-all, `(tag, keys)` each: the step's blocks ([`hypercube_keys`]) in one message
/// as the textbook has it; or, when `split`, in two — first the blocks the receiver
/// passes on, then those for the receiver itself (2^i of them, from consecutive sources),
/// which it reads straight into its result, so that no block for a node is copied into
/// the result after the last step. Splitting costs a start-up per step and is done on raw
/// links only: on emulated links the schedule keeps the model's one message per step.
fn step_messages(fold: &Fold, v: usize, receiver: NodeId, i: usize, split: bool) -> Vec<(Tag, Vec<usize>)> {
    let keys = hypercube_keys(fold, v, i);
    if !split {
        return vec![(ALLTOALL_EXCHANGE.tag(i), keys)];
    }
    let (yours, pass_on): (Vec<usize>, Vec<usize>) = keys.into_iter().partition(|key| key % fold.p() == receiver);
    [(ALLTOALL_PASS_ON.tag(i), pass_on), (ALLTOALL_EXCHANGE.tag(i), yours)]
        .into_iter()
        .filter(|(_, keys)| !keys.is_empty())
        .collect()
}

/// The result of the hypercube all-to-all, assembled in place from the messages posted
/// into it ([`InPlaceResult::post`]); without any, packed from the hand at the end.
struct InPlaceResult {
    layout: BlockLayout,
    /// Allocated at the first message posted into it.
    result: Option<Assembly>,
    /// The sources whose blocks for me are posted into place, and those receives.
    placed: Vec<(std::ops::Range<NodeId>, Posted)>,
}

impl InPlaceResult {
    fn new(p: usize, block: usize) -> Self {
        InPlaceResult { layout: BlockLayout::uniform(p, block), result: None, placed: Vec::new() }
    }

    /// Posts the message from `src` with `tag` and `keys` into its part of the result if
    /// every block of it is for me and its sources are consecutive; false otherwise.
    fn post(&mut self, comm: &Comm, src: NodeId, tag: Tag, keys: &[usize]) -> Result<bool, CommError> {
        let (my_id, p) = (comm.id(), comm.p());
        let Some(first) = keys.first().map(|key| key / p) else { return Ok(false) };
        let sources = first..first + keys.len();
        if keys.iter().zip(sources.clone()).any(|(&key, s)| key != s * p + my_id) {
            return Ok(false);
        }
        let result = self.result.get_or_insert_with(|| comm.assembly(self.layout.total()));
        let place = result.place(self.layout.span(sources.clone())).map_err(|error| comm.assembly_error(error))?;
        self.placed.push((sources, comm.post_into(src, tag, place)?));
        Ok(true)
    }

    /// Waits for the messages posted into place, then copies the blocks for me that
    /// arrived otherwise into their places.
    async fn finish(self, comm: &Comm, hand: &mut Hand<'_>) -> Result<Bytes, CommError> {
        let (my_id, p) = (comm.id(), comm.p());
        let Some(mut result) = self.result else { return hand.pack(comm, &to_node(p, my_id)) };
        let mut placed = Vec::with_capacity(self.placed.len());
        for (sources, posted) in self.placed {
            comm.wait(posted).await?;
            placed.push(sources);
        }
        for s in (0..p).filter(|s| !placed.iter().any(|sources| sources.contains(s))) {
            let block = hand.take(comm, s * p + my_id)?;
            result.copy_in(self.layout.range(s).start, &block).map_err(|error| comm.assembly_error(error))?;
        }
        result.finish().map_err(|error| comm.assembly_error(error))
    }
}

/// All-to-all by pairwise exchange on a hypercube: Algorithm 4.10
/// (ALL_TO_ALL_PERSONAL), line by line. With E-cube routing no two messages of a step
/// share a link.
///
/// ```text
/// for i := 1 to 2^d - 1 do
///     partner := my_id XOR i
///     send M[my_id, partner] to partner
///     receive M[partner, my_id] from partner
/// ```
///
/// Any p: d = ⌈log2 p⌉ and a step whose partner is ≥ p is skipped (no such node).
/// Steps: 2^d - 1 (p - 1 when p is a power of two). Cost (t_s + t_w m)(p - 1) plus
/// t_h per hop: ½ t_h p log p in all on a hypercube.
pub async fn pairwise_xor(comm: &Comm, blocks: Bytes, block: usize) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    let steps = (1..1usize << hypercube_dimension(p))
        .map(|i| (phase.tag(i), my_id ^ i, my_id ^ i))
        .filter(|&(_, partner, _)| partner < p) // no such node
        .collect();
    exchange_in_place(comm, &blocks, block, steps).await
}

/// All-to-all by pairwise exchange at every distance (as MPI libraries do it on a
/// fully connected network): step i sends to the node i ahead and receives from the
/// node i behind.
///
/// ```text
/// for i := 1 to p - 1 do
///     send M[my_id, (my_id + i) mod p] to (my_id + i) mod p
///     receive M[(my_id - i) mod p, my_id] from (my_id - i) mod p
/// ```
///
/// Steps: p - 1, any p. Cost (t_s + t_w m)(p - 1) on a fully connected network.
pub async fn pairwise(comm: &Comm, blocks: Bytes, block: usize) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    let steps = (1..p).map(|i| (phase.tag(i), (my_id + i) % p, (my_id + p - i) % p)).collect();
    exchange_in_place(comm, &blocks, block, steps).await
}

/// The steps of a pairwise exchange, `(tag, dst, src)` each: send my block for `dst`,
/// receive `src`'s block for me. The result is assembled in place, as MPI receives into
/// the caller's buffer: every receive is posted before the first send, so each block is
/// read from its link straight into its place, and the result is never copied together.
async fn exchange_in_place(
    comm: &Comm,
    blocks: &Bytes,
    block: usize,
    steps: Vec<(Tag, NodeId, NodeId)>,
) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let layout = BlockLayout::uniform(p, block);
    let mut result = comm.assembly(layout.total());
    let mine = layout.slice(blocks, my_id..my_id + 1);
    result.copy_in(layout.range(my_id).start, &mine).map_err(|error| comm.assembly_error(error))?;
    let mut posted = Vec::with_capacity(steps.len());
    for &(tag, _, src) in &steps {
        let place = result.place(layout.range(src)).map_err(|error| comm.assembly_error(error))?;
        posted.push(comm.post_into(src, tag, place)?);
    }
    for (&(tag, dst, _), posted) in steps.iter().zip(posted) {
        comm.send(dst, tag, layout.slice(blocks, dst..dst + 1)).await?;
        comm.wait(posted).await?;
    }
    result.finish().map_err(|error| comm.assembly_error(error))
}

/// Bruck's all-to-all (Bruck, Ho, Kipnis, Upfal, Weathersby 1997): a local rotation,
/// ⌈log p⌉ steps at distances 1, 2, 4, ..., and the inverse rotation. A block for the
/// node j ahead travels 2^k further in step k for every bit k set in j.
///
/// ```text
/// for j := 0 to p - 1 do B[j] := M[my_id, (my_id + j) mod p]      /* rotate */
/// for k := 0 to ⌈log p⌉ - 1 do
///     J := { j : bit k of j is 1 }
///     send B[j] for j in J to (my_id + 2^k) mod p
///     receive B[j] for j in J from (my_id - 2^k) mod p
/// for s := 0 to p - 1 do result[s] := B[(my_id - s) mod p]       /* B[j] came from my_id - j */
/// ```
///
/// Steps: ⌈log p⌉, any p. Each step moves about p/2 blocks: cost
/// (t_s + ½ t_w m p)⌈log p⌉ on a fully connected network, plus the two local rotations.
pub async fn bruck(comm: &Comm, blocks: Bytes, block: usize) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    let mine = BlockLayout::uniform(p, block).cut(&blocks, 0..p);
    let mut b: Vec<Bytes> = (0..p).map(|j| mine[(my_id + j) % p].clone()).collect();
    for k in 0..hypercube_dimension(p) {
        let set: Vec<usize> = (0..p).filter(|j| j & (1 << k) != 0).collect();
        let (dst, src) = ((my_id + (1 << k)) % p, (my_id + p - (1 << k)) % p);
        let x = concat(set.iter().map(|&j| &b[j]));
        let y = comm.exchange(dst, src, phase.tag(k), x).await?;
        expect_message_len(comm, src, &y, set.len() * block)?;
        for (n, &j) in set.iter().enumerate() {
            b[j] = y.slice(n * block..(n + 1) * block);
        }
    }
    let result: Vec<Bytes> = (0..p).map(|s| b[(my_id + p - s) % p].clone()).collect();
    Ok(concat(&result))
}

#[cfg(test)]
mod tests {
    use topocomm_proto::{Topology, TopologyKind};

    use super::*;

    #[test]
    fn mesh_keys_are_the_blocks_the_coordinates_name() {
        for (kind, p, dims) in [(TopologyKind::Torus, 12, &[3, 4][..]), (TopologyKind::Mesh3d, 24, &[2, 3, 4][..])] {
            let grid = Grid::of(&Topology::new(kind, p, Some(dims)).unwrap());
            for holder in 0..p {
                let h = grid.coords(holder);
                for dim in 0..dims.len() {
                    for j in 0..dims[dim] {
                        let named: Vec<usize> = (0..p * p)
                            .filter(|&key| {
                                let (s, d) = (grid.coords(key / p), grid.coords(key % p));
                                s[..=dim] == h[..=dim] && d[dim] == j && d[dim + 1..] == h[dim + 1..]
                            })
                            .collect();
                        assert_eq!(mesh_keys(&grid, p, holder, dim, j), named, "{kind:?} {holder} {dim} {j}");
                    }
                }
            }
        }
    }
}
