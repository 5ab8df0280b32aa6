//! The validated graph of a network file: vertices (endpoints, then switches), links
//! with their classes, and shortest-path routes with a deterministic tie-break.
//!
//! Routing is breadth-first search ([CLRS 22.2]) run once from every endpoint: it gives
//! each vertex its distance to that endpoint, and the next hop from a vertex towards an
//! endpoint is the **lowest-id neighbour one step closer**. Routes go only to
//! endpoints (ranks live there), so the table holds one entry per vertex and endpoint:
//! `vertices x endpoints` entries of 4 bytes each, built in `O(endpoints x (vertices +
//! links))` time. A graph whose table would pass [`FileGraph::MAX_ROUTE_TABLE_ENTRIES`]
//! (64 Mi entries, 256 MiB) is refused rather than built. Every vertex may forward: an
//! endpoint lies on a route when a shortest path crosses it (a torus's hosts forward,
//! as the direct networks' nodes do).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::description::{ClassPhysics, NetworkDescription};
use super::error::NetworkFileError;

/// A class of links, by its index in [`FileGraph::class_physics`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClassId(pub usize);

/// One link of the graph, `a < b`; parallel links appear once each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GraphLink {
    pub a: usize,
    pub b: usize,
    pub class: ClassId,
}

/// A validated network graph with its routes; made by [`NetworkDescription::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileGraph {
    name: Option<String>,
    /// Every vertex's name: endpoints first.
    names: Vec<String>,
    endpoints: usize,
    classes: Vec<ClassPhysics>,
    /// Every link, sorted by `(a, b)`.
    links: Vec<GraphLink>,
    /// Distinct neighbours of vertex `v`: `neighbours[offsets[v]..offsets[v + 1]]`,
    /// sorted by vertex.
    offsets: Vec<usize>,
    neighbours: Vec<(usize, ClassId)>,
    /// `next_hops[at * endpoints + destination]`.
    next_hops: Vec<u32>,
}

impl FileGraph {
    /// The most next-hop entries (vertices x endpoints) a graph may need: 64 Mi, which
    /// is 256 MiB of table.
    pub const MAX_ROUTE_TABLE_ENTRIES: usize = 64 << 20;

    /// Builds the graph of a description whose names, ends and classes are checked;
    /// `links` are `(low end, high end, class index)`.
    pub(super) fn new(
        description: &NetworkDescription,
        mut links: Vec<(usize, usize, usize)>,
    ) -> Result<Self, NetworkFileError> {
        let vertices = description.vertex_count();
        let endpoints = description.endpoints.len();
        let entries = vertices as u128 * endpoints as u128;
        if entries > Self::MAX_ROUTE_TABLE_ENTRIES as u128 || vertices > u32::MAX as usize {
            return Err(NetworkFileError::RouteTableTooLarge {
                vertices,
                endpoints,
                entries,
                bound: Self::MAX_ROUTE_TABLE_ENTRIES,
            });
        }
        links.sort_unstable();
        for pair in links.windows(2) {
            let ((a, b, first), (c, d, second)) = (pair[0], pair[1]);
            if (a, b) == (c, d) && first != second {
                return Err(NetworkFileError::ParallelLinksDiffer {
                    a: description.name_of(a),
                    b: description.name_of(b),
                    first: description.classes[first].name.clone(),
                    second: description.classes[second].name.clone(),
                });
            }
        }
        let mut distinct: Vec<(usize, usize, ClassId)> = Vec::with_capacity(2 * links.len());
        for &(a, b, class) in &links {
            distinct.push((a, b, ClassId(class)));
            distinct.push((b, a, ClassId(class)));
        }
        distinct.sort_unstable();
        distinct.dedup();
        let mut offsets = vec![0; vertices + 1];
        for &(from, _, _) in &distinct {
            offsets[from + 1] += 1;
        }
        for v in 0..vertices {
            offsets[v + 1] += offsets[v];
        }
        let graph = Self {
            name: description.name.clone(),
            names: description.endpoints.iter().chain(&description.switches).cloned().collect(),
            endpoints,
            classes: description.classes.clone(),
            links: links.iter().map(|&(a, b, class)| GraphLink { a, b, class: ClassId(class) }).collect(),
            offsets,
            neighbours: distinct.into_iter().map(|(_, to, class)| (to, class)).collect(),
            next_hops: Vec::new(),
        };
        graph.check_reachable()?;
        Ok(graph.with_routes())
    }

