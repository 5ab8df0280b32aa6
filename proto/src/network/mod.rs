//! Switched networks: graphs of endpoints, which run ranks, and switches, which only
//! forward, with a class on every link ([`ClassId`], each class its own physics). Three
//! families are built in: the k-port fat-tree ([`fat_tree`]), the dragonfly
//! ([`dragonfly`]) and a cluster of machines of many cores ([`machines`]). Each numbers
//! its own vertices (hosts first, then switches) and routes arithmetically, so a network
//! of 65,536 hosts holds no table.
//!
//! [`Switched`] puts `p` ranks on a family's hosts as a [`Placement`] says (linear: rank
//! `r` on host `r`) and numbers the network's vertices as the rest of topocomm sees them:
//! ranks `0..p`, then the switches `p..p + switches`. Hosts without a rank are no vertex:
//! no route between two hosts crosses a host. The ranks' groups ([`RankGroups`]: those
//! of a machine, an edge switch, a dragonfly group) follow from where they sit.
//!
//! This module is pure arithmetic, like [`crate::topology`], which holds a [`Switched`]
//! for the switched kinds.

/// Serde for a policy that is its own name (`"round-robin"`, `"valiant:7"`): written by
/// its `Display`, read back by its `FromStr`, whose error says what is wrong.
macro_rules! serde_by_name {
    ($policy:ty) => {
        impl serde::Serialize for $policy {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $policy {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod dragonfly;
pub mod fat_tree;
mod groups;
pub mod machines;
pub mod placement;
pub mod routes;

use std::sync::Arc;

use crate::netfile::FileGraph;
use dragonfly::Dragonfly;
use fat_tree::FatTree;
use machines::Machines;
pub use routes::{Flow, Routes};

pub use groups::RankGroups;
pub use placement::Placement;

/// A vertex of a family: a host or a switch, in the family's own numbering.
pub type Vertex = usize;

/// A link's class: an index into the network's class names.
pub type ClassId = usize;

/// The class every link of a direct network has.
pub const DIRECT_CLASSES: &[&str] = &["link"];

/// A switched network: a built-in family and its shape, or a graph read from a file
/// (`--network FILE`: [`crate::netfile`]), whose endpoints all hold ranks and whose
/// routes are its shortest paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Family {
    FatTree(FatTree),
    Dragonfly(Dragonfly),
    Machines(Machines),
    File(Arc<FileGraph>),
}

impl Family {
    /// The hosts, which ranks may be put on.
    pub fn hosts(&self) -> usize {
        match self {
            Family::FatTree(tree) => tree.hosts(),
            Family::Dragonfly(dragonfly) => dragonfly.hosts(),
            Family::Machines(machines) => machines.hosts(),
            Family::File(graph) => graph.endpoints(),
        }
    }

    /// The switches.
    pub fn switches(&self) -> usize {
        match self {
            Family::FatTree(tree) => tree.switches(),
            Family::Dragonfly(dragonfly) => dragonfly.routers(),
            Family::Machines(machines) => machines.switches(),
            Family::File(graph) => graph.switches().len(),
        }
    }

    fn neighbours(&self, v: Vertex) -> Vec<(Vertex, ClassId)> {
        match self {
            Family::FatTree(tree) => tree.neighbours(v),
            Family::Dragonfly(dragonfly) => dragonfly.neighbours(v),
            Family::Machines(machines) => machines.neighbours(v),
            Family::File(graph) => graph.neighbours(v).iter().map(|&(w, class)| (w, class.0)).collect(),
        }
    }

    fn link_class(&self, a: Vertex, b: Vertex) -> Option<ClassId> {
        match self {
            Family::FatTree(tree) => tree.link_class(a, b),
            Family::Dragonfly(dragonfly) => dragonfly.link_class(a, b),
            Family::Machines(machines) => machines.link_class(a, b),
            Family::File(graph) => graph.class_of(a, b).map(|class| class.0),
        }
    }

    /// The routes the family takes unless told otherwise.
    pub fn default_routes(&self) -> Routes {
        match self {
            Family::FatTree(_) => Routes::DModK,
            Family::Dragonfly(_) => Routes::Minimal,
            Family::Machines(_) | Family::File(_) => Routes::ShortestPath,
        }
    }

    /// What `routes` picks for `flow`, from host `src` to host `dst`.
    fn pick(&self, routes: Routes, src: usize, dst: usize, flow: Flow) -> Pick {
        match (self, routes) {
            (Family::FatTree(_), Routes::Ecmp) => Pick::Spread(flow.hash(0)),
            (Family::Dragonfly(dragonfly), Routes::Valiant { seed }) => {
                Pick::Via(dragonfly.intermediate(src, dst, flow.hash(seed)))
            }
            _ => Pick::Destination,
        }
    }

    /// Every pick `routes` may make from host `src` to host `dst`, whatever the flow.
    fn picks(&self, routes: Routes, src: usize, dst: usize) -> Vec<Pick> {
        match (self, routes) {
            (Family::FatTree(tree), Routes::Ecmp) => (0..(tree.k() / 2).pow(2) as u64).map(Pick::Spread).collect(),
            (Family::Dragonfly(dragonfly), Routes::Valiant { .. }) => {
                let ends = [dragonfly.group_of(src), dragonfly.group_of(dst)];
                let vias = (0..dragonfly.groups()).filter(|group| !ends.contains(group)).map(Some);
                std::iter::once(None).chain(vias).map(Pick::Via).collect()
            }
            _ => vec![Pick::Destination],
        }
    }

    /// The next vertex from `at` towards host `dst` by `pick`.
    fn next_hop(&self, at: Vertex, dst: usize, pick: Pick) -> Vertex {
        match (self, pick) {
            (Family::FatTree(tree), Pick::Spread(hash)) => tree.next_hop(at, dst, Some(hash)),
            (Family::FatTree(tree), _) => tree.next_hop(at, dst, None),
            (Family::Dragonfly(dragonfly), Pick::Via(via)) => dragonfly.next_hop(at, dst, via),
            (Family::Dragonfly(dragonfly), _) => dragonfly.next_hop(at, dst, None),
            (Family::Machines(machines), _) => machines.next_hop(at, dst),
            (Family::File(graph), _) => graph.next_hop(at, dst),
        }
    }

    fn coords(&self, v: Vertex) -> Vec<usize> {
        match self {
            Family::FatTree(tree) => tree.coords(v),
            Family::Dragonfly(dragonfly) => dragonfly.coords(v),
            Family::Machines(machines) => machines.coords(v),
            Family::File(_) => vec![v],
        }
    }

    fn attachment(&self, host: usize) -> Vertex {
        match self {
            Family::FatTree(tree) => tree.attachment(host),
            Family::Dragonfly(dragonfly) => dragonfly.attachment(host),
            Family::Machines(machines) => machines.attachment(host),
            Family::File(graph) => graph.next_hop(host, (host + 1) % graph.endpoints().max(1)),
        }
    }

    /// The most hops a route between two of `hosts` takes under `routes`.
    fn diameter(&self, hosts: &[usize], routes: Routes) -> usize {
        match self {
            Family::FatTree(tree) => tree.diameter(hosts),
            Family::Dragonfly(dragonfly) => dragonfly.diameter(hosts, matches!(routes, Routes::Valiant { .. })),
            Family::Machines(machines) => machines.diameter(hosts),
            Family::File(graph) => {
                hosts.iter().flat_map(|&a| hosts.iter().map(move |&b| graph.hops(a, b))).max().unwrap_or(0)
            }
        }
    }

    /// How many consecutive hosts make one group of ranks of the hierarchical
    /// collectives: a machine's cores, an edge switch's hosts (k/2), a dragonfly group's
    /// (A routers of P); `None` for a graph from a file, which names no groups.
    pub fn group_hosts(&self) -> Option<usize> {
        match self {
            Family::FatTree(tree) => Some(tree.k() / 2),
            Family::Dragonfly(dragonfly) => Some(dragonfly.hosts_per_group()),
            Family::Machines(machines) => Some(machines.cores()),
            Family::File(_) => None,
        }
    }

    /// The family's link classes, by [`ClassId`].
    pub fn class_names(&self) -> Vec<&str> {
        match self {
            Family::FatTree(_) => fat_tree::CLASSES.to_vec(),
            Family::Dragonfly(_) => dragonfly::CLASSES.to_vec(),
            Family::Machines(_) => machines::CLASSES.to_vec(),
            Family::File(graph) => graph.class_names(),
        }
    }

    /// Links cut by the family's natural halving of all its hosts; `None` for a graph
    /// from a file (finding a graph's bisection is NP-hard).
    pub fn bisection_width(&self) -> Option<usize> {
        match self {
            Family::FatTree(tree) => Some(tree.bisection_width()),
            Family::Dragonfly(dragonfly) => Some(dragonfly.bisection_width()),
            Family::Machines(machines) => Some(machines.bisection_width()),
            Family::File(_) => None,
        }
    }
}

/// What a policy picks for a flow, which its route follows at every hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    /// The family's own route to the destination (d-mod-k, minimal, shortest path).
    Destination,
    /// ECMP: the up-ports by this hash.
    Spread(u64),
    /// Valiant: by way of this group (`None`: minimal).
    Via(Option<usize>),
}

/// `p` ranks on a family's hosts as a [`Placement`] puts them, and the network's
/// vertices: ranks `0..p`, then the family's switches; routed by one of the family's
/// policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switched {
    family: Family,
    ranks: usize,
    routes: Routes,
    placement: Placement,
    /// Where the ranks sit, unless the placement is linear (rank `r` on host `r`).
    placed: Option<Placed>,
}

/// The ranks' hosts under a placement that is not linear, both ways, and their groups.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placed {
    /// Each rank's host.
    host_of: Vec<usize>,
    /// Each host's rank, [`NO_RANK`] for a host without one.
    rank_on: Vec<usize>,
    /// The ranks' groups, when the family has groups.
    groups: Option<RankGroups>,
}

