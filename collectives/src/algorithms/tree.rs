//! The binomial tree, built once as data and read by every tree algorithm (the hypercube
//! broadcast, reduction, scatter and gather, and through them the all-reduce that
//! reduces then broadcasts), as Open MPI's `coll_base_topo.c` builds its trees once;
//! and its two walks over `Comm`, [`broadcast_down`] and [`reduce_up`], over any ranks
//! (all p, or a group's and its leaders' in `two_level`).
//!
//! The tree is the loop of Algorithm 4.2 (GENERAL_ONE_TO_ALL_BC, [GGKK 4.1.3]) unrolled:
//!
//! ```text
//! my_virtual_id := my_id XOR source
//! mask := 2^d - 1
//! for i := d - 1 downto 0 do
//!     mask := mask XOR 2^i                       /* set bit i of mask to 0 */
//!     if (my_virtual_id AND mask) = 0 then       /* lower i bits are 0 */
//!         if (my_virtual_id AND 2^i) = 0 then
//!             send X to (my_virtual_id XOR 2^i) XOR source
//!         else
//!             receive X from (my_virtual_id XOR 2^i) XOR source
//! ```
//!
//! So a node of virtual id v ≠ 0 whose lowest set bit is t receives once, in step t, from
//! its parent v − 2^t, and sends in the steps i = t − 1 down to 0 to its children v + 2^i;
//! the root (v = 0) sends in every step d − 1 down to 0. The child v + 2^i roots the
//! subtree of virtual ids v + 2^i .. v + 2^(i+1) − 1, the blocks a scatter hands it and a
//! gather takes from it. Algorithm 4.3 (ALL_TO_ONE_REDUCE) walks the same edges in the
//! opposite order, step 0 first: [`BinomialTree::top_down`] and
//! [`BinomialTree::bottom_up`] give both orders.
//!
//! When p is not a power of two the tree is the MPI-style binomial tree of d = ⌈log2 p⌉
//! steps over virtual ids (my_id − root) mod p, and a child ≥ p does not exist (nobody
//! sends to it or waits for it); see [`Relabelling`].

use std::ops::Range;

use bytes::Bytes;
use topocomm_proto::NodeId;

use super::patterns::{Relabelling, hypercube_dimension};
use super::phases::Phase;
use crate::comm::{Comm, CommError};

/// One edge of the tree at one node, with the step (the hypercube dimension) it is
/// crossed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeEdge {
    /// This node's parent: data comes from it on the way down and goes to it on the way
    /// up. `subtree` is this node's own subtree.
    Parent { node: NodeId, step: usize, subtree: Range<usize> },
    /// One of this node's children, and the subtree it roots.
    Child { node: NodeId, step: usize, subtree: Range<usize> },
}

/// One node's place in the binomial tree of `p` nodes rooted at `root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinomialTree {
    labels: Relabelling,
    p: usize,
    my_virtual_id: usize,
    /// d = ⌈log2 p⌉: the number of steps.
    steps: usize,
}

impl BinomialTree {
    /// The tree of `p` nodes rooted at `root`, as node `me` sees it.
    pub fn new(root: NodeId, p: usize, me: NodeId) -> Self {
        let labels = Relabelling::new(root, p);
        BinomialTree { labels, p, my_virtual_id: labels.to_virtual(me), steps: hypercube_dimension(p) }
    }

    /// The relabelling that makes the root virtual node 0.
    pub fn labels(&self) -> Relabelling {
        self.labels
    }

    /// This node's virtual id (the root's is 0).
    pub fn virtual_id(&self) -> usize {
        self.my_virtual_id
    }

    /// The physical nodes of the virtual ids `span` that exist (those below p), in
    /// virtual order: the nodes of a subtree.
    pub fn nodes(&self, span: Range<usize>) -> Vec<NodeId> {
        span.take_while(|&v| v < self.p).map(|v| self.labels.to_physical(v)).collect()
    }

    /// The step in which this node hears from its parent: the lowest set bit of its
    /// virtual id (d for the root, which has no parent).
    fn parent_step(&self) -> usize {
        if self.my_virtual_id == 0 { self.steps } else { self.my_virtual_id.trailing_zeros() as usize }
    }

    fn parent(&self) -> Option<TreeEdge> {
        let step = self.parent_step();
        (self.my_virtual_id != 0).then(|| TreeEdge::Parent {
            node: self.labels.to_physical(self.my_virtual_id ^ (1 << step)),
            step,
            subtree: self.my_virtual_id..self.my_virtual_id + (1 << step),
        })
    }

    fn child(&self, step: usize) -> Option<TreeEdge> {
        let child = self.my_virtual_id + (1 << step);
        (child < self.p).then(|| TreeEdge::Child {
            node: self.labels.to_physical(child),
            step,
            subtree: child..child + (1 << step),
        })
    }

    /// The edges in the order of Algorithm 4.2 (broadcast, scatter): the parent first,
    /// then the children, the largest subtree first.
    pub fn top_down(&self) -> impl Iterator<Item = TreeEdge> + use<> {
        let tree = *self;
        tree.parent().into_iter().chain((0..tree.parent_step()).rev().filter_map(move |step| tree.child(step)))
    }

    /// The edges in the order of Algorithm 4.3 (reduction, gather): the children, the
    /// smallest subtree first, then the parent.
    pub fn bottom_up(&self) -> impl Iterator<Item = TreeEdge> + use<> {
        let tree = *self;
        (0..tree.parent_step()).filter_map(move |step| tree.child(step)).chain(tree.parent())
    }
}

