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
//! `han`'s "simple" all-reduce runs an all-reduce among the leaders between a reduce and
//! a broadcast inside the nodes: [`allreduce_ring`], with the ring among the leaders (for
//! large vectors; [`allreduce`]'s trees send the whole vector log g times in a row).
//! [`allreduce_multi_leader`] gives every rank of a group a lane instead of one leader
//! ([Kandalla 2009]'s multi-leader idea; [Mikami 2018]'s 2D-Torus all-reduce): a ring
//! reduce-scatter inside each group, a ring all-reduce of each shard along its lane
//! across the groups, all lanes at once, a ring all-gather inside.
//!
//! Every level is a building block of the flat schedules: the binomial trees of
//! Algorithms 4.2 and 4.3 ([`broadcast_down`], [`reduce_up`]) laid over a group's ranks or
//! over the leaders, and the ring all-gather of Algorithm 4.4
//! ([`allgather_ring_parts`]) and ring all-reduce ([`allreduce_ring_along`]) over the
//! leaders. Groups may differ in size, and a single group makes each schedule its flat
//! tree.
//!
//! Costs, for g groups of at most c ranks, m bytes a node: t_s, t_w are the links'
//! inside a group (on a cluster, `intra`), T_s, T_w those between leaders (`inter`); a
//! message between leaders of a direct network crosses several links.
//!
//! Tags: [`TWO_LEVEL_GROUPS`] inside the groups, [`TWO_LEVEL_LEADERS`] among the leaders
//! ([`TWO_LEVEL_LEADERS_RING`] for the leaders' ring all-reduce); the multi-leader
//! all-reduce's own [`MULTI_LEADER_FOLD`], [`MULTI_LEADER_GROUPS`], [`MULTI_LEADER_LANES`];
//! the all-reduce's and all-gather's way back down walks the same tree edges as the way
//! up in the other direction, so no (sender, receiver, tag) repeats.

use bytes::Bytes;
use topocomm_proto::NodeId;

use super::allgather::allgather_ring_parts;
use super::allreduce::{allreduce_ring_along, allreduce_ring_around};
use super::blocks::{BlockLayout, concat};
use super::folding::expect_layout_len;
use super::hierarchy::Hierarchy;
use super::patterns::{LineGroup, Reduction};
use super::phases::{
    MULTI_LEADER_FOLD, MULTI_LEADER_GROUPS, MULTI_LEADER_LANES, TWO_LEVEL_GROUPS, TWO_LEVEL_LEADERS,
    TWO_LEVEL_LEADERS_RING,
};
use super::tree::{BinomialTree, broadcast_down, reduce_up};
use crate::comm::{Comm, CommError};

/// This node's binomial tree inside its group, rooted at the group's leader for `root`.
fn group_tree<'h>(
    comm: &Comm,
    hierarchy: &Hierarchy<'h>,
    root: NodeId,
) -> (BinomialTree, impl Fn(usize) -> NodeId + use<'h>) {
    let leader = hierarchy.position(hierarchy.leader(hierarchy.group_of(comm.id()), root));
    group_tree_from(comm, hierarchy, leader)
}

/// This node's binomial tree inside its group, rooted at position `leader` of the group.
fn group_tree_from<'h>(
    comm: &Comm,
    hierarchy: &Hierarchy<'h>,
    leader: usize,
) -> (BinomialTree, impl Fn(usize) -> NodeId + use<'h>) {
    let group = hierarchy.group(hierarchy.group_of(comm.id()));
    (BinomialTree::new(leader, group.len(), hierarchy.position(comm.id())), move |k| group.at(k))
}

/// The binomial tree among the groups' leaders for `root`, rooted at the root's group,
/// as a leader sees it.
fn leaders_tree<'h>(
    comm: &Comm,
    hierarchy: &Hierarchy<'h>,
    root: NodeId,
) -> (BinomialTree, impl Fn(usize) -> NodeId + use<'h>) {
    let tree = BinomialTree::new(hierarchy.group_of(root), hierarchy.groups(), hierarchy.group_of(comm.id()));
    let hierarchy = *hierarchy;
    (tree, move |g| hierarchy.leader(g, root))
}