    /// Every vertex reached from endpoint 0, else which endpoint or switch is not.
    fn check_reachable(&self) -> Result<(), NetworkFileError> {
        let distances = self.distances_from(0);
        if let Some(unreached) = (0..self.endpoints).find(|&v| distances[v] == u32::MAX) {
            return Err(NetworkFileError::Disconnected {
                unreached: self.names[unreached].clone(),
                from: self.names[0].clone(),
            });
        }
        if let Some(switch) = self.switches().find(|&v| distances[v] == u32::MAX) {
            return Err(NetworkFileError::SwitchWithoutRoute { switch: self.names[switch].clone() });
        }
        Ok(())
    }

    /// Hop distances from `source` to every vertex (`u32::MAX`: unreachable).
    fn distances_from(&self, source: usize) -> Vec<u32> {
        let mut distances = vec![u32::MAX; self.vertices()];
        let mut queue = VecDeque::from([source]);
        distances[source] = 0;
        while let Some(at) = queue.pop_front() {
            for &(next, _) in self.neighbours(at) {
                if distances[next] == u32::MAX {
                    distances[next] = distances[at] + 1;
                    queue.push_back(next);
                }
            }
        }
        distances
    }

    /// The next-hop table: one BFS per endpoint, the lowest-id closer neighbour.
    fn with_routes(mut self) -> Self {
        let mut next_hops = vec![0u32; self.vertices() * self.endpoints];
        for destination in 0..self.endpoints {
            let distances = self.distances_from(destination);
            for at in 0..self.vertices() {
                let hop = if at == destination {
                    at
                } else {
                    // Sorted by vertex: the first one closer is the lowest id. Connected,
                    // so every vertex but the destination has one.
                    self.neighbours(at)
                        .iter()
                        .find(|&&(next, _)| distances[next] + 1 == distances[at])
                        .map_or(at, |&(next, _)| next)
                };
                next_hops[at * self.endpoints + destination] = hop as u32;
            }
        }
        self.next_hops = next_hops;
        self
    }

    /// The network's name, if the file gave one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// How many endpoints (vertex ids `0..endpoints()`): hosts that run ranks.
    pub fn endpoints(&self) -> usize {
        self.endpoints
    }

    /// The switches' vertex ids, `endpoints()..vertices()`.
    pub fn switches(&self) -> std::ops::Range<usize> {
        self.endpoints..self.vertices()
    }

    /// How many vertices: endpoints, then switches.
    pub fn vertices(&self) -> usize {
        self.names.len()
    }

    /// Whether `vertex` is an endpoint (runs ranks) rather than a switch.
    pub fn is_endpoint(&self, vertex: usize) -> bool {
        vertex < self.endpoints
    }

    /// The name the file gave `vertex`. Panics past the last vertex.
    pub fn vertex_name(&self, vertex: usize) -> &str {
        &self.names[vertex]
    }

