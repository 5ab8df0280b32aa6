//! Building blocks the one-to-all broadcast and its dual, the all-to-one reduction,
//! share: the virtual-id relabelling of the hypercube algorithms, the grid a mesh
//! algorithm walks, the line group (a ring, a row or a column: its [`Members`], the
//! [`RingOrder`] a ring algorithm walks it in, and the halves of a pass along it) with
//! its store-and-forward broadcast and reduction, and the element-wise reduction step
//! (the tags of the steps are [`super::phases`]).
//!
//! A group's members are computed, not stored: every line is an arithmetic progression
//! of ids, so a node's view of a ring of a million nodes takes a few words, and finding
//! its own position takes a division. The groups a placement makes on a switched network
//! (a machine's ranks, wherever they are: [`RankGroups`]) are progressions of positions
//! in the network's own table of its groups, which a [`Numbering`] reads.
//!
//! Everything here speaks `Comm` (send, recv) and plain ids; nothing touches links or
//! timers, and nothing knows which collective called it.

use bytes::{Bytes, BytesMut};
use topocomm_proto::elements::combine;
use topocomm_proto::network::RankGroups;
use topocomm_proto::spec::{Dtype, ReduceOp};
use topocomm_proto::topology::squarest_grid;
use topocomm_proto::{NodeId, Topology, TopologyKind};

use super::phases::Phase;
use crate::comm::segments::Segment;
use crate::comm::{Comm, CommError};

/// The number of hypercube dimensions a `p`-node schedule needs: d = ⌈log2 p⌉
/// (0 for one node).
pub fn hypercube_dimension(p: usize) -> usize {
    p.next_power_of_two().trailing_zeros() as usize
}

/// How the hypercube algorithms renumber nodes so that the root becomes virtual node 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relabelling {
    /// `virtual = id XOR root` (Algorithm 4.2, line 3): p is a power of two.
    Xor { root: NodeId },
    /// `virtual = (id - root) mod p`: the MPI-style binomial tree for any other p.
    Rotate { root: NodeId, p: usize },
}

impl Relabelling {
    /// The textbook XOR relabelling when `p` is a power of two, the rotation otherwise.
    pub fn new(root: NodeId, p: usize) -> Self {
        if p.is_power_of_two() { Relabelling::Xor { root } } else { Relabelling::Rotate { root, p } }
    }

    /// The virtual id of physical node `id` (the root is 0).
    pub fn to_virtual(self, id: NodeId) -> usize {
        match self {
            Relabelling::Xor { root } => id ^ root,
            Relabelling::Rotate { root, p } => (id + p - root) % p,
        }
    }

    /// The physical node of `virtual_id`; the inverse of [`Relabelling::to_virtual`].
    pub fn to_physical(self, virtual_id: usize) -> NodeId {
        match self {
            Relabelling::Xor { root } => virtual_id ^ root,
            Relabelling::Rotate { root, p } => (virtual_id + root) % p,
        }
    }
}

/// The grid a mesh algorithm walks: the topology's own dims on a mesh, torus, mesh3d or
/// torus3d, the squarest 2-D grid of p otherwise. Ids are row-major, the last dimension
/// fastest (as in `Topology`), so a row of a 2-D grid is a run of consecutive ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    dims: Vec<usize>,
    /// Whether every line wraps around (torus, torus3d): then the ring method runs
    /// along it, otherwise the line method.
    wraps: bool,
}

impl Grid {
    /// The grid of `topology` (see the type's docs).
    pub fn of(topology: &Topology) -> Self {
        match topology.kind() {
            TopologyKind::Mesh | TopologyKind::Mesh3d => Grid { dims: topology.dims().to_vec(), wraps: false },
            TopologyKind::Torus | TopologyKind::Torus3d => Grid { dims: topology.dims().to_vec(), wraps: true },
            TopologyKind::Ring
            | TopologyKind::Hypercube
            | TopologyKind::Full
            | TopologyKind::FatTree
            | TopologyKind::Dragonfly
            | TopologyKind::Cluster
            | TopologyKind::Graph => {
                let (rows, cols) = squarest_grid(topology.p());
                Grid { dims: vec![rows, cols], wraps: false }
            }
        }
    }