/// What [`Placed::rank_on`] holds for a host without a rank.
const NO_RANK: usize = usize::MAX;

impl Switched {
    /// `ranks ≤ family.hosts()` (checked by the caller, which says why), on the hosts
    /// `placement` gives them, routed as the family routes by default.
    pub fn new(family: Family, ranks: usize, placement: Placement) -> Self {
        debug_assert!(ranks <= family.hosts());
        let placed = (!placement.is_linear()).then(|| {
            let host_of = placement.hosts(&family, ranks);
            let mut rank_on = vec![NO_RANK; family.hosts()];
            for (rank, &host) in host_of.iter().enumerate() {
                rank_on[host] = rank;
            }
            let groups = family.group_hosts().map(|size| RankGroups::new(&host_of, size));
            Placed { host_of, rank_on, groups }
        });
        let routes = family.default_routes();
        Switched { family, ranks, routes, placement, placed }
    }

    /// The network routed by `routes`, one of its family's policies (checked by the
    /// caller, which says why not: [`crate::TopologyKind::check_routes`]).
    pub fn with_routes(self, routes: Routes) -> Self {
        Switched { routes, ..self }
    }

    /// The route policy.
    pub fn routes(&self) -> Routes {
        self.routes
    }

    /// The family.
    pub fn family(&self) -> &Family {
        &self.family
    }

