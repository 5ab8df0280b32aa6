//! Folding: how the schedules made for 2^d nodes (the hypercube all-gather and
//! reduce-scatter of Algorithms 4.7 and 4.8, recursive doubling and halving) serve any
//! p, as MPI libraries do it ([Thakur 2005], [Rabenseifner 2004]).
//!
//! With q = 2^⌊log2 p⌋ and r = p - q, the first 2r ids pair up: odd id 2v + 1 is an
//! *extra* node and folds into its even partner 2v (one link on a ring, a line or a
//! hypercube). The q *core* nodes get virtual ids 0..q-1:
//!
//! ```text
//! virtual id of a core node:  id / 2  if id < 2r (even ids only),  id - r  otherwise
//! physical id of virtual v:   2v      if v < r,                    v + r   otherwise
//! ```
//!
//! Both maps are increasing, so core node v stands for the contiguous physical ids
//! `physical(v)..physical(v + 1)` (two of them for v < r, one otherwise): in any block
//! layout, the blocks of core node v are contiguous and lie in core order. A folded
//! schedule runs in three parts:
//!
//! ```text
//! fold in:   an extra node sends its data to its partner, which merges it into its own
//! core:      the q core nodes run the 2^d schedule on virtual ids
//! unfold:    each partner hands the extra node its part of the result
//! ```
//!
//! That costs two steps more than the core (none when p is a power of two, where every
//! node is a core node and virtual id = id), and no cliff in between.
//!
//! The two checks the block collectives share (a buffer's length against its layout, a
//! layout's block count) sit at the end.
//!
//! Everything here speaks `Comm` and plain ids; nothing knows which collective runs.

use std::ops::Range;

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::frame::Tag;

use super::blocks::BlockLayout;
use crate::comm::{Comm, CommError};

/// The folding of p nodes onto a core of q = 2^⌊log2 p⌋ (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fold {
    p: usize,
    q: usize,
}

/// What one node does in a folded schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A core node: runs the schedule as `virtual_id`, for itself and its `extra`, if any.
    Core { virtual_id: usize, extra: Option<NodeId> },
    /// An extra node: hands its data to `partner` and waits for its part of the result.
    Extra { partner: NodeId },
}

/// Where a node stands after [`Fold::fold_in`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// This node folded its data into `partner`; its result comes back from there.
    Folded { partner: NodeId },
    /// This node runs in the core as `virtual_id` with `data`: its own, merged with that
    /// of its `extra` node if it has one.
    Core { virtual_id: usize, extra: Option<NodeId>, data: Bytes },
}

impl Fold {
    /// The folding of `p` nodes (p ≥ 1).
    pub fn new(p: usize) -> Self {
        let q = if p.is_power_of_two() { p } else { p.next_power_of_two() / 2 };
        Fold { p, q }
    }

    /// Nodes in all.
    pub fn p(&self) -> usize {
        self.p
    }

    /// Nodes in the core: q = 2^⌊log2 p⌋.
    pub fn q(&self) -> usize {
        self.q
    }

    /// The dimension of the core's hypercube: log2 q.
    pub fn dimension(&self) -> usize {
        self.q.trailing_zeros() as usize
    }

    /// Extra nodes: r = p - q.
    pub fn extras(&self) -> usize {
        self.p - self.q
    }

    /// What node `id` does.
    pub fn role(&self, id: NodeId) -> Role {
        let r = self.extras();
        if id < 2 * r && id % 2 == 1 {
            Role::Extra { partner: id - 1 }
        } else if id < 2 * r {
            Role::Core { virtual_id: id / 2, extra: Some(id + 1) }
        } else {
            Role::Core { virtual_id: id - r, extra: None }
        }
    }

    /// The physical id of core node `virtual_id`; for `virtual_id = q`, p (so that core
    /// node v stands for the ids `physical(v)..physical(v + 1)`).
    pub fn physical(&self, virtual_id: usize) -> NodeId {
        let r = self.extras();
        if virtual_id < r { 2 * virtual_id } else { virtual_id + r }
    }

    /// The blocks of `layout` (one per physical node) as the core sees them: core node v
    /// holds blocks `physical(v)..physical(v + 1)`.
    pub fn core_blocks<'a>(&self, layout: &'a BlockLayout) -> CoreBlocks<'a> {
        CoreBlocks { layout, fold: Some(*self) }
    }

    /// The fold-in step: an extra node sends `data` to its partner (tag `tag`); a core node
    /// with an extra receives that node's data and merges it into its own with
    /// `merge(own, extra's)`.
    pub async fn fold_in(
        &self,
        comm: &Comm,
        tag: Tag,
        data: Bytes,
        merge: impl FnOnce(Bytes, Bytes) -> Result<Bytes, CommError>,
    ) -> Result<Part, CommError> {
        match self.role(comm.id()) {
            Role::Extra { partner } => {
                comm.send(partner, tag, data).await?;
                Ok(Part::Folded { partner })
            }
            Role::Core { virtual_id, extra } => {
                let data = match extra {
                    Some(extra) => merge(data, comm.recv(extra, tag).await?)?,
                    None => data,
                };
                Ok(Part::Core { virtual_id, extra, data })
            }
        }
    }

    /// The unfold step of a core node: hands `part` to its `extra` node, if it has one
    /// (the extra node receives it from its partner with the same `tag`).
    pub async fn unfold(&self, comm: &Comm, extra: Option<NodeId>, tag: Tag, part: Bytes) -> Result<(), CommError> {
        if let Some(extra) = extra {
            comm.send(extra, tag, part).await?;
        }
        Ok(())
    }
}

