//! Switched networks: graphs of endpoints, which run ranks, and switches, which only
//! forward, with a class on every link ([`ClassId`], each class its own physics). Three
//! families are built in: the k-port fat-tree ([`fat_tree`]), the dragonfly
//! ([`dragonfly`]) and a cluster of machines of many cores ([`machines`]). Each numbers
//! its own vertices (hosts first, then switches) and routes arithmetically, so a network
//! of 65,536 hosts holds no table.
//!
//! [`Switched`] puts `p` ranks on a family's hosts (rank `r` on host `r`: linear
//! placement) and numbers the network's vertices as the rest of topocomm sees them:
//! ranks `0..p`, then the switches `p..p + switches`. Hosts without a rank are no vertex:
//! no route between two hosts crosses a host.
//!
//! This module is pure arithmetic, like [`crate::topology`], which holds a [`Switched`]
//! for the switched kinds.

pub mod dragonfly;
pub mod fat_tree;
pub mod machines;
pub mod routes;

use std::sync::Arc;

use crate::netfile::FileGraph;
use dragonfly::Dragonfly;
use fat_tree::FatTree;
use machines::Machines;
pub use routes::{Flow, Routes};

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

    fn diameter(&self, hosts: usize, routes: Routes) -> usize {
        match self {
            Family::FatTree(tree) => tree.diameter(hosts),
            Family::Dragonfly(dragonfly) => dragonfly.diameter(hosts, matches!(routes, Routes::Valiant { .. })),
            Family::Machines(machines) => machines.diameter(hosts),
            Family::File(graph) => (0..hosts)
                .flat_map(|a| (0..hosts).map(move |b| (a, b)))
                .map(|(a, b)| graph.hops(a, b))
                .max()
                .unwrap_or(0),
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

/// `p` ranks on a family's first `p` hosts, and the network's vertices: ranks `0..p`,
/// then the family's switches; routed by one of the family's policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switched {
    family: Family,
    ranks: usize,
    routes: Routes,
}

impl Switched {
    /// `ranks ≤ family.hosts()` (checked by the caller, which says why), routed as the
    /// family routes by default.
    pub fn new(family: Family, ranks: usize) -> Self {
        debug_assert!(ranks <= family.hosts());
        let routes = family.default_routes();
        Switched { family, ranks, routes }
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

    /// The family's vertex of a network vertex.
    fn inner(&self, v: usize) -> Vertex {
        if v < self.ranks { v } else { self.family.hosts() + (v - self.ranks) }
    }

    /// The network vertex of a family vertex; `None` for a host without a rank.
    fn outer(&self, v: Vertex) -> Option<usize> {
        let hosts = self.family.hosts();
        match v {
            _ if v < self.ranks => Some(v),
            _ if v < hosts => None,
            _ => Some(self.ranks + (v - hosts)),
        }
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
    /// flow's route.
    pub fn next_hop(&self, at: usize, flow: Flow) -> usize {
        self.next_hop_by(self.routes, at, flow)
    }

    /// [`Switched::next_hop`] by the policy `routes`.
    fn next_hop_by(&self, routes: Routes, at: usize, flow: Flow) -> usize {
        let pick = self.family.pick(routes, flow.src, flow.dst, flow);
        self.next_hop_picked(at, flow.dst, pick)
    }

    fn next_hop_picked(&self, at: usize, dst: usize, pick: Pick) -> usize {
        let next = self.family.next_hop(self.inner(at), dst, pick);
        self.outer(next).expect("a route crosses no host but its ends")
    }

    /// Every route the policy may give a flow from rank `src` to rank `dst` (`src !=
    /// dst`), whatever its tag, each once, in the order of the policy's choices: one
    /// where the policy routes by destination.
    pub fn route_choices(&self, src: usize, dst: usize) -> Vec<Vec<usize>> {
        let mut choices: Vec<Vec<usize>> = Vec::new();
        for pick in self.family.picks(self.routes, src, dst) {
            let mut route = vec![src];
            let mut at = src;
            while at != dst {
                at = self.next_hop_picked(at, dst, pick);
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

    /// Where a vertex sits in the family (see each family's `coords`).
    pub fn coords(&self, v: usize) -> Vec<usize> {
        self.family.coords(self.inner(v))
    }

    /// The switch rank `rank` hangs off, as a network vertex.
    pub fn attachment(&self, rank: usize) -> usize {
        self.outer(self.family.attachment(rank)).expect("a switch is a vertex")
    }

    /// The most hops a route between two ranks takes under the policy.
    pub fn diameter(&self) -> usize {
        self.family.diameter(self.ranks, self.routes)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod route_tests;
