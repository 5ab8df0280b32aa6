//! Why a network file cannot be read or its graph cannot be built: one variant per
//! mistake, each a one-line message naming the offending thing.

use std::path::PathBuf;

/// What is wrong with a network file or with the description it gives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkFileError {
    // The description's graph (`NetworkDescription::build`).
    #[error("the network has no endpoint: at least one host must run ranks")]
    NoEndpoints,
    #[error("the name `{name}` is given to two vertices (vertex {first} and vertex {second})")]
    DuplicateVertex { name: String, first: usize, second: usize },
    #[error("the class `{name}` is declared twice")]
    DuplicateClass { name: String },
    #[error("link {index} ends at vertex {end}, but the network has only {vertices} vertices (0..{vertices})")]
    LinkEndOutOfRange { index: usize, end: usize, vertices: usize },
    #[error("link {index} links `{vertex}` to itself")]
    SelfLink { index: usize, vertex: String },
    #[error("link {index} (`{a}` - `{b}`) has the class `{class}`, which is not declared")]
    UnknownClass { index: usize, a: String, b: String, class: String },
    #[error("the class `{class}` is declared but no link has it")]
    ClassWithoutLink { class: String },
    #[error("the parallel links between `{a}` and `{b}` differ in class (`{first}` and `{second}`)")]
    ParallelLinksDiffer { a: String, b: String, first: String, second: String },
    #[error("the network is disconnected: endpoint `{unreached}` cannot be reached from endpoint `{from}`")]
    Disconnected { unreached: String, from: String },
    #[error("switch `{switch}` has no route: no endpoint can reach it")]
    SwitchWithoutRoute { switch: String },
    #[error(
        "the network is too large to route: its next-hop table would hold {vertices} vertices x {endpoints} \
         endpoints = {entries} entries, over the bound of {bound}"
    )]
    RouteTableTooLarge { vertices: usize, endpoints: usize, entries: u128, bound: usize },

    // Reading a file.
    #[error("cannot read the network file {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{}: cannot tell the format (topocomm's JSON starts with `{{`, a SimGrid platform with `<`)", path.display())]
    UnknownFormat { path: PathBuf },
    #[error("network JSON: {0}")]
    Json(String),
    #[error("network JSON: unknown schema_version {found} (this topocomm reads {supported})")]
    SchemaVersion { found: u64, supported: u64 },
    #[error("network JSON: link {index} names `{name}`, which is neither an endpoint nor a switch")]
    UnknownVertex { index: usize, name: String },
    #[error(
        "network JSON: class `{class}`: {field} `{value}` is not a duration (a number of ns, or e.g. \"1us\", \"50ns\", \"0.1ns\")"
    )]
    BadDuration { class: String, field: &'static str, value: String },
    #[error("SimGrid platform: {0}")]
    Xml(String),
    #[error("SimGrid platform, line {line}: {message}")]
    SimGrid { line: u32, message: String },
}
