//! SimGrid platform files (XML, `<platform version="4.1">`) read into a
//! [`NetworkDescription`], built as SimGrid 3.32 builds them (`sg_platf.cpp`,
//! `FatTreeZone.cpp`, `DragonflyZone.cpp`, `TorusZone.cpp` of simgrid/simgrid; the
//! platform format is in SimGrid's user manual, "Describing your Simulated Platform").
//!
//! What is read:
//!
//! * `<cluster>`, directly under `<platform>` or nested in `<zone>`s, with `id`, `prefix`,
//!   `radical` (`"0-15"`, `"1-4,6,9-11"`), `suffix`, `bw`, `lat` and `topology`:
//!   - default (`FLAT`): every host `prefix+radical+suffix` hangs by its private link
//!     (class `private`) off the cluster's router, a switch named `router_id` or
//!     `prefix+id+"_router"+suffix`, as SimGrid names it;
//!   - `FAT_TREE`, `topo_parameters="L;c1,..,cL;p1,..,pL;n1,..,nL"` (the extended
//!     generalized fat-tree of Öhring et al., "On generalized fat trees", IPPS 1995): a
//!     level-`i` switch has `c_i` children, a level-`i-1` vertex `p_i` parents, and `n_i`
//!     parallel links join a vertex to each of its parents; the hosts are level 0 (`c1·…·cL`
//!     of them), switch `j` of level `i` is named `{id}_switch_{i}_{j}`, and the links
//!     between levels `i-1` and `i` are of class `level{i}`. Parents and children are
//!     matched by SimGrid's labels (`FatTreeZone::generate_labels` and `are_related`);
//!   - `DRAGONFLY`, `topo_parameters="G,nb;C,nk;B,ng;N"` (Kim, Dally, Scott, Abts, ISCA
//!     2008, in SimGrid's three-level form, after Cray Cascade): `G` groups of `C` chassis
//!     of `B` routers (blades) of `N` hosts. Host `r` has coordinates (group, chassis,
//!     blade, node) with the node fastest and hangs off router `{id}_router_{g}_{c}_{b}`
//!     by a `terminal` link. The local kinds: a chassis' routers are all linked to each
//!     other (class `green`, `ng` links bundled into one of `ng` times `bw`, as SimGrid
//!     does), and routers of one blade index in a group's chassis likewise (class
//!     `black`, `nk`·`bw`); the global kind: groups `i < j` are linked by one link
//!     (class `blue`, `nb`·`bw`) between router `j` of group `i` and router `i` of group
//!     `j` (routers counted chassis-major inside a group);
//!   - `TORUS`, `topo_parameters="d1,d2,…"`: `d1·d2·…` hosts, coordinate 0 varying
//!     fastest; every host links to its `+1` neighbour (with wrap-around) in every
//!     dimension (class `torus`), so a dimension of 2 gives two parallel links per pair
//!     and a dimension of 1 none (SimGrid's self-link there carries no route).
//!
//!   Hosts of a FAT_TREE, DRAGONFLY or TORUS take the first radicals, as many as the
//!   shape has hosts (SimGrid ignores the rest and refuses too few).
//! * `<host>` and `<router>` (switches) in zones, `<link>`s, and the `<route>`s and
//!   `<zoneRoute>`s (`gw_src`, `gw_dst`) that name them by `<link_ctn>`: a route of `k`
//!   links becomes a path of `k` links between its ends through `k - 1` switches named
//!   `{src}->{dst}/{i}`, each of the class of its `<link>` (the link's `id`). A link
//!   several routes name becomes one link per route: hop counts and physics hold, the
//!   sharing of that one link between routes is not kept.
//!
//! Classes: a platform with one cluster names its classes as above; with several, each
//! cluster's are `{cluster id}.{class}`. Physics: SimGrid's `bw` (bytes per second,
//! with SimGrid's units: `Bps`, `kBps`, `MBps`, `GBps`, …, `KiBps`, `MiBps`, …, and bits:
//! `bps`, `Mbps`, `Gbps`, …, `Gibps`; no unit is `Bps`) gives t_w = 1/bw, rounded to
//! whole picoseconds per byte (`125MBps` is 8000 ps/B, `10Gbps` 800 ps/B); `lat`
//! (seconds, with `s`, `ms`, `us`, `ns`, `ps`, `m`, `h`, `d`, `w`; no unit is `s`) gives
//! t_h = lat, rounded to whole nanoseconds (`50us` is 50000 ns). SimGrid has no t_s: the
//! run's default applies.
//!
//! Not kept, by design: a flat cluster's backbone (`bb_bw`, `bb_lat`: a shared bus
//! every route in the cluster crosses once, which no undirected link can be; its router
//! stands for it), the per-host `loopback_*` and `limiter_link` pseudo-links, speeds,
//! cores and properties. Refused, with the line: a zone routed by `Vivaldi` or `Wifi`
//! (coordinates or a cell, no links) that joins more than one part, elements of no
//! network meaning here
//! (`<cabinet>`, `<peer>`, `<backbone>`, `<host_link>`, bypass routes, `<include>`),
//! `topo_parameters` SimGrid refuses (a wrong count of fields, a zero, lists whose lengths
//! differ from the levels), too few radicals, `bw` ≤ 0, a negative `lat`, and a dragonfly
//! of more groups than blades per chassis (SimGrid 3.32's minimal routing reaches group
//! `g` through blade `g` and reads past its green links otherwise).

use std::collections::HashMap;

use roxmltree::{Document, Node, ParsingOptions};

use super::description::{ClassPhysics, DescribedLink, NetworkDescription};
use super::error::NetworkFileError;