    /// The extent of each dimension.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// The coordinates of `id`, one per dimension, the last one fastest.
    pub fn coords(&self, id: NodeId) -> Vec<usize> {
        let mut coords = vec![0; self.dims.len()];
        let mut rest = id;
        for (c, &extent) in coords.iter_mut().zip(&self.dims).rev() {
            *c = rest % extent;
            rest /= extent;
        }
        coords
    }

    /// The ids after each other along dimension `dim`: the product of the extents after it.
    fn stride(&self, dim: usize) -> usize {
        self.dims[dim + 1..].iter().product()
    }

    /// The nodes at coordinate `j` in dimension `dim` that share the coordinates of `id`
    /// after `dim` (those before it run free), in id order: the nodes one member of a
    /// line along `dim` stands for in a mesh scatter, gather or all-to-all phase.
    /// Computed directly, one id per node returned.
    pub fn nodes_at(&self, id: NodeId, dim: usize, j: usize) -> Vec<NodeId> {
        let stride = self.stride(dim);
        let outer: usize = self.dims[..dim].iter().product();
        let (period, offset) = (self.dims[dim] * stride, j * stride + id % stride);
        (0..outer).map(|a| a * period + offset).collect()
    }

    /// The line through `id` along dimension `dim`: every node that differs from `id`
    /// only in coordinate `dim`, in order of that coordinate (so member `k` has
    /// coordinate `k`). Along the last dimension that is `id`'s row.
    pub fn line(&self, id: NodeId, dim: usize) -> LineGroup<'static> {
        let stride = self.stride(dim);
        let first = id - self.coords(id)[dim] * stride;
        LineGroup { members: Members::new(first, stride, self.dims[dim]), wraps: self.wraps }
    }
}

/// The members of a line group, in order: `first`, `first + stride`, ...,
/// `first + (n - 1)·stride` (the whole ring 0, 1, ..., p-1 is first 0, stride 1; a row or
/// column of a grid has the stride of its dimension), counted in a [`Numbering`]: the
/// ids themselves, or positions in a network's table of its groups. Computed, not stored:
/// a few words whatever n, and a member's position is found by a division.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Members<'a> {
    first: usize,
    stride: usize,
    n: usize,
    numbering: Numbering<'a>,
}

/// What the progression of a [`Members`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbering<'a> {
    /// The ids: index i is node i.
    Ids,
    /// The ranks group by group, each group's in the order of its hosts: index i is the
    /// rank in slot i of the groups ([`RankGroups::at_slot`]), so a group is a run.
    Grouped(&'a RankGroups),
    /// The lanes across the groups: index j·g + k is the rank at position j of group k
    /// (g groups, j below the smallest group's size), so a lane is a run.
    Lanes(&'a RankGroups),
}

impl Numbering<'_> {
    /// The node at index `index`.
    fn id(self, index: usize) -> NodeId {
        match self {
            Numbering::Ids => index,
            Numbering::Grouped(groups) => groups.at_slot(index),
            Numbering::Lanes(groups) => groups.member(index % groups.groups(), index / groups.groups()),
        }
    }

    /// The index of node `id`, if it has one.
    fn index(self, id: NodeId) -> Option<usize> {
        match self {
            Numbering::Ids => Some(id),
            Numbering::Grouped(groups) => groups.slot_of(id),
            Numbering::Lanes(groups) => {
                groups.slot_of(id)?;
                let position = groups.position(id);
                (position < groups.smallest()).then(|| position * groups.groups() + groups.group_of(id))
            }
        }
    }
}

impl Members<'static> {
    /// The `n` ids `first + k·stride`, k = 0, 1, ..., n-1.
    pub fn new(first: NodeId, stride: usize, n: usize) -> Self {
        Members { first, stride, n, numbering: Numbering::Ids }
    }
}

impl<'a> Members<'a> {
    /// The `n` nodes at indices `first + k·stride` of `numbering`.
    pub fn numbered(numbering: Numbering<'a>, first: usize, stride: usize, n: usize) -> Self {
        Members { first, stride, n, numbering }
    }

    /// The `n` members at positions `offset`, `offset + stride`, ... of these.
    pub fn part(self, offset: usize, stride: usize, n: usize) -> Self {
        Members { first: self.first + offset * self.stride, stride: self.stride * stride, n, ..self }
    }

    /// The number of members.
    pub fn len(self) -> usize {
        self.n
    }

    /// Whether there is no member.
    pub fn is_empty(self) -> bool {
        self.n == 0
    }

