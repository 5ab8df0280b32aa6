//! Networks read from files (`--network FILE`): topocomm's own JSON graph and SimGrid
//! platform files, both read into one plain [`NetworkDescription`] that
//! [`NetworkDescription::build`] validates into a routable [`FileGraph`].
//!
//! The API the CLI and `Topology` use:
//!
//! * [`read_network_file`]`(path) -> Result<NetworkDescription, NetworkFileError>` (the
//!   format told by the first character: `{` JSON, `<` SimGrid XML), or
//!   [`parse_network`]`(text)`, [`json::parse_network_json`], [`simgrid::parse_platform`];
//!   [`json::to_network_json`] writes a description back as JSON.
//! * [`NetworkDescription`] `{ name, endpoints, switches, classes: Vec<ClassPhysics>,
//!   links: Vec<DescribedLink> }`: vertex ids `0..E` are the endpoints (hosts that run
//!   ranks) in file order, `E..E+S` the switches (forward only); links are undirected
//!   `{ a, b, class }`, parallel ones repeated; [`ClassPhysics`] `{ name, ts_ns, th_ns,
//!   tw_ps }` (each `Option<u64>`: `None` takes the run's default), in the units of
//!   `spec::link::LinkModel`.
//! * [`NetworkDescription::build`]`() -> Result<FileGraph, NetworkFileError>`, refusing with
//!   one line: no endpoint; duplicate vertex or class names; a link end out of range; a
//!   self-link; a link of an undeclared class; a class no link has; parallel links of
//!   different classes; a disconnected graph; a switch with no route (no endpoint reaches
//!   it); a next-hop table over [`FileGraph::MAX_ROUTE_TABLE_ENTRIES`].
//! * [`FileGraph`]: `endpoints()`, `switches()`, `vertices()`, `is_endpoint(v)`,
//!   `vertex_name(v)`, `vertex_by_name(name)`, `neighbours(v) -> &[(usize, ClassId)]`
//!   (distinct, sorted by vertex), `class_of(a, b) -> Option<ClassId>`,
//!   `parallel_links(a, b)`, `links()`, `class_names()`, `class_physics()`,
//!   `class_by_name(name)`, and the routes: `next_hop(at, destination_endpoint)`,
//!   `route(source, destination) -> Vec<usize>` (both ends included), `hops(source,
//!   destination)`. Routes are shortest paths; among equal ones the next hop is the
//!   lowest-id neighbour one step closer (the table: vertices × endpoints entries of 4
//!   bytes, one BFS per endpoint).
//!
//! Layer: beneath everything (it uses no other module of this crate), beside `topology`.

pub mod description;
pub mod error;
pub mod graph;
pub mod json;
pub mod simgrid;

use std::path::Path;

pub use description::{ClassPhysics, DescribedLink, NetworkDescription};
pub use error::NetworkFileError;
pub use graph::{ClassId, FileGraph, GraphLink};

/// Reads a network file: topocomm's JSON when its first non-blank character is `{`, a
/// SimGrid platform when it is `<`.
pub fn read_network_file(path: &Path) -> Result<NetworkDescription, NetworkFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| NetworkFileError::Unreadable { path: path.to_owned(), reason: error.to_string() })?;
    parse_network(&text).map_err(|error| match error {
        NetworkFileError::UnknownFormat { .. } => NetworkFileError::UnknownFormat { path: path.to_owned() },
        other => other,
    })
}

/// Reads a network file's text, JSON or SimGrid XML by its first non-blank character.
pub fn parse_network(text: &str) -> Result<NetworkDescription, NetworkFileError> {
    match text.trim_start().chars().next() {
        Some('{') => json::parse_network_json(text),
        Some('<') => simgrid::parse_platform(text),
        _ => Err(NetworkFileError::UnknownFormat { path: "(text)".into() }),
    }
}