/// Reads a SimGrid platform file's text into a description (not yet validated: call
/// [`NetworkDescription::build`]).
pub fn parse_platform(text: &str) -> Result<NetworkDescription, NetworkFileError> {
    // SimGrid's files name their DTD (`<!DOCTYPE platform SYSTEM …>`); it is not fetched.
    let options = ParsingOptions { allow_dtd: true, nodes_limit: MAX_XML_NODES, ..ParsingOptions::default() };
    let document =
        Document::parse_with_options(text, options).map_err(|error| NetworkFileError::Xml(error.to_string()))?;
    let root = document.root_element();
    let mut reader = PlatformReader {
        document: &document,
        endpoints: Vec::new(),
        switches: Vec::new(),
        names: HashMap::new(),
        classes: Vec::new(),
        links: Vec::new(),
        declared_links: HashMap::new(),
        clusters: 0,
    };
    if root.tag_name().name() != "platform" {
        return Err(reader.error(root, format!("the root element is <{}>, not <platform>", root.tag_name().name())));
    }
    let version = root.attribute("version").unwrap_or("0.0");
    if version.split('.').next() != Some("4") {
        return Err(reader.error(root, format!("platform version {version}: only version 4 (4.1) files are read")));
    }
    reader.read_children(root)?;
    Ok(reader.finish())
}

/// Most XML nodes a platform file may hold (an entity expanded past it is refused).
const MAX_XML_NODES: u32 = 1 << 22;

/// A vertex before the endpoints are counted: switches are numbered after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vertex {
    Endpoint(usize),
    Switch(usize),
}

/// A class as a cluster or a `<link>` makes it, before names are settled.
struct PendingClass {
    /// The cluster that made it (its name is prefixed when there are several), or none
    /// for a `<link>`'s class.
    cluster: Option<String>,
    name: String,
    physics: LinkPhysics,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct LinkPhysics {
    bandwidth: f64,
    latency: f64,
}

impl LinkPhysics {
    fn class(&self, name: String) -> ClassPhysics {
        ClassPhysics {
            name,
            ts_ns: None,
            th_ns: Some((self.latency * 1e9).round() as u64),
            tw_ps: Some((1e12 / self.bandwidth).round() as u64),
        }
    }
}

struct PlatformReader<'input> {
    document: &'input Document<'input>,
    endpoints: Vec<String>,
    switches: Vec<String>,
    names: HashMap<String, Vertex>,
    classes: Vec<PendingClass>,
    links: Vec<(Vertex, Vertex, usize)>,
    /// `<link>`s declared: physics, and the class made for it once a route uses it.
    declared_links: HashMap<String, (LinkPhysics, Option<usize>)>,
    clusters: usize,
}

impl<'input> PlatformReader<'input> {
    fn error(&self, node: Node, message: String) -> NetworkFileError {
        NetworkFileError::SimGrid { line: self.document.text_pos_at(node.range().start).row, message }
    }

    fn required<'a>(&self, node: Node<'a, 'input>, name: &str) -> Result<&'a str, NetworkFileError> {
        node.attribute(name).ok_or_else(|| {
            let id = node.attribute("id").map(|id| format!(" `{id}`")).unwrap_or_default();
            self.error(node, format!("<{}>{id} has no `{name}`", node.tag_name().name()))
        })
    }

