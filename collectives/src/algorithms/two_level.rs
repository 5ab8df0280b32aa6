//! Two-level collectives: inside each group of a [`Hierarchy`] (a machine's cores, an
//! edge switch's hosts; a direct network's grid rows), then among the groups' leaders,
//! then inside again, so that only the leaders' messages cross from group to group.
//!
//! This is the decomposition of Open MPI's `han` ([HAN 2020]: Luo, Bosilca et al.,
//! "HAN: a Hierarchical AutotuNed Collective Communication Framework", IEEE CLUSTER
//! 2020; `ompi/mca/coll/han`): its all-reduce is a lower-level (intra-node) reduce, an
//! upper-level (inter-node) reduce, an upper-level broadcast and a lower-level broadcast
//! ("lr, ur, ub, lb" in `coll_han_allreduce.c`), its broadcast the upper level then the
//! lower. `han` cuts the message into segments and pipelines the levels; these schedules
//! run each level on the whole message, one after the other (unsegmented). The
//! all-gather is the single-leader case of the multi-leader all-gather ([Kandalla 2009]:
//! Kandalla et al., "Designing multi-leader-based Allgather algorithms for multi-core
//! clusters", IPDPS 2009): gather inside each node, all-gather among the leaders,
//! broadcast inside.
//!
//! Every level is a building block of the flat schedules: the binomial trees of
//! Algorithms 4.2 and 4.3 ([`broadcast_down`], [`reduce_up`]) laid over a group's ranks or
//! over the leaders, and the ring all-gather of Algorithm 4.4
//! ([`allgather_ring_parts`]) over the leaders. Groups may differ in size, and a single
//! group makes each schedule its flat tree.
//!
//! Costs, for g groups of at most c ranks, m bytes a node: t_s, t_w are the links'
//! inside a group (on a cluster, `intra`), T_s, T_w those between leaders (`inter`); a
//! message between leaders of a direct network crosses several links.
//!
//! Tags: [`TWO_LEVEL_GROUPS`] inside the groups, [`TWO_LEVEL_LEADERS`] among the leaders;
//! the all-reduce's and all-gather's way back down walks the same tree edges as the way
//! up in the other direction, so no (sender, receiver, tag) repeats.

use bytes::Bytes;
use topocomm_proto::NodeId;

use super::allgather::allgather_ring_parts;
use super::blocks::concat;
use super::hierarchy::Hierarchy;
use super::patterns::{LineGroup, Reduction};
use super::phases::{TWO_LEVEL_GROUPS, TWO_LEVEL_LEADERS};
use super::tree::{BinomialTree, broadcast_down, reduce_up};
use crate::comm::{Comm, CommError};

/// This node's binomial tree inside its group, rooted at the group's leader for `root`.
fn group_tree(comm: &Comm, hierarchy: &Hierarchy, root: NodeId) -> (BinomialTree, impl Fn(usize) -> NodeId + use<>) {
    let g = hierarchy.group_of(comm.id());
    let group = hierarchy.group(g);
    let leader = hierarchy.position(hierarchy.leader(g, root));
    (BinomialTree::new(leader, group.len(), hierarchy.position(comm.id())), move |k| group.at(k))
}

/// The binomial tree among the groups' leaders for `root`, rooted at the root's group,
/// as a leader sees it.
fn leaders_tree(comm: &Comm, hierarchy: &Hierarchy, root: NodeId) -> (BinomialTree, impl Fn(usize) -> NodeId + use<>) {
    let tree = BinomialTree::new(hierarchy.group_of(root), hierarchy.groups(), hierarchy.group_of(comm.id()));
    let hierarchy = *hierarchy;
    (tree, move |g| hierarchy.leader(g, root))
}

/// Whether this node leads its group in a collective rooted at `root`.
fn leads(comm: &Comm, hierarchy: &Hierarchy, root: NodeId) -> bool {
    hierarchy.leader(hierarchy.group_of(comm.id()), root) == comm.id()
}

/// Two-level broadcast ([HAN 2020]'s upper-level then lower-level broadcast): the root
/// leads its own group, the first rank leads every other; the leaders' binomial tree
/// carries the message to every leader, then each group's tree from its leader.
///
/// ```text
/// if I lead my group then
///     X := ONE_TO_ALL_BC(X) among the leaders, from the root     /* Algorithm 4.2 */
/// X := ONE_TO_ALL_BC(X) in my group, from its leader             /* Algorithm 4.2 */
/// ```
///
/// Steps: ⌈log g⌉ + ⌈log c⌉ (log p on a √p x √p grid of groups). Cost
/// ⌈log g⌉(T_s + T_w m) + ⌈log c⌉(t_s + t_w m): g - 1 messages cross between groups,
/// whatever the root.
pub async fn broadcast(comm: &Comm, hierarchy: Hierarchy, root: NodeId, message: Bytes) -> Result<Bytes, CommError> {
    let mut x = message;
    if leads(comm, &hierarchy, root) {
        let (tree, leader) = leaders_tree(comm, &hierarchy, root);
        x = broadcast_down(comm, &tree, leader, x, TWO_LEVEL_LEADERS).await?;
    }
    let (tree, member) = group_tree(comm, &hierarchy, root);
    broadcast_down(comm, &tree, member, x, TWO_LEVEL_GROUPS).await
}

