//! The plain data a network file gives: endpoints, switches, classes of links with
//! their physics, and links between vertex ids; [`NetworkDescription::build`] validates
//! it into a routable [`FileGraph`].

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::error::NetworkFileError;
use super::graph::FileGraph;

/// One class of links and the physics a file gives it: the run's own type (a physics
/// left out takes the run's default, `--ts/--th/--tw`).
pub use crate::spec::link::ClassPhysics;

/// One undirected link between vertex ids `a` and `b`, of class `class`. Two links
/// between the same pair are parallel links (a fat-tree's several cables); they must be
/// of one class.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DescribedLink {
    pub a: usize,
    pub b: usize,
    pub class: String,
}

/// A network as a file gives it. Vertex ids: the endpoints are `0..E` in file order,
/// the switches `E..E+S`. Plain data: [`Self::build`] checks it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkDescription {
    pub name: Option<String>,
    /// Hosts that run ranks: vertex ids `0..endpoints.len()`, in file order.
    pub endpoints: Vec<String>,
    /// Vertices that only forward: ids `endpoints.len()..`, in file order.
    pub switches: Vec<String>,
    pub classes: Vec<ClassPhysics>,
    pub links: Vec<DescribedLink>,
}

impl NetworkDescription {
    /// Vertices in all: endpoints, then switches.
    pub fn vertex_count(&self) -> usize {
        self.endpoints.len() + self.switches.len()
    }

    /// The name of vertex `vertex` (an endpoint's or a switch's); `None` past the last.
    pub fn vertex_name(&self, vertex: usize) -> Option<&str> {
        match vertex.checked_sub(self.endpoints.len()) {
            None => self.endpoints.get(vertex),
            Some(switch) => self.switches.get(switch),
        }
        .map(String::as_str)
    }

    /// Validates the description and builds its graph and routes. Refused, each with
    /// one line naming the culprit: no endpoint; two vertices or two classes of one name;
    /// a link end out of range or a self-link; a link of an undeclared class or a class
    /// no link has; parallel links of different classes; endpoints that cannot reach each
    /// other (disconnected); a switch no endpoint can reach (no route); and a next-hop
    /// table over [`FileGraph::MAX_ROUTE_TABLE_ENTRIES`].
    pub fn build(&self) -> Result<FileGraph, NetworkFileError> {
        if self.endpoints.is_empty() {
            return Err(NetworkFileError::NoEndpoints);
        }
        self.check_names()?;
        let vertices = self.vertex_count();
        let class_ids: HashMap<&str, usize> =
            self.classes.iter().enumerate().map(|(id, class)| (class.name.as_str(), id)).collect();
        let mut class_used = vec![false; self.classes.len()];
        let mut links = Vec::with_capacity(self.links.len());
        for (index, link) in self.links.iter().enumerate() {
            for end in [link.a, link.b] {
                if end >= vertices {
                    return Err(NetworkFileError::LinkEndOutOfRange { index, end, vertices });
                }
            }
            if link.a == link.b {
                return Err(NetworkFileError::SelfLink { index, vertex: self.name_of(link.a) });
            }
            let Some(&class) = class_ids.get(link.class.as_str()) else {
                return Err(NetworkFileError::UnknownClass {
                    index,
                    a: self.name_of(link.a),
                    b: self.name_of(link.b),
                    class: link.class.clone(),
                });
            };
            class_used[class] = true;
            links.push((link.a.min(link.b), link.a.max(link.b), class));
        }
        if let Some(unused) = class_used.iter().position(|used| !used) {
            return Err(NetworkFileError::ClassWithoutLink { class: self.classes[unused].name.clone() });
        }
        FileGraph::new(self, links)
    }

    /// Every vertex name once, every class name once.
    fn check_names(&self) -> Result<(), NetworkFileError> {
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(self.vertex_count());
        for (vertex, name) in self.endpoints.iter().chain(&self.switches).enumerate() {
            if let Some(first) = seen.insert(name, vertex) {
                return Err(NetworkFileError::DuplicateVertex { name: name.clone(), first, second: vertex });
            }
        }
        let mut classes: HashMap<&str, ()> = HashMap::with_capacity(self.classes.len());
        for class in &self.classes {
            if classes.insert(&class.name, ()).is_some() {
                return Err(NetworkFileError::DuplicateClass { name: class.name.clone() });
            }
        }
        Ok(())
    }

