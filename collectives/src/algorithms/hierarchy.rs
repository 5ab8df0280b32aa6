//! The groups of ranks the two-level algorithms ([`super::two_level`]) run in: a
//! [`Hierarchy`] of p ranks in groups, each group's first rank its leader, and the one
//! place that says how large a network's groups are ([`group_size`]).
//!
//! A group is what ranks share that is faster inside than between: a machine's cores (its
//! shared memory against its one network port), an edge switch's hosts, a dragonfly
//! group's. A direct network of the textbook has neither, so its groups are the rows of
//! the grid its mesh algorithms walk ([`Grid::of`]: a mesh's or torus's own rows, the
//! squarest 2-D grid of p on any other shape), whose members are neighbours on a mesh or
//! torus.
//!
//! Like a line group's members ([`Members`]), a hierarchy of runs of consecutive ranks
//! (the ranks placed on the hosts in order: linear placement, and every direct network)
//! is computed, not stored: two words whatever p, so that each node of a simulation of a
//! million holds no list of groups; a group is a [`Members`] progression, found by a
//! division. Under any other placement a group is whichever ranks sit on its hosts: the
//! hierarchy reads the network's own [`RankGroups`], built once with it, and its groups
//! and lanes are progressions in that table's [`Numbering`]s.

use topocomm_proto::network::RankGroups;
use topocomm_proto::{NodeId, Topology, TopologyKind};

use super::patterns::{Grid, Members, Numbering};

/// The size of the groups of `topology`'s ranks: the one source of a network's groups
/// (a switched family's own, [`topocomm_proto::network::Family::group_hosts`]: the
/// cores of a machine, the hosts of an edge switch, those of a dragonfly group).
pub fn group_size(topology: &Topology) -> usize {
    use TopologyKind as T;
    match topology.kind() {
        // No machines or switches: the rows of the grid the mesh algorithms walk.
        T::Ring | T::Mesh | T::Torus | T::Mesh3d | T::Torus3d | T::Hypercube | T::Full => {
            Grid::of(topology).dims().last().copied().unwrap_or(1)
        }
        // A cluster's machine (traffic inside never crosses its port), a fat-tree's edge
        // switch (its hosts reach each other in two hops), a dragonfly's group (its
        // routers are fully connected, and the global links between groups are what it
        // has least of); a graph from a file has no groups it names: the rows of the
        // squarest grid.
        T::Cluster | T::FatTree | T::Dragonfly | T::Graph => topology
            .switched()
            .and_then(|switched| switched.family().group_hosts())
            .unwrap_or_else(|| Grid::of(topology).dims().last().copied().unwrap_or(1)),
    }
}

/// A hierarchy that cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HierarchyError {
    #[error("a hierarchy of {p} ranks in groups of {group_size} has no group: both must be at least 1")]
    Empty { p: usize, group_size: usize },
}

/// p ranks in groups. Of consecutive ranks, `group_size` each but the last, which holds
/// what is left (so groups differ in size where `group_size` does not divide p, and one
/// group holds every rank where `group_size` ≥ p): group g is the ranks g·`group_size`,
/// g·`group_size` + 1, ... Or, under a placement that is not linear, the network's
/// [`RankGroups`]: each group the ranks on its hosts, of any sizes. A group's first rank
/// is its leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hierarchy<'a> {
    p: usize,
    group_size: usize,
    /// The network's groups, when they are not runs of consecutive ranks.
    placed: Option<&'a RankGroups>,
}

impl<'a> Hierarchy<'a> {
    /// The groups of `topology`'s ranks: where its placement puts them, of the size
    /// [`group_size`] says.
    pub fn of(topology: &'a Topology) -> Self {
        let placed = topology.switched().and_then(|switched| switched.rank_groups());
        Hierarchy { p: topology.p(), group_size: group_size(topology).clamp(1, topology.p().max(1)), placed }
    }

    /// `p` ranks in groups of `group_size` (the last one shorter where it does not divide p).
    pub fn new(p: usize, group_size: usize) -> Result<Self, HierarchyError> {
        if p == 0 || group_size == 0 {
            return Err(HierarchyError::Empty { p, group_size });
        }
        Ok(Hierarchy { p, group_size: group_size.min(p), placed: None })
    }

    /// The groups of `groups`, as a placement made them.
    pub fn placed(groups: &'a RankGroups) -> Self {
        Hierarchy { p: groups.ranks(), group_size: groups.largest(), placed: Some(groups) }
    }

