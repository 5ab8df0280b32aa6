//! `topocomm topology ... --svg FILE`: the wiring as a picture. A ring is a circle; a
//! fully connected network is a circle with every chord; a mesh or torus is a grid
//! whose wraparound links are curves that leave the grid's ends; a 3-D mesh or torus
//! is a stack of such grids (layers, one per first coordinate) in oblique view; a
//! hypercube of up to 64 nodes is the usual projection (square, cube, two cubes, rows
//! and blocks of cubes) with each node's binary label, and a larger one a circle in
//! Gray-code order, so that
//! neighbours on the circle are neighbours in the cube. The switched families are laid
//! out by [`switched`]: a fat-tree in its levels, a dragonfly's groups on a circle, a
//! cluster's machines as boxes holding their cores; a network read from a file in rows
//! by hops from the ranks. Switches are squares. Links are coloured by dimension or
//! class where that helps. Every link of [`Topology::edges`] is drawn exactly once, and
//! every vertex is labelled with its id. [`layout`] is the picture as data, which the
//! lab's pages draw and animate in the browser.

mod switched;

use std::f64::consts::PI;
use std::path::Path;

use serde::Serialize;
use topocomm_proto::topology::NodeId;
use topocomm_proto::{Topology, TopologyKind};

use crate::render::picture::{self, Svg, colour, n};
use crate::render::topology_view::TopologyArgs;

/// Writes the picture `args.svg` asks for, if it asks for one.
pub fn write_requested(args: &TopologyArgs) -> anyhow::Result<()> {
    let Some(path) = &args.svg else { return Ok(()) };
    let topology = args.shape.topology_of(args.nodes)?;
    write(&topology, path)?;
    eprintln!("wrote the picture of the {topology} to {}", path.display());
    Ok(())
}

/// Writes the picture of `topology` to `path` (`.svg` or `.png`).
pub fn write(topology: &Topology, path: &Path) -> anyhow::Result<()> {
    picture::Format::of(path)?;
    picture::save(&svg(topology), path)
}

/// Radius of a node's disc.
const NODE_R: f64 = 15.0;
/// Room around the drawing (curves and labels live there).
const MARGIN: f64 = 70.0;
/// Room above the drawing for the title.
const HEADER: f64 = 64.0;

/// How one link is drawn.
enum Shape {
    Line,
    /// A circular arc of the given radius (ring links along the circle).
    Arc(f64),
    /// A cubic curve with these two control points.
    Curve((f64, f64), (f64, f64)),
}

/// A link to draw: its ends, its shape, its colour and legend entry.
struct Link {
    a: NodeId,
    b: NodeId,
    shape: Shape,
    /// Index into the legend.
    kind: usize,
}

/// Node positions, links and the legend's entries (colour, text, dashed).
struct Drawing {
    at: Vec<(f64, f64)>,
    links: Vec<Link>,
    legend: Vec<(&'static str, String, bool)>,
    /// Binary labels beside the nodes (small hypercubes).
    binary: Option<usize>,
    /// Outlines drawn under the nodes (a fat-tree's pods, a dragonfly's groups, a
    /// cluster's machines), in the drawing's coordinates until [`layout`] places them.
    regions: Vec<PlacedRegion>,
}

/// A node placed on the picture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacedNode {
    pub id: NodeId,
    pub x: f64,
    pub y: f64,
    /// A switch (forwards only), drawn as a square; a node runs a rank.
    pub switch: bool,
}

/// A link placed on the picture: its SVG path from `from` to `to`, its colour, and
/// whether it is dashed (a wraparound link).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacedLink {
    pub from: NodeId,
    pub to: NodeId,
    pub path: String,
    pub colour: &'static str,
    pub dashed: bool,
}

/// One entry of the legend, at the left end of its sample line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LegendEntry {
    pub colour: &'static str,
    pub text: String,
    pub dashed: bool,
    pub x: f64,
    pub y: f64,
}

/// An outline placed on the picture, under the nodes: a fat-tree's pod or a cluster's
/// machine as a box (`round` false), a dragonfly's group as a ring (`round`: the ellipse
/// inscribed in the box), with the vertices it holds and its label, centred on `label_x`
/// with its baseline at `label_y`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacedRegion {
    pub label: String,
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    pub round: bool,
    pub members: Vec<NodeId>,
    pub label_x: f64,
    pub label_y: f64,
}