    /// The name of an in-range vertex, owned, for an error.
    pub(super) fn name_of(&self, vertex: usize) -> String {
        self.vertex_name(vertex).unwrap_or("?").to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two hosts on one switch, one class; `edit` spoils it.
    fn star(edit: impl FnOnce(&mut NetworkDescription)) -> Result<FileGraph, NetworkFileError> {
        let mut description = NetworkDescription {
            name: None,
            endpoints: vec!["h0".into(), "h1".into()],
            switches: vec!["s0".into()],
            classes: vec![ClassPhysics::named("edge")],
            links: vec![
                DescribedLink { a: 0, b: 2, class: "edge".into() },
                DescribedLink { a: 1, b: 2, class: "edge".into() },
            ],
        };
        edit(&mut description);
        description.build()
    }

    fn refused(edit: impl FnOnce(&mut NetworkDescription)) -> String {
        star(edit).expect_err("the description is refused").to_string()
    }

    #[test]
    fn a_good_description_builds() {
        let graph = star(|_| {}).unwrap();
        assert_eq!(graph.route(0, 1), vec![0, 2, 1]);
    }

    #[test]
    fn a_disconnected_graph_is_refused_naming_the_endpoint() {
        let message = refused(|d| {
            d.endpoints.push("lonely".into());
            d.links.iter_mut().for_each(|link| link.b += 1);
        });
        assert_eq!(message, "the network is disconnected: endpoint `lonely` cannot be reached from endpoint `h0`");
    }

    #[test]
    fn a_switch_with_no_route_is_refused() {
        let message = refused(|d| d.switches.push("s9".into()));
        assert_eq!(message, "switch `s9` has no route: no endpoint can reach it");
        // Two switches linked to each other only: still no route to them.
        let message = refused(|d| {
            d.switches.extend(["s8".to_owned(), "s9".to_owned()]);
            d.links.push(DescribedLink { a: 3, b: 4, class: "edge".into() });
        });
        assert_eq!(message, "switch `s8` has no route: no endpoint can reach it");
    }

    #[test]
    fn a_class_that_no_link_has_is_refused() {
        let message = refused(|d| d.classes.push(ClassPhysics::named("core")));
        assert_eq!(message, "the class `core` is declared but no link has it");
    }

    #[test]
    fn a_link_of_an_undeclared_class_is_refused() {
        let message = refused(|d| d.links[1].class = "egde".into());
        assert_eq!(message, "link 1 (`h1` - `s0`) has the class `egde`, which is not declared");
    }

    #[test]
    fn duplicate_names_are_refused() {
        assert_eq!(
            refused(|d| d.switches[0] = "h1".into()),
            "the name `h1` is given to two vertices (vertex 1 and vertex 2)"
        );
        assert_eq!(refused(|d| d.classes.push(ClassPhysics::named("edge"))), "the class `edge` is declared twice");
    }

    #[test]
    fn bad_link_ends_are_refused() {
        assert_eq!(
            refused(|d| d.links[0].b = 7),
            "link 0 ends at vertex 7, but the network has only 3 vertices (0..3)"
        );
        assert_eq!(refused(|d| d.links[0].b = 0), "link 0 links `h0` to itself");
    }

    #[test]
    fn parallel_links_of_two_classes_are_refused() {
        let message = refused(|d| {
            d.classes.push(ClassPhysics::named("spare"));
            d.links.push(DescribedLink { a: 2, b: 0, class: "spare".into() });
        });
        assert_eq!(message, "the parallel links between `h0` and `s0` differ in class (`edge` and `spare`)");
    }

    #[test]
    fn no_endpoint_is_refused() {
        let message = refused(|d| {
            d.endpoints.clear();
            d.links.clear();
        });
        assert_eq!(message, "the network has no endpoint: at least one host must run ranks");
    }

    #[test]
    fn a_route_table_over_the_bound_is_refused_before_it_is_built() {
        // 8193 hosts on one switch: 8194 x 8193 entries, just over 64 Mi.
        let message = refused(|d| {
            d.endpoints = (0..8193).map(|host| format!("h{host}")).collect();
            d.links = (0..8193).map(|host| DescribedLink { a: host, b: 8193, class: "edge".into() }).collect();
        });
        assert!(message.starts_with("the network is too large to route: its next-hop table would hold 8194 vertices x 8193 endpoints = 67133442 entries, over the bound of 67108864"), "{message}");
    }
}