    /// The member at position `k` (k < n).
    pub fn at(self, k: usize) -> NodeId {
        debug_assert!(k < self.n, "position {k} of a group of {}", self.n);
        self.numbering.id(self.first + k * self.stride)
    }

    /// The position of `id` among the members, if it is one.
    pub fn position_of(self, id: NodeId) -> Option<usize> {
        let offset = self.numbering.index(id)?.checked_sub(self.first)?;
        let k = match self.stride {
            0 => (offset == 0).then_some(0)?,
            stride if offset % stride == 0 => offset / stride,
            _ => return None,
        };
        (k < self.n).then_some(k)
    }

    /// The members in order.
    pub fn iter(self) -> impl Iterator<Item = NodeId> + use<'a> {
        (0..self.n).map(move |k| self.at(k))
    }

    /// This node's position among the members; a node that is not one fails the run.
    pub fn my_position(self, comm: &Comm) -> Result<usize, CommError> {
        self.position_of(comm.id()).ok_or_else(|| CommError::Unsupported {
            me: comm.id(),
            algorithm: "line group".into(),
            reason: match self.numbering {
                Numbering::Ids => format!(
                    "node {} is not a member of the line of {} nodes from node {} in steps of {}",
                    comm.id(),
                    self.n,
                    self.first,
                    self.stride
                ),
                _ => format!(
                    "node {} is not one of the {} members {:?}",
                    comm.id(),
                    self.n,
                    self.iter().collect::<Vec<_>>()
                ),
            },
        })
    }
}

/// The order a ring algorithm (Algorithms 4.4 and 4.5) walks a line group in: a group
/// that wraps is its own ring; a line that does not is walked as the ring of its
/// positions 0, 2, 4, ... up the line and ..., 5, 3, 1 back down, whose every hop spans
/// at most two links and whose n hops use each link direction once. Computed, as
/// [`Members`] are: ring position k is [`RingOrder::at`]`(k)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingOrder<'a> {
    members: Members<'a>,
    /// Whether the line is walked up its even positions and back down its odd ones.
    up_and_back: bool,
}

impl<'a> RingOrder<'a> {
    /// The number of members on the ring.
    pub fn len(self) -> usize {
        self.members.len()
    }

    /// Whether the ring has no member.
    pub fn is_empty(self) -> bool {
        self.members.is_empty()
    }

    /// The line position that stands at ring position `k`.
    fn line_position(self, k: usize) -> usize {
        let (n, evens) = (self.len(), self.len().div_ceil(2));
        match self.up_and_back {
            false => k,
            true if k < evens => 2 * k,
            true => 2 * (n - 1 - k) + 1,
        }
    }

    /// The ring position of line position `j`: the inverse of [`RingOrder::line_position`].
    fn ring_position(self, j: usize) -> usize {
        match self.up_and_back {
            false => j,
            true if j.is_multiple_of(2) => j / 2,
            true => self.len() - 1 - j / 2,
        }
    }

    /// The member at ring position `k` (k < n).
    pub fn at(self, k: usize) -> NodeId {
        self.members.at(self.line_position(k))
    }

    /// The ring position of `id`, if it is a member.
    pub fn position_of(self, id: NodeId) -> Option<usize> {
        self.members.position_of(id).map(|j| self.ring_position(j))
    }

    /// The members in ring order.
    pub fn iter(self) -> impl Iterator<Item = NodeId> + use<'a> {
        (0..self.len()).map(move |k| self.at(k))
    }

    /// This node's ring position; a node that is not a member fails the run.
    pub fn my_position(self, comm: &Comm) -> Result<usize, CommError> {
        self.members.my_position(comm).map(|j| self.ring_position(j))
    }
}

/// A direction along a line group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Towards higher positions (clockwise on a ring).
    Up,
    /// Towards lower positions (counter-clockwise on a ring).
    Down,
}

impl Direction {
    /// Both directions, in the order a pass serves its halves: Up, then Down.
    pub const BOTH: [Direction; 2] = [Direction::Up, Direction::Down];

    /// The other direction.
    pub fn reverse(self) -> Self {
        match self {
            Direction::Up => Direction::Down,
            Direction::Down => Direction::Up,
        }
    }
}

