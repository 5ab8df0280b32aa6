//! The groups of ranks a placement makes: the ranks whose hosts lie in one block of
//! consecutive hosts (a machine's cores, an edge switch's hosts, a dragonfly group's),
//! which the hierarchical collectives run inside, whatever ranks those are.

/// The ranks of a network by group: the groups that hold a rank, in the order of their
/// hosts, each group's ranks in the order of their hosts. A group's ranks are at
/// positions `0..len`, its leader the first. Built once with the network (a few words a
/// rank), so that each node of a simulation reads it rather than building its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankGroups {
    /// The ranks group by group ("slot" order).
    order: Vec<usize>,
    /// Each rank's slot: its index in `order`.
    slot: Vec<usize>,
    /// Each rank's group.
    group: Vec<usize>,
    /// Where each group starts in `order`, and after the last, the end.
    starts: Vec<usize>,
}

impl RankGroups {
    /// The groups of ranks on `host_of` (rank `r` on host `host_of[r]`, distinct hosts),
    /// `hosts_per_group` consecutive hosts a group (at least 1).
    pub fn new(host_of: &[usize], hosts_per_group: usize) -> Self {
        let hosts_per_group = hosts_per_group.max(1);
        let mut order: Vec<usize> = (0..host_of.len()).collect();
        order.sort_unstable_by_key(|&rank| host_of[rank]);
        let mut slot = vec![0; host_of.len()];
        let mut group = vec![0; host_of.len()];
        let mut starts = Vec::new();
        let mut block = None;
        for (at, &rank) in order.iter().enumerate() {
            let this = host_of[rank] / hosts_per_group;
            if block != Some(this) {
                block = Some(this);
                starts.push(at);
            }
            slot[rank] = at;
            group[rank] = starts.len() - 1;
        }
        starts.push(order.len());
        RankGroups { order, slot, group, starts }
    }

    /// The ranks.
    pub fn ranks(&self) -> usize {
        self.order.len()
    }

    /// The groups that hold a rank.
    pub fn groups(&self) -> usize {
        self.starts.len() - 1
    }

    /// Where group `g` starts in slot order.
    pub fn start(&self, g: usize) -> usize {
        self.starts[g]
    }

    /// The ranks of group `g`.
    pub fn len(&self, g: usize) -> usize {
        self.starts[g + 1] - self.starts[g]
    }

    /// Whether there is no rank (and so no group).
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The ranks of the smallest group.
    pub fn smallest(&self) -> usize {
        (0..self.groups()).map(|g| self.len(g)).min().unwrap_or(0)
    }

    /// The ranks of the largest group.
    pub fn largest(&self) -> usize {
        (0..self.groups()).map(|g| self.len(g)).max().unwrap_or(0)
    }

    /// The rank in slot `slot` (group by group).
    pub fn at_slot(&self, slot: usize) -> usize {
        self.order[slot]
    }

    /// The slot of `rank`, if it is one.
    pub fn slot_of(&self, rank: usize) -> Option<usize> {
        self.slot.get(rank).copied()
    }

    /// The rank at position `k` of group `g`.
    pub fn member(&self, g: usize, k: usize) -> usize {
        self.order[self.starts[g] + k]
    }

    /// The group of `rank`.
    pub fn group_of(&self, rank: usize) -> usize {
        self.group[rank]
    }

    /// The position of `rank` in its group (its leader's is 0).
    pub fn position(&self, rank: usize) -> usize {
        self.slot[rank] - self.starts[self.group[rank]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(groups: &RankGroups) -> Vec<Vec<usize>> {
        (0..groups.groups()).map(|g| (0..groups.len(g)).map(|k| groups.member(g, k)).collect()).collect()
    }

    #[test]
    fn ranks_group_by_the_block_of_their_host_in_host_order() {
        // Ranks 0..6 on hosts 7, 0, 5, 1, 4, 12 in blocks of 4 hosts: blocks 0, 1 and 3.
        let placed = RankGroups::new(&[7, 0, 5, 1, 4, 12], 4);
        assert_eq!(groups(&placed), [vec![1, 3], vec![4, 2, 0], vec![5]]);
        assert_eq!((placed.smallest(), placed.largest()), (1, 3));
        for g in 0..placed.groups() {
            for k in 0..placed.len(g) {
                let rank = placed.member(g, k);
                assert_eq!((placed.group_of(rank), placed.position(rank)), (g, k));
                assert_eq!(placed.at_slot(placed.slot_of(rank).unwrap()), rank);
            }
        }
        assert_eq!(placed.slot_of(6), None);
    }

    #[test]
    fn linear_ranks_make_runs_of_consecutive_ranks() {
        let linear: Vec<usize> = (0..10).collect();
        assert_eq!(groups(&RankGroups::new(&linear, 4)), [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
    }
}
