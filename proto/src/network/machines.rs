//! A cluster of machines of many cores: `M` machines of `C` cores each. The cores of a
//! machine reach each other through the machine's memory, a switch of its own that each
//! core links to (class `intra`); a machine reaches the others through its one network
//! port, the link from its memory switch to the cluster's switch (class `inter`). So
//! traffic inside a machine never crosses an `inter` link, and all the traffic of a
//! machine's cores to other machines shares its port, as on the clusters Open MPI's
//! `han` (Luo et al., CLUSTER 2020) and MPICH's multi-leader collectives are made for.
//!
//! Vertices, as [`super::Family`] numbers them: cores `0..M·C` (machine-major, so core
//! `x` is on machine `x / C`), then the machines' memory switches, then the cluster's
//! switch (only when there are two machines or more).

use super::{ClassId, Vertex};

/// The class of a core's link to its machine's memory.
pub const INTRA: ClassId = 0;
/// The class of a machine's port to the cluster's switch.
pub const INTER: ClassId = 1;

/// The cluster's link classes, by [`ClassId`].
pub const CLASSES: &[&str] = &["intra", "inter"];

/// `machines` machines of `cores` cores (each at least 1, checked by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machines {
    machines: usize,
    cores: usize,
}

impl Machines {
    pub fn new(machines: usize, cores: usize) -> Self {
        Machines { machines, cores }
    }

    /// `M · C`.
    pub fn hosts(&self) -> usize {
        self.machines * self.cores
    }

    /// One memory switch a machine, and the cluster's switch when there are two
    /// machines or more.
    pub fn switches(&self) -> usize {
        self.machines + usize::from(self.machines > 1)
    }

    /// The number of machines.
    pub fn machines(&self) -> usize {
        self.machines
    }

    /// The number of cores a machine.
    pub fn cores(&self) -> usize {
        self.cores
    }

    fn memory(&self, machine: usize) -> Vertex {
        self.hosts() + machine
    }

    fn cluster_switch(&self) -> Vertex {
        self.hosts() + self.machines
    }

    /// The memory switch a core hangs off.
    pub fn attachment(&self, core: usize) -> Vertex {
        self.memory(core / self.cores)
    }

    /// Every vertex linked to `v`, with the link's class.
    pub fn neighbours(&self, v: Vertex) -> Vec<(Vertex, ClassId)> {
        let hosts = self.hosts();
        if v < hosts {
            return vec![(self.attachment(v), INTRA)];
        }
        if v == self.cluster_switch() {
            return (0..self.machines).map(|m| (self.memory(m), INTER)).collect();
        }
        let machine = v - hosts;
        let cores = (0..self.cores).map(|c| (machine * self.cores + c, INTRA));
        let port = (self.machines > 1).then(|| (self.cluster_switch(), INTER));
        cores.chain(port).collect()
    }

    /// The class of the link between `a` and `b`, if they are linked. Does not allocate.
    pub fn link_class(&self, a: Vertex, b: Vertex) -> Option<ClassId> {
        let hosts = self.hosts();
        let (low, high) = (a.min(b), a.max(b));
        if low < hosts {
            return (high == self.attachment(low)).then_some(INTRA);
        }
        let memory_and_cluster = self.machines > 1 && high == self.cluster_switch() && low < high;
        memory_and_cluster.then_some(INTER)
    }

    /// The next vertex from `at` towards core `dst`: up to the machine's memory, across
    /// the cluster's switch if `dst` is on another machine, down to `dst`. `at != dst`.
    pub fn next_hop(&self, at: Vertex, dst: usize) -> Vertex {
        let hosts = self.hosts();
        let dst_memory = self.attachment(dst);
        match at {
            _ if at < hosts => self.attachment(at),
            _ if at == dst_memory => dst,
            _ if at == self.cluster_switch() => dst_memory,
            _ => self.cluster_switch(),
        }
    }

    /// Where a vertex sits: a core `[machine, core]`, a memory switch `[machine]`, the
    /// cluster's switch `[]`.
    pub fn coords(&self, v: Vertex) -> Vec<usize> {
        let hosts = self.hosts();
        match v {
            _ if v < hosts => vec![v / self.cores, v % self.cores],
            _ if v == self.cluster_switch() => vec![],
            _ => vec![v - hosts],
        }
    }

    /// The most hops a route between two of `hosts` takes: 2 in one machine, 4 across
    /// machines.
    pub fn diameter(&self, hosts: &[usize]) -> usize {
        let machine = |host: &usize| host / self.cores;
        match hosts {
            [] | [_] => 0,
            [first, rest @ ..] if rest.iter().all(|host| machine(host) == machine(first)) => 2,
            _ => 4,
        }
    }

    /// Links cut by halving the machines: one port of each machine of a half, ⌊M/2⌋
    /// (one machine: the memory links of half its cores, ⌊C/2⌋).
    pub fn bisection_width(&self) -> usize {
        if self.machines > 1 { self.machines / 2 } else { self.cores / 2 }
    }
}