    /// Where the ranks sit.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The ranks: vertices `0..ranks`.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The family's hosts, ranks on them or not.
    pub fn hosts(&self) -> usize {
        self.family.hosts()
    }

    /// The switches: vertices `ranks..ranks + switches`.
    pub fn switches(&self) -> usize {
        self.family.switches()
    }

    /// Ranks and switches.
    pub fn vertices(&self) -> usize {
        self.ranks + self.switches()
    }

    /// The host rank `rank` sits on, in the family's numbering.
    pub fn host_of(&self, rank: usize) -> usize {
        self.placed.as_ref().map_or(rank, |placed| placed.host_of[rank])
    }

    /// The rank on `host`, if one sits there.
    pub fn rank_on(&self, host: usize) -> Option<usize> {
        match &self.placed {
            None => (host < self.ranks).then_some(host),
            Some(placed) => placed.rank_on.get(host).copied().filter(|&rank| rank != NO_RANK),
        }
    }

    /// The ranks' groups of a placement that is not linear, on a family with groups
    /// ([`Family::group_hosts`]); `None` where the groups are runs of consecutive ranks
    /// (linear) or the family has none.
    pub fn rank_groups(&self) -> Option<&RankGroups> {
        self.placed.as_ref().and_then(|placed| placed.groups.as_ref())
    }

