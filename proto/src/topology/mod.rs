//! Interconnection topologies: ids 0..p-1, neighbours, edges, diameter and the
//! deterministic route between any two nodes (ring: the shorter way; mesh and torus:
//! dimension-ordered; hypercube: E-cube, lowest differing bit first; full: direct).
//! Shapes are validated on construction; an invalid one says what would be valid.
//!
//! Ids are row-major over [`Topology::dims`]: the last dimension varies fastest, so in
//! a 2-D mesh `id = row * cols + col` and a row is a run of consecutive ids. The
//! hypercube is the exception: coordinate `k` of a node is bit `k` of its id.
//!
//! Routes are what the node's router follows hop by hop: [`Topology::next_hop`] is
//! the single rule and [`Topology::flow_route`] is that rule iterated, so the two always
//! agree. A route is a flow's (source, destination, tag): a switched network may route
//! flows between the same two ranks apart by its policy ([`Routes`], `--routes`: ECMP on a
//! fat-tree, Valiant on a dragonfly). Every route is a shortest path but Valiant's.
//!
//! This module is pure arithmetic: it knows nothing of sockets, frames or collectives.

mod switched_shape;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, EnumString, IntoStaticStr, VariantNames};

use crate::netfile::FileGraph;
use crate::network::{ClassId, DIRECT_CLASSES, Family, Placement, Switched};
pub use crate::network::{Flow, Routes};

/// A node's id in the current topology, 0..p-1.
pub type NodeId = usize;

/// The shapes topocomm can wire.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// A cycle of `p` nodes; node `i` links to `i - 1` and `i + 1` (mod p).
    Ring,
    /// A 2-D grid `R x C` without wraparound.
    Mesh,
    /// A 2-D grid `R x C` with wraparound in both dimensions.
    Torus,
    /// A 3-D grid `A x B x C` without wraparound.
    Mesh3d,
    /// A 3-D grid `A x B x C` with wraparound in all three dimensions.
    Torus3d,
    /// `p = 2^d` nodes; two nodes link when their ids differ in exactly one bit.
    Hypercube,
    /// Every node links to every other node.
    Full,
    /// The k-port three-level fat-tree (`--dims K`): hosts under switches
    /// ([`crate::network::fat_tree`]).
    FatTree,
    /// The dragonfly `A x P x H` of Kim et al. ([`crate::network::dragonfly`]).
    Dragonfly,
    /// `M x C`: M machines of C cores ([`crate::network::machines`]).
    Cluster,
    /// A network read from a file (`--network FILE`: topocomm's JSON or a SimGrid
    /// platform, [`crate::netfile`]); every endpoint holds a rank.
    Graph,
}

impl TopologyKind {
    /// Whether the kind has switches: vertices that only forward, beside its ranks.
    pub fn is_switched(self) -> bool {
        matches!(self, TopologyKind::FatTree | TopologyKind::Dragonfly | TopologyKind::Cluster | TopologyKind::Graph)
    }

    /// The routes the kind takes unless told otherwise: a fat-tree's d-mod-k, a
    /// dragonfly's minimal ones, the shortest paths of a fully connected network, a
    /// cluster and a network from a file, the dimension order of the rest.
    pub fn default_routes(self) -> Routes {
        match self {
            TopologyKind::FatTree => Routes::DModK,
            TopologyKind::Dragonfly => Routes::Minimal,
            TopologyKind::Full | TopologyKind::Cluster | TopologyKind::Graph => Routes::ShortestPath,
            _ => Routes::DimensionOrder,
        }
    }

    /// Whether the kind routes by `routes`; else why not, in one line that says what it
    /// takes.
    pub fn check_routes(self, routes: Routes) -> Result<(), TopologyError> {
        let own = match self {
            TopologyKind::FatTree => matches!(routes, Routes::DModK | Routes::Ecmp),
            TopologyKind::Dragonfly => matches!(routes, Routes::Minimal | Routes::Valiant { .. }),
            _ => routes == self.default_routes(),
        };
        if own {
            return Ok(());
        }
        let (kind, takes) = match self {
            TopologyKind::FatTree => ("a fat-tree".to_string(), "d-mod-k or ecmp".to_string()),
            TopologyKind::Dragonfly => ("a dragonfly".to_string(), "minimal or valiant[:SEED]".to_string()),
            TopologyKind::Graph => ("a network from a file".to_string(), format!("{} only", self.default_routes())),
            TopologyKind::Full => ("a fully connected network".to_string(), format!("{} only", self.default_routes())),
            kind => (format!("a {kind}"), format!("{} only", kind.default_routes())),
        };
        Err(TopologyError::Invalid(format!(
            "--routes {routes} applies to {}; {kind} routes {takes}",
            routes.applies_to()
        )))
    }
}

/// Why a shape cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// `p = 0`.
    #[error("a topology needs at least one node")]
    Empty,
    /// The shape does not fit; the message says what would.
    #[error("{0}")]
    Invalid(String),
}

/// A validated topology of `p` nodes (ranks). A switched kind also has switches, vertices
/// `p..vertices()` that only forward; a direct one's vertices are its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    kind: TopologyKind,
    p: usize,
    dims: Vec<usize>,
    switched: Option<Arc<Switched>>,
}

/// How many shapes an error message lists before it abbreviates.
const MAX_LISTED_SHAPES: usize = 24;