/// The blocks of a layout grouped by core node: core node v holds the layout's blocks
/// `bound(v)..bound(v + 1)`. Folded, a core node holds its own block and its extra's
/// (the bounds are [`Fold::physical`]); unfolded (a layout of exactly q blocks), one
/// block each. Computed, not stored, as the layout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreBlocks<'a> {
    layout: &'a BlockLayout,
    /// The folding whose core nodes hold the blocks; `None`: core node v holds block v.
    fold: Option<Fold>,
}

impl<'a> CoreBlocks<'a> {
    /// Core node v holds block v of `layout` (a layout of q blocks).
    pub fn identity(layout: &'a BlockLayout) -> Self {
        CoreBlocks { layout, fold: None }
    }

    /// The core nodes: q.
    pub fn q(&self) -> usize {
        self.fold.map_or(self.layout.p(), |fold| fold.q())
    }

    /// The first block of core node `v` (for v = q, the end of the last).
    fn bound(&self, v: usize) -> usize {
        self.fold.map_or(v, |fold| fold.physical(v))
    }

    /// The byte range of the blocks of core nodes `nodes` (contiguous).
    pub fn span(&self, nodes: Range<usize>) -> Range<usize> {
        self.layout.span(self.bound(nodes.start)..self.bound(nodes.end))
    }

    /// Bytes the blocks of core nodes `nodes` take.
    pub fn len(&self, nodes: Range<usize>) -> usize {
        self.span(nodes).len()
    }
}

/// Checks that a buffer has the length a layout gives it; a wrong one fails the run as
/// an element length mismatch.
pub fn expect_layout_len(comm: &Comm, data: &Bytes, expected: usize) -> Result<(), CommError> {
    if data.len() == expected {
        Ok(())
    } else {
        Err(comm.elements_error(topocomm_proto::elements::ElementsError::LengthMismatch {
            acc: expected,
            other: data.len(),
        }))
    }
}

/// Checks that `layout` has one block per node; `what` names the collective that needs it.
pub fn expect_one_block_per_node(comm: &Comm, layout: &BlockLayout, what: &str) -> Result<(), CommError> {
    if layout.p() == comm.p() {
        Ok(())
    } else {
        Err(CommError::Unsupported {
            me: comm.id(),
            algorithm: what.to_owned(),
            reason: format!("a layout of {} blocks on {} nodes (one block per node is needed)", layout.p(), comm.p()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_virtual_ids_agree() {
        for p in 1..=70 {
            let fold = Fold::new(p);
            let q = fold.q();
            assert!(q.is_power_of_two() && q <= p && p < 2 * q, "{p}");
            let mut virtual_ids = Vec::new();
            for id in 0..p {
                match fold.role(id) {
                    Role::Core { virtual_id, extra } => {
                        assert_eq!(fold.physical(virtual_id), id);
                        let next = fold.physical(virtual_id + 1);
                        assert_eq!(next - id, 1 + usize::from(extra.is_some()), "{p} {id}");
                        if let Some(extra) = extra {
                            assert_eq!(fold.role(extra), Role::Extra { partner: id });
                        }
                        virtual_ids.push(virtual_id);
                    }
                    Role::Extra { partner } => assert_eq!(partner + 1, id),
                }
            }
            assert_eq!(virtual_ids, (0..q).collect::<Vec<_>>(), "{p}");
            assert_eq!(fold.physical(q), p);
        }
        assert_eq!(Fold::new(6).role(3), Role::Extra { partner: 2 });
        assert_eq!(Fold::new(6).role(5), Role::Core { virtual_id: 3, extra: None });
    }

    #[test]
    fn core_blocks_group_the_folded_blocks() {
        let layout = BlockLayout::uniform(6, 10);
        let fold = Fold::new(6);
        let core = fold.core_blocks(&layout);
        assert_eq!(core.q(), 4);
        assert_eq!(core.span(0..1), 0..20);
        assert_eq!(core.span(1..2), 20..40);
        assert_eq!(core.span(2..4), 40..60);
        let split = BlockLayout::split(40, 4, 4);
        let identity = CoreBlocks::identity(&split);
        assert_eq!(identity.span(1..3), 12..32);
        assert_eq!(identity.len(3..4), 8);
    }
}