    fn read_children(&mut self, parent: Node) -> Result<(), NetworkFileError> {
        for child in parent.children().filter(Node::is_element) {
            match child.tag_name().name() {
                "zone" | "AS" => {
                    self.check_routing(child)?;
                    self.read_children(child)?;
                }
                "cluster" => self.read_cluster(child)?,
                "host" => {
                    let name = self.required(child, "id")?;
                    self.add_endpoint(child, name.to_owned())?;
                }
                "router" => {
                    let name = self.required(child, "id")?;
                    self.add_switch(child, name.to_owned())?;
                }
                "link" => self.read_link(child)?,
                "route" => {
                    let (source, destination) = (self.required(child, "src")?, self.required(child, "dst")?);
                    self.read_route(child, source, destination)?;
                }
                "zoneRoute" | "ASroute" => {
                    let (source, destination) = (self.required(child, "gw_src")?, self.required(child, "gw_dst")?);
                    self.read_route(child, source, destination)?;
                }
                // No network in them: settings, the deployment, traces and properties.
                "config" | "random" | "prop" | "actor" | "process" | "trace" | "trace_connect" | "disk" => {}
                other => {
                    return Err(self.error(
                        child,
                        format!(
                            "<{other}> is not read: topocomm reads <cluster>s, <host>s, <router>s, <link>s, \
                             <route>s and <zoneRoute>s, nested in <zone>s"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A zone whose routing has no links (Vivaldi's coordinates, Wifi's cell) can hold
    /// one network part, not join several.
    fn check_routing(&self, zone: Node) -> Result<(), NetworkFileError> {
        let routing = zone.attribute("routing").unwrap_or("");
        let parts = zone
            .children()
            .filter(|child| ["zone", "AS", "cluster", "host", "router"].contains(&child.tag_name().name()))
            .count();
        if matches!(routing, "Vivaldi" | "Wifi") && parts > 1 {
            let id = zone.attribute("id").unwrap_or("?");
            return Err(self.error(
                zone,
                format!(
                    "zone `{id}` is routed by {routing}, which joins its {parts} parts without links: topocomm reads \
                     zones routed over links (Full, Floyd, Dijkstra, DijkstraCache)"
                ),
            ));
        }
        Ok(())
    }

    fn add_endpoint(&mut self, node: Node, name: String) -> Result<Vertex, NetworkFileError> {
        let vertex = Vertex::Endpoint(self.endpoints.len());
        self.name_vertex(node, &name, vertex)?;
        self.endpoints.push(name);
        Ok(vertex)
    }

    fn add_switch(&mut self, node: Node, name: String) -> Result<Vertex, NetworkFileError> {
        let vertex = Vertex::Switch(self.switches.len());
        self.name_vertex(node, &name, vertex)?;
        self.switches.push(name);
        Ok(vertex)
    }

    fn name_vertex(&mut self, node: Node, name: &str, vertex: Vertex) -> Result<(), NetworkFileError> {
        if self.names.insert(name.to_owned(), vertex).is_some() {
            return Err(self.error(node, format!("the name `{name}` is given twice")));
        }
        Ok(())
    }

    fn add_class(&mut self, cluster: Option<&str>, name: &str, physics: LinkPhysics) -> usize {
        self.classes.push(PendingClass { cluster: cluster.map(str::to_owned), name: name.to_owned(), physics });
        self.classes.len() - 1
    }

    fn read_link(&mut self, node: Node) -> Result<(), NetworkFileError> {
        let id = self.required(node, "id")?;
        let bandwidth = self.required(node, "bandwidth")?;
        let what = format!("bandwidth of link `{id}`");
        let bandwidth = parse_bandwidth(bandwidth).map_err(|error| self.error(node, format!("{what}: {error}")))?;
        let latency = node.attribute("latency").unwrap_or("0");
        let latency =
            parse_time(latency).map_err(|error| self.error(node, format!("latency of link `{id}`: {error}")))?;
        let physics = self.checked_physics(node, &format!("link `{id}`"), bandwidth, latency)?;
        if self.declared_links.insert(id.to_owned(), (physics, None)).is_some() {
            return Err(self.error(node, format!("the link `{id}` is declared twice")));
        }
        Ok(())
    }

    fn checked_physics(
        &self,
        node: Node,
        what: &str,
        bandwidth: f64,
        latency: f64,
    ) -> Result<LinkPhysics, NetworkFileError> {
        if !(bandwidth > 0.0 && bandwidth.is_finite()) {
            return Err(self.error(node, format!("{what}: the bandwidth must be above 0 (got {bandwidth} B/s)")));
        }
        if !(latency >= 0.0 && latency.is_finite()) {
            return Err(self.error(node, format!("{what}: the latency must not be negative (got {latency} s)")));
        }
        Ok(LinkPhysics { bandwidth, latency })
    }

    /// A `<route>` or `<zoneRoute>` between two named vertices, through its `<link_ctn>`s.
    fn read_route(&mut self, node: Node, source: &str, destination: &str) -> Result<(), NetworkFileError> {
        let find = |name: &str| {
            self.names.get(name).copied().ok_or_else(|| {
                self.error(
                    node,
                    format!("the route from `{source}` to `{destination}` names `{name}`, which is no host or router"),
                )
            })
        };
        let (from, to) = (find(source)?, find(destination)?);
        let mut classes = Vec::new();
        for link in node.children().filter(|child| child.has_tag_name("link_ctn")) {
            let id = self.required(link, "id")?;
            let Some(&(physics, class)) = self.declared_links.get(id) else {
                return Err(self.error(
                    link,
                    format!(
                        "the route from `{source}` to `{destination}` names the link `{id}`, which is not declared"
                    ),
                ));
            };
            let class = match class {
                Some(class) => class,
                None => {
                    let class = self.add_class(None, id, physics);
                    self.declared_links.insert(id.to_owned(), (physics, Some(class)));
                    class
                }
            };
            classes.push(class);
        }
        if classes.is_empty() {
            return Err(self.error(node, format!("the route from `{source}` to `{destination}` names no link")));
        }
        let mut at = from;
        for (index, &class) in classes.iter().enumerate() {
            let next = if index + 1 == classes.len() {
                to
            } else {
                self.add_switch(node, format!("{source}->{destination}/{}", index + 1))?
            };
            self.links.push((at, next, class));
            at = next;
        }
        Ok(())
    }

    fn read_cluster(&mut self, node: Node) -> Result<(), NetworkFileError> {
        self.clusters += 1;
        let id = self.required(node, "id")?;
        let prefix = self.required(node, "prefix")?;
        let suffix = self.required(node, "suffix")?;
        let radicals = parse_radicals(self.required(node, "radical")?)
            .map_err(|error| self.error(node, format!("cluster `{id}`: radical: {error}")))?;
        let bandwidth = parse_bandwidth(self.required(node, "bw")?)
            .map_err(|error| self.error(node, format!("cluster `{id}`: bw: {error}")))?;
        let latency = parse_time(self.required(node, "lat")?)
            .map_err(|error| self.error(node, format!("cluster `{id}`: lat: {error}")))?;
        let physics = self.checked_physics(node, &format!("cluster `{id}`"), bandwidth, latency)?;
        let parameters = node.attribute("topo_parameters").unwrap_or("");
        let topology = node.attribute("topology").unwrap_or("FLAT");
        let shape = match topology {
            "FLAT" => None,
            "FAT_TREE" => Some(parse_fat_tree(parameters).map(Shape::FatTree)),
            "DRAGONFLY" => Some(parse_dragonfly(parameters).map(Shape::Dragonfly)),
            "TORUS" => Some(parse_torus(parameters).map(Shape::Torus)),
            other => {
                return Err(self.error(
                    node,
                    format!("cluster `{id}`: topology `{other}` (SimGrid knows FLAT, FAT_TREE, DRAGONFLY, TORUS)"),
                ));
            }
        };
        let host_name = |radical: &i64| format!("{prefix}{radical}{suffix}");
        let Some(shape) = shape else {
            let router = match node.attribute("router_id") {
                Some(router) if !router.is_empty() => router.to_owned(),
                _ => format!("{prefix}{id}_router{suffix}"),
            };
            let class = self.add_class(Some(id), "private", physics);
            let hosts = radicals
                .iter()
                .map(|radical| self.add_endpoint(node, host_name(radical)))
                .collect::<Result<Vec<_>, _>>()?;
            let router = self.add_switch(node, router)?;
            self.links.extend(hosts.into_iter().map(|host| (host, router, class)));
            return Ok(());
        };
        let shape = shape.map_err(|error| {
            self.error(node, format!("cluster `{id}`: topo_parameters `{parameters}` of {topology}: {error}"))
        })?;
        let hosts = shape.hosts();
        if (radicals.len() as u64) < hosts {
            return Err(self.error(
                node,
                format!(
                    "cluster `{id}`: its {topology} has {hosts} hosts but the radical gives only {} names",
                    radicals.len()
                ),
            ));
        }
        let hosts = radicals[..hosts as usize]
            .iter()
            .map(|radical| self.add_endpoint(node, host_name(radical)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut wiring = Wiring::default();
        match &shape {
            Shape::FatTree(tree) => tree.wire(&mut wiring),
            Shape::Dragonfly(dragonfly) => dragonfly.wire(&mut wiring),
            Shape::Torus(torus) => torus.wire(&mut wiring),
        }
        let mut classes = HashMap::new();
        for (kind, multiplier) in &wiring.classes {
            let bundled = LinkPhysics { bandwidth: physics.bandwidth * *multiplier as f64, ..physics };
            classes.insert(kind.clone(), self.add_class(Some(id), kind, bundled));
        }
        let switches = wiring
            .switches
            .iter()
            .map(|name| self.add_switch(node, format!("{id}_{name}")))
            .collect::<Result<Vec<_>, _>>()?;
        let vertex = |end: WiredEnd| match end {
            WiredEnd::Host(host) => hosts[host],
            WiredEnd::Switch(switch) => switches[switch],
        };
        for (a, b, kind) in wiring.links {
            self.links.push((vertex(a), vertex(b), classes[&kind]));
        }
        Ok(())
    }

    /// The description: switches numbered after the endpoints, classes named.
    fn finish(self) -> NetworkDescription {
        let endpoints = self.endpoints.len();
        let id = |vertex: Vertex| match vertex {
            Vertex::Endpoint(endpoint) => endpoint,
            Vertex::Switch(switch) => endpoints + switch,
        };
        let several = self.clusters > 1;
        let classes = self
            .classes
            .iter()
            .map(|class| {
                let name = match &class.cluster {
                    Some(cluster) if several => format!("{cluster}.{}", class.name),
                    _ => class.name.clone(),
                };
                class.physics.class(name)
            })
            .collect::<Vec<_>>();
        let links = self
            .links
            .iter()
            .map(|&(a, b, class)| DescribedLink { a: id(a), b: id(b), class: classes[class].name.clone() })
            .collect();
        NetworkDescription { name: None, endpoints: self.endpoints, switches: self.switches, classes, links }
    }
}

/// The switches and links a hierarchical cluster's shape makes, by index into its hosts
/// and its own switches, and the classes with the bandwidth multiplier of each.
#[derive(Default)]
struct Wiring {
    switches: Vec<String>,
    links: Vec<(WiredEnd, WiredEnd, String)>,
    /// `(class, bandwidth multiplier)`, in the order first used.
    classes: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Copy)]
enum WiredEnd {
    Host(usize),
    Switch(usize),
}

impl Wiring {
    fn link(&mut self, a: WiredEnd, b: WiredEnd, class: &str, multiplier: u64) {
        if !self.classes.iter().any(|(known, _)| known == class) {
            self.classes.push((class.to_owned(), multiplier));
        }
        self.links.push((a, b, class.to_owned()));
    }
}

/// A hierarchical cluster's shape, checked.
enum Shape {
    FatTree(FatTree),
    Dragonfly(Dragonfly),
    Torus(Torus),
}

impl Shape {
    fn hosts(&self) -> u64 {
        match self {
            Shape::FatTree(tree) => tree.children.iter().product(),
            Shape::Dragonfly(dragonfly) => dragonfly.groups * dragonfly.chassis * dragonfly.blades * dragonfly.nodes,
            Shape::Torus(torus) => torus.dimensions.iter().product(),
        }
    }
}

/// Most hosts or switches one cluster may make: past this the graph could not be
/// routed anyway (`FileGraph::MAX_ROUTE_TABLE_ENTRIES`).
const MAX_CLUSTER_VERTICES: u64 = 1 << 24;

/// A number of SimGrid's `topo_parameters`: a whole number above 0.
fn count(text: &str, what: &str) -> Result<u64, String> {
    let value: u64 = text.trim().parse().map_err(|_| format!("{what} `{text}` is not a whole number"))?;
    if value == 0 {
        return Err(format!("{what} must be greater than 0"));
    }
    if value > MAX_CLUSTER_VERTICES {
        return Err(format!("{what} {value} is over {MAX_CLUSTER_VERTICES}"));
    }
    Ok(value)
}

fn bounded_product(values: impl IntoIterator<Item = u64>) -> Result<u64, String> {
    values.into_iter().try_fold(1u64, |product, value| {
        product
            .checked_mul(value)
            .filter(|&product| product <= MAX_CLUSTER_VERTICES)
            .ok_or_else(|| format!("the shape makes more than {MAX_CLUSTER_VERTICES} vertices"))
    })
}

/// SimGrid's extended generalized fat-tree `L;c1,..,cL;p1,..,pL;n1,..,nL`.
struct FatTree {
    /// Children of a level-`i+1` switch.
    children: Vec<u64>,
    /// Parents of a level-`i` vertex.
    parents: Vec<u64>,
    /// Parallel links between a level-`i` vertex and each of its parents.
    parallel: Vec<u64>,
}

fn parse_fat_tree(parameters: &str) -> Result<FatTree, String> {
    let parts: Vec<&str> = parameters.split(';').collect();
    if parts.len() != 4 {
        return Err(format!(
            "a fat-tree is the levels and 3 lists `L;children;parents;links`, got {} fields",
            parts.len()
        ));
    }
    let levels = count(parts[0], "the number of levels")?;
    let list = |text: &str, what: &str| -> Result<Vec<u64>, String> {
        let values: Vec<&str> = text.split(',').collect();
        if values.len() as u64 != levels {
            return Err(format!("{levels} levels but the {what} list has {} values", values.len()));
        }
        values.iter().map(|value| count(value, what)).collect()
    };
    let tree = FatTree {
        children: list(parts[1], "child count")?,
        parents: list(parts[2], "parent count")?,
        parallel: list(parts[3], "link count")?,
    };
    for level in 0..=levels as usize {
        bounded_product(tree.nodes_at(level))?;
    }
    Ok(tree)
}

impl FatTree {
    fn levels(&self) -> usize {
        self.children.len()
    }

    /// The factors of the vertex count of `level` (0: the hosts): parents up to it,
    /// children above it.
    fn nodes_at(&self, level: usize) -> impl Iterator<Item = u64> + '_ {
        self.parents[..level].iter().chain(&self.children[level..]).copied()
    }

    /// The labels of `level`'s vertices, in position order: digit `j` counts to
    /// `parents[j]` below the level and `children[j]` from it up, digit 0 fastest
    /// (SimGrid's `generate_labels`).
    fn labels(&self, level: usize) -> Vec<Vec<u64>> {
        let radices: Vec<u64> = self.nodes_at(level).collect();
        let count: u64 = radices.iter().product();
        let mut label = vec![0; self.levels()];
        let mut labels = Vec::with_capacity(count as usize);
        for _ in 0..count {
            labels.push(label.clone());
            for (digit, radix) in label.iter_mut().zip(&radices) {
                *digit += 1;
                if *digit < *radix {
                    break;
                }
                *digit = 0;
            }
        }
        labels
    }

    fn wire(&self, wiring: &mut Wiring) {
        let mut below: Vec<(WiredEnd, Vec<u64>)> =
            self.labels(0).into_iter().enumerate().map(|(host, label)| (WiredEnd::Host(host), label)).collect();
        for level in 1..=self.levels() {
            let class = format!("level{level}");
            let mut this_level = Vec::new();
            for (position, label) in self.labels(level).into_iter().enumerate() {
                let switch = WiredEnd::Switch(wiring.switches.len());
                wiring.switches.push(format!("switch_{level}_{position}"));
                this_level.push((switch, label));
            }
            // A parent and a child are related when their labels agree but in digit
            // `level - 1` (SimGrid's `are_related`).
            for (child, child_label) in &below {
                for (parent, parent_label) in &this_level {
                    let related =
                        (0..self.levels()).all(|digit| digit + 1 == level || child_label[digit] == parent_label[digit]);
                    if related {
                        for _ in 0..self.parallel[level - 1] {
                            wiring.link(*child, *parent, &class, 1);
                        }
                    }
                }
            }
            below = this_level;
        }
    }
}

/// SimGrid's dragonfly `G,nb;C,nk;B,ng;N`.
struct Dragonfly {
    groups: u64,
    blue: u64,
    chassis: u64,
    black: u64,
    blades: u64,
    green: u64,
    nodes: u64,
}

fn parse_dragonfly(parameters: &str) -> Result<Dragonfly, String> {
    let parts: Vec<&str> = parameters.split(';').collect();
    if parts.len() != 4 {
        return Err(format!(
            "a dragonfly is `groups,links;chassis,links;routers,links;nodes`: 4 fields, got {}",
            parts.len()
        ));
    }
    let pair = |text: &str, what: &str| -> Result<(u64, u64), String> {
        let values: Vec<&str> = text.split(',').collect();
        if values.len() != 2 {
            return Err(format!(
                "the {what} field `{text}` must be 2 values (a count and links), got {}",
                values.len()
            ));
        }
        Ok((count(values[0], &format!("the number of {what}"))?, count(values[1], &format!("the {what} links"))?))
    };
    let (groups, blue) = pair(parts[0], "groups")?;
    let (chassis, black) = pair(parts[1], "chassis")?;
    let (blades, green) = pair(parts[2], "routers")?;
    let nodes = count(parts[3], "the number of nodes per router")?;
    bounded_product([groups, chassis, blades, nodes])?;
    if groups > 1 && groups > blades {
        return Err(format!(
            "{groups} groups but {blades} routers per chassis: SimGrid's minimal routing reaches group g through \
             router g of a chassis, so there must be at least as many routers per chassis as groups"
        ));
    }
    Ok(Dragonfly { groups, blue, chassis, black, blades, green, nodes })
}

impl Dragonfly {
    fn wire(&self, wiring: &mut Wiring) {
        let (groups, chassis, blades) = (self.groups as usize, self.chassis as usize, self.blades as usize);
        let router = |group: usize, chassis_index: usize, blade: usize| {
            WiredEnd::Switch((group * chassis + chassis_index) * blades + blade)
        };
        for group in 0..groups {
            for chassis_index in 0..chassis {
                for blade in 0..blades {
                    wiring.switches.push(format!("router_{group}_{chassis_index}_{blade}"));
                }
            }
        }
        let nodes = self.nodes as usize;
        for host in 0..groups * chassis * blades * nodes {
            let router_index = host / nodes;
            wiring.link(WiredEnd::Host(host), WiredEnd::Switch(router_index), "terminal", 1);
        }
        for group in 0..groups {
            for chassis_index in 0..chassis {
                for j in 0..blades {
                    for k in j + 1..blades {
                        wiring.link(
                            router(group, chassis_index, j),
                            router(group, chassis_index, k),
                            "green",
                            self.green,
                        );
                    }
                }
            }
        }
        for group in 0..groups {
            for j in 0..chassis {
                for k in j + 1..chassis {
                    for blade in 0..blades {
                        wiring.link(router(group, j, blade), router(group, k, blade), "black", self.black);
                    }
                }
            }
        }
        let per_group = chassis * blades;
        for i in 0..groups {
            for j in i + 1..groups {
                wiring.link(
                    WiredEnd::Switch(i * per_group + j),
                    WiredEnd::Switch(j * per_group + i),
                    "blue",
                    self.blue,
                );
            }
        }
    }
}

/// SimGrid's torus `d1,d2,…`.
struct Torus {
    dimensions: Vec<u64>,
}

fn parse_torus(parameters: &str) -> Result<Torus, String> {
    let dimensions = parameters.split(',').map(|value| count(value, "a dimension")).collect::<Result<Vec<_>, _>>()?;
    bounded_product(dimensions.iter().copied())?;
    Ok(Torus { dimensions })
}

impl Torus {
    fn wire(&self, wiring: &mut Wiring) {
        let hosts: u64 = self.dimensions.iter().product();
        for rank in 0..hosts {
            let mut stride = 1;
            for &size in &self.dimensions {
                let neighbour =
                    if (rank / stride) % size == size - 1 { rank - (size - 1) * stride } else { rank + stride };
                if neighbour != rank {
                    wiring.link(WiredEnd::Host(rank as usize), WiredEnd::Host(neighbour as usize), "torus", 1);
                }
                stride *= size;
            }
        }
    }
}

/// SimGrid's radicals: `"1-4,6,9-11"` is 1, 2, 3, 4, 6, 9, 10, 11 (an empty range when
/// the end is below the start, as SimGrid's loop gives).
fn parse_radicals(text: &str) -> Result<Vec<i64>, String> {
    let mut radicals = Vec::new();
    for group in text.split(',') {
        let ends: Vec<&str> = group.split('-').collect();
        let number = |end: &str| end.trim().parse::<i64>().map_err(|_| format!("`{end}` in `{group}` is not an int"));
        let (start, end) = match ends.as_slice() {
            [single] => (number(single)?, number(single)?),
            [start, end] => (number(start)?, number(end)?),
            _ => return Err(format!("malformed radical `{group}`")),
        };
        if end.saturating_sub(start).max(0) as u64 >= MAX_CLUSTER_VERTICES {
            return Err(format!("the range `{group}` names more than {MAX_CLUSTER_VERTICES} hosts"));
        }
        radicals.extend(start..=end);
    }
    Ok(radicals)
}

/// A number and SimGrid's unit, scaled: the longest prefix that is a number (as
/// `strtod` reads it), then a unit of `units` (none: `default_unit`).
fn parse_with_unit(text: &str, units: &[(&str, f64)], default_unit: &str) -> Result<f64, String> {
    let text = text.trim_start();
    let number_end = (1..=text.len())
        .rev()
        .filter(|&end| text.is_char_boundary(end))
        .find(|&end| text[..end].parse::<f64>().is_ok())
        .ok_or_else(|| format!("cannot parse number `{text}`"))?;
    let value: f64 = text[..number_end].parse().expect("a number, checked above");
    let unit = match &text[number_end..] {
        "" => default_unit,
        unit => unit,
    };
    let scale = units
        .iter()
        .find(|(known, _)| *known == unit)
        .map(|(_, scale)| *scale)
        .ok_or_else(|| format!("unknown unit `{unit}` in `{text}`"))?;
    Ok(value * scale)
}

const DECIMAL_PREFIXES: [&str; 8] = ["k", "M", "G", "T", "P", "E", "Z", "Y"];
const BINARY_PREFIXES: [&str; 8] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"];

/// A bandwidth in bytes per second, as SimGrid's `xbt_parse_get_bandwidth` reads it.
pub fn parse_bandwidth(text: &str) -> Result<f64, String> {
    let mut units: Vec<(String, f64)> = Vec::new();
    for (unit, scale) in [("bps", 0.125), ("Bps", 1.0)] {
        units.push((unit.to_owned(), scale));
        for (prefixes, step) in [(DECIMAL_PREFIXES, 1000.0), (BINARY_PREFIXES, 1024.0)] {
            let mut value = scale;
            for prefix in prefixes {
                value *= step;
                units.push((format!("{prefix}{unit}"), value));
            }
        }
    }
    let units: Vec<(&str, f64)> = units.iter().map(|(unit, scale)| (unit.as_str(), *scale)).collect();
    parse_with_unit(text, &units, "Bps")
}

/// A time in seconds, as SimGrid's `xbt_parse_get_time` reads it (`m` is a minute).
pub fn parse_time(text: &str) -> Result<f64, String> {
    const UNITS: [(&str, f64); 9] = [
        ("w", 7.0 * 24.0 * 3600.0),
        ("d", 24.0 * 3600.0),
        ("h", 3600.0),
        ("m", 60.0),
        ("s", 1.0),
        ("ms", 1e-3),
        ("us", 1e-6),
        ("ns", 1e-9),
        ("ps", 1e-12),
    ];
    parse_with_unit(text, &UNITS, "s")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn platform(body: &str) -> String {
        format!(
            "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n<platform version=\"4.1\">\n{body}\n</platform>\n"
        )
    }

    fn cluster(topology: &str, parameters: &str, radical: &str) -> String {
        platform(&format!(
            "<cluster id=\"c\" prefix=\"n\" suffix=\"\" radical=\"{radical}\" speed=\"1Gf\" bw=\"125MBps\" lat=\"50us\" \
             topology=\"{topology}\" topo_parameters=\"{parameters}\"/>"
        ))
    }

    fn refused(text: &str) -> String {
        parse_platform(text).and_then(|description| description.build()).expect_err("refused").to_string()
    }

    fn links_of(description: &NetworkDescription, class: &str) -> usize {
        description.links.iter().filter(|link| link.class == class).count()
    }

    #[test]
    fn bandwidths_and_times_read_as_simgrid_reads_them() {
        for (text, bytes_per_second) in [
            ("125MBps", 125e6),
            ("10Gbps", 1.25e9),
            ("1GiBps", 1073741824.0),
            ("8bps", 1.0),
            ("1kBps", 1e3),
            ("1KiBps", 1024.0),
            ("1e3", 1e3),
            ("2.5EBps", 2.5e18),
        ] {
            assert_eq!(parse_bandwidth(text), Ok(bytes_per_second), "{text}");
        }
        for (text, seconds) in
            [("50us", 50e-6), ("1ms", 1e-3), ("2m", 120.0), ("0", 0.0), ("3ps", 3e-12), ("1.5s", 1.5)]
        {
            // As SimGrid: the number times the unit's scale (50 x 1e-6 is not 5e-5 exactly).
            let read = parse_time(text).unwrap();
            assert!((read - seconds).abs() <= 1e-12 * seconds, "{text}: {read}");
        }
        assert_eq!(parse_bandwidth("10 Gbps"), Err("unknown unit ` Gbps` in `10 Gbps`".to_owned()));
        assert_eq!(parse_time("fast"), Err("cannot parse number `fast`".to_owned()));
    }

    #[test]
    fn physics_map_bw_to_tw_and_lat_to_th() {
        let physics = LinkPhysics { bandwidth: 125e6, latency: 50e-6 }.class("private".into());
        assert_eq!((physics.ts_ns, physics.th_ns, physics.tw_ps), (None, Some(50_000), Some(8000)));
        let fast = LinkPhysics { bandwidth: parse_bandwidth("10Gbps").unwrap(), latency: 0.0 }.class("x".into());
        assert_eq!(fast.tw_ps, Some(800));
    }

    #[test]
    fn radicals_are_ranges_and_singles() {
        assert_eq!(parse_radicals("1-4,6,9-11"), Ok(vec![1, 2, 3, 4, 6, 9, 10, 11]));
        assert_eq!(parse_radicals("5-3"), Ok(vec![]));
        assert!(parse_radicals("1-2-3").unwrap_err().contains("malformed radical"));
        assert!(parse_radicals("a-3").unwrap_err().contains("not an int"));
    }

    #[test]
    fn a_flat_cluster_is_a_star_on_its_router() {
        let description = parse_platform(&platform(
            "<zone id=\"w\" routing=\"Full\"><cluster id=\"c\" prefix=\"node-\" suffix=\".org\" radical=\"0-2,7\" \
             speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\"/></zone>",
        ))
        .unwrap();
        assert_eq!(description.endpoints, ["node-0.org", "node-1.org", "node-2.org", "node-7.org"]);
        assert_eq!(description.switches, ["node-c_router.org"]);
        assert_eq!(links_of(&description, "private"), 4);
        let graph = description.build().unwrap();
        assert_eq!(graph.route(0, 3), vec![0, 4, 3]);
    }

    #[test]
    fn the_k_port_fat_tree_has_its_textbook_counts() {
        // Al-Fares et al.'s k = 4 three-level fat-tree as an XGFT: 16 hosts, 20 switches,
        // 48 links.
        let description = parse_platform(&cluster("FAT_TREE", "3;2,2,4;1,2,2;1,1,1", "0-15")).unwrap();
        assert_eq!((description.endpoints.len(), description.switches.len(), description.links.len()), (16, 20, 48));
        assert_eq!(
            (links_of(&description, "level1"), links_of(&description, "level2"), links_of(&description, "level3")),
            (16, 16, 16)
        );
        let graph = description.build().unwrap();
        // Hosts 0 and 1 share an edge switch; 0 and 2 a pod; 0 and 15 only the core.
        assert_eq!((graph.hops(0, 1), graph.hops(0, 2), graph.hops(0, 15)), (2, 4, 6));
    }

    #[test]
    fn a_fat_tree_keeps_its_parallel_links() {
        // SimGrid's example shape: 4 leaves of 4 hosts, 2 cores, 2 cables leaf-core.
        let graph = parse_platform(&cluster("FAT_TREE", "2;4,4;1,2;1,2", "0-15")).unwrap().build().unwrap();
        assert_eq!((graph.endpoints(), graph.switches().len(), graph.links().len()), (16, 6, 16 + 16));
        let (leaf, core) =
            (graph.vertex_by_name("c_switch_1_0").unwrap(), graph.vertex_by_name("c_switch_2_0").unwrap());
        assert_eq!(graph.parallel_links(leaf, core), 2);
    }

    #[test]
    fn a_dragonfly_has_its_local_and_global_links() {
        // 3 groups of 2 chassis of 3 routers of 1 host.
        let description = parse_platform(&cluster("DRAGONFLY", "3,2;2,1;3,2;1", "0-17")).unwrap();
        assert_eq!((description.endpoints.len(), description.switches.len()), (18, 18));
        // terminal: one a host; green: 3 pairs a chassis x 6 chassis; black: one a blade
        // x 3 blades x 3 groups; blue: one a pair of groups.
        assert_eq!(["terminal", "green", "black", "blue"].map(|class| links_of(&description, class)), [18, 18, 9, 3]);
        let blue = description.classes.iter().find(|class| class.name == "blue").unwrap();
        assert_eq!(blue.tw_ps, Some(4000), "two links bundled: twice the bandwidth");
        let graph = description.build().unwrap();
        let (router_0_0_1, router_1_0_0) =
            (graph.vertex_by_name("c_router_0_0_1").unwrap(), graph.vertex_by_name("c_router_1_0_0").unwrap());
        assert_eq!(graph.class_of(router_0_0_1, router_1_0_0), graph.class_by_name("blue"));
    }

    #[test]
    fn a_torus_links_every_host_to_its_next_in_each_dimension() {
        let description = parse_platform(&cluster("TORUS", "3,2,1", "0-5")).unwrap();
        assert!(description.switches.is_empty());
        // Dimension 3: 6 links; dimension 2: two parallel links a pair (6); dimension 1: none.
        assert_eq!(description.links.len(), 12);
        let graph = description.build().unwrap();
        assert_eq!((graph.parallel_links(0, 3), graph.hops(0, 5)), (2, 2));
    }

    #[test]
    fn topo_parameters_simgrid_refuses_are_refused() {
        for (topology, parameters, expected) in [
            ("FAT_TREE", "2;4,4;1,2", "got 3 fields"),
            ("FAT_TREE", "2;4,4,4;1,2;1,2", "2 levels but the child count list has 3 values"),
            ("FAT_TREE", "2;4,4;1,0;1,2", "parent count must be greater than 0"),
            ("FAT_TREE", "0;;;", "the number of levels must be greater than 0"),
            ("FAT_TREE", "x;4;1;1", "the number of levels `x` is not a whole number"),
            ("DRAGONFLY", "2,1;2,1;2,1", "4 fields, got 3"),
            ("DRAGONFLY", "2,1;2;2,1;2", "the chassis field `2` must be 2 values"),
            ("DRAGONFLY", "2,0;2,1;2,1;2", "the groups links must be greater than 0"),
            ("DRAGONFLY", "3,1;1,1;2,1;1", "3 groups but 2 routers per chassis"),
            ("TORUS", "3,0,2", "a dimension must be greater than 0"),
            ("TORUS", "", "a dimension `` is not a whole number"),
        ] {
            let message = refused(&cluster(topology, parameters, "0-63"));
            assert!(
                message.starts_with(&format!(
                    "SimGrid platform, line 4: cluster `c`: topo_parameters `{parameters}` of {topology}: "
                )),
                "{message}"
            );
            assert!(message.contains(expected), "{topology} {parameters}: {message}");
        }
        let message = refused(&cluster("TORUS", "4,4", "0-14"));
        assert_eq!(
            message,
            "SimGrid platform, line 4: cluster `c`: its TORUS has 16 hosts but the radical gives only 15 names"
        );
    }

    #[test]
    fn unknown_names_are_refused() {
        let route = |gateway: &str, link: &str| {
            platform(&format!(
                "<zone id=\"w\" routing=\"Full\">\
                 <cluster id=\"a\" prefix=\"a\" suffix=\"\" radical=\"0-1\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\"/>\
                 <cluster id=\"b\" prefix=\"b\" suffix=\"\" radical=\"0-1\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\"/>\
                 <link id=\"up\" bandwidth=\"1GBps\" latency=\"1ms\"/>\
                 <zoneRoute src=\"a\" dst=\"b\" gw_src=\"{gateway}\" gw_dst=\"bb_router\"><link_ctn id=\"{link}\"/></zoneRoute>\
                 </zone>"
            ))
        };
        assert!(parse_platform(&route("aa_router", "up")).unwrap().build().is_ok());
        assert_eq!(
            refused(&route("aa_ruoter", "up")),
            "SimGrid platform, line 4: the route from `aa_ruoter` to `bb_router` names `aa_ruoter`, which is no host or router"
        );
        assert_eq!(
            refused(&route("aa_router", "down")),
            "SimGrid platform, line 4: the route from `aa_router` to `bb_router` names the link `down`, which is not declared"
        );
        assert!(refused(&cluster("HYPERCUBE", "", "0-1")).contains("topology `HYPERCUBE`"));
        assert!(
            refused(&platform("<zone id=\"w\" routing=\"Full\"><cabinet id=\"x\"/></zone>"))
                .contains("<cabinet> is not read")
        );
    }

    #[test]
    fn clusters_without_a_route_between_them_are_disconnected() {
        let text = platform(
            "<zone id=\"w\" routing=\"Full\">\
             <cluster id=\"a\" prefix=\"a\" suffix=\"\" radical=\"0-1\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\"/>\
             <cluster id=\"b\" prefix=\"b\" suffix=\"\" radical=\"0-1\" speed=\"1Gf\" bw=\"1GBps\" lat=\"1us\"/></zone>",
        );
        assert_eq!(refused(&text), "the network is disconnected: endpoint `b0` cannot be reached from endpoint `a0`");
        // With several clusters, classes are named after their cluster.
        let description = parse_platform(&text).unwrap();
        assert_eq!(
            description.classes.iter().map(|class| class.name.as_str()).collect::<Vec<_>>(),
            ["a.private", "b.private"]
        );
    }

    #[test]
    fn bad_physics_and_bad_xml_are_refused() {
        let with = |bw: &str, lat: &str| {
            platform(&format!(
                "<cluster id=\"c\" prefix=\"n\" suffix=\"\" radical=\"0-1\" speed=\"1Gf\" bw=\"{bw}\" lat=\"{lat}\"/>"
            ))
        };
        assert!(refused(&with("0Bps", "1us")).contains("the bandwidth must be above 0"));
        assert!(refused(&with("1GBps", "-1us")).contains("the latency must not be negative"));
        assert!(refused(&with("1GBps", "1 lightyear")).contains("lat: unknown unit"));
        assert!(refused("<platform version=\"4.1\"><cluster").starts_with("SimGrid platform: "));
        assert!(refused("<platform version=\"3\"/>").contains("only version 4"));
    }
}
