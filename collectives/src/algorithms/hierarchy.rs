//! The groups of ranks the two-level algorithms ([`super::two_level`]) run in: a
//! [`Hierarchy`] of p ranks in groups of consecutive ranks, each group's first rank its
//! leader, and the one place that says where a network's groups are ([`group_size`]).
//!
//! A group is what ranks share that is faster inside than between: a machine's cores (its
//! shared memory against its one network port), an edge switch's hosts. A direct network
//! of the textbook has neither, so its groups are the rows of the grid its mesh
//! algorithms walk ([`Grid::of`]: a mesh's or torus's own rows, the squarest 2-D grid of p
//! on any other shape), whose members are neighbours on a mesh or torus.
//!
//! Like a line group's members ([`Members`]), a hierarchy is computed, not stored: two
//! words whatever p, so that each node of a simulation of a million holds no list of
//! groups; a group is a [`Members`] progression, found by a division. Groups are runs of
//! consecutive ranks (ranks placed on machines in order): the two-level all-gather
//! relies on it, appending a group's blocks in rank order.

use topocomm_proto::{NodeId, Topology, TopologyKind};

use super::patterns::{Grid, Members};

/// The size of the groups of `topology`'s ranks: the one source of a network's groups
/// (a new family's "the cores of a machine", "the hosts of an edge switch" is one arm
/// here).
pub fn group_size(topology: &Topology) -> usize {
    use TopologyKind as T;
    match topology.kind() {
        // No machines or switches: the rows of the grid the mesh algorithms walk.
        T::Ring | T::Mesh | T::Torus | T::Mesh3d | T::Torus3d | T::Hypercube | T::Full => {
            Grid::of(topology).dims().last().copied().unwrap_or(1)
        }
        // The cores of a machine: traffic inside never crosses the machine's port.
        T::Cluster => topology.dims()[1],
        // The hosts of an edge switch (k/2): they reach each other in two hops.
        T::FatTree => topology.dims()[0] / 2,
        // The hosts of a group (A routers of P): a group's routers are fully connected,
        // and the global links between groups are what a dragonfly has least of.
        T::Dragonfly => topology.dims()[0] * topology.dims()[1],
        // A graph from a file has no groups it names: the rows of the squarest grid.
        T::Graph => Grid::of(topology).dims().last().copied().unwrap_or(1),
    }
}

/// A hierarchy that cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HierarchyError {
    #[error("a hierarchy of {p} ranks in groups of {group_size} has no group: both must be at least 1")]
    Empty { p: usize, group_size: usize },
}

/// p ranks in groups of consecutive ranks, `group_size` each but the last, which holds
/// what is left (so groups differ in size where `group_size` does not divide p, and one
/// group holds every rank where `group_size` ≥ p). Group g is the ranks
/// g·`group_size`, g·`group_size` + 1, ...; its first rank is its leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hierarchy {
    p: usize,
    group_size: usize,
}

impl Hierarchy {
    /// The groups of `topology`'s ranks, as [`group_size`] says.
    pub fn of(topology: &Topology) -> Self {
        Hierarchy { p: topology.p(), group_size: group_size(topology).clamp(1, topology.p().max(1)) }
    }

    /// `p` ranks in groups of `group_size` (the last one shorter where it does not divide p).
    pub fn new(p: usize, group_size: usize) -> Result<Self, HierarchyError> {
        if p == 0 || group_size == 0 {
            return Err(HierarchyError::Empty { p, group_size });
        }
        Ok(Hierarchy { p, group_size: group_size.min(p) })
    }

    /// The number of ranks.
    pub fn p(&self) -> usize {
        self.p
    }

    /// The size of every group but the last (which may be smaller).
    pub fn group_size(&self) -> usize {
        self.group_size
    }

    /// The number of groups: ⌈p / group_size⌉.
    pub fn groups(&self) -> usize {
        self.p.div_ceil(self.group_size)
    }

    /// The size of the smallest group: the last one's (every other holds `group_size`).
    pub fn smallest_group_size(&self) -> usize {
        self.p - (self.groups() - 1) * self.group_size
    }

    /// The ranks of group `g` (g < [`Hierarchy::groups`]) in order, its leader first.
    pub fn group(&self, g: usize) -> Members {
        let first = g * self.group_size;
        Members::new(first, 1, self.group_size.min(self.p - first))
    }

    /// Every group, in order.
    pub fn iter(&self) -> impl Iterator<Item = Members> + use<> {
        let hierarchy = *self;
        (0..hierarchy.groups()).map(move |g| hierarchy.group(g))
    }

    /// The group `rank` belongs to.
    pub fn group_of(&self, rank: NodeId) -> usize {
        rank / self.group_size
    }