/// Where a member stands in a store-and-forward pass that starts at the root position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassPosition {
    Root,
    /// `distance` hops from the root, in the half that goes `direction`.
    Half {
        direction: Direction,
        distance: usize,
    },
}

/// An ordered group of nodes that pass a message along from member to member: the whole
/// ring, or one row or column of a grid. Members next to each other in the order are
/// neighbours; with `wraps`, so are the last and the first.
///
/// A pass from the root position goes both ways, one hop per step (store-and-forward,
/// [KGGK94 3.2]): on a wrapping group of n members the `Up` (clockwise) half reaches
/// distances 1..=⌊n/2⌋ and the `Down` half 1..=⌊(n-1)/2⌋; on a line each half runs to
/// its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineGroup<'a> {
    pub members: Members<'a>,
    pub wraps: bool,
}

impl LineGroup<'static> {
    /// All `p` nodes as one ring, 0, 1, ..., p-1 and back to 0.
    pub fn ring(p: usize) -> Self {
        LineGroup { members: Members::new(0, 1, p), wraps: true }
    }
}

impl<'a> LineGroup<'a> {
    fn len(&self) -> usize {
        self.members.len()
    }

    /// The order a ring algorithm walks this group in (see [`RingOrder`]).
    pub fn ring_order(&self) -> RingOrder<'a> {
        RingOrder { members: self.members, up_and_back: !self.wraps }
    }

    /// How far the half going `direction` reaches from position `root`.
    pub fn reach(&self, root: usize, direction: Direction) -> usize {
        let n = self.len();
        match (self.wraps, direction) {
            (true, Direction::Up) => n / 2,
            (true, Direction::Down) => (n - 1) / 2,
            (false, Direction::Up) => n - 1 - root,
            (false, Direction::Down) => root,
        }
    }

    /// Where position `at` stands in a pass from position `root`.
    pub fn place(&self, at: usize, root: usize) -> PassPosition {
        let n = self.len();
        let up = (at + n - root) % n;
        if up == 0 {
            PassPosition::Root
        } else if up <= self.reach(root, Direction::Up) {
            PassPosition::Half { direction: Direction::Up, distance: up }
        } else {
            PassPosition::Half { direction: Direction::Down, distance: n - up }
        }
    }

    /// The position `distance` hops from position `from` going `direction` (round the
    /// group, distance ≤ n): in a pass from `root`, the member at that distance in the
    /// half going `direction` is `away(root, direction, distance)`.
    pub fn away(&self, from: usize, direction: Direction, distance: usize) -> usize {
        let n = self.len();
        match direction {
            Direction::Up => (from + distance) % n,
            Direction::Down => (from + n - distance) % n,
        }
    }

    /// The member one hop from position `at` going `direction`.
    pub fn next(&self, at: usize, direction: Direction) -> NodeId {
        self.members.at(self.away(at, direction, 1))
    }
}

/// Store-and-forward broadcast along `group` from the member at `root_position`
/// ([KGGK94 3.2, Fig. 3.2], store-and-forward on a ring, and its line variant):
///
/// ```text
/// if I am the root then
///     send X to my Up neighbour   (if the Up half is not empty)
///     send X to my Down neighbour (if the Down half is not empty)
/// else                            /* distance δ from the root, in the half going dir */
///     receive X from my neighbour against dir
///     if δ < reach(dir) then send X to my neighbour along dir
/// ```
///
/// Every member returns X. The message to distance δ travels with tag `phase.tag(δ)`.
/// Steps: the larger reach (the root's two sends leave at once: links are independent);
/// ⌊n/2⌋ on a ring of n, cost (t_s + t_w m)⌊n/2⌋ — the textbook's ⌈p/2⌉ for even p.
pub async fn broadcast_along(
    comm: &Comm,
    group: &LineGroup<'_>,
    root_position: usize,
    message: Bytes,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let me = group.members.my_position(comm)?;
    match group.place(me, root_position) {
        PassPosition::Root => {
            for direction in Direction::BOTH {
                if group.reach(root_position, direction) >= 1 {
                    comm.send(group.next(me, direction), phase.tag(1), message.clone()).await?;
                }
            }
            Ok(message)
        }
        PassPosition::Half { direction, distance } => {
            let x = comm.recv(group.next(me, direction.reverse()), phase.tag(distance)).await?;
            if distance < group.reach(root_position, direction) {
                comm.send(group.next(me, direction), phase.tag(distance + 1), x.clone()).await?;
            }
            Ok(x)
        }
    }
}