/// Algorithm 4.2 down `tree`, whose node k is the rank `rank(k)` (the identity for a
/// tree of all p nodes; a group's member k, or group k's leader, in `two_level`): a node
/// receives X from its parent, then sends it to its children, the largest subtree
/// first, in turn ([`Comm::send_in_turn`]). Every node returns X; the root brings it.
/// The edge of step i carries `phase.tag(i)`. Steps: ⌈log2 n⌉ for a tree of n nodes.
pub async fn broadcast_down(
    comm: &Comm,
    tree: &BinomialTree,
    rank: impl Fn(usize) -> NodeId,
    message: Bytes,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let mut x = message;
    for edge in tree.top_down() {
        match edge {
            TreeEdge::Parent { node, step, .. } => x = comm.recv(rank(node), phase.tag(step)).await?,
            TreeEdge::Child { node, step, .. } => comm.send_in_turn(rank(node), phase.tag(step), [x.clone()]).await?,
        }
    }
    Ok(x)
}

/// Algorithm 4.3 up `tree` (node k the rank `rank(k)`, as for [`broadcast_down`]): a node
/// takes what each child sends, the smallest subtree first, and folds it into its own
/// with `combine(own, child's)` (an element-wise reduction; for a gather rooted at node
/// 0, where each subtree is a run of consecutive nodes, appending), then sends the
/// result to its parent. The root returns `Some(result)`, every other node `None`.
/// The edge of step i carries `phase.tag(i)`. Steps: ⌈log2 n⌉ for a tree of n nodes.
pub async fn reduce_up(
    comm: &Comm,
    tree: &BinomialTree,
    rank: impl Fn(usize) -> NodeId,
    mine: Bytes,
    mut combine: impl FnMut(Bytes, Bytes) -> Result<Bytes, CommError>,
    phase: Phase,
) -> Result<Option<Bytes>, CommError> {
    let mut sum = mine;
    for edge in tree.bottom_up() {
        match edge {
            TreeEdge::Child { node, step, .. } => {
                let x = comm.recv(rank(node), phase.tag(step)).await?;
                sum = combine(sum, x)?;
            }
            TreeEdge::Parent { node, step, .. } => {
                comm.send(rank(node), phase.tag(step), sum).await?;
                return Ok(None);
            }
        }
    }
    Ok(Some(sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The edges the loop of Algorithm 4.2 takes at node `me`, written out as the
    /// textbook writes it (the reference the tree must equal).
    fn algorithm_4_2(root: NodeId, p: usize, me: NodeId) -> Vec<(bool, NodeId, usize)> {
        let labels = Relabelling::new(root, p);
        let d = hypercube_dimension(p);
        let my_virtual_id = labels.to_virtual(me);
        let mut mask = (1usize << d) - 1;
        let mut edges = Vec::new();
        for i in (0..d).rev() {
            mask ^= 1 << i;
            if my_virtual_id & mask == 0 {
                let partner = my_virtual_id ^ (1 << i);
                if my_virtual_id & (1 << i) == 0 {
                    if partner < p {
                        edges.push((true, labels.to_physical(partner), i));
                    }
                } else {
                    edges.push((false, labels.to_physical(partner), i));
                }
            }
        }
        edges
    }

    fn as_sends(edges: impl Iterator<Item = TreeEdge>) -> Vec<(bool, NodeId, usize)> {
        edges
            .map(|edge| match edge {
                TreeEdge::Child { node, step, .. } => (true, node, step),
                TreeEdge::Parent { node, step, .. } => (false, node, step),
            })
            .collect()
    }

    #[test]
    fn top_down_is_algorithm_4_2_at_every_node_root_and_p() {
        for p in 1..=40 {
            for root in 0..p {
                for me in 0..p {
                    let tree = BinomialTree::new(root, p, me);
                    assert_eq!(as_sends(tree.top_down()), algorithm_4_2(root, p, me), "p {p} root {root} node {me}");
                    let mut reversed = as_sends(tree.bottom_up());
                    reversed.reverse();
                    assert_eq!(reversed, algorithm_4_2(root, p, me), "bottom-up is the reverse, p {p} root {root}");
                }
            }
        }
    }

    #[test]
    fn every_node_but_the_root_has_one_parent_and_the_subtrees_partition_the_nodes() {
        for p in 1..=40 {
            for root in [0, p / 2, p - 1] {
                let mut parents = vec![0; p];
                let mut covered = vec![0; p];
                covered[root] += 1;
                for me in 0..p {
                    let tree = BinomialTree::new(root, p, me);
                    for edge in tree.top_down() {
                        match edge {
                            TreeEdge::Parent { node, .. } => {
                                *parents.get_mut(me).expect("a node of the tree") += 1;
                                let parent = BinomialTree::new(root, p, node);
                                assert!(
                                    parent.top_down().any(|e| matches!(e, TreeEdge::Child { node, .. } if node == me)),
                                    "p {p}: {node} is the parent of {me} but not the other way round"
                                );
                            }
                            TreeEdge::Child { node, subtree, .. } if me == root => {
                                for v in tree.nodes(subtree) {
                                    covered[v] += 1;
                                }
                                assert_ne!(node, root);
                            }
                            TreeEdge::Child { .. } => {}
                        }
                    }
                }
                let expected_parents: Vec<usize> = (0..p).map(|me| usize::from(me != root)).collect();
                assert_eq!(parents, expected_parents, "p {p} root {root}");
                assert_eq!(covered, vec![1; p], "the root's subtrees and the root cover every node once, p {p}");
            }
        }
    }
}