    /// The network's groups when they are not runs of consecutive ranks.
    pub fn rank_groups(&self) -> Option<&'a RankGroups> {
        self.placed
    }

    /// The number of ranks.
    pub fn p(&self) -> usize {
        self.p
    }

    /// The size of the largest group (of consecutive ranks: every group but the last).
    pub fn group_size(&self) -> usize {
        self.group_size
    }

    /// The number of groups: ⌈p / group_size⌉ of consecutive ranks.
    pub fn groups(&self) -> usize {
        match self.placed {
            Some(groups) => groups.groups(),
            None => self.p.div_ceil(self.group_size),
        }
    }

    /// The size of the smallest group (of consecutive ranks: the last one's).
    pub fn smallest_group_size(&self) -> usize {
        match self.placed {
            Some(groups) => groups.smallest(),
            None => self.p - (self.groups() - 1) * self.group_size,
        }
    }

    /// The ranks of group `g` (g < [`Hierarchy::groups`]) in order, its leader first.
    pub fn group(&self, g: usize) -> Members<'a> {
        match self.placed {
            Some(groups) => Members::numbered(Numbering::Grouped(groups), groups.start(g), 1, groups.len(g)),
            None => {
                let first = g * self.group_size;
                Members::new(first, 1, self.group_size.min(self.p - first))
            }
        }
    }

    /// Every group, in order.
    pub fn iter(&self) -> impl Iterator<Item = Members<'a>> + use<'a> {
        let hierarchy = *self;
        (0..hierarchy.groups()).map(move |g| hierarchy.group(g))
    }

    /// The group `rank` belongs to.
    pub fn group_of(&self, rank: NodeId) -> usize {
        match self.placed {
            Some(groups) => groups.group_of(rank),
            None => rank / self.group_size,
        }
    }

    /// The position of `rank` in its group (its leader's is 0).
    pub fn position(&self, rank: NodeId) -> usize {
        match self.placed {
            Some(groups) => groups.position(rank),
            None => rank % self.group_size,
        }
    }

    /// Lane `j` (j below [`Hierarchy::smallest_group_size`]): the rank at position `j` of
    /// every group, in group order.
    pub fn lane(&self, j: usize) -> Members<'a> {
        match self.placed {
            Some(groups) => Members::numbered(Numbering::Lanes(groups), j * groups.groups(), 1, groups.groups()),
            None => Members::new(j, self.group_size, self.groups()),
        }
    }

    /// Every group's leader, its first rank, in group order: lane 0.
    pub fn leaders(&self) -> Members<'a> {
        self.lane(0)
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
        let torus = shape(TopologyKind::Torus, 12, Some(&[3, 4]));
        let torus = Hierarchy::of(&torus);
        assert_eq!(groups(&torus), [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9, 10, 11]]);
        let mesh = shape(TopologyKind::Mesh, 12, Some(&[4, 3]));
        let mesh = Hierarchy::of(&mesh);
        assert_eq!(groups(&mesh), [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9, 10, 11]]);
        let mesh3d = shape(TopologyKind::Mesh3d, 24, Some(&[2, 3, 4]));
        let mesh3d = Hierarchy::of(&mesh3d);
        assert_eq!((mesh3d.groups(), mesh3d.group_size()), (6, 4));
        // Not a grid: the rows of the squarest grid, as the mesh algorithms walk it.
        for (kind, p, rows) in [
            (TopologyKind::Ring, 16, 4),
            (TopologyKind::Hypercube, 32, 4),
            (TopologyKind::Full, 6, 2),
            (TopologyKind::Ring, 7, 1),
        ] {
            let topology = shape(kind, p, None);
            let hierarchy = Hierarchy::of(&topology);
            assert_eq!(hierarchy.groups(), rows, "{kind:?} of {p}");
            assert_eq!(hierarchy.group_size() * rows, p, "{kind:?} of {p}");
        }
        let one = shape(TopologyKind::Ring, 1, None);
        assert_eq!(groups(&Hierarchy::of(&one)), [vec![0]]);
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

    /// Under round-robin on a cluster of 3 machines of 4 cores with 10 ranks, machine m
    /// holds the ranks m, m + 3, m + 6 (and 9 on machine 0): the groups, their lanes and
    /// every rank's group and position are those.
    #[test]
    fn a_placement_s_groups_are_the_ranks_on_each_machine() {
        let cluster = shape(TopologyKind::Cluster, 10, Some(&[3, 4]))
            .placed(topocomm_proto::network::Placement::RoundRobin)
            .expect("a placement");
        let hierarchy = Hierarchy::of(&cluster);
        assert_eq!(groups(&hierarchy), [vec![0, 3, 6, 9], vec![1, 4, 7], vec![2, 5, 8]]);
        assert_eq!((hierarchy.groups(), hierarchy.smallest_group_size()), (3, 3));
        let lanes: Vec<Vec<NodeId>> = (0..3).map(|j| hierarchy.lane(j).iter().collect()).collect();
        assert_eq!(lanes, [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
        assert_eq!(hierarchy.leaders().iter().collect::<Vec<_>>(), [0, 1, 2]);
        for (g, group) in hierarchy.iter().enumerate() {
            for (k, rank) in group.iter().enumerate() {
                assert_eq!((hierarchy.group_of(rank), hierarchy.position(rank)), (g, k));
                assert_eq!(group.position_of(rank), Some(k));
            }
        }
        // Rank 9 is on no lane (it folds into lane 0 of its machine); rank 4 is on lane 1 only.
        assert_eq!((0..3).find_map(|j| hierarchy.lane(j).position_of(9)), None);
        assert_eq!(hierarchy.lane(1).position_of(4), Some(1));
        assert_eq!(hierarchy.lane(0).position_of(4), None);
        assert_eq!(hierarchy.leader(0, 6), 6);
        assert_eq!(hierarchy.leader(1, 6), 1);
    }

    #[test]
    fn an_empty_hierarchy_is_refused_in_one_line() {
        let error = Hierarchy::new(8, 0).unwrap_err().to_string();
        assert_eq!(error, "a hierarchy of 8 ranks in groups of 0 has no group: both must be at least 1");
        assert!(Hierarchy::new(0, 3).is_err());
    }
}