impl Topology {
    /// Builds and validates a shape. `dims` is for mesh/torus (2 factors) and
    /// mesh3d/torus3d (3 factors); without it the squarest (most cubic) factorisation
    /// of `p` is chosen (see [`squarest_grid`] and [`cubest_grid`]).
    ///
    /// Ring, hypercube and full have their shape fixed by `p`; they accept `dims` only
    /// if it equals that shape (ring and full: `[p]`; hypercube: `[2; d]`).
    ///
    /// Errors: `p = 0` gives [`TopologyError::Empty`]; anything else that does not fit
    /// gives [`TopologyError::Invalid`] with a message naming the valid choices.
    pub fn new(kind: TopologyKind, p: usize, dims: Option<&[usize]>) -> Result<Self, TopologyError> {
        if p == 0 {
            return Err(TopologyError::Empty);
        }
        let dims = match kind {
            TopologyKind::Ring | TopologyKind::Full => fixed_dims(kind, p, vec![p], dims, &format!("[{p}]"))?,
            TopologyKind::Hypercube => {
                if !p.is_power_of_two() {
                    let below = 1usize << (usize::BITS - 1 - p.leading_zeros());
                    let above = below.checked_mul(2).map_or_else(|| "none".to_string(), |a| a.to_string());
                    return Err(TopologyError::Invalid(format!(
                        "a hypercube needs a power-of-two node count; {p} is not \
                         (nearest: {below} or {above})"
                    )));
                }
                let d = p.trailing_zeros() as usize;
                let canonical = vec![2; d];
                let shown = if d == 0 { "[] (0-dimensional)".to_string() } else { join_dims(&canonical) };
                fixed_dims(kind, p, canonical, dims, &shown)?
            }
            TopologyKind::Mesh | TopologyKind::Torus => match dims {
                None => {
                    let (r, c) = squarest_grid(p);
                    vec![r, c]
                }
                Some(d) => grid_dims(kind, p, d, 2)?,
            },
            TopologyKind::Mesh3d | TopologyKind::Torus3d => match dims {
                None => {
                    let (a, b, c) = cubest_grid(p);
                    vec![a, b, c]
                }
                Some(d) => grid_dims(kind, p, d, 3)?,
            },
            TopologyKind::Graph => {
                return Err(TopologyError::Invalid(
                    "a graph is read from a file (--network FILE: topocomm's JSON or a SimGrid platform), and runs \
                     in the simulator (simulate, explain, topology): daemons wire the built-in topologies only"
                        .to_string(),
                ));
            }
            TopologyKind::FatTree | TopologyKind::Dragonfly | TopologyKind::Cluster => {
                let (dims, family) = switched_shape::family(kind, p, dims)?;
                let switched = Some(Arc::new(Switched::new(family, p, Placement::Linear)));
                return Ok(Self { kind, p, dims, switched });
            }
        };
        Ok(Self { kind, p, dims, switched: None })
    }

    /// The network a file describes, every endpoint a rank (vertices: the endpoints in
    /// the file's order, then its switches), routed by its shortest paths. `p`, when
    /// given, must be the endpoints' count.
    pub fn from_network(graph: FileGraph, p: Option<usize>) -> Result<Self, TopologyError> {
        let endpoints = graph.endpoints();
        if let Some(p) = p.filter(|&p| p != endpoints) {
            return Err(TopologyError::Invalid(format!(
                "the network{} has {endpoints} endpoints, and every one holds a rank: {p} ranks do not fit it",
                graph.name().map(|name| format!(" {name}")).unwrap_or_default()
            )));
        }
        let family = Family::File(Arc::new(graph));
        let switched = Some(Arc::new(Switched::new(family, endpoints, Placement::Linear)));
        Ok(Self { kind: TopologyKind::Graph, p: endpoints, dims: vec![endpoints], switched })
    }

    /// The same network with its ranks placed on its hosts as `placement` says (see
    /// [`crate::network::placement`]), routed as before. A direct network's vertices are
    /// its ranks, and its algorithms are laid out on their ids: it takes the linear
    /// placement only.
    pub fn placed(self, placement: Placement) -> Result<Self, TopologyError> {
        if placement == self.placement() {
            return Ok(self);
        }
        let Some(switched) = &self.switched else {
            return Err(TopologyError::Invalid(format!(
                "a {} places rank r on node r: its vertices are its ranks, so --placement {placement} applies to \
                 switched networks only (fat-tree, dragonfly, cluster, --network)",
                self.kind
            )));
        };
        let switched =
            Some(Arc::new(Switched::new(switched.family().clone(), self.p, placement).with_routes(switched.routes())));
        Ok(Self { switched, ..self })
    }

    /// Where the ranks sit on the hosts: linear on a direct network.
    pub fn placement(&self) -> Placement {
        self.switched.as_ref().map_or(Placement::Linear, |switched| switched.placement())
    }

    /// The topology routed by `routes`; refused, in one line, when the policy is not one
    /// of this kind's ([`TopologyKind::check_routes`]).
    pub fn with_routes(self, routes: Routes) -> Result<Self, TopologyError> {
        self.kind.check_routes(routes)?;
        let switched = self.switched.map(|switched| Arc::new(Arc::unwrap_or_clone(switched).with_routes(routes)));
        Ok(Self { switched, ..self })
    }

    /// The topology routed by `routes` if given ([`Topology::with_routes`]), else as it
    /// is (its kind's default).
    pub fn routed(self, routes: Option<Routes>) -> Result<Self, TopologyError> {
        match routes {
            Some(routes) => self.with_routes(routes),
            None => Ok(self),
        }
    }

    /// How the topology routes: a switched network by its policy, a direct one by its
    /// kind's one ([`TopologyKind::default_routes`]).
    pub fn routes(&self) -> Routes {
        self.switched.as_ref().map_or(self.kind.default_routes(), |switched| switched.routes())
    }

    /// The shape's kind.
    pub fn kind(&self) -> TopologyKind {
        self.kind
    }

    /// The number of nodes.
    pub fn p(&self) -> usize {
        self.p
    }

    /// Extent of each dimension (ring: `[p]`; mesh/torus: `[rows, cols]`; 3-D:
    /// `[a, b, c]`; hypercube: `[2; d]`; full: `[p]`).
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// The dims joined with `x`, e.g. `"4x4"`, `"2x2x2"` or `"8"` (a 0-dimensional
    /// hypercube of one node gives `""`).
    pub fn describe_dims(&self) -> String {
        join_dims(&self.dims)
    }

    /// The number of dimensions: ring 1, mesh/torus 2, mesh3d/torus3d 3, hypercube d,
    /// full 1.
    pub fn dimension(&self) -> usize {
        self.dims.len()
    }

    /// Whether `id` names a node of this topology (`id < p`).
    pub fn contains(&self, id: NodeId) -> bool {
        id < self.p
    }

    /// The coordinates of `id`, one per dimension (ring/full: `[id]`; grids:
    /// row-major, last coordinate fastest; hypercube: coordinate `k` is bit `k`).
    ///
    /// Panics if `id >= p`.
    pub fn coords(&self, id: NodeId) -> Vec<usize> {
        self.check(id);
        if let Some(switched) = &self.switched {
            return switched.coords(id);
        }
        if self.kind == TopologyKind::Hypercube {
            return (0..self.dims.len()).map(|k| (id >> k) & 1).collect();
        }
        let mut out = vec![0; self.dims.len()];
        let mut rest = id;
        for (c, &ext) in out.iter_mut().zip(&self.dims).rev() {
            *c = rest % ext;
            rest /= ext;
        }
        out
    }