    /// The family's vertex of a network vertex.
    fn inner(&self, v: usize) -> Vertex {
        if v < self.ranks { self.host_of(v) } else { self.family.hosts() + (v - self.ranks) }
    }

    /// The network vertex of a family vertex; `None` for a host without a rank.
    fn outer(&self, v: Vertex) -> Option<usize> {
        let hosts = self.family.hosts();
        if v < hosts { self.rank_on(v) } else { Some(self.ranks + (v - hosts)) }
    }

    /// The vertices linked to `v`, sorted, with each link's class.
    pub fn neighbours(&self, v: usize) -> Vec<(usize, ClassId)> {
        let mut out: Vec<(usize, ClassId)> = self
            .family
            .neighbours(self.inner(v))
            .into_iter()
            .filter_map(|(w, class)| self.outer(w).map(|w| (w, class)))
            .collect();
        out.sort_unstable();
        out
    }

    /// The class of the link between `a` and `b`, if they are linked.
    pub fn link_class(&self, a: usize, b: usize) -> Option<ClassId> {
        self.family.link_class(self.inner(a), self.inner(b))
    }

    /// The next vertex from `at` towards the flow's destination (`at != flow.dst`) on the
    /// flow's route. The flow names ranks, and a policy that hashes it hashes the ranks
    /// (what a frame's header carries); the route runs between the ranks' hosts.
    pub fn next_hop(&self, at: usize, flow: Flow) -> usize {
        self.next_hop_by(self.routes, at, flow)
    }

    /// [`Switched::next_hop`] by the policy `routes`.
    fn next_hop_by(&self, routes: Routes, at: usize, flow: Flow) -> usize {
        // The source in the family (a switch may stand for it where the policy routes by
        // destination: a node's table of next hops).
        let (src, dst) = (self.inner(flow.src), self.host_of(flow.dst));
        let pick = self.family.pick(routes, src, dst, flow);
        self.next_hop_picked(at, dst, pick)
    }

    /// The next vertex from `at` towards host `dst` by `pick`.
    fn next_hop_picked(&self, at: usize, dst: usize, pick: Pick) -> usize {
        let next = self.family.next_hop(self.inner(at), dst, pick);
        self.outer(next).expect("a route crosses no host but its ends")
    }

    /// Every route the policy may give a flow from rank `src` to rank `dst` (`src !=
    /// dst`), whatever its tag, each once, in the order of the policy's choices: one
    /// where the policy routes by destination.
    pub fn route_choices(&self, src: usize, dst: usize) -> Vec<Vec<usize>> {
        let dst_host = self.host_of(dst);
        let mut choices: Vec<Vec<usize>> = Vec::new();
        for pick in self.family.picks(self.routes, self.host_of(src), dst_host) {
            let mut route = vec![src];
            let mut at = src;
            while at != dst {
                at = self.next_hop_picked(at, dst_host, pick);
                route.push(at);
            }
            if !choices.contains(&route) {
                choices.push(route);
            }
        }
        choices
    }

    /// The hops from rank `a` to rank `b` under the family's default policy, whatever the
    /// network's: what every policy but Valiant's takes (ECMP's routes are as long as
    /// d-mod-k's).
    pub fn distance(&self, a: usize, b: usize) -> usize {
        let (routes, flow) = (self.family.default_routes(), Flow::new(a, b, 0));
        let (mut at, mut hops) = (a, 0);
        while at != b {
            at = self.next_hop_by(routes, at, flow);
            hops += 1;
        }
        hops
    }

    /// Where a vertex sits in the family (see each family's `coords`): a rank where its
    /// host does.
    pub fn coords(&self, v: usize) -> Vec<usize> {
        self.family.coords(self.inner(v))
    }

    /// The switch rank `rank` hangs off, as a network vertex.
    pub fn attachment(&self, rank: usize) -> usize {
        self.outer(self.family.attachment(self.host_of(rank))).expect("a switch is a vertex")
    }

    /// The most hops a route between two ranks takes under the policy.
    pub fn diameter(&self) -> usize {
        let hosts: Vec<usize> = match &self.placed {
            None => (0..self.ranks).collect(),
            Some(placed) => placed.host_of.clone(),
        };
        self.family.diameter(&hosts, self.routes)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod route_tests;