/// Whether this node leads its group in a collective rooted at `root`.
fn leads(comm: &Comm, hierarchy: &Hierarchy<'_>, root: NodeId) -> bool {
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
pub async fn broadcast(
    comm: &Comm,
    hierarchy: Hierarchy<'_>,
    root: NodeId,
    message: Bytes,
) -> Result<Bytes, CommError> {
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
    hierarchy: Hierarchy<'_>,
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
pub async fn allreduce(
    comm: &Comm,
    hierarchy: Hierarchy<'_>,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let sum = reduce(comm, hierarchy, 0, vector, reduction).await?;
    broadcast(comm, hierarchy, 0, sum).await
}

/// Two-level all-reduce with a ring among the leaders, [HAN 2020]'s "simple" all-reduce
/// (`mca_coll_han_allreduce_intra_simple`: a reduce inside each node, an all-reduce among
/// the nodes' leaders, a broadcast inside each node), the leaders' all-reduce the ring
/// of Algorithm 4.5 then 4.4 ([`allreduce_ring_along`]): each leader sends 2(g - 1)/g
/// of the vector between groups in 2(g - 1) messages of m/g, where the trees of
/// [`allreduce`] send it all 2⌈log g⌉ times in a row (large vectors).
///
/// ```text
/// all := around_leaders(X, op, ALLREDUCE_RING among the leaders)    /* see around_leaders */
/// ```
///
/// Steps: 2⌈log c⌉ + 2(g - 1). Cost 2⌈log c⌉(t_s + t_w m) + 2(g - 1)(T_s + T_w m/g), plus
/// the combines: 2g(g - 1) messages, 2(g - 1)m bytes in all, cross between groups.
pub async fn allreduce_ring(
    comm: &Comm,
    hierarchy: Hierarchy<'_>,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let combine = |sum: Bytes, x: Bytes| reduction.combine(comm, sum, &x);
    around_leaders(comm, hierarchy, vector, combine, async |ours| {
        let leaders = LineGroup { members: hierarchy.leaders(), wraps: true }.ring_order();
        allreduce_ring_along(comm, &leaders, ours, reduction, TWO_LEVEL_LEADERS_RING).await
    })
    .await
}

/// Multi-leader all-reduce, the hierarchical (2-D ring) all-reduce: every rank of a group
/// leads a lane, so that the c ranks of a group talk across groups at once, each for a
/// c-th of the vector, where [`allreduce_ring`] sends it all through one leader.
/// [Kandalla 2009]'s multi-leader design (there for the all-gather) on the all-reduce;
/// the 2D-Torus all-reduce of [Mikami 2018] (a reduce-scatter along the rows, an
/// all-reduce along the columns, an all-gather along the rows) with a group for a row.
/// Each level is a ring of [Thakur 2005]'s bandwidth-optimal all-reduce:
/// [`allreduce_ring_around`]'s reduce-scatter and all-gather (Algorithms 4.5 and 4.4)
/// inside each group, and between them [`allreduce_ring_along`] along each lane.
///
/// Lanes: c is the size of the smallest group (the last; every group where they are
/// equal), and the rank at position j < c of every group is on lane j, the g ranks
/// j, j + C, j + 2C, ... (C the size of the other groups). A rank at a position k ≥ c of a
/// larger group folds into lane k mod c of its group, as [`super::folding`] folds extra
/// nodes: it hands its vector to that rank, which combines it in, and gets the result
/// back at the end.
///
/// ```text
/// k := my position in my group; c := the smallest group's size
/// if k ≥ c then                                      /* fold: in, then out */
///     send X to my group's rank k mod c; receive result from it; return
/// X := X + every X my group's ranks k + c, k + 2c, ... send me
/// cut X into c shards                                /* element-aligned */
/// shard := REDUCE_SCATTER_RING(X) in my group's first c ranks   /* Algorithm 4.5: shard k */
/// shard := ALLREDUCE_RING(shard) along my lane k, across the g groups
/// result := ALLGATHER_RING(shard) in my group's first c ranks   /* Algorithm 4.4 */
/// send result to my group's ranks k + c, k + 2c, ...
/// ```
///
/// Steps: 2(c - 1) + 2(g - 1), plus 2 where a group folds ranks in (4(√p - 1) on a √p x
/// √p grid of groups). Cost, t_s, t_w inside a group, T_s, T_w between groups:
/// 2(c - 1)(t_s + t_w m/c) + 2(g - 1)(T_s + T_w m/(cg)), plus the combines. The c lanes
/// share a group's port to the network (one a machine on a cluster), which then carries
/// c messages of m/(cg) a step: 2(g - 1)m/g bytes out of each group in all, the least an
/// all-reduce of g groups can send (the flat ring sends 2(p - 1)m/p through each port, in
/// 2(p - 1) start-ups), as many as [`allreduce_ring`] sends through its one leader, in
/// 2(g - 1) start-ups of c messages at once instead of one.
pub async fn allreduce_multi_leader(
    comm: &Comm,
    hierarchy: Hierarchy<'_>,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let lanes = hierarchy.smallest_group_size();
    let group = hierarchy.group(hierarchy.group_of(comm.id()));
    let position = hierarchy.position(comm.id());
    let [fold_in, fold_out] = [MULTI_LEADER_FOLD.tag(0), MULTI_LEADER_FOLD.tag(1)];
    if position >= lanes {
        let lane = group.at(position % lanes);
        comm.send(lane, fold_in, vector).await?;
        return comm.recv(lane, fold_out).await;
    }
    // The ranks of my group that fold into me: positions k + c, k + 2c, ... of my group.
    let folded = group.part(position + lanes, lanes, (group.len() - 1 - position) / lanes);
    let mut sum = vector;
    for rank in folded.iter() {
        let theirs = comm.recv(rank, fold_in).await?;
        sum = reduction.combine(comm, sum, &theirs)?;
    }
    let inside = LineGroup { members: group.part(0, 1, lanes), wraps: true }.ring_order();
    let across = LineGroup { members: hierarchy.lane(position), wraps: true }.ring_order();
    let result = allreduce_ring_around(comm, &inside, sum, reduction, MULTI_LEADER_GROUPS, async |shard| {
        allreduce_ring_along(comm, &across, shard, reduction, MULTI_LEADER_LANES).await
    })
    .await?;
    for rank in folded.iter() {
        comm.send(rank, fold_out, result.clone()).await?;
    }
    Ok(result)
}

/// Two-level all-gather ([Kandalla 2009], one leader a group): each group gathers its
/// blocks to its leader, the leaders pass their groups' blocks round the ring of leaders
/// (Algorithm 4.4), and each leader broadcasts all p blocks to its group.
///
/// ```text
/// all := around_leaders(my block, append, ALL_TO_ALL_BC_RING among the leaders)
/// ```
///
/// Blocks may differ in length (`layout`'s). The blocks arrive group by group, each
/// group's in its order; where the groups are not runs of consecutive ranks (a placement
/// that is not linear), each node puts them in rank order at the end, a copy of the p
/// blocks. Steps: 2⌈log c⌉ + g - 1. Cost
/// t_s ⌈log c⌉ + t_w m (c - 1) to gather, (g - 1)(T_s + T_w m c) round the leaders,
/// ⌈log c⌉(t_s + t_w m p) down the groups: g(g - 1) messages cross between groups,
/// against g(p - 1) for the ring over every node (g of its p messages a step).
pub async fn allgather(
    comm: &Comm,
    hierarchy: Hierarchy<'_>,
    layout: &BlockLayout,
    mine: Bytes,
) -> Result<Bytes, CommError> {
    let append = |ours: Bytes, theirs: Bytes| Ok(concat([&ours, &theirs]));
    let all = around_leaders(comm, hierarchy, mine, append, async |ours| {
        let leaders = LineGroup { members: hierarchy.leaders(), wraps: true }.ring_order();
        Ok(concat(&allgather_ring_parts(comm, &leaders, ours, TWO_LEVEL_LEADERS).await?))
    })
    .await?;
    let Some(groups) = hierarchy.rank_groups() else {
        return Ok(all);
    };
    expect_layout_len(comm, &all, layout.total())?;
    let mut blocks = vec![Bytes::new(); groups.ranks()];
    let mut at = 0;
    for slot in 0..groups.ranks() {
        let rank = groups.at_slot(slot);
        blocks[rank] = all.slice(at..at + layout.len(rank));
        at += layout.len(rank);
    }
    Ok(concat(&blocks))
}

/// The shape of the all-reduce and all-gather with a collective among the leaders: up
/// each group's binomial tree to its first rank, folding with `combine` (rooted at the
/// first rank, every subtree is a run of consecutive positions, so appending a child's
/// blocks to one's own keeps the group's order), `among_leaders` on the leaders alone,
/// then down the same tree.
///
/// ```text
/// ours := ALL_TO_ONE_REDUCE(mine, combine) in my group, to its leader  /* Algorithm 4.3 */
/// if I lead my group then
///     all := among_leaders(ours)
/// all := ONE_TO_ALL_BC(all) in my group, from its leader               /* Algorithm 4.2 */
/// ```
async fn around_leaders(
    comm: &Comm,
    hierarchy: Hierarchy<'_>,
    mine: Bytes,
    combine: impl FnMut(Bytes, Bytes) -> Result<Bytes, CommError>,
    among_leaders: impl AsyncFnOnce(Bytes) -> Result<Bytes, CommError>,
) -> Result<Bytes, CommError> {
    let (tree, member) = group_tree_from(comm, &hierarchy, 0);
    let mut all = Bytes::new();
    if let Some(ours) = reduce_up(comm, &tree, &member, mine, combine, TWO_LEVEL_GROUPS).await? {
        all = among_leaders(ours).await?;
    }
    broadcast_down(comm, &tree, member, all, TWO_LEVEL_GROUPS).await
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use topocomm_proto::flow::{FlowEvent, FlowKind};
    use topocomm_proto::reference;
    use topocomm_proto::spec::{Algorithm, Collective, Dtype, LinkModel, Ports, ReduceOp, Routing, RunSpec};
    use topocomm_proto::{Topology, TopologyKind};

    use super::*;
    use crate::simulator::{self, Options, simulate};

    const LINKS: LinkModel =
        LinkModel { ts_ns: 1_000, th_ns: 100, tw_ps: 1_000, routing: Routing::Sf, packet_bytes: 0, ports: Ports::All };
    /// Every two-level schedule, by the names the catalogue gives them.
    const CASES: [(Collective, Algorithm); 6] = [
        (Collective::Broadcast, Algorithm::TwoLevel),
        (Collective::Reduce, Algorithm::TwoLevel),
        (Collective::Allreduce, Algorithm::TwoLevel),
        (Collective::Allreduce, Algorithm::TwoLevelRing),
        (Collective::Allreduce, Algorithm::MultiLeader),
        (Collective::Allgather, Algorithm::TwoLevel),
    ];
    const DTYPES: [Dtype; 4] = [Dtype::I32, Dtype::I64, Dtype::F32, Dtype::F64];
    const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

    fn spec(
        (collective, algorithm): (Collective, Algorithm),
        root: NodeId,
        elements: usize,
        (dtype, op): (Dtype, ReduceOp),
        seed: u64,
    ) -> RunSpec {
        let size_bytes = (elements * dtype.size()) as u64;
        RunSpec { root, size_bytes, dtype, op, seed, ..RunSpec::new(collective, algorithm) }
    }

    /// Runs `spec`'s collective two-level over `hierarchy` (not the topology's own) on the
    /// simulator from the reference's inputs, and holds every node's result to the
    /// reference; fails naming the first node that differs.
    fn verify(spec: &RunSpec, topology: &Topology, hierarchy: Hierarchy<'static>) -> Result<(), String> {
        let p = topology.p();
        let per_node = |comm: Comm| {
            let spec = spec.clone();
            async move {
                let input = reference::input(&spec, p, comm.id());
                let reduction = Reduction { dtype: spec.dtype, op: spec.op };
                match (spec.collective, spec.algorithm) {
                    (Collective::Broadcast, _) => broadcast(&comm, hierarchy, spec.root, input).await,
                    (Collective::Reduce, _) => reduce(&comm, hierarchy, spec.root, input, reduction).await,
                    (Collective::Allreduce, Algorithm::TwoLevelRing) => {
                        allreduce_ring(&comm, hierarchy, input, reduction).await
                    }
                    (Collective::Allreduce, Algorithm::MultiLeader) => {
                        allreduce_multi_leader(&comm, hierarchy, input, reduction).await
                    }
                    (Collective::Allreduce, _) => allreduce(&comm, hierarchy, input, reduction).await,
                    (Collective::Allgather, _) => {
                        let layout = BlockLayout::uniform(p, input.len());
                        allgather(&comm, hierarchy, &layout, input).await
                    }
                    (other, _) => unreachable!("{other} is not two-level"),
                }
            }
        };
        let mut failures = Vec::new();
        let simulation = simulate(topology, LINKS, Options::default(), per_node, |node, _, result| match result {
            Ok(output) => {
                if let Err(mismatch) = reference::check(spec, p, node, &output) {
                    failures.push(format!("node {node}: {mismatch}"));
                }
            }
            Err(error) => failures.push(format!("node {node} failed: {error}")),
        })
        .map_err(|error| error.to_string())?;
        if let Some(&(node, count)) = simulation.unclaimed.first() {
            failures.push(format!("node {node} holds {count} messages nobody took"));
        }
        failures.sort();
        match failures.first() {
            None => Ok(()),
            Some(first) => Err(format!("{} {} {hierarchy:?} on {topology}: {first}", spec.collective, spec.algorithm)),
        }
    }

    fn ring(p: usize) -> Topology {
        Topology::new(TopologyKind::Ring, p, None).expect("a ring")
    }

    /// Every collective over groups of every size from 1 to past p (so groups of unequal
    /// size, one group, groups of one), p = 1..=13 and 16, from every root, with 0, 1 and
    /// 5 elements, the dtypes and ops in turn.
    #[test]
    fn every_collective_over_groups_of_every_size_matches_the_reference() {
        let mut checked = 0u64;
        for p in (1..=13).chain([16]) {
            let topology = ring(p);
            for group_size in 1..=p + 1 {
                let hierarchy = Hierarchy::new(p, group_size).expect("a hierarchy");
                for case in CASES {
                    let roots = if case.0.has_root() { (0..p).collect() } else { vec![0] };
                    for root in roots {
                        for elements in [0, 1, 5] {
                            let dtype_and_op = (DTYPES[checked as usize % 4], OPS[checked as usize / 4 % 4]);
                            let spec = spec(case, root, elements, dtype_and_op, checked);
                            verify(&spec, &topology, hierarchy).unwrap_or_else(|error| panic!("{error}"));
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 5000, "only {checked} runs");
    }

    /// Through the catalogue's path (`algorithms::run`, the topology's own hierarchy) on
    /// shapes whose groups are grid rows, one group (a prime ring) and a 3-D grid's rows.
    #[test]
    fn every_collective_on_the_topology_s_own_groups_matches_the_reference() {
        let shape = |kind, p, dims: Option<&[usize]>| Topology::new(kind, p, dims).expect("a valid shape");
        let shapes = [
            shape(TopologyKind::Torus, 12, Some(&[3, 4])),
            shape(TopologyKind::Mesh, 15, Some(&[5, 3])),
            shape(TopologyKind::Torus3d, 18, Some(&[2, 3, 3])),
            shape(TopologyKind::Hypercube, 32, None),
            shape(TopologyKind::Ring, 11, None),
            shape(TopologyKind::Full, 20, None),
        ];
        for topology in shapes {
            for case in CASES {
                for (root, dtype_and_op) in [
                    (0, (Dtype::F64, ReduceOp::Sum)),
                    (topology.p() - 1, (Dtype::I32, ReduceOp::Max)),
                    (5, (Dtype::F32, ReduceOp::Prod)),
                ] {
                    let spec = spec(case, root, 300, dtype_and_op, 7);
                    let inputs = simulator::spec::Inputs::Reference;
                    let run = simulator::spec::run(&spec, &topology, LINKS, inputs, Options::default())
                        .unwrap_or_else(|error| panic!("{case:?} on {topology} from {root}: {error}"));
                    assert!(run.verified);
                }
            }
        }
    }

    /// The multi-leader all-reduce on clusters whose last machine is short (p not a
    /// multiple of the cores a machine: fewer lanes, the other ranks folded in), on
    /// whole ones, and on groups of every size of a ring, with lengths that do not divide
    /// by the lanes or the groups, every dtype and op.
    #[test]
    fn the_multi_leader_all_reduce_matches_the_reference_on_short_machines() {
        let mut checked = 0;
        for (machines, cores) in [(4, 8), (3, 4), (2, 5), (5, 3)] {
            for p in 1..=machines * cores {
                let cluster = Topology::new(TopologyKind::Cluster, p, Some(&[machines, cores])).expect("a cluster");
                let hierarchy = Hierarchy::new(p, cores).expect("a hierarchy");
                assert_eq!(hierarchy, Hierarchy::of(&cluster));
                for elements in [0, 1, 7, 61] {
                    let dtype_and_op = (DTYPES[checked % 4], OPS[checked / 4 % 4]);
                    let spec =
                        spec((Collective::Allreduce, Algorithm::MultiLeader), 0, elements, dtype_and_op, p as u64);
                    verify(&spec, &cluster, hierarchy).unwrap_or_else(|error| panic!("{error}"));
                    checked += 1;
                }
            }
        }
        assert!(checked > 250, "only {checked} runs");
    }

    /// Issue 46 item 6: on a cluster of 4 machines of 8 cores whose `intra` links are 20
    /// times faster than `inter` (t_s 5 µs against 100 µs, t_h 0.5 µs against 10, t_w
    /// 0.5 ns/B against 10), the multi-leader all-reduce of 1 MiB beats the flat ring and
    /// halving-doubling in the simulator, verified against the reference, and so does it
    /// at 64 KiB, where start-ups dominate.
    #[test]
    fn on_a_cluster_with_fast_machines_many_leaders_beat_the_flat_all_reduces() {
        use topocomm_proto::spec::ClassPhysics;
        let cluster = Topology::new(TopologyKind::Cluster, 32, Some(&[4, 8])).expect("a cluster");
        let inter = LinkModel {
            ts_ns: 100_000,
            th_ns: 10_000,
            tw_ps: 10_000,
            routing: Routing::Sf,
            packet_bytes: 0,
            ports: Ports::All,
        };
        let intra = ClassPhysics { name: "intra".into(), ts_ns: Some(5_000), th_ns: Some(500), tw_ps: Some(500) };
        for size_bytes in [1 << 20, 64 << 10] {
            let time = |algorithm| {
                let spec = RunSpec {
                    size_bytes,
                    dtype: Dtype::F32,
                    classes: vec![intra.clone()],
                    ..RunSpec::new(Collective::Allreduce, algorithm)
                };
                let run = simulator::spec::run(
                    &spec,
                    &cluster,
                    inter,
                    simulator::spec::Inputs::Reference,
                    Options::default(),
                )
                .unwrap_or_else(|error| panic!("{algorithm} on {cluster}: {error}"));
                assert!(run.verified, "{algorithm}");
                run.time_ns
            };
            let many = time(Algorithm::MultiLeader);
            for flat in [Algorithm::Ring, Algorithm::HalvingDoubling, Algorithm::TwoLevelRing] {
                let theirs = time(flat);
                assert!(many < theirs, "{size_bytes} B: multi-leader {many} ns against {flat} {theirs} ns");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Any p, any group size, any root, length, dtype and operator.
        #[test]
        fn any_hierarchy_root_and_length(
            p in 1usize..40,
            group_size in 1usize..45,
            root in any::<prop::sample::Index>(),
            elements in 0usize..70,
            case in prop::sample::select(CASES.to_vec()),
            dtype in prop::sample::select(DTYPES.to_vec()),
            op in prop::sample::select(OPS.to_vec()),
            seed in any::<u64>(),
        ) {
            let hierarchy = Hierarchy::new(p, group_size).expect("a hierarchy");
            let spec = spec(case, root.index(p), elements, (dtype, op), seed);
            prop_assert_eq!(verify(&spec, &ring(p), hierarchy), Ok(()));
        }
    }

    /// What a schedule sent between groups: messages and bytes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Across {
        algorithm: Algorithm,
        messages: usize,
        bytes: u64,
    }

    /// The messages of a recorded flow whose sender and receiver are in different groups.
    fn across_groups(algorithm: Algorithm, events: &[FlowEvent], hierarchy: &Hierarchy) -> Across {
        let across: Vec<&FlowEvent> = events
            .iter()
            .filter(|event| {
                event.kind == FlowKind::Send && hierarchy.group_of(event.src) != hierarchy.group_of(event.dst)
            })
            .collect();
        Across { algorithm, messages: across.len(), bytes: across.iter().map(|event| event.bytes).sum() }
    }

    /// On rings and tori whose groups are the grid's rows, counted from the recorded flow
    /// and printed as a table (`cargo test -p topocomm-collectives --lib two_level --
    /// --nocapture`): the two-level all-reduce (trees) sends 2(g - 1) messages between
    /// groups and the all-gather g(g - 1), fewer than every flat schedule of theirs; the
    /// all-reduce with a ring among the leaders sends 2(g - 1)m bytes between groups,
    /// fewer than every flat all-reduce, in fewer messages than the flat ring, mesh and
    /// halving-doubling; the multi-leader all-reduce sends those bytes too, in
    /// 2(g - 1) messages from each of the p ranks. The flat reduce-then-broadcast is a pair of binomial trees itself,
    /// which on a power of two with aligned rows are already two-level: it never sends
    /// less, and there as much.
    #[test]
    fn two_levels_send_less_between_groups_than_the_flat_schedules() {
        let shape = |kind, p, dims: Option<&[usize]>| Topology::new(kind, p, dims).expect("a valid shape");
        let shapes = [
            shape(TopologyKind::Ring, 16, None),
            shape(TopologyKind::Torus, 16, Some(&[4, 4])),
            shape(TopologyKind::Ring, 12, None),
            shape(TopologyKind::Torus, 15, Some(&[3, 5])),
        ];
        let m = 512u64;
        println!("sent between groups (the grid's rows), messages / bytes, {m} B a node:");
        for topology in shapes {
            let hierarchy = Hierarchy::of(&topology);
            let g = hierarchy.groups();
            assert!(g > 1 && hierarchy.group_size() > 1, "{topology}: {hierarchy:?}");
            for collective in [Collective::Allreduce, Collective::Allgather] {
                let counts: Vec<Across> = topocomm_proto::catalogue::algorithms(collective)
                    .map(|entry| {
                        let spec = RunSpec { size_bytes: m, ..RunSpec::new(collective, entry.algorithm) };
                        let (inputs, options) =
                            (simulator::spec::Inputs::Reference, Options { record: true, ..Options::default() });
                        let run = simulator::spec::run(&spec, &topology, LINKS, inputs, options)
                            .unwrap_or_else(|error| panic!("{collective} {} on {topology}: {error}", entry.algorithm));
                        across_groups(entry.algorithm, &run.events, &hierarchy)
                    })
                    .collect();
                let listed: Vec<String> =
                    counts.iter().map(|c| format!("{} {} / {}", c.algorithm, c.messages, c.bytes)).collect();
                println!(
                    "  {collective} on {topology}, {g} groups of {}: {}",
                    hierarchy.group_size(),
                    listed.join(", ")
                );
                let of = |algorithm| *counts.iter().find(|c| c.algorithm == algorithm).expect("in the catalogue");
                let trees = of(Algorithm::TwoLevel);
                let expected = if collective == Collective::Allreduce { 2 * (g - 1) } else { g * (g - 1) };
                assert_eq!(trees.messages, expected, "{collective} on {topology}");
                let ring = (collective == Collective::Allreduce).then(|| of(Algorithm::TwoLevelRing));
                if let Some(ring) = ring {
                    assert_eq!(ring.bytes, 2 * (g as u64 - 1) * m, "{collective} on {topology}");
                    // The same bytes through c lanes: every one of the c·g ranks sends
                    // 2(g - 1) messages across.
                    let lanes = of(Algorithm::MultiLeader);
                    let c = hierarchy.group_size();
                    assert_eq!((lanes.messages, lanes.bytes), (2 * (g - 1) * g * c, ring.bytes), "{topology}");
                }
                let two_level = [Algorithm::TwoLevel, Algorithm::TwoLevelRing, Algorithm::MultiLeader];
                let flat = counts.iter().filter(|c| !two_level.contains(&c.algorithm));
                for &flat in flat {
                    let trees_too = flat.algorithm == Algorithm::ReduceBroadcast;
                    let fewer = |two_level: usize, flat: usize| two_level < flat || (trees_too && two_level == flat);
                    assert!(
                        fewer(trees.messages, flat.messages),
                        "{collective} on {topology}: {trees:?} against {flat:?}"
                    );
                    if let Some(ring) = ring {
                        assert!(
                            fewer(ring.bytes as usize, flat.bytes as usize),
                            "{topology}: {ring:?} against {flat:?}"
                        );
                        if matches!(flat.algorithm, Algorithm::Ring | Algorithm::Mesh | Algorithm::HalvingDoubling) {
                            assert!(ring.messages < flat.messages, "{topology}: {ring:?} against {flat:?}");
                        }
                    }
                }
            }
        }
    }
}