/// Store-and-forward reduction along `group` to the member at `root_position`: the dual
/// of [`broadcast_along`], the same hops in reverse order, combining on the way.
///
/// ```text
/// sum := X
/// if I am the root then
///     receive Y from my Up neighbour   (if the Up half is not empty);  sum := sum op Y
///     receive Y from my Down neighbour (if the Down half is not empty); sum := sum op Y
/// else                            /* distance δ from the root, in the half going dir */
///     if δ < reach(dir) then receive Y from my neighbour along dir; sum := sum op Y
///     send sum to my neighbour against dir
/// ```
///
/// The root position gets `Some(reduction of every member's vector)`, every other member
/// `None`. The hop from distance δ to δ-1 carries tag `phase.tag(δ)`. Steps and cost as
/// for the broadcast, plus the time of the combines.
pub async fn reduce_along(
    comm: &Comm,
    group: &LineGroup<'_>,
    root_position: usize,
    vector: Bytes,
    reduction: Reduction,
    phase: Phase,
) -> Result<Option<Bytes>, CommError> {
    let me = group.members.my_position(comm)?;
    let mut sum = vector;
    match group.place(me, root_position) {
        PassPosition::Root => {
            for direction in Direction::BOTH {
                if group.reach(root_position, direction) >= 1 {
                    let y = comm.recv(group.next(me, direction), phase.tag(1)).await?;
                    sum = reduction.combine(comm, sum, &y)?;
                }
            }
            Ok(Some(sum))
        }
        PassPosition::Half { direction, distance } => {
            if distance < group.reach(root_position, direction) {
                let y = comm.recv(group.next(me, direction), phase.tag(distance + 1)).await?;
                sum = reduction.combine(comm, sum, &y)?;
            }
            comm.send(group.next(me, direction.reverse()), phase.tag(distance), sum).await?;
            Ok(None)
        }
    }
}

/// An element-wise reduction: vectors of `dtype` elements combined with `op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reduction {
    pub dtype: Dtype,
    pub op: ReduceOp,
}

impl Reduction {
    /// `sum[j] := sum[j] op x[j]` for every element j (in place when `sum` is not shared,
    /// as a received message is: no copy, no allocation). Known zeros combined with known
    /// zeros are known zeros, whatever the operator (see `crate::zeros`).
    pub fn combine(self, comm: &Comm, sum: Bytes, x: &[u8]) -> Result<Bytes, CommError> {
        if sum.len() == x.len() && crate::zeros::is_zeros(&sum) && crate::zeros::is_zeros(x) {
            return Ok(sum);
        }
        let mut acc = sum.try_into_mut().unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        combine(self.dtype, self.op, &mut acc, x).map_err(|error| comm.elements_error(error))?;
        Ok(acc.freeze())
    }