    /// The id at `coords`; the inverse of [`Topology::coords`].
    ///
    /// Panics if `coords` has the wrong length or a coordinate is out of range.
    pub fn id_of(&self, coords: &[usize]) -> NodeId {
        if self.switched.is_some() {
            return (0..self.vertices())
                .find(|&v| self.coords(v) == coords)
                .unwrap_or_else(|| panic!("no vertex of {self} sits at {coords:?}"));
        }
        assert_eq!(coords.len(), self.dims.len(), "{self} takes {} coordinates, got {coords:?}", self.dims.len());
        for (k, (&c, &ext)) in coords.iter().zip(&self.dims).enumerate() {
            assert!(c < ext, "coordinate {k} of {coords:?} is out of range 0..{ext} in {self}");
        }
        if self.kind == TopologyKind::Hypercube {
            return coords.iter().enumerate().map(|(k, &c)| c << k).sum();
        }
        coords.iter().zip(&self.dims).fold(0, |id, (&c, &ext)| id * ext + c)
    }

    /// The nodes linked to `id`: sorted, without duplicates, never `id` itself.
    ///
    /// Panics if `id >= p`.
    pub fn neighbours(&self, id: NodeId) -> Vec<NodeId> {
        self.check(id);
        if let Some(switched) = &self.switched {
            return switched.neighbours(id).into_iter().map(|(v, _)| v).collect();
        }
        let mut out = match self.kind {
            TopologyKind::Full => return (0..self.p).filter(|&n| n != id).collect(),
            TopologyKind::Hypercube => (0..self.dims.len()).map(|k| id ^ (1 << k)).collect(),
            _ => {
                let wrap = self.wraps();
                let mut out = Vec::with_capacity(2 * self.dims.len());
                let mut stride = 1;
                for &ext in self.dims.iter().rev() {
                    let c = (id / stride) % ext;
                    let base = id - c * stride;
                    if c + 1 < ext {
                        out.push(base + (c + 1) * stride);
                    } else if wrap && ext > 1 {
                        out.push(base);
                    }
                    if c > 0 {
                        out.push(base + (c - 1) * stride);
                    } else if wrap && ext > 1 {
                        out.push(base + (ext - 1) * stride);
                    }
                    stride *= ext;
                }
                out
            }
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `a` and `b` are linked. False for `a == b` and for ids out of range.
    /// Does not allocate.
    pub fn is_neighbour(&self, a: NodeId, b: NodeId) -> bool {
        self.link_class(a, b).is_some()
    }

    /// The class of the link between `a` and `b` (an index into
    /// [`Topology::class_names`]); `None` when they are not linked, are equal or are out
    /// of range. Does not allocate.
    pub fn link_class(&self, a: NodeId, b: NodeId) -> Option<ClassId> {
        let n = self.vertices();
        if a == b || a >= n || b >= n {
            return None;
        }
        match &self.switched {
            Some(switched) => switched.link_class(a, b),
            None => self.direct_link(a, b).then_some(0),
        }
    }

    /// The names of the link classes, by [`ClassId`]: one, `link`, on a direct network;
    /// a switched kind's own (a fat-tree's `edge`, `aggregation`, `core`).
    pub fn class_names(&self) -> Vec<&str> {
        match &self.switched {
            Some(switched) => switched.family().class_names(),
            None => DIRECT_CLASSES.to_vec(),
        }
    }

    /// Ranks and switches: the vertices `0..vertices()`, the ranks first. A direct
    /// network's vertices are its `p` nodes.
    pub fn vertices(&self) -> usize {
        self.switched.as_ref().map_or(self.p, |switched| switched.vertices())
    }

    /// The switches, vertices `p..vertices()` that only forward (0 on a direct network).
    pub fn switches(&self) -> usize {
        self.vertices() - self.p
    }

    /// Whether vertex `v` is a switch.
    pub fn is_switch(&self, v: NodeId) -> bool {
        v >= self.p && v < self.vertices()
    }

    /// The endpoints ranks may be put on: a switched kind's hosts (with a rank or
    /// not), a direct network's nodes.
    pub fn hosts(&self) -> usize {
        self.switched.as_ref().map_or(self.p, |switched| switched.hosts())
    }

    /// Links cut by halving the nodes the usual way: a ring 2, a mesh across its longest
    /// dimension (the product of the others; a torus twice that), a hypercube p/2, the
    /// fully connected network ⌊p/2⌋·⌈p/2⌉; a switched kind the family's own (of all its
    /// hosts, ranks on them or not).
    pub fn bisection_width(&self) -> Option<usize> {
        if let Some(switched) = &self.switched {
            return switched.family().bisection_width();
        }
        let p = self.p;
        Some(match self.kind {
            _ if p < 2 => 0,
            TopologyKind::Full => (p / 2) * p.div_ceil(2),
            TopologyKind::Hypercube => p / 2,
            TopologyKind::Ring => {
                if p > 2 {
                    2
                } else {
                    1
                }
            }
            _ => {
                let longest = self.dims.iter().copied().max().unwrap_or(1);
                let across = p / longest;
                if self.wraps() && longest > 2 { 2 * across } else { across }
            }
        })
    }

    /// The switched network, on a switched kind.
    pub fn switched(&self) -> Option<&Switched> {
        self.switched.as_deref()
    }

    /// Whether `a` and `b` (distinct, in range) are linked on a direct network.
    fn direct_link(&self, a: NodeId, b: NodeId) -> bool {
        match self.kind {
            TopologyKind::Full => true,
            TopologyKind::Hypercube => (a ^ b).is_power_of_two(),
            _ => {
                let wrap = self.wraps();
                let mut stride = 1;
                let mut differing = 0;
                for &ext in self.dims.iter().rev() {
                    let (ca, cb) = ((a / stride) % ext, (b / stride) % ext);
                    if ca != cb {
                        differing += 1;
                        let diff = ca.abs_diff(cb);
                        if differing > 1 || !(diff == 1 || (wrap && diff == ext - 1)) {
                            return false;
                        }
                    }
                    stride *= ext;
                }
                differing == 1
            }
        }
    }

    /// Every undirected link once, as `(a, b)` with `a < b`, sorted.
    pub fn edges(&self) -> Vec<(NodeId, NodeId)> {
        (0..self.vertices())
            .flat_map(|a| self.neighbours(a).into_iter().filter(move |&b| a < b).map(move |b| (a, b)))
            .collect()
    }

    /// The largest distance between two nodes (ring: `p/2`; mesh: sum of `ext-1`;
    /// torus: sum of `ext/2`; hypercube: `d`; full: 1, or 0 for one node).
    pub fn diameter(&self) -> usize {
        if let Some(switched) = &self.switched {
            return switched.diameter();
        }
        match self.kind {
            TopologyKind::Full => usize::from(self.p > 1),
            TopologyKind::Hypercube => self.dims.len(),
            _ if self.wraps() => self.dims.iter().map(|&ext| ext / 2).sum(),
            _ => self.dims.iter().map(|&ext| ext - 1).sum(),
        }
    }

    /// The distance from `a` to `b`: the hops of [`Topology::route`]`(a, b)` under every
    /// policy but Valiant's, whose routes may be longer (a switched network's default
    /// routes' hops); the shortest-path distance on a direct network.
    ///
    /// Panics if `a` or `b` is `>= p`.
    pub fn distance(&self, a: NodeId, b: NodeId) -> usize {
        self.check(a);
        self.check(b);
        if let Some(switched) = &self.switched {
            return switched.distance(a, b);
        }
        match self.kind {
            TopologyKind::Full => usize::from(a != b),
            TopologyKind::Hypercube => (a ^ b).count_ones() as usize,
            _ => {
                let wrap = self.wraps();
                let mut stride = 1;
                let mut hops = 0;
                for &ext in self.dims.iter().rev() {
                    let (ca, cb) = ((a / stride) % ext, (b / stride) % ext);
                    let diff = ca.abs_diff(cb);
                    hops += if wrap { diff.min(ext - diff) } else { diff };
                    stride *= ext;
                }
                hops
            }
        }
    }

    /// The path of tag 0's messages from `src` to `dst`, both ends included
    /// (`route(a, a) == [a]`): [`Topology::flow_route`] of that flow, and so every
    /// message's path but under a policy that routes flows apart (ECMP, Valiant).
    ///
    /// Panics if `src` or `dst` is `>= p`.
    pub fn route(&self, src: NodeId, dst: NodeId) -> Vec<NodeId> {
        self.flow_route(Flow::new(src, dst, 0))
    }

    /// The deterministic path of `flow`, both ends included. It is
    /// [`Topology::next_hop`] applied until the destination:
    ///
    /// - ring: the shorter way round; on a tie (distance `p/2`) the `+1` direction;
    /// - mesh, mesh3d: dimension-ordered, correcting the LAST coordinate (the column,
    ///   fastest-varying) first, then the one before it, and so on (XY(Z) order);
    /// - torus, torus3d: the same order, each dimension the shorter way round, ties
    ///   in the `+` direction;
    /// - hypercube: E-cube, flipping the lowest differing bit first;
    /// - full: direct, `[src, dst]`;
    /// - a switched network: its policy's ([`Routes`]).
    ///
    /// Panics if `flow.src` or `flow.dst` is `>= p`.
    pub fn flow_route(&self, flow: Flow) -> Vec<NodeId> {
        let capacity = if self.switched.is_some() { 8 } else { self.distance(flow.src, flow.dst) + 1 };
        let mut path = Vec::with_capacity(capacity);
        let mut at = flow.src;
        path.push(at);
        while at != flow.dst {
            at = self.next_hop(at, flow);
            path.push(at);
        }
        path
    }

    /// The node after `at` on `flow`'s route ([`Topology::flow_route`]), so that
    /// forwarding hop by hop follows the route; `at` itself when `at == flow.dst`. Does
    /// not allocate.
    ///
    /// Panics if `at` or `flow.dst` is `>= p`.
    pub fn next_hop(&self, at: NodeId, flow: Flow) -> NodeId {
        let dst = flow.dst;
        self.check(at);
        self.check(dst);
        if at == dst {
            return at;
        }
        if let Some(switched) = &self.switched {
            assert!(dst < self.p, "routes lead to ranks, and {dst} is a switch of {self}");
            return switched.next_hop(at, flow);
        }
        match self.kind {
            TopologyKind::Full => dst,
            TopologyKind::Hypercube => at ^ (1 << (at ^ dst).trailing_zeros()),
            // A ring's coordinate is the id: the shorter way round, with no division.
            TopologyKind::Ring => {
                let ahead = if dst > at { dst - at } else { dst + self.p - at };
                match 2 * ahead <= self.p {
                    true if at + 1 == self.p => 0,
                    true => at + 1,
                    false if at == 0 => self.p - 1,
                    false => at - 1,
                }
            }
            _ => {
                let wrap = self.wraps();
                let mut stride = 1;
                for &ext in self.dims.iter().rev() {
                    let (ca, cb) = ((at / stride) % ext, (dst / stride) % ext);
                    if ca != cb {
                        let forward = if wrap { 2 * ((cb + ext - ca) % ext) <= ext } else { cb > ca };
                        let next = if forward { (ca + 1) % ext } else { (ca + ext - 1) % ext };
                        return at - ca * stride + next * stride;
                    }
                    stride *= ext;
                }
                unreachable!("{at} != {dst} but no coordinate differs in {self}")
            }
        }
    }

    /// Every route a flow from `src` to `dst` may take under the policy, whatever its tag,
    /// each once: [`Topology::route`] alone where the policy routes by destination.
    ///
    /// Panics if `src` or `dst` is `>= p`.
    pub fn route_choices(&self, src: NodeId, dst: NodeId) -> Vec<Vec<NodeId>> {
        match &self.switched {
            Some(switched) if src != dst && !switched.routes().by_destination() => {
                self.check(src);
                self.check(dst);
                switched.route_choices(src, dst)
            }
            _ => vec![self.route(src, dst)],
        }
    }

    /// The neighbour every message from rank `src` for rank `dst` arrives over, whatever
    /// its tag (`dst` itself when they are equal): one under every policy, since a policy
    /// that routes flows apart (ECMP, Valiant) routes a network whose ranks have one link
    /// each (a fat-tree's, a dragonfly's hosts).
    ///
    /// Panics if `src` or `dst` is `>= p`.
    pub fn arrives_via(&self, src: NodeId, dst: NodeId) -> NodeId {
        match &self.switched {
            _ if src == dst => dst,
            Some(switched) if !switched.routes().by_destination() => switched.attachment(dst),
            _ => self.route(src, dst).iter().rev().nth(1).copied().unwrap_or(src),
        }
    }

    /// Whether the grid dimensions wrap around (ring, torus, torus3d).
    fn wraps(&self) -> bool {
        matches!(self.kind, TopologyKind::Ring | TopologyKind::Torus | TopologyKind::Torus3d)
    }

    fn check(&self, id: NodeId) {
        assert!(id < self.vertices(), "node id {id} is out of range for {self}");
    }
}

impl fmt::Display for Topology {
    /// E.g. "ring of 5 nodes", "torus 4x4 (16 nodes)", "hypercube of 8 nodes (d=3)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.p;
        let nodes = if p == 1 { "node" } else { "nodes" };
        if let Some(switched) = &self.switched {
            let (hosts, switches) = (switched.hosts(), switched.switches());
            let placed = if p == hosts { format!("{p} {nodes}") } else { format!("{p} {nodes} on {hosts} hosts") };
            let placed = match switched.placement() {
                Placement::Linear => placed,
                placement => format!("{placed} placed {placement}"),
            };
            let switches = format!("{switches} switch{}", if switches == 1 { "" } else { "es" });
            return match self.kind {
                TopologyKind::FatTree => write!(f, "fat-tree k={} ({placed}, {switches})", self.dims[0]),
                TopologyKind::Cluster => {
                    write!(f, "cluster of {} machines x {} cores ({placed}, {switches})", self.dims[0], self.dims[1])
                }
                TopologyKind::Graph => {
                    let name = match switched.family() {
                        Family::File(graph) => graph.name().map(|name| format!(" {name}")).unwrap_or_default(),
                        _ => String::new(),
                    };
                    write!(f, "network{name} ({placed}, {switches})")
                }
                kind => write!(f, "{kind} {} ({placed}, {switches})", self.describe_dims()),
            };
        }
        match self.kind {
            TopologyKind::Ring => write!(f, "ring of {p} {nodes}"),
            TopologyKind::Full => write!(f, "fully connected network of {p} {nodes}"),
            TopologyKind::Hypercube => {
                write!(f, "hypercube of {p} {nodes} (d={})", self.dims.len())
            }
            kind => write!(f, "{kind} {} ({p} {nodes})", self.describe_dims()),
        }
    }
}

/// The squarest `R x C` grid of `p` nodes: `R <= C`, `R` the largest divisor of `p`
/// not above `sqrt(p)`. For a prime `p` that is `1 x p`; `p = 0` gives `(0, 0)`.
pub fn squarest_grid(p: usize) -> (usize, usize) {
    if p == 0 {
        return (0, 0);
    }
    let r = (1..=p.isqrt()).rev().find(|&r| p.is_multiple_of(r)).unwrap_or(1);
    (r, p / r)
}

/// The most cubic `A x B x C` grid of `p` nodes: `A <= B <= C`, the largest extent
/// `C` as small as possible and, among those, `A` as large as possible (so 12 gives
/// 2x2x3, 64 gives 4x4x4, 68 gives 2x2x17). `p = 0` gives `(0, 0, 0)`.
pub fn cubest_grid(p: usize) -> (usize, usize, usize) {
    if p == 0 {
        return (0, 0, 0);
    }
    let mut best = (1, 1, p);
    let mut a = 1;
    while a <= p / a / a {
        if p.is_multiple_of(a) {
            let q = p / a;
            let mut b = a;
            while b <= q / b {
                if q.is_multiple_of(b) {
                    let c = q / b;
                    if c < best.2 || (c == best.2 && a > best.0) {
                        best = (a, b, c);
                    }
                }
                b += 1;
            }
        }
        a += 1;
    }
    best
}

/// Accepts `dims` for a kind whose shape `p` fixes, only if it equals `canonical`.
fn fixed_dims(
    kind: TopologyKind,
    p: usize,
    canonical: Vec<usize>,
    dims: Option<&[usize]>,
    shown: &str,
) -> Result<Vec<usize>, TopologyError> {
    match dims {
        Some(d) if d != canonical.as_slice() => Err(TopologyError::Invalid(format!(
            "a {kind} of {p} nodes has its shape fixed by the node count: dims {shown} \
             or none, got {}",
            show_given(d)
        ))),
        _ => Ok(canonical),
    }
}

/// Validates user-given dims for a 2-D (`n = 2`) or 3-D (`n = 3`) grid.
fn grid_dims(kind: TopologyKind, p: usize, dims: &[usize], n: usize) -> Result<Vec<usize>, TopologyError> {
    let form = if n == 2 { "RxC" } else { "AxBxC" };
    if dims.len() != n {
        return Err(TopologyError::Invalid(format!(
            "{kind} takes {n} dims ({form}), got {}{}",
            dims.len(),
            if dims.is_empty() { String::new() } else { format!(" ({})", join_dims(dims)) }
        )));
    }
    let product = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if product == Some(p) {
        return Ok(dims.to_vec());
    }
    let product = product.map_or_else(|| "more than usize::MAX".to_string(), |x| x.to_string());
    let shapes = if n == 2 {
        let all: Vec<String> = divisors(p).into_iter().map(|r| format!("{r}x{}", p / r)).collect();
        format!("valid 2-D shapes for {p} nodes: {}", list_shapes(&all))
    } else {
        let mut all = Vec::new();
        for a in divisors(p) {
            for b in divisors(p / a) {
                let c = p / a / b;
                if a <= b && b <= c {
                    all.push(format!("{a}x{b}x{c}"));
                }
            }
        }
        format!("valid 3-D shapes for {p} nodes (in any order): {}", list_shapes(&all))
    };
    Err(TopologyError::Invalid(format!("dims {} multiply to {product}, not {p} nodes; {shapes}", join_dims(dims))))
}

/// The divisors of `p >= 1`, ascending.
fn divisors(p: usize) -> Vec<usize> {
    let mut low = Vec::new();
    let mut high = Vec::new();
    let mut d = 1;
    while d <= p / d {
        if p.is_multiple_of(d) {
            low.push(d);
            if d != p / d {
                high.push(p / d);
            }
        }
        d += 1;
    }
    low.extend(high.into_iter().rev());
    low
}

fn list_shapes(all: &[String]) -> String {
    if all.len() <= MAX_LISTED_SHAPES {
        all.join(", ")
    } else {
        format!("{}, ... ({} in all)", all[..MAX_LISTED_SHAPES].join(", "), all.len())
    }
}

fn join_dims(dims: &[usize]) -> String {
    dims.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

fn show_given(dims: &[usize]) -> String {
    if dims.is_empty() { "[]".to_string() } else { join_dims(dims) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, VecDeque};
    use strum::IntoEnumIterator;

    const MAX_P: usize = 64;

    fn topo(kind: TopologyKind, p: usize, dims: Option<&[usize]>) -> Topology {
        Topology::new(kind, p, dims).unwrap_or_else(|e| panic!("{kind} {p} {dims:?}: {e}"))
    }

    fn invalid(kind: TopologyKind, p: usize, dims: Option<&[usize]>) -> String {
        match Topology::new(kind, p, dims) {
            Err(TopologyError::Invalid(msg)) => msg,
            other => panic!("{kind} {p} {dims:?}: expected Invalid, got {other:?}"),
        }
    }

    /// Every valid topology of 1..=MAX_P nodes: ring, full, hypercube, mesh and torus
    /// in every 2-D factorisation, mesh3d and torus3d in
    /// every 3-D factorisation up to 24 nodes, beyond that the monotone ones.
    fn all_topologies() -> Vec<Topology> {
        let mut out = Vec::new();
        for p in 1..=MAX_P {
            out.push(topo(TopologyKind::Ring, p, None));
            out.push(topo(TopologyKind::Full, p, None));
            if p.is_power_of_two() {
                out.push(topo(TopologyKind::Hypercube, p, None));
            }
            for r in divisors(p) {
                let dims = [r, p / r];
                out.push(topo(TopologyKind::Mesh, p, Some(&dims)));
                out.push(topo(TopologyKind::Torus, p, Some(&dims)));
                for b in divisors(p / r) {
                    let dims = [r, b, p / r / b];
                    // Ordered both ways is enough: the code treats all dims alike.
                    let sorted = dims.is_sorted() || dims.iter().rev().is_sorted();
                    if !sorted && p > 24 {
                        continue;
                    }
                    out.push(topo(TopologyKind::Mesh3d, p, Some(&dims)));
                    out.push(topo(TopologyKind::Torus3d, p, Some(&dims)));
                }
            }
        }
        out
    }

    /// BFS distances from `src` over `neighbours`.
    fn bfs(t: &Topology, src: NodeId) -> Vec<usize> {
        let mut dist = vec![usize::MAX; t.p()];
        dist[src] = 0;
        let mut queue = VecDeque::from([src]);
        while let Some(u) = queue.pop_front() {
            for v in t.neighbours(u) {
                if dist[v] == usize::MAX {
                    dist[v] = dist[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        dist
    }

    #[test]
    fn every_topology_up_to_64_is_consistent() {
        let all = all_topologies();
        let mut pairs = 0usize;
        for t in &all {
            let p = t.p();
            assert_eq!(t.dims().iter().product::<usize>(), p, "{t}");
            // Neighbours: sorted, unique, not self, symmetric, agree with is_neighbour.
            let mut union = BTreeSet::new();
            for a in 0..p {
                let ns = t.neighbours(a);
                assert!(ns.windows(2).all(|w| w[0] < w[1]), "{t}: {a} -> {ns:?}");
                assert!(!ns.contains(&a), "{t}: {a} is its own neighbour");
                for &b in &ns {
                    assert!(t.neighbours(b).contains(&a), "{t}: {a}-{b} not symmetric");
                    union.insert((a.min(b), a.max(b)));
                }
                for b in 0..p {
                    assert_eq!(t.is_neighbour(a, b), ns.contains(&b), "{t}: {a}, {b}");
                }
                assert_eq!(t.id_of(&t.coords(a)), a, "{t}");
                assert_eq!(t.coords(a).len(), t.dimension(), "{t}");
            }
            let edges = t.edges();
            assert!(edges.windows(2).all(|w| w[0] < w[1]), "{t}: edges unsorted");
            assert_eq!(edges, union.into_iter().collect::<Vec<_>>(), "{t}");

            // Routes: shortest, along edges, agreeing with next_hop and distance.
            let mut max_dist = 0;
            for src in 0..p {
                let dist = bfs(t, src);
                for (dst, &d) in dist.iter().enumerate() {
                    pairs += 1;
                    assert_ne!(d, usize::MAX, "{t}: {dst} unreachable from {src}");
                    max_dist = max_dist.max(d);
                    let r = t.route(src, dst);
                    assert_eq!(r.first(), Some(&src), "{t}");
                    assert_eq!(r.last(), Some(&dst), "{t}");
                    assert_eq!(r.len() - 1, d, "{t}: route {src}->{dst} = {r:?}");
                    assert_eq!(t.distance(src, dst), d, "{t}: {src}->{dst}");
                    for w in r.windows(2) {
                        assert!(t.is_neighbour(w[0], w[1]), "{t}: {r:?}");
                        assert_eq!(t.next_hop(w[0], Flow::new(src, dst, 0)), w[1], "{t}: {r:?}");
                    }
                    assert_eq!(t.next_hop(dst, Flow::new(src, dst, 0)), dst);
                }
            }
            assert_eq!(t.diameter(), max_dist, "{t}");
        }
        // Sanity on the coverage: all kinds present, tens of thousands of pairs.
        let kinds: BTreeSet<_> = all.iter().map(|t| t.kind() as u8).collect();
        assert_eq!(kinds.len(), TopologyKind::iter().filter(|kind| !kind.is_switched()).count());
        assert!(pairs > 100_000, "{pairs}");
    }

    /// A ring's next hop, computed without division, is the grid's rule for one
    /// wrapping dimension: forward when the destination is at most half way round.
    #[test]
    fn a_rings_next_hop_is_the_grid_rule() {
        for p in 1..=20 {
            let ring = Topology::new(TopologyKind::Ring, p, None).unwrap();
            for at in 0..p {
                for dst in (0..p).filter(|&dst| dst != at) {
                    let forward = 2 * ((dst + p - at) % p) <= p;
                    let expected = if forward { (at + 1) % p } else { (at + p - 1) % p };
                    assert_eq!(ring.next_hop(at, Flow::new(at, dst, 0)), expected, "ring of {p}: {at} -> {dst}");
                }
            }
        }
    }

    #[test]
    fn explicit_routes() {
        let ring8 = topo(TopologyKind::Ring, 8, None);
        assert_eq!(ring8.route(0, 5), [0, 7, 6, 5]);
        assert_eq!(ring8.route(0, 4), [0, 1, 2, 3, 4]);
        assert_eq!(ring8.route(4, 0), [4, 5, 6, 7, 0]);
        assert_eq!(ring8.route(3, 3), [3]);
        let cube = topo(TopologyKind::Hypercube, 8, None);
        assert_eq!(cube.route(0, 7), [0, 1, 3, 7]);
        assert_eq!(cube.route(6, 1), [6, 7, 5, 1]);
        let mesh = topo(TopologyKind::Mesh, 9, Some(&[3, 3]));
        assert_eq!(mesh.route(0, 8), [0, 1, 2, 5, 8]);
        assert_eq!(mesh.route(8, 0), [8, 7, 6, 3, 0]);
        let torus = topo(TopologyKind::Torus, 16, None);
        assert_eq!(torus.dims(), [4, 4]);
        assert_eq!(torus.route(0, 3), [0, 3]);
        assert_eq!(torus.route(0, 10), [0, 1, 2, 6, 10]);
        assert_eq!(torus.route(0, 15), [0, 3, 15]);
        let mesh3d = topo(TopologyKind::Mesh3d, 8, None);
        assert_eq!(mesh3d.route(0, 7), [0, 1, 3, 7]);
        let full = topo(TopologyKind::Full, 5, None);
        assert_eq!(full.route(1, 4), [1, 4]);
    }

    #[test]
    fn small_cases() {
        let ring2 = topo(TopologyKind::Ring, 2, None);
        assert_eq!(ring2.neighbours(0), [1]);
        assert_eq!(ring2.edges(), [(0, 1)]);
        let ring1 = topo(TopologyKind::Ring, 1, None);
        assert!(ring1.neighbours(0).is_empty());
        assert_eq!(ring1.diameter(), 0);
        let torus = topo(TopologyKind::Torus, 4, Some(&[2, 2]));
        assert_eq!(torus.neighbours(0), [1, 2]);
        let torus = topo(TopologyKind::Torus, 3, Some(&[1, 3]));
        assert_eq!(torus.neighbours(0), [1, 2]);
        let cube1 = topo(TopologyKind::Hypercube, 1, None);
        assert_eq!(cube1.dims(), [] as [usize; 0]);
        assert_eq!(cube1.dimension(), 0);
        assert_eq!(cube1.coords(0), [] as [usize; 0]);
        assert_eq!(cube1.id_of(&[]), 0);
        assert_eq!(cube1.route(0, 0), [0]);
        let cube = topo(TopologyKind::Hypercube, 8, None);
        assert_eq!(cube.coords(6), [0, 1, 1]);
        assert_eq!(cube.id_of(&[1, 0, 1]), 5);
        assert_eq!(cube.neighbours(5), [1, 4, 7]);
        let mesh = topo(TopologyKind::Mesh, 12, Some(&[3, 4]));
        assert_eq!(mesh.coords(7), [1, 3]);
        assert_eq!(mesh.id_of(&[2, 1]), 9);
        assert_eq!(mesh.neighbours(5), [1, 4, 6, 9]);
        let m3 = topo(TopologyKind::Mesh3d, 24, Some(&[2, 3, 4]));
        assert_eq!(m3.coords(23), [1, 2, 3]);
        assert_eq!(m3.coords(13), [1, 0, 1]);
        assert_eq!(m3.id_of(&[1, 0, 1]), 13);
        assert!(!mesh.is_neighbour(0, 12));
        assert!(!mesh.is_neighbour(3, 4), "row ends are not linked in a mesh");
        assert!(topo(TopologyKind::Torus, 12, Some(&[3, 4])).is_neighbour(3, 0));
    }

    #[test]
    fn dimensions_and_defaults() {
        use TopologyKind::*;
        assert_eq!(topo(Ring, 5, None).dimension(), 1);
        assert_eq!(topo(Full, 5, None).dimension(), 1);
        assert_eq!(topo(Mesh, 8, None).dims(), [2, 4]);
        assert_eq!(topo(Mesh, 8, None).dimension(), 2);
        assert_eq!(topo(Torus, 7, None).dims(), [1, 7]);
        assert_eq!(topo(Torus3d, 12, None).dims(), [2, 2, 3]);
        assert_eq!(topo(Mesh3d, 64, None).dimension(), 3);
        assert_eq!(topo(Hypercube, 16, None).dims(), [2, 2, 2, 2]);
        assert_eq!(topo(Hypercube, 16, None).dimension(), 4);
        // Fixed shapes accept their own dims.
        assert_eq!(topo(Ring, 6, Some(&[6])).dims(), [6]);
        assert_eq!(topo(Hypercube, 4, Some(&[2, 2])).dims(), [2, 2]);
        assert_eq!(topo(Full, 3, Some(&[3])).dims(), [3]);
    }

    #[test]
    fn grid_helpers() {
        assert_eq!(squarest_grid(0), (0, 0));
        assert_eq!(squarest_grid(1), (1, 1));
        assert_eq!(squarest_grid(8), (2, 4));
        assert_eq!(squarest_grid(16), (4, 4));
        assert_eq!(squarest_grid(13), (1, 13));
        assert_eq!(squarest_grid(18), (3, 6));
        assert_eq!(cubest_grid(0), (0, 0, 0));
        assert_eq!(cubest_grid(1), (1, 1, 1));
        assert_eq!(cubest_grid(8), (2, 2, 2));
        assert_eq!(cubest_grid(12), (2, 2, 3));
        assert_eq!(cubest_grid(24), (2, 3, 4));
        assert_eq!(cubest_grid(64), (4, 4, 4));
        assert_eq!(cubest_grid(68), (2, 2, 17));
        assert_eq!(cubest_grid(7), (1, 1, 7));
        assert_eq!(divisors(12), [1, 2, 3, 4, 6, 12]);
        assert_eq!(divisors(1), [1]);
    }

    #[test]
    fn display() {
        use TopologyKind::*;
        assert_eq!(topo(Hypercube, 8, None).to_string(), "hypercube of 8 nodes (d=3)");
        assert_eq!(topo(Torus, 16, None).to_string(), "torus 4x4 (16 nodes)");
        assert_eq!(topo(Ring, 5, None).to_string(), "ring of 5 nodes");
        assert_eq!(topo(Ring, 1, None).to_string(), "ring of 1 node");
        assert_eq!(topo(Mesh3d, 12, None).to_string(), "mesh3d 2x2x3 (12 nodes)");
        assert_eq!(topo(Full, 4, None).to_string(), "fully connected network of 4 nodes");
        assert_eq!(topo(Mesh, 8, None).describe_dims(), "2x4");
        assert_eq!(topo(Ring, 8, None).describe_dims(), "8");
        assert_eq!(topo(Hypercube, 1, None).describe_dims(), "");
    }

    #[test]
    fn kind_names() {
        for kind in TopologyKind::iter() {
            let name = kind.to_string();
            assert_eq!(name.parse::<TopologyKind>().unwrap(), kind);
        }
        assert_eq!("mesh3d".parse::<TopologyKind>().unwrap(), TopologyKind::Mesh3d);
        assert_eq!("torus3d".parse::<TopologyKind>().unwrap(), TopologyKind::Torus3d);
        assert_eq!(TopologyKind::VARIANTS.len(), 11);
        assert_eq!("fat-tree".parse::<TopologyKind>().unwrap(), TopologyKind::FatTree);
    }

    #[test]
    fn validation_errors() {
        use TopologyKind::*;
        for kind in TopologyKind::iter() {
            assert_eq!(Topology::new(kind, 0, None), Err(TopologyError::Empty));
        }
        assert_eq!(
            invalid(Hypercube, 6, None),
            "a hypercube needs a power-of-two node count; 6 is not (nearest: 4 or 8)"
        );
        assert!(invalid(Hypercube, 3, None).contains("(nearest: 2 or 4)"));
        assert_eq!(
            invalid(Mesh, 8, Some(&[3, 3])),
            "dims 3x3 multiply to 9, not 8 nodes; valid 2-D shapes for 8 nodes: \
             1x8, 2x4, 4x2, 8x1"
        );
        assert!(invalid(Torus, 7, Some(&[0, 7])).contains("multiply to 0, not 7 nodes"));
        assert!(invalid(Torus, 4, Some(&[usize::MAX, 2])).contains("multiply to more than usize::MAX, not 4 nodes"));
        let msg = invalid(Torus3d, 12, Some(&[2, 2, 2]));
        assert!(msg.starts_with("dims 2x2x2 multiply to 8, not 12 nodes"), "{msg}");
        assert!(msg.contains("1x1x12, 1x2x6, 1x3x4, 2x2x3"), "{msg}");
        let msg = invalid(Mesh, 720720, Some(&[2, 2]));
        assert!(msg.contains("(240 in all)"), "{msg}");
        assert_eq!(invalid(Mesh3d, 8, Some(&[2, 4])), "mesh3d takes 3 dims (AxBxC), got 2 (2x4)");
        assert_eq!(invalid(Mesh, 8, Some(&[2, 2, 2])), "mesh takes 2 dims (RxC), got 3 (2x2x2)");
        assert_eq!(invalid(Torus, 8, Some(&[])), "torus takes 2 dims (RxC), got 0");
        let msg = invalid(Ring, 8, Some(&[2, 4]));
        assert!(msg.contains("dims [8] or none, got 2x4"), "{msg}");
        let msg = invalid(Hypercube, 8, Some(&[4, 2]));
        assert!(msg.contains("dims 2x2x2 or none, got 4x2"), "{msg}");
        let msg = invalid(Full, 3, Some(&[]));
        assert!(msg.contains("dims [3] or none, got []"), "{msg}");
        // Errors display as their message.
        let err = Topology::new(Hypercube, 6, None).unwrap_err();
        assert!(err.to_string().starts_with("a hypercube needs"));
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn out_of_range_id_panics() {
        topo(TopologyKind::Ring, 4, None).neighbours(4);
    }

    #[test]
    fn out_of_range_is_not_a_neighbour() {
        let t = topo(TopologyKind::Full, 4, None);
        assert!(!t.is_neighbour(0, 4));
        assert!(!t.contains(4));
        assert!(t.contains(3));
    }

    /// A random valid topology of up to a few thousand nodes.
    fn arb_topology() -> impl Strategy<Value = Topology> {
        (0usize..7, 1usize..=4096, any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(
            |(k, p, i, j)| {
                let kind = TopologyKind::iter().nth(k).unwrap();
                match kind {
                    TopologyKind::Hypercube => topo(kind, 1 << (p.trailing_zeros().min(12)), None),
                    TopologyKind::Mesh | TopologyKind::Torus => {
                        let ds = divisors(p);
                        let r = ds[i.index(ds.len())];
                        topo(kind, p, Some(&[r, p / r]))
                    }
                    TopologyKind::Mesh3d | TopologyKind::Torus3d => {
                        let ds = divisors(p);
                        let a = ds[i.index(ds.len())];
                        let ds = divisors(p / a);
                        let b = ds[j.index(ds.len())];
                        topo(kind, p, Some(&[a, b, p / a / b]))
                    }
                    _ => topo(kind, p, None),
                }
            },
        )
    }

    proptest! {
        #[test]
        fn routes_on_large_topologies(
            t in arb_topology(),
            a in any::<prop::sample::Index>(),
            b in any::<prop::sample::Index>(),
        ) {
            let (src, dst) = (a.index(t.p()), b.index(t.p()));
            let r = t.route(src, dst);
            prop_assert_eq!(r[0], src);
            prop_assert_eq!(*r.last().unwrap(), dst);
            prop_assert_eq!(r.len() - 1, t.distance(src, dst));
            prop_assert!(t.distance(src, dst) <= t.diameter());
            prop_assert_eq!(t.distance(src, dst), t.distance(dst, src));
            for w in r.windows(2) {
                prop_assert!(t.is_neighbour(w[0], w[1]));
                prop_assert_eq!(t.next_hop(w[0], Flow::new(src, dst, 0)), w[1]);
            }
            prop_assert_eq!(t.id_of(&t.coords(src)), src);
            let ns = t.neighbours(src);
            prop_assert!(ns.iter().all(|&n| t.is_neighbour(n, src) && t.distance(src, n) == 1));
        }

        #[test]
        fn squarest_grid_is_squarest(p in 1usize..100_000) {
            let (r, c) = squarest_grid(p);
            prop_assert_eq!(r * c, p);
            prop_assert!(r <= c);
            prop_assert!(divisors(p).into_iter().all(|d| d <= r || d * d > p));
            prop_assert_eq!(topo(TopologyKind::Mesh, p, None).dims().to_vec(), vec![r, c]);
        }

        #[test]
        fn cubest_grid_is_most_cubic(p in 1usize..5_000) {
            let (a, b, c) = cubest_grid(p);
            prop_assert_eq!(a * b * c, p);
            prop_assert!(a <= b && b <= c);
            for x in divisors(p) {
                for y in divisors(p / x) {
                    let z = p / x / y;
                    let (lo, hi) = (x.min(y).min(z), x.max(y).max(z));
                    prop_assert!(hi > c || (hi == c && lo <= a), "{x}x{y}x{z} beats {a}x{b}x{c}");
                }
            }
            prop_assert_eq!(topo(TopologyKind::Torus3d, p, None).dims().to_vec(), vec![a, b, c]);
        }
    }
}