/// The picture of a topology as data, in the picture's coordinates: what [`svg`] draws
/// and what the lab's page draws (and animates) in the browser.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layout {
    pub width: f64,
    pub height: f64,
    pub title: String,
    pub subtitle: String,
    pub node_radius: f64,
    pub nodes: Vec<PlacedNode>,
    /// Every link of [`Topology::edges`], once.
    pub links: Vec<PlacedLink>,
    pub legend: Vec<LegendEntry>,
    /// Digits of the binary labels beside the nodes (small hypercubes).
    pub binary_digits: Option<usize>,
    /// Outlines under the nodes: a fat-tree's pods, a dragonfly's groups, a cluster's
    /// machines.
    pub regions: Vec<PlacedRegion>,
}

/// Where everything of `topology`'s picture goes.
pub fn layout(topology: &Topology) -> Layout {
    let mut drawing = match topology.kind() {
        TopologyKind::Ring => circle(topology, true),
        TopologyKind::Full => circle(topology, false),
        TopologyKind::Mesh | TopologyKind::Torus => grid(topology),
        TopologyKind::Mesh3d | TopologyKind::Torus3d => layers(topology),
        TopologyKind::Hypercube if topology.dimension() <= MOST_CUBE_DIMENSIONS => cube(topology),
        TopologyKind::Hypercube => gray_circle(topology),
        TopologyKind::FatTree => switched::fat_tree(topology),
        TopologyKind::Dragonfly => switched::dragonfly(topology),
        TopologyKind::Cluster => switched::cluster(topology),
        TopologyKind::Graph => levels(topology),
    };
    // Legend items, laid out in lines under the drawing.
    let corners =
        drawing.regions.iter().flat_map(|r| [(r.x, r.y), (r.x + r.width, r.y + r.height), (r.label_x, r.label_y)]);
    let extent: Vec<(f64, f64)> = drawing.at.iter().copied().chain(corners).collect();
    let (min_x, min_y) = extent.iter().fold((f64::MAX, f64::MAX), |(x, y), p| (x.min(p.0), y.min(p.1)));
    let (max_x, max_y) = extent.iter().fold((f64::MIN, f64::MIN), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let title_width = topology.to_string().chars().count() as f64 * 12.0 + 40.0;
    let width = (max_x - min_x + 2.0 * MARGIN).max(460.0).max(title_width);
    let item_width = |text: &str| 50.0 + text.chars().count() as f64 * 7.4;
    let mut legend_at = Vec::new();
    let (mut lx, mut line) = (20.0, 0usize);
    for (_, text, _) in &drawing.legend {
        if lx > 20.0 && lx + item_width(text) > width - 10.0 {
            (lx, line) = (20.0, line + 1);
        }
        legend_at.push((lx, line));
        lx += item_width(text);
    }
    let legend_height = if drawing.legend.is_empty() { 0.0 } else { 24.0 * (line + 1) as f64 + 8.0 };
    let height = max_y - min_y + 2.0 * MARGIN + HEADER + legend_height;
    // Centre the drawing across the width, below the header.
    let (dx, dy) = ((width - (max_x - min_x)) / 2.0 - min_x, MARGIN + HEADER - min_y);
    let shift = |(x, y): (f64, f64)| (x + dx, y + dy);
    for p in &mut drawing.at {
        *p = shift(*p);
    }
    for region in &mut drawing.regions {
        ((region.x, region.y), (region.label_x, region.label_y)) =
            (shift((region.x, region.y)), shift((region.label_x, region.label_y)));
    }
    let note = match topology.kind() {
        _ if topology.switches() > 0 => "; squares are switches",
        TopologyKind::Hypercube => "; bit k of an id is its coordinate in dimension k",
        TopologyKind::Ring | TopologyKind::Full => "",
        _ => "; ids row-major (the last coordinate varies fastest)",
    };
    let subtitle = format!(
        "{}, diameter {}{note}",
        crate::render::quantity::count(topology.edges().len() as u64, "link"),
        topology.diameter()
    );
    let links = drawing
        .links
        .iter()
        .map(|link| {
            let (a, b) = (drawing.at[link.a], drawing.at[link.b]);
            let path = match link.shape {
                Shape::Line => format!("M{},{} L{},{}", n(a.0), n(a.1), n(b.0), n(b.1)),
                Shape::Arc(r) => format!("M{},{} A{},{} 0 0 1 {},{}", n(a.0), n(a.1), n(r), n(r), n(b.0), n(b.1)),
                Shape::Curve(c1, c2) => {
                    let (c1, c2) = (shift(c1), shift(c2));
                    format!(
                        "M{},{} C{},{} {},{} {},{}",
                        n(a.0),
                        n(a.1),
                        n(c1.0),
                        n(c1.1),
                        n(c2.0),
                        n(c2.1),
                        n(b.0),
                        n(b.1)
                    )
                }
            };
            let (colour, _, dashed) = drawing.legend.get(link.kind).cloned().unwrap_or(("#555", String::new(), false));
            PlacedLink { from: link.a, to: link.b, path, colour, dashed }
        })
        .collect();
    let legend_top = height - legend_height + 4.0;
    let legend = drawing
        .legend
        .iter()
        .zip(legend_at)
        .map(|((colour, text, dashed), (x, line))| LegendEntry {
            colour,
            text: text.clone(),
            dashed: *dashed,
            x,
            y: legend_top + 24.0 * line as f64 + 8.0,
        })
        .collect();
    Layout {
        width,
        height,
        title: topology.to_string(),
        subtitle,
        node_radius: NODE_R,
        nodes: drawing
            .at
            .iter()
            .enumerate()
            .map(|(id, &(x, y))| PlacedNode { id, x, y, switch: topology.is_switch(id) })
            .collect(),
        links,
        legend,
        binary_digits: drawing.binary,
        regions: drawing.regions,
    }
}

/// The picture as SVG text. Elements carry classes: `node` (one per node), `edge`
/// (one per link; `wrap` too for wraparound links), `legend`.
pub fn svg(topology: &Topology) -> String {
    let layout = layout(topology);
    let mut svg = Svg::new(layout.width, layout.height);
    svg.text((20.0, 32.0), 19.0, &layout.title, r##"font-weight="bold" fill="#222""##);
    svg.text((20.0, 52.0), 12.5, &layout.subtitle, r##"fill="#555""##);
    for region in &layout.regions {
        svg.open(r#"class="region""#);
        let outline = r##"fill="#f6f6f2" stroke="#b9b2a0" stroke-width="1.2""##;
        if region.round {
            let (rx, ry) = (region.width / 2.0, region.height / 2.0);
            let (cx, cy) = (region.x + rx, region.y + ry);
            svg.raw(&format!(r#"<ellipse cx="{}" cy="{}" rx="{}" ry="{}" {outline}/>"#, n(cx), n(cy), n(rx), n(ry)));
        } else {
            svg.raw(&format!(
                r#"<rect x="{}" y="{}" width="{}" height="{}" rx="8" {outline}/>"#,
                n(region.x),
                n(region.y),
                n(region.width),
                n(region.height)
            ));
        }
        svg.text((region.label_x, region.label_y), 11.5, &region.label, r##"text-anchor="middle" fill="#6b6250""##);
        svg.close();
    }
    for link in &layout.links {
        let class = if link.dashed { "edge wrap" } else { "edge" };
        let dash = if link.dashed { r#" stroke-dasharray="7 4""# } else { "" };
        svg.path(
            &link.path,
            &format!(r#"class="{class}" fill="none" stroke="{}" stroke-width="2"{dash}"#, link.colour),
        );
    }
    let font = if topology.p() > 99 { 10.0 } else { 12.5 };
    for node in &layout.nodes {
        let (id, x, y) = (node.id, node.x, node.y);
        if node.switch {
            svg.open(r#"class="switch""#);
            let side = 2.0 * NODE_R * 0.85;
            svg.path(
                &format!("M{},{} h{} v{} h-{} Z", n(x - side / 2.0), n(y - side / 2.0), n(side), n(side), n(side)),
                r##"fill="#f3efe6" stroke="#6b5b3a" stroke-width="1.4""##,
            );
            svg.text((x, y + 3.6), 10.0, &id.to_string(), r##"text-anchor="middle" fill="#4a3f28""##);
            svg.close();
            continue;
        }
        svg.open(r#"class="node""#);
        svg.circle((x, y), NODE_R, r##"fill="#eaf1fb" stroke="#1f4e79" stroke-width="1.6""##);
        svg.text(
            (x, y + font * 0.36),
            font,
            &id.to_string(),
            r##"text-anchor="middle" font-weight="bold" fill="#10304f""##,
        );
        if let Some(bits) = layout.binary_digits {
            let label = format!("({id:0bits$b})");
            svg.text((x + NODE_R + 3.0, y - NODE_R + 1.0), 11.0, &label, r##"fill="#555""##);
        }
        svg.close();
    }
    for entry in &layout.legend {
        let (x, y) = (entry.x, entry.y);
        svg.open(r#"class="legend""#);
        let dash = if entry.dashed { r#" stroke-dasharray="7 4""# } else { "" };
        svg.line((x, y), (x + 30.0, y), &format!(r#"stroke="{}" stroke-width="2"{dash}"#, entry.colour));
        svg.text((x + 36.0, y + 4.5), 12.5, &entry.text, r##"fill="#222""##);
        svg.close();
    }
    svg.finish("")
}

/// A network read from a file, in rows: the ranks at the bottom, each switch as many
/// rows up as it is hops from the nearest rank, each row in id order and centred; links
/// coloured by class.
fn levels(topology: &Topology) -> Drawing {
    let n = topology.vertices();
    let mut level = vec![usize::MAX; n];
    let mut queue: std::collections::VecDeque<NodeId> = (0..topology.p()).collect();
    for &rank in &queue {
        level[rank] = 0;
    }
    while let Some(at) = queue.pop_front() {
        for next in topology.neighbours(at) {
            if level[next] == usize::MAX {
                level[next] = level[at] + 1;
                queue.push_back(next);
            }
        }
    }
    let rows = level.iter().copied().max().unwrap_or(0) + 1;
    let mut row: Vec<Vec<NodeId>> = vec![Vec::new(); rows];
    for (v, &l) in level.iter().enumerate() {
        row[l].push(v);
    }
    let widest = row.iter().map(Vec::len).max().unwrap_or(1) as f64;
    let spacing = 44.0;
    let mut at = vec![(0.0, 0.0); n];
    for (l, members) in row.iter().enumerate() {
        let span = (widest - 1.0) * spacing;
        let step = if members.len() > 1 { span / (members.len() - 1) as f64 } else { 0.0 };
        let start = if members.len() > 1 { 0.0 } else { span / 2.0 };
        for (i, &v) in members.iter().enumerate() {
            at[v] = (start + i as f64 * step, (rows - 1 - l) as f64 * 110.0);
        }
    }
    Drawing {
        at,
        links: switched::class_links(topology),
        legend: switched::class_legend(topology),
        binary: None,
        regions: Vec::new(),
    }
}

/// Ring (links along the circle) or fully connected (every chord), ids clockwise from
/// the top.
fn circle(topology: &Topology, ring: bool) -> Drawing {
    let p = topology.p();
    let radius = (p as f64 * 56.0 / (2.0 * PI)).max(if ring { 120.0 } else { 150.0 });
    let at = (0..p).map(|i| on_circle(radius, i, p)).collect();
    let links = topology
        .edges()
        .into_iter()
        .map(|(a, b)| {
            // Along the circle, clockwise from the lower id (or from p-1 round to 0).
            let (a, b) = if ring && b == (a + 1) % p {
                (a, b)
            } else if ring {
                (b, a)
            } else {
                (a, b)
            };
            Link { a, b, shape: if ring && p > 2 { Shape::Arc(radius) } else { Shape::Line }, kind: 0 }
        })
        .collect();
    Drawing { at, links, legend: Vec::new(), binary: None, regions: Vec::new() }
}

fn on_circle(radius: f64, i: usize, p: usize) -> (f64, f64) {
    let angle = -PI / 2.0 + 2.0 * PI * i as f64 / p as f64;
    (radius * angle.cos(), radius * angle.sin())
}

/// Which dimension a link runs along, and whether it wraps around (its ends differ by
/// extent - 1 there, on an extent of more than 2).
fn along(topology: &Topology, a: NodeId, b: NodeId) -> (usize, bool) {
    let (ca, cb) = (topology.coords(a), topology.coords(b));
    let k = (0..ca.len()).find(|&k| ca[k] != cb[k]).unwrap_or(0);
    let extent = topology.dims()[k];
    (k, extent > 2 && ca[k].abs_diff(cb[k]) == extent - 1)
}

/// A 2-D mesh or torus: rows down, columns across; a row's wraparound link leaves its
/// last node to the right and swings back over the row into its first node from the
/// left; a column's leaves downwards and swings back beside the column.
fn grid(topology: &Topology) -> Drawing {
    let (rows, cols) = (topology.dims()[0], topology.dims()[1]);
    let s = if rows.max(cols) > 8 { 70.0 } else { 90.0 };
    let at: Vec<(f64, f64)> = (0..topology.p())
        .map(|id| {
            let c = topology.coords(id);
            (c[1] as f64 * s, c[0] as f64 * s)
        })
        .collect();
    let mut links = Vec::new();
    for (a, b) in topology.edges() {
        let (k, wraps) = along(topology, a, b);
        if !wraps {
            links.push(Link { a, b, shape: Shape::Line, kind: 0 });
            continue;
        }
        // From the high end round to the low end.
        let (hi, lo) = if topology.coords(a)[k] > topology.coords(b)[k] { (a, b) } else { (b, a) };
        let (h, l) = (at[hi], at[lo]);
        let shape = if k == 1 {
            Shape::Curve((h.0 + 0.95 * s, h.1 - 0.45 * s), (l.0 - 0.95 * s, l.1 - 0.45 * s))
        } else {
            Shape::Curve((h.0 - 0.45 * s, h.1 + 0.95 * s), (l.0 - 0.45 * s, l.1 - 0.95 * s))
        };
        links.push(Link { a: hi, b: lo, shape, kind: 1 + k });
    }
    let mut legend = vec![("#555", "link".to_owned(), false)];
    if topology.kind() == TopologyKind::Torus {
        // Entry `kind` styles links of that kind: 1 + k wraps along dimension k
        // (dimension 0 runs down a column, dimension 1 along a row).
        legend.push((colour(1), "column wrap".to_owned(), true));
        legend.push((colour(2), "row wrap".to_owned(), true));
    }
    Drawing { at, links, legend, binary: None, regions: Vec::new() }
}

/// A 3-D mesh or torus as layers: layer `a` (the first coordinate) is a `b x c` grid
/// in oblique view (rows recede up and to the right), layers stacked downwards; links
/// between layers are vertical and lighter.
fn layers(topology: &Topology) -> Drawing {
    let rows = topology.dims()[1];
    let (sx, kx, ky) = (110.0, 48.0, 40.0);
    let layer_gap = (rows.saturating_sub(1)) as f64 * ky + 120.0;
    let at: Vec<(f64, f64)> = (0..topology.p())
        .map(|id| {
            let c = topology.coords(id);
            // Row b recedes: further rows sit up and to the right.
            let (a, b, col) = (c[0] as f64, (rows - 1 - c[1]) as f64, c[2] as f64);
            (col * sx + b * kx, a * layer_gap - b * ky)
        })
        .collect();
    let mut links = Vec::new();
    for (a, b) in topology.edges() {
        let (k, wraps) = along(topology, a, b);
        if !wraps {
            links.push(Link { a, b, shape: Shape::Line, kind: usize::from(k == 0) });
            continue;
        }
        let (hi, lo) = if topology.coords(a)[k] > topology.coords(b)[k] { (a, b) } else { (b, a) };
        let (h, l) = (at[hi], at[lo]);
        let shape = match k {
            // From the last layer down and round into the first layer from above.
            0 => Shape::Curve((h.0 - 0.6 * kx, h.1 + 0.45 * layer_gap), (l.0 - 0.6 * kx, l.1 - 0.45 * layer_gap)),
            // From the front row further forward, round into the back row from behind.
            1 => Shape::Curve((h.0 - 0.9 * kx + 0.3 * sx, h.1 + 0.9 * ky), (l.0 + 0.9 * kx + 0.3 * sx, l.1 - 0.9 * ky)),
            // From a row's last node out to the right, over the row into its first.
            _ => Shape::Curve((h.0 + 0.8 * sx, h.1 - 0.6 * ky), (l.0 - 0.8 * sx, l.1 - 0.6 * ky)),
        };
        links.push(Link { a: hi, b: lo, shape, kind: 2 + k });
    }
    let mut legend =
        vec![("#555", "link within a layer".to_owned(), false), ("#a9a9a9", "link between layers".to_owned(), false)];
    if topology.kind() == TopologyKind::Torus3d {
        for (k, name) in ["between layers", "along a layer's depth", "along a row"].iter().enumerate() {
            legend.push((colour(1 + k), format!("wraparound {name}"), true));
        }
    }
    Drawing { at, links, legend, binary: None, regions: Vec::new() }
}

/// The largest hypercube drawn as nested cubes (64 nodes); larger ones go on a circle.
const MOST_CUBE_DIMENSIONS: usize = 6;

/// A hypercube of up to 64 nodes as nested cubes: bit 0 across, bit 1 down, bit 2 into
/// the page (the back square up and to the right), bit 3 a second cube beside the
/// first, bit 4 a second row of cubes below, bit 5 a second block of cubes beside the
/// first block.
fn cube(topology: &Topology) -> Drawing {
    let d = topology.dimension();
    let s = 120.0;
    let at: Vec<(f64, f64)> = (0..topology.p())
        .map(|id| {
            let bit = |k: usize| ((id >> k) & 1) as f64;
            (
                bit(0) * s + bit(2) * 0.5 * s + bit(3) * 2.3 * s + bit(5) * 4.9 * s,
                bit(1) * s - bit(2) * 0.42 * s + bit(3) * 0.55 * s + bit(4) * 2.6 * s + bit(5) * 0.3 * s,
            )
        })
        .collect();
    let links = topology
        .edges()
        .into_iter()
        .map(|(a, b)| Link { a, b, shape: Shape::Line, kind: (a ^ b).trailing_zeros() as usize })
        .collect();
    Drawing { at, links, legend: dimension_legend(d), binary: Some(d.max(1)), regions: Vec::new() }
}

/// A hypercube of more than 64 nodes on a circle in Gray-code order: each run of 64
/// consecutive positions is a 6-dimensional sub-cube.
fn gray_circle(topology: &Topology) -> Drawing {
    let p = topology.p();
    let radius = (p as f64 * 48.0 / (2.0 * PI)).max(200.0);
    let mut at = vec![(0.0, 0.0); p];
    for position in 0..p {
        at[position ^ (position >> 1)] = on_circle(radius, position, p);
    }
    let links = topology
        .edges()
        .into_iter()
        .map(|(a, b)| Link { a, b, shape: Shape::Line, kind: (a ^ b).trailing_zeros() as usize })
        .collect();
    Drawing { at, links, legend: dimension_legend(topology.dimension()), binary: None, regions: Vec::new() }
}

fn dimension_legend(d: usize) -> Vec<(&'static str, String, bool)> {
    (0..d).map(|k| (colour(k), format!("dimension {k}"), false)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(kind: TopologyKind, p: usize, dims: Option<&[usize]>) -> (Topology, String) {
        let topology = Topology::new(kind, p, dims).unwrap();
        let text = svg(&topology);
        (topology, text)
    }

    fn count_class(text: &str, class: &str) -> usize {
        let doc = roxmltree::Document::parse(text).expect("valid XML");
        doc.descendants().filter(|n| n.attribute("class").is_some_and(|c| c.split(' ').any(|c| c == class))).count()
    }

    #[test]
    fn every_shape_draws_each_node_and_link_once() {
        let shapes: &[(TopologyKind, usize, Option<&[usize]>)] = &[
            (TopologyKind::Ring, 1, None),
            (TopologyKind::Ring, 2, None),
            (TopologyKind::Ring, 8, None),
            (TopologyKind::Full, 6, None),
            (TopologyKind::Mesh, 12, Some(&[3, 4])),
            (TopologyKind::Torus, 16, None),
            (TopologyKind::Torus, 8, Some(&[2, 4])),
            (TopologyKind::Mesh3d, 8, None),
            (TopologyKind::Torus3d, 27, None),
            (TopologyKind::Hypercube, 1, None),
            (TopologyKind::Hypercube, 16, None),
            (TopologyKind::Hypercube, 64, None),
        ];
        for &(kind, p, dims) in shapes {
            let (topology, text) = parsed(kind, p, dims);
            assert_eq!(count_class(&text, "node"), p, "{topology}");
            assert_eq!(count_class(&text, "edge"), topology.edges().len(), "{topology}");
            let doc = roxmltree::Document::parse(&text).unwrap();
            let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
            for id in 0..p {
                assert!(texts.contains(&id.to_string().as_str()), "{topology}: no label {id}");
            }
        }
    }

    #[test]
    fn hypercubes_up_to_64_nodes_are_nested_cubes_with_every_node_apart() {
        for p in [8, 16, 32, 64] {
            let topology = Topology::new(TopologyKind::Hypercube, p, None).unwrap();
            let layout = layout(&topology);
            assert_eq!(layout.binary_digits, Some(topology.dimension()), "binary labels: {topology}");
            for a in &layout.nodes {
                for b in layout.nodes.iter().filter(|b| b.id > a.id) {
                    let apart = (a.x - b.x).hypot(a.y - b.y);
                    assert!(apart > 3.0 * NODE_R, "{topology}: nodes {} and {} {apart} apart", a.id, b.id);
                }
            }
        }
        let beyond = layout(&Topology::new(TopologyKind::Hypercube, 128, None).unwrap());
        assert_eq!(beyond.binary_digits, None, "128 nodes go on the Gray-code circle");
    }

    #[test]
    fn every_link_of_the_layout_runs_from_its_first_node_to_its_second() {
        let at = |text: &str| -> (f64, f64) {
            let (x, y) = text.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        };
        for (kind, p) in [(TopologyKind::Ring, 8), (TopologyKind::Torus, 16), (TopologyKind::Torus3d, 27)] {
            let topology = Topology::new(kind, p, None).unwrap();
            let layout = layout(&topology);
            assert_eq!(layout.links.len(), topology.edges().len());
            for link in &layout.links {
                let words: Vec<&str> = link.path.split([' ', 'M', 'L', 'A', 'C']).filter(|w| w.contains(',')).collect();
                let (start, end) = (at(words[0]), at(words[words.len() - 1]));
                let (from, to) = (&layout.nodes[link.from], &layout.nodes[link.to]);
                assert!((start.0 - from.x).abs() < 0.01 && (start.1 - from.y).abs() < 0.01, "{topology}: {link:?}");
                assert!((end.0 - to.x).abs() < 0.01 && (end.1 - to.y).abs() < 0.01, "{topology}: {link:?}");
            }
        }
    }

    #[test]
    fn torus_wraparounds_are_marked() {
        let (_, text) = parsed(TopologyKind::Torus, 16, Some(&[4, 4]));
        assert_eq!(count_class(&text, "wrap"), 8);
        let (_, text) = parsed(TopologyKind::Mesh, 16, Some(&[4, 4]));
        assert_eq!(count_class(&text, "wrap"), 0);
        let (_, text) = parsed(TopologyKind::Torus3d, 27, None);
        assert_eq!(count_class(&text, "wrap"), 27);
    }

    #[test]
    fn a_png_of_the_picture_decodes() {
        let topology = Topology::new(TopologyKind::Hypercube, 8, None).unwrap();
        let dir = std::env::temp_dir().join(format!("topocomm-topology-{}", std::process::id()));
        let path = dir.join("cube.png");
        write(&topology, &path).unwrap();
        let decoder = ::png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let reader = decoder.read_info().unwrap();
        let doc_text = svg(&topology);
        let doc = roxmltree::Document::parse(&doc_text).unwrap();
        let root = doc.root_element();
        let width: f64 = root.attribute("width").unwrap().parse().unwrap();
        let height: f64 = root.attribute("height").unwrap().parse().unwrap();
        assert_eq!((reader.info().width, reader.info().height), (width.round() as u32, height.round() as u32));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