    /// A segment of `sum` combined with the partner's `x` (every operator commutes):
    /// in place when the segment is this node's to write, else in whichever buffer no
    /// one else holds (the received one, as a whole-vector exchange does).
    pub fn combine_segment(self, comm: &Comm, sum: Segment, x: Bytes) -> Result<Segment, CommError> {
        match sum {
            Segment::Own(mut own) => {
                combine(self.dtype, self.op, &mut own, &x).map_err(|error| comm.elements_error(error))?;
                Ok(Segment::Own(own))
            }
            Segment::Shared(own) if own.is_unique() => Ok(Segment::Shared(self.combine(comm, own, &x)?)),
            Segment::Shared(own) => Ok(Segment::Shared(self.combine(comm, x, &own)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(group: &LineGroup<'_>, root: usize) -> Vec<PassPosition> {
        (0..group.len()).map(|at| group.place(at, root)).collect()
    }

    fn half(direction: Direction, distance: usize) -> PassPosition {
        PassPosition::Half { direction, distance }
    }

    #[test]
    fn ring_halves_split_the_distances() {
        use Direction::{Down, Up};
        // Ring of 8 from 2: clockwise 3,4,5,6 (distances 1..=4), counter-clockwise 1,0,7.
        let ring = LineGroup::ring(8);
        assert_eq!(
            places(&ring, 2),
            [
                half(Down, 2),
                half(Down, 1),
                PassPosition::Root,
                half(Up, 1),
                half(Up, 2),
                half(Up, 3),
                half(Up, 4),
                half(Down, 3)
            ]
        );
        assert_eq!((ring.reach(2, Up), ring.reach(2, Down)), (4, 3));
        let ring = LineGroup::ring(7);
        assert_eq!((ring.reach(0, Up), ring.reach(0, Down)), (3, 3));
        assert_eq!(places(&LineGroup::ring(2), 1), [half(Up, 1), PassPosition::Root]);
        assert_eq!(places(&LineGroup::ring(1), 0), [PassPosition::Root]);
        // Every distance is within its half's reach.
        for n in 1..20 {
            let ring = LineGroup::ring(n);
            for root in 0..n {
                for place in places(&ring, root) {
                    if let PassPosition::Half { direction, distance } = place {
                        assert!((1..=ring.reach(root, direction)).contains(&distance), "{n} {root} {place:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn line_halves_run_to_the_ends() {
        use Direction::{Down, Up};
        let line = LineGroup { members: Members::new(10, 1, 4), wraps: false };
        assert_eq!(places(&line, 1), [half(Down, 1), PassPosition::Root, half(Up, 1), half(Up, 2)]);
        assert_eq!((line.reach(1, Up), line.reach(1, Down)), (2, 1));
        assert_eq!(line.next(3, Down), 12);
        assert_eq!(places(&line, 3), [half(Down, 3), half(Down, 2), half(Down, 1), PassPosition::Root]);
    }

    fn ids(members: impl Iterator<Item = NodeId>) -> Vec<NodeId> {
        members.collect()
    }

    #[test]
    fn grid_lines() {
        let torus = Topology::new(TopologyKind::Torus, 12, Some(&[3, 4])).unwrap();
        let grid = Grid::of(&torus);
        assert_eq!(grid.coords(7), [1, 3]);
        assert_eq!(grid.line(7, 1), LineGroup { members: Members::new(4, 1, 4), wraps: true });
        assert_eq!(grid.line(7, 0), LineGroup { members: Members::new(3, 4, 3), wraps: true });
        assert_eq!(ids(grid.line(7, 0).members.iter()), [3, 7, 11]);
        let mesh3d = Topology::new(TopologyKind::Mesh3d, 24, Some(&[2, 3, 4])).unwrap();
        let grid = Grid::of(&mesh3d);
        assert_eq!(grid.coords(13), [1, 0, 1]);
        assert_eq!(ids(grid.line(13, 2).members.iter()), [12, 13, 14, 15]);
        assert_eq!(ids(grid.line(13, 1).members.iter()), [13, 17, 21]);
        assert_eq!(ids(grid.line(13, 0).members.iter()), [1, 13]);
        assert!(!grid.line(13, 0).wraps);
        // Every node lies on each of its lines, at its own coordinate.
        for id in 0..24 {
            for dim in 0..3 {
                assert_eq!(grid.line(id, dim).members.position_of(id), Some(grid.coords(id)[dim]), "{id} {dim}");
            }
        }
        let ring = Topology::new(TopologyKind::Ring, 6, None).unwrap();
        assert_eq!(Grid::of(&ring), Grid { dims: vec![2, 3], wraps: false });
    }

    #[test]
    fn nodes_at_a_coordinate_are_those_the_coordinates_name() {
        for (kind, p, dims) in [
            (TopologyKind::Mesh, 12, &[3, 4][..]),
            (TopologyKind::Torus3d, 24, &[2, 3, 4][..]),
            (TopologyKind::Mesh3d, 30, &[5, 3, 2][..]),
        ] {
            let grid = Grid::of(&Topology::new(kind, p, Some(dims)).unwrap());
            for id in 0..p {
                for dim in 0..dims.len() {
                    for j in 0..dims[dim] {
                        let mine = grid.coords(id);
                        let named: Vec<NodeId> = (0..p)
                            .filter(|&n| {
                                let c = grid.coords(n);
                                c[dim] == j && c[dim + 1..] == mine[dim + 1..]
                            })
                            .collect();
                        assert_eq!(grid.nodes_at(id, dim, j), named, "{kind:?} {id} {dim} {j}");
                    }
                }
            }
        }
    }

    #[test]
    fn members_are_found_where_they_stand() {
        let members = Members::new(5, 3, 4);
        assert_eq!(ids(members.iter()), [5, 8, 11, 14]);
        assert_eq!((members.len(), members.at(2)), (4, 11));
        let positions: Vec<Option<usize>> = (0..18).map(|id| members.position_of(id)).collect();
        let mut expected = vec![None; 18];
        for (k, id) in [5, 8, 11, 14].into_iter().enumerate() {
            expected[id] = Some(k);
        }
        assert_eq!(positions, expected);
        assert_eq!(Members::new(7, 0, 1).position_of(7), Some(0));
        assert_eq!(Members::new(7, 0, 1).position_of(8), None);
        assert_eq!(Members::new(0, 1, 0).position_of(0), None);
        let ring = LineGroup::ring(1 << 20).members;
        assert_eq!(ring.position_of((1 << 20) - 1), Some((1 << 20) - 1));
        assert_eq!(ring.position_of(1 << 20), None);
    }

    #[test]
    fn a_line_is_walked_up_the_evens_and_down_the_odds() {
        let order = |n: usize, wraps| LineGroup { members: Members::new(10, 1, n), wraps }.ring_order();
        assert_eq!(ids(order(6, false).iter()), [10, 12, 14, 15, 13, 11]);
        assert_eq!(ids(order(5, false).iter()), [10, 12, 14, 13, 11]);
        assert_eq!(ids(order(2, false).iter()), [10, 11]);
        assert_eq!(ids(order(1, false).iter()), [10]);
        assert_eq!(ids(order(5, true).iter()), [10, 11, 12, 13, 14]);
        for n in 1..12 {
            for wraps in [false, true] {
                let ring = order(n, wraps);
                let walk = ids(ring.iter());
                // Off the wrap link, no hop of the walk spans more than two links.
                let longest = if wraps { 1 } else { 2 };
                for (a, b) in walk.iter().zip(walk.iter().cycle().skip(1)) {
                    assert!(a.abs_diff(*b) <= longest || (wraps && a.abs_diff(*b) == n - 1), "{n}: {walk:?}");
                }
                for (k, &id) in walk.iter().enumerate() {
                    assert_eq!(ring.position_of(id), Some(k), "{n} {wraps}: {walk:?}");
                }
                assert_eq!(ring.position_of(10 + n), None);
                let mut sorted = walk.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (10..10 + n).collect::<Vec<_>>());
            }
        }
        let column = LineGroup { members: Members::new(3, 4, 3), wraps: false }.ring_order();
        assert_eq!(ids(column.iter()), [3, 11, 7]);
    }

    #[test]
    fn the_halves_of_a_pass_cover_every_member_once() {
        for n in 1..12 {
            for wraps in [false, true] {
                let group = LineGroup { members: Members::new(100, 1, n), wraps };
                for root in 0..n {
                    let mut seen = vec![root];
                    for direction in Direction::BOTH {
                        for distance in 1..=group.reach(root, direction) {
                            let at = group.away(root, direction, distance);
                            assert_eq!(group.place(at, root), half(direction, distance), "{n} {wraps} {root}");
                            seen.push(at);
                        }
                    }
                    seen.sort_unstable();
                    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{n} {wraps} {root}");
                }
            }
        }
        let ring = LineGroup::ring(8);
        assert_eq!(ring.away(2, Direction::Down, 3), 7);
        assert_eq!(ring.next(7, Direction::Up), 0);
    }

    #[test]
    fn relabelling_round_trips() {
        for p in 1..=17 {
            for root in 0..p {
                let r = Relabelling::new(root, p);
                assert_eq!(r.to_virtual(root), 0);
                let mut seen: Vec<usize> = (0..p).map(|id| r.to_virtual(id)).collect();
                assert!((0..p).all(|id| r.to_physical(r.to_virtual(id)) == id));
                seen.sort_unstable();
                assert_eq!(seen, (0..p).collect::<Vec<_>>());
            }
        }
        assert_eq!(Relabelling::new(5, 8), Relabelling::Xor { root: 5 });
        assert_eq!(Relabelling::new(5, 6).to_virtual(1), 2);
    }

    #[test]
    fn hypercube_dimensions() {
        let dims: Vec<usize> = [1, 2, 3, 4, 5, 8, 9, 16, 17].iter().map(|&p| hypercube_dimension(p)).collect();
        assert_eq!(dims, [0, 1, 2, 2, 3, 3, 4, 4, 5]);
    }
}