    /// The vertex of that name, if any (a linear search: for messages, not hot paths).
    pub fn vertex_by_name(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|known| known == name)
    }

    /// The distinct neighbours of `vertex` and the class of the link(s) to each, sorted
    /// by vertex (parallel links give one entry: see [`Self::parallel_links`]). Panics
    /// past the last vertex.
    pub fn neighbours(&self, vertex: usize) -> &[(usize, ClassId)] {
        &self.neighbours[self.offsets[vertex]..self.offsets[vertex + 1]]
    }

    /// The class of the link(s) between `a` and `b`; `None` when they are not linked.
    pub fn class_of(&self, a: usize, b: usize) -> Option<ClassId> {
        let neighbours = self.neighbours(a);
        neighbours.binary_search_by_key(&b, |&(vertex, _)| vertex).ok().map(|at| neighbours[at].1)
    }

    /// How many links join `a` and `b` (0 when they are not linked; more than 1 for
    /// parallel links).
    pub fn parallel_links(&self, a: usize, b: usize) -> usize {
        let key = (a.min(b), a.max(b));
        let start = self.links.partition_point(|link| (link.a, link.b) < key);
        self.links[start..].iter().take_while(|link| (link.a, link.b) == key).count()
    }

    /// Every link, parallel ones each, sorted by `(a, b)` with `a < b`.
    pub fn links(&self) -> &[GraphLink] {
        &self.links
    }

    /// The classes' names, in [`ClassId`] order.
    pub fn class_names(&self) -> Vec<&str> {
        self.classes.iter().map(|class| class.name.as_str()).collect()
    }

    /// The classes and the physics the file gave each, in [`ClassId`] order.
    pub fn class_physics(&self) -> &[ClassPhysics] {
        &self.classes
    }

    /// The class of that name, if declared.
    pub fn class_by_name(&self, name: &str) -> Option<ClassId> {
        self.classes.iter().position(|class| class.name == name).map(ClassId)
    }

    /// The next vertex from `at` on the shortest route to endpoint `destination` (the
    /// lowest-id neighbour one step closer; `destination` itself once there). Panics when
    /// `at` is no vertex or `destination` no endpoint.
    pub fn next_hop(&self, at: usize, destination: usize) -> usize {
        assert!(destination < self.endpoints, "route to vertex {destination}, which is no endpoint");
        assert!(at < self.vertices(), "route from vertex {at}, which does not exist");
        self.next_hops[at * self.endpoints + destination] as usize
    }

    /// The vertices from `source` to endpoint `destination`, both included:
    /// [`Self::next_hop`] iterated. Panics as `next_hop` does.
    pub fn route(&self, source: usize, destination: usize) -> Vec<usize> {
        let mut route = vec![source];
        let mut at = source;
        while at != destination {
            at = self.next_hop(at, destination);
            route.push(at);
        }
        route
    }

    /// How many links the route from `source` to endpoint `destination` crosses.
    pub fn hops(&self, source: usize, destination: usize) -> usize {
        self.route(source, destination).len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netfile::description::DescribedLink;

    /// `endpoints` hosts and switches `s0..`, linked as `links` says (names), one class.
    fn graph(endpoints: usize, switches: usize, links: &[(usize, usize)]) -> FileGraph {
        NetworkDescription {
            name: None,
            endpoints: (0..endpoints).map(|host| format!("h{host}")).collect(),
            switches: (0..switches).map(|switch| format!("s{switch}")).collect(),
            classes: vec![ClassPhysics::named("wire")],
            links: links.iter().map(|&(a, b)| DescribedLink { a, b, class: "wire".into() }).collect(),
        }
        .build()
        .expect("the test graph builds")
    }

    #[test]
    fn ties_go_to_the_lowest_vertex_id() {
        // h0 and h1 on switches s0 (2) .. s3 (5): s0 - s2, s0 - s3, s2 - s1, s3 - s1, h0 - s0,
        // h1 - s1; from s0 two equal ways to s1, through s2 (4) or s3 (5): 4 wins, whatever
        // the order the links were given in.
        let links = [(0, 2), (1, 3), (2, 5), (2, 4), (5, 3), (4, 3)];
        let built = graph(2, 4, &links);
        assert_eq!(built.route(0, 1), vec![0, 2, 4, 3, 1]);
        let reversed: Vec<_> = links.iter().rev().map(|&(a, b)| (b, a)).collect();
        assert_eq!(graph(2, 4, &reversed).route(0, 1), vec![0, 2, 4, 3, 1]);
        assert_eq!(built.route(1, 0), vec![1, 3, 4, 2, 0]);
    }

    #[test]
    fn routes_are_shortest_and_next_hop_is_route_iterated() {
        // A ring of 6 hosts with a chord 0 - 3.
        let built = graph(6, 0, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)]);
        assert_eq!(built.hops(1, 4), 3);
        assert_eq!(built.route(1, 4), vec![1, 0, 3, 4]);
        // Three ways of 3 hops (through 1, or 3 then 0 or 4): the lowest first hop, 1.
        assert_eq!(built.route(2, 5), vec![2, 1, 0, 5]);
        for source in 0..6 {
            for destination in 0..6 {
                let route = built.route(source, destination);
                assert_eq!(route.first(), Some(&source));
                assert_eq!(route.last(), Some(&destination));
                assert!(route.windows(2).all(|hop| built.class_of(hop[0], hop[1]).is_some()));
                if source != destination {
                    assert_eq!(route[1], built.next_hop(source, destination));
                }
            }
        }
    }

    #[test]
    fn neighbours_are_distinct_and_sorted_and_parallel_links_are_counted() {
        let built = graph(2, 1, &[(2, 1), (0, 2), (2, 0), (1, 2), (1, 2)]);
        assert_eq!(built.neighbours(2), &[(0, ClassId(0)), (1, ClassId(0))]);
        assert_eq!((built.parallel_links(0, 2), built.parallel_links(2, 1), built.parallel_links(0, 1)), (2, 3, 0));
        assert_eq!(built.links().len(), 5);
        assert_eq!(built.class_of(0, 1), None);
        assert_eq!(built.class_names(), vec!["wire"]);
        assert_eq!((built.vertex_by_name("s0"), built.is_endpoint(2)), (Some(2), false));
    }
}