    /// The position of `rank` in its group (its leader's is 0).
    pub fn position(&self, rank: NodeId) -> usize {
        rank % self.group_size
    }

    /// Every group's leader, its first rank, in group order.
    pub fn leaders(&self) -> Members {
        Members::new(0, self.group_size, self.groups())
    }

    /// The leader of group `g` in a collective rooted at `root`: the root leads its own
    /// group, so that its message or result needs no hop to another leader; every other
    /// group is led by its first rank.
    pub fn leader(&self, g: usize, root: NodeId) -> NodeId {
        if self.group_of(root) == g { root } else { self.group(g).at(0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(kind: TopologyKind, p: usize, dims: Option<&[usize]>) -> Topology {
        Topology::new(kind, p, dims).expect("a valid shape")
    }

    fn groups(hierarchy: &Hierarchy) -> Vec<Vec<NodeId>> {
        hierarchy.iter().map(|group| group.iter().collect()).collect()
    }

    #[test]
    fn a_direct_network_s_groups_are_the_rows_of_its_grid() {
        let torus = Hierarchy::of(&shape(TopologyKind::Torus, 12, Some(&[3, 4])));
        assert_eq!(groups(&torus), [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9, 10, 11]]);
        let mesh = Hierarchy::of(&shape(TopologyKind::Mesh, 12, Some(&[4, 3])));
        assert_eq!(groups(&mesh), [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9, 10, 11]]);
        let mesh3d = Hierarchy::of(&shape(TopologyKind::Mesh3d, 24, Some(&[2, 3, 4])));
        assert_eq!((mesh3d.groups(), mesh3d.group_size()), (6, 4));
        // Not a grid: the rows of the squarest grid, as the mesh algorithms walk it.
        for (kind, p, rows) in [
            (TopologyKind::Ring, 16, 4),
            (TopologyKind::Hypercube, 32, 4),
            (TopologyKind::Full, 6, 2),
            (TopologyKind::Ring, 7, 1),
        ] {
            let hierarchy = Hierarchy::of(&shape(kind, p, None));
            assert_eq!(hierarchy.groups(), rows, "{kind:?} of {p}");
            assert_eq!(hierarchy.group_size() * rows, p, "{kind:?} of {p}");
        }
        assert_eq!(groups(&Hierarchy::of(&shape(TopologyKind::Ring, 1, None))), [vec![0]]);
    }

    #[test]
    fn groups_partition_the_ranks_whatever_their_sizes() {
        for p in 1..=40 {
            for size in 1..=p + 2 {
                let hierarchy = Hierarchy::new(p, size).expect("a hierarchy");
                let all: Vec<NodeId> = groups(&hierarchy).concat();
                assert_eq!(all, (0..p).collect::<Vec<_>>(), "p {p} size {size}");
                assert_eq!(hierarchy.groups(), p.div_ceil(size.min(p)), "p {p} size {size}");
                let smallest = hierarchy.iter().map(|group| group.len()).min();
                assert_eq!(Some(hierarchy.smallest_group_size()), smallest, "p {p} size {size}");
                for (g, group) in hierarchy.iter().enumerate() {
                    assert!(!group.is_empty() && group.len() <= size, "p {p} size {size} group {g}");
                    assert_eq!(hierarchy.leaders().at(g), group.at(0), "p {p} size {size}");
                    for (k, rank) in group.iter().enumerate() {
                        assert_eq!((hierarchy.group_of(rank), hierarchy.position(rank)), (g, k), "p {p} size {size}");
                    }
                }
            }
        }
        // Unequal: 10 in fours is 4, 4 and 2; one group of all where the size reaches p.
        assert_eq!(groups(&Hierarchy::new(10, 4).unwrap()), [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
        assert_eq!(groups(&Hierarchy::new(5, 9).unwrap()), [vec![0, 1, 2, 3, 4]]);
    }

    #[test]
    fn the_root_leads_its_own_group_and_first_ranks_the_others() {
        let hierarchy = Hierarchy::new(10, 4).unwrap();
        let leaders = |root| (0..hierarchy.groups()).map(|g| hierarchy.leader(g, root)).collect::<Vec<_>>();
        assert_eq!(leaders(0), [0, 4, 8]);
        assert_eq!(leaders(6), [0, 6, 8]);
        assert_eq!(leaders(9), [0, 4, 9]);
    }

    #[test]
    fn an_empty_hierarchy_is_refused_in_one_line() {
        let error = Hierarchy::new(8, 0).unwrap_err().to_string();
        assert_eq!(error, "a hierarchy of 8 ranks in groups of 0 has no group: both must be at least 1");
        assert!(Hierarchy::new(0, 3).is_err());
    }
}