/// Two-level reduction, the dual of [`broadcast`] ([HAN 2020]'s lower-level then
/// upper-level reduce): each group reduces to its leader up its binomial tree (the root
/// leads its own), then the leaders reduce to the root up theirs.
///
/// ```text
/// sum := ALL_TO_ONE_REDUCE(X) in my group, to its leader         /* Algorithm 4.3 */
/// if I lead my group then
///     sum := ALL_TO_ONE_REDUCE(sum) among the leaders, to the root
/// ```
///
/// The root returns the reduction of every node's vector, every other node an empty
/// buffer. Steps: ⌈log g⌉ + ⌈log c⌉. Cost ⌈log c⌉(t_s + t_w m) + ⌈log g⌉(T_s + T_w m),
/// plus ⌈log c⌉ + ⌈log g⌉ combines on the longest path.
pub async fn reduce(
    comm: &Comm,
    hierarchy: Hierarchy,
    root: NodeId,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let combine = |sum: Bytes, x: Bytes| reduction.combine(comm, sum, &x);
    let (tree, member) = group_tree(comm, &hierarchy, root);
    let Some(sum) = reduce_up(comm, &tree, member, vector, combine, TWO_LEVEL_GROUPS).await? else {
        return Ok(Bytes::new());
    };
    let (tree, leader) = leaders_tree(comm, &hierarchy, root);
    let sum = reduce_up(comm, &tree, leader, sum, combine, TWO_LEVEL_LEADERS).await?;
    Ok(sum.unwrap_or_default())
}

/// Two-level all-reduce, [HAN 2020]'s four levels unsegmented: reduce inside each group
/// (lr), reduce among the leaders (ur), broadcast among them (ub), broadcast inside each
/// group (lb) — that is, the two-level reduction to node 0 and the two-level broadcast
/// from it.
///
/// ```text
/// sum := TWO_LEVEL_REDUCE(X, root 0)          /* lr, ur: see reduce */
/// result := TWO_LEVEL_BC(sum, root 0)         /* ub, lb: see broadcast */
/// ```
///
/// Steps: 2(⌈log g⌉ + ⌈log c⌉). Cost 2⌈log c⌉(t_s + t_w m) + 2⌈log g⌉(T_s + T_w m),
/// plus the combines: 2(g - 1) messages of m bytes cross between groups. The ring
/// all-reduce over every node sends g messages of m/p across the groups' boundaries in
/// each of its 2(p - 1) steps, 2g(p - 1) in all.
pub async fn allreduce(comm: &Comm, hierarchy: Hierarchy, vector: Bytes, reduction: Reduction) -> Result<Bytes, CommError> {
    let sum = reduce(comm, hierarchy, 0, vector, reduction).await?;
    broadcast(comm, hierarchy, 0, sum).await
}

/// Two-level all-gather ([Kandalla 2009], one leader a group): each group gathers its
/// blocks to its leader up its binomial tree rooted at the leader — every subtree is then
/// a run of consecutive ranks, so appending a child's blocks to one's own keeps rank
/// order — the leaders pass their groups' blocks round the ring of leaders
/// (Algorithm 4.4), and each leader broadcasts all p blocks down its group's tree.
///
/// ```text
/// ours := GATHER(my block) in my group, to its leader   /* Algorithm 4.3, appending */
/// if I lead my group then
///     all := ALL_TO_ALL_BC_RING(ours) among the leaders /* Algorithm 4.4 */
/// all := ONE_TO_ALL_BC(all) in my group, from its leader /* Algorithm 4.2 */
/// ```
///
/// Blocks may differ in length (a layout's). Steps: 2⌈log c⌉ + g - 1. Cost
/// t_s ⌈log c⌉ + t_w m (c - 1) to gather, (g - 1)(T_s + T_w m c) round the leaders,
/// ⌈log c⌉(t_s + t_w m p) down the groups: g(g - 1) messages cross between groups,
/// against g(p - 1) for the ring over every node (g of its p messages a step).
pub async fn allgather(comm: &Comm, hierarchy: Hierarchy, mine: Bytes) -> Result<Bytes, CommError> {
    let append = |ours: Bytes, theirs: Bytes| Ok(concat([&ours, &theirs]));
    let (tree, member) = group_tree(comm, &hierarchy, 0);
    let mut all = Bytes::new();
    if let Some(ours) = reduce_up(comm, &tree, &member, mine, append, TWO_LEVEL_GROUPS).await? {
        let leaders = LineGroup { members: hierarchy.leaders(), wraps: true }.ring_order();
        all = concat(&allgather_ring_parts(comm, &leaders, ours, TWO_LEVEL_LEADERS).await?);
    }
    broadcast_down(comm, &tree, member, all, TWO_LEVEL_GROUPS).await
}
