//! Where the built-in switched families put their vertices: a fat-tree as its levels
//! (hosts at the bottom, then edge, aggregation and core switches, each pod's switches
//! over its hosts in the pod's box), a dragonfly as its groups on a circle (each group's
//! routers on a small ring, its hosts outside them, global links as chords between
//! groups), and a cluster as boxes, one a machine, holding its cores under the machine's
//! memory switch, round the cluster's switch. Each place is read from the vertex's family coordinates
//! (`Topology::coords`, as each family in `proto/src/network` gives them), so hosts
//! without a rank leave their place empty.

use std::f64::consts::PI;

use topocomm_proto::Topology;
use topocomm_proto::topology::NodeId;

use super::{Drawing, Link, NODE_R, PlacedRegion, Shape};
use crate::render::picture::colour;

/// Centre to centre between two neighbouring nodes of a row.
const SPACING: f64 = 40.0;
/// Centre to centre between two neighbouring routers of a dragonfly's group.
const ROUTER_SPACING: f64 = 52.0;
/// Between two levels of a fat-tree.
const LEVEL_GAP: f64 = 110.0;

/// A fat-tree of K-port switches (`dims = [K]`): the core switches on top, then each
/// pod's aggregation and edge switches, its hosts at the bottom; pods side by side, a
/// pod's edge switch over the hosts it links and aggregation switch `i` over edge switch
/// `i`, each pod outlined by a box; the core switches spread across the whole width
/// above the boxes (core `(i, j)` links aggregation switch `i` of every pod).
pub(super) fn fat_tree(topology: &Topology) -> Drawing {
    let half = topology.dims()[0] / 2;
    let pod_width = (half * half - 1) as f64 * SPACING;
    let pod_step = pod_width + 1.75 * SPACING;
    let width = (2 * half - 1) as f64 * pod_step + pod_width;
    let cores = half * half;
    let at = (0..topology.vertices())
        .map(|v| {
            let place = topology.coords(v);
            let (level, pod) = (place[0], place[1]);
            let x = match level {
                0 => pod as f64 * pod_step + (place[2] * half + place[3]) as f64 * SPACING,
                1 | 2 => pod as f64 * pod_step + (place[2] as f64 * half as f64 + (half - 1) as f64 / 2.0) * SPACING,
                _ if cores == 1 => width / 2.0,
                _ => (place[1] * half + place[2]) as f64 * width / (cores - 1) as f64,
            };
            (x, (3 - level) as f64 * LEVEL_GAP)
        })
        .collect();
    // Each pod outlined: its hosts, edge and aggregation switches.
    let mut members = vec![Vec::new(); 2 * half];
    for v in 0..topology.vertices() {
        // Below the core switches (level 3), every vertex is in its pod.
        if let [0..=2, pod, ..] = topology.coords(v)[..] {
            members[pod].push(v);
        }
    }
    let pad = NODE_R + 12.0;
    let regions = members
        .into_iter()
        .enumerate()
        .map(|(pod, members)| PlacedRegion {
            label: format!("pod {pod}"),
            x: pod as f64 * pod_step - pad,
            y: LEVEL_GAP - pad,
            width: pod_width + 2.0 * pad,
            height: 2.0 * LEVEL_GAP + 2.0 * pad,
            round: false,
            members,
            label_x: pod as f64 * pod_step + pod_width / 2.0,
            label_y: 3.0 * LEVEL_GAP + pad + 16.0,
        })
        .collect();
    Drawing { at, links: class_links(topology), legend: class_legend(topology), binary: None, regions }
}

/// A dragonfly `AxPxH` (`dims = [A, P, H]`, `A·H + 1` groups): group `G` at angle
/// `2πG/g` from the top, clockwise; its routers on a half ring facing outwards, router
/// `i` further clockwise than router `i - 1`; its hosts on an outer circle, router by
/// router in the same sense, so each router's hosts are just outside it. Each group is
/// outlined by a ring, labelled outside its hosts.
pub(super) fn dragonfly(topology: &Topology) -> Drawing {
    let (routers, hosts_per_router) = (topology.dims()[0], topology.dims()[1]);
    let groups = routers * topology.dims()[2] + 1;
    // The routers of a group on a half ring of this radius, ROUTER_SPACING apart.
    let ring = if routers > 1 {
        (ROUTER_SPACING / (2.0 * (PI / (2.0 * (routers - 1) as f64)).sin())).max(SPACING)
    } else {
        0.0
    };
    let group_hosts = (routers * hosts_per_router) as f64;
    let sector = 2.0 * PI / groups as f64;
    // Hosts SPACING apart on the outer circle, filling at most 80% of a group's sector.
    let for_hosts = group_hosts * SPACING / (0.8 * sector);
    // Group centres far enough apart that neighbouring rings do not touch.
    let for_rings = if groups > 1 { (ring + NODE_R + 24.0) / (sector / 2.0).sin() } else { 0.0 };
    let outward = ring + 2.5 * NODE_R + 30.0;
    let radius = for_rings.max(for_hosts - outward).max(120.0);
    let host_radius = radius + outward;
    let host_step = SPACING / host_radius;
    let towards = |angle: f64, length: f64| (length * angle.sin(), -length * angle.cos());
    let at = (0..topology.vertices())
        .map(|v| {
            let place = topology.coords(v);
            let (group, router) = (place[0], place[1]);
            let facing = group as f64 * sector;
            if topology.is_switch(v) {
                let spread = if routers > 1 { (router as f64 / (routers - 1) as f64 - 0.5) * PI } else { 0.0 };
                let (cx, cy) = towards(facing, radius);
                let (dx, dy) = towards(facing + spread, ring);
                (cx + dx, cy + dy)
            } else {
                let index = (router * hosts_per_router + place[2]) as f64;
                towards(facing + (index - (group_hosts - 1.0) / 2.0) * host_step, host_radius)
            }
        })
        .collect();
    let mut members = vec![Vec::new(); groups];
    for v in 0..topology.vertices() {
        members[topology.coords(v)[0]].push(v);
    }
    let around = ring + NODE_R + 10.0;
    let regions = members
        .into_iter()
        .enumerate()
        .map(|(group, members)| {
            let facing = group as f64 * sector;
            let (cx, cy) = towards(facing, radius);
            let (label_x, label_y) = towards(facing, host_radius + NODE_R + 22.0);
            PlacedRegion {
                label: format!("group {group}"),
                x: cx - around,
                y: cy - around,
                width: 2.0 * around,
                height: 2.0 * around,
                round: true,
                members,
                label_x,
                label_y,
            }
        })
        .collect();
    Drawing { at, links: class_links(topology), legend: class_legend(topology), binary: None, regions }
}

/// How far below a machine's memory switch its row of cores is.
const FIRST_CORES: f64 = 64.0;
/// From the cluster's switch to a row of machines' memory switches.
const TO_MACHINES: f64 = 120.0;
/// Most cores in a row under their memory switch; more go on an arc round it.
const CORES_A_ROW: usize = 8;
/// How much of a half turn the arc of cores spans.
const ARC_SPAN: f64 = 0.8;
/// Most machines in a single row; more go in two rows, above and below the switch.
const MACHINES_IN_ONE_ROW: usize = 6;

/// Where core `core` of `cores` sits from its machine's memory switch, across and away
/// from the cluster's switch: in a row under it, or past eight cores on an arc round it
/// (so that no link to a core crosses another core).
fn core_offset(core: usize, cores: usize) -> (f64, f64) {
    if cores <= CORES_A_ROW {
        return ((core as f64 - (cores - 1) as f64 / 2.0) * SPACING, FIRST_CORES);
    }
    let radius = (cores - 1) as f64 * SPACING / (ARC_SPAN * PI);
    let angle = PI * ((1.0 - ARC_SPAN) / 2.0 + ARC_SPAN * core as f64 / (cores - 1) as f64);
    (-radius * angle.cos(), radius * angle.sin())
}

/// A cluster `MxC` (`dims = [M, C]`): each machine a box holding its cores, with its
/// memory switch at the box's side nearest the cluster's switch; the boxes in a row under
/// the cluster's switch, or, past six machines, in two rows, the first above the switch
/// (its boxes upside down) and the rest below.
pub(super) fn cluster(topology: &Topology) -> Drawing {
    let (machines, cores) = (topology.dims()[0], topology.dims()[1]);
    let offsets: Vec<(f64, f64)> = (0..cores).map(|core| core_offset(core, cores)).collect();
    let pad = NODE_R + 12.0;
    let half_width = offsets.iter().map(|o| o.0.abs()).fold(0.0, f64::max) + pad;
    let box_width = (2.0 * half_width).max(110.0);
    let depth = offsets.iter().map(|o| o.1).fold(0.0, f64::max);
    let box_step = box_width + 30.0;
    let above = if machines > MACHINES_IN_ONE_ROW { machines.div_ceil(2) } else { 0 };
    // Machine m's memory switch, and the way its cores go from it (1 down, -1 up).
    let machine_at = |machine: usize| -> ((f64, f64), f64) {
        let (index, in_row, up) =
            if machine < above { (machine, above, true) } else { (machine - above, machines - above, false) };
        let x = (index as f64 - (in_row - 1) as f64 / 2.0) * box_step;
        if up { ((x, -TO_MACHINES), -1.0) } else { ((x, TO_MACHINES), 1.0) }
    };
    let at = (0..topology.vertices())
        .map(|v| match topology.coords(v)[..] {
            [machine, core] => {
                let ((x, y), way) = machine_at(machine);
                let (dx, dy) = offsets[core];
                (x + dx, y + way * dy)
            }
            [machine] => machine_at(machine).0,
            _ => (0.0, 0.0),
        })
        .collect();
    let mut members = vec![Vec::new(); machines];
    for v in 0..topology.vertices() {
        if let [machine, ..] = topology.coords(v)[..] {
            members[machine].push(v);
        }
    }
    let regions = members
        .into_iter()
        .enumerate()
        .map(|(machine, members)| {
            let ((x, y), way) = machine_at(machine);
            let (near, far) = (y - way * pad, y + way * (depth + pad));
            let label_y = if way > 0.0 { far + 18.0 } else { far - 10.0 };
            PlacedRegion {
                label: format!("machine {machine}"),
                x: x - box_width / 2.0,
                y: near.min(far),
                width: box_width,
                height: (far - near).abs(),
                round: false,
                members,
                label_x: x,
                label_y,
            }
        })
        .collect();
    Drawing { at, links: class_links(topology), legend: class_legend(topology), binary: None, regions }
}

/// Every link as a line, coloured by its class.
pub(super) fn class_links(topology: &Topology) -> Vec<Link> {
    topology
        .edges()
        .into_iter()
        .map(|(a, b): (NodeId, NodeId)| {
            let class = topology.link_class(a, b).map_or(0, usize::from);
            Link { a, b, shape: Shape::Line, kind: class }
        })
        .collect()
}

/// A legend entry per class of link, in the class's colour.
pub(super) fn class_legend(topology: &Topology) -> Vec<(&'static str, String, bool)> {
    topology.class_names().iter().enumerate().map(|(i, name)| (colour(i), format!("{name} links"), false)).collect()
}

#[cfg(test)]
mod tests {
    use topocomm_proto::TopologyKind;

    use super::super::{Layout, PlacedNode, PlacedRegion, layout};
    use super::*;

    fn laid_out(kind: TopologyKind, p: usize, dims: &[usize]) -> (Topology, Layout) {
        let topology = Topology::new(kind, p, Some(dims)).unwrap();
        let layout = layout(&topology);
        (topology, layout)
    }

    /// Every shape the tests lay out: all hosts ranked, and some left empty.
    const SHAPES: &[(TopologyKind, usize, &[usize])] = &[
        (TopologyKind::FatTree, 2, &[2]),
        (TopologyKind::FatTree, 16, &[4]),
        (TopologyKind::FatTree, 11, &[4]),
        (TopologyKind::FatTree, 54, &[6]),
        (TopologyKind::Dragonfly, 1, &[1, 1, 1]),
        (TopologyKind::Dragonfly, 12, &[2, 2, 1]),
        (TopologyKind::Dragonfly, 7, &[2, 2, 1]),
        (TopologyKind::Dragonfly, 72, &[4, 2, 2]),
        (TopologyKind::Dragonfly, 21, &[3, 1, 2]),
        (TopologyKind::Cluster, 1, &[1, 1]),
        (TopologyKind::Cluster, 12, &[3, 4]),
        (TopologyKind::Cluster, 30, &[8, 4]),
        (TopologyKind::Cluster, 40, &[2, 20]),
    ];

    #[test]
    fn every_vertex_is_placed_once_and_apart_from_every_other() {
        for &(kind, p, dims) in SHAPES {
            let (topology, layout) = laid_out(kind, p, dims);
            let ids: Vec<usize> = layout.nodes.iter().map(|node| node.id).collect();
            assert_eq!(ids, (0..topology.vertices()).collect::<Vec<_>>(), "{topology}");
            for node in &layout.nodes {
                assert_eq!(node.switch, topology.is_switch(node.id), "{topology}: {node:?}");
                assert!(node.x.is_finite() && node.y.is_finite(), "{topology}: {node:?}");
                assert!(node.x >= NODE_R && node.x <= layout.width - NODE_R, "{topology}: {node:?} across");
                assert!(node.y >= NODE_R && node.y <= layout.height - NODE_R, "{topology}: {node:?} down");
            }
            for a in &layout.nodes {
                for b in layout.nodes.iter().filter(|b| b.id > a.id) {
                    let apart = (a.x - b.x).hypot(a.y - b.y);
                    assert!(apart >= 2.0 * NODE_R + 4.0, "{topology}: {} and {} only {apart} apart", a.id, b.id);
                }
            }
            assert_eq!(layout.links.len(), topology.edges().len(), "{topology}");
        }
    }

    #[test]
    fn a_fat_tree_is_its_levels_with_each_switch_over_what_it_links_below() {
        for (p, k) in [(16, 4), (11, 4), (54, 6), (128, 8)] {
            let (topology, layout) = laid_out(TopologyKind::FatTree, p, &[k]);
            let level = |v: usize| topology.coords(v)[0];
            // Level by level upwards: hosts, edge, aggregation, core, each a row.
            for (a, b) in layout.nodes.iter().flat_map(|a| layout.nodes.iter().map(move |b| (a, b))) {
                match level(a.id).cmp(&level(b.id)) {
                    std::cmp::Ordering::Less => assert!(a.y > b.y, "{topology}: {} under {}", a.id, b.id),
                    std::cmp::Ordering::Equal => assert_eq!(a.y, b.y, "{topology}: {} and {}", a.id, b.id),
                    std::cmp::Ordering::Greater => {}
                }
            }
            // A host or an edge switch lies under the span of the switches it links above,
            // and each edge switch over the hosts it links.
            for edge in (0..topology.vertices()).filter(|&v| level(v) == 1) {
                let below: Vec<&PlacedNode> = topology
                    .neighbours(edge)
                    .into_iter()
                    .filter(|&v| level(v) == 0)
                    .map(|v| &layout.nodes[v])
                    .collect();
                let x = layout.nodes[edge].x;
                if !below.is_empty() {
                    let (lo, hi) = below.iter().fold((f64::MAX, f64::MIN), |(lo, hi), n| (lo.min(n.x), hi.max(n.x)));
                    assert!(
                        lo - SPACING < x && x < hi + SPACING,
                        "{topology}: edge switch {edge} at {x}, hosts {lo}..{hi}"
                    );
                }
            }
            // Each pod's hosts, edge and aggregation switches in its box alone; the core
            // switches in none.
            assert_eq!(layout.regions.len(), k, "{topology}: a box a pod");
            for node in &layout.nodes {
                let place = topology.coords(node.id);
                let expected: Vec<usize> = if place[0] < 3 { vec![place[1]] } else { vec![] };
                assert_eq!(holding(&layout, node), expected, "{topology}: {node:?} at {place:?}");
                assert!(
                    expected.iter().all(|&pod| layout.regions[pod].members.contains(&node.id)),
                    "{topology}: {node:?}"
                );
            }
            // Pods apart: every host of pod 0 left of every host of pod 1.
            let pod_hosts = |pod: usize| -> Vec<f64> {
                (0..topology.p()).filter(|&v| topology.coords(v)[1] == pod).map(|v| layout.nodes[v].x).collect()
            };
            let right_of_pod_0 = pod_hosts(0).into_iter().fold(f64::MIN, f64::max);
            assert!(pod_hosts(1).iter().all(|&x| x > right_of_pod_0 + SPACING), "{topology}: pods apart");
        }
    }

    /// The regions whose box holds `node`'s whole disc or square.
    fn holding(layout: &Layout, node: &PlacedNode) -> Vec<usize> {
        let holds = |region: &PlacedRegion| {
            region.x + NODE_R <= node.x
                && node.x <= region.x + region.width - NODE_R
                && region.y + NODE_R <= node.y
                && node.y <= region.y + region.height - NODE_R
        };
        (0..layout.regions.len()).filter(|&r| holds(&layout.regions[r])).collect()
    }

    /// The centre of a region's box.
    fn centre(region: &PlacedRegion) -> (f64, f64) {
        (region.x + region.width / 2.0, region.y + region.height / 2.0)
    }

    #[test]
    fn a_dragonfly_is_its_groups_on_a_circle_each_holding_its_routers_with_its_hosts_outside() {
        for (p, dims) in [(12, [2, 2, 1]), (7, [2, 2, 1]), (72, [4, 2, 2]), (21, [3, 1, 2]), (100, [6, 3, 1])] {
            let (topology, layout) = laid_out(TopologyKind::Dragonfly, p, &dims);
            let groups = dims[0] * dims[2] + 1;
            assert_eq!(layout.regions.len(), groups, "{topology}");
            assert!(layout.regions.iter().all(|region| region.round), "{topology}: groups are rings");
            let centres: Vec<(f64, f64)> = layout.regions.iter().map(centre).collect();
            let middle =
                centres.iter().fold((0.0, 0.0), |(x, y), c| (x + c.0 / groups as f64, y + c.1 / groups as f64));
            let radius = (centres[0].0 - middle.0).hypot(centres[0].1 - middle.1);
            assert!(radius > 100.0, "{topology}: a circle, not a point");
            for (group, c) in centres.iter().enumerate() {
                let off = (c.0 - middle.0).hypot(c.1 - middle.1);
                assert!((off - radius).abs() < 0.01, "{topology}: group {group} at {off}, group 0 at {radius}");
                // Clockwise from the top, evenly.
                let angle = (c.0 - middle.0).atan2(middle.1 - c.1);
                let expected = 2.0 * PI * group as f64 / groups as f64;
                let off = (angle - expected + PI).rem_euclid(2.0 * PI) - PI;
                assert!(off.abs() < 1e-6, "{topology}: group {group} at {angle} rad, not {expected}");
            }
            for v in 0..topology.vertices() {
                let group = topology.coords(v)[0];
                let region = &layout.regions[group];
                assert!(region.members.contains(&v), "{topology}: {v} in group {group}'s members");
                let node = &layout.nodes[v];
                let from = |c: (f64, f64)| (node.x - c.0).hypot(node.y - c.1);
                let inside = from(centres[group]) < region.width / 2.0;
                assert_eq!(inside, topology.is_switch(v), "{topology}: routers inside their ring, hosts outside: {v}");
                let nearest = (0..groups).min_by(|&a, &b| from(centres[a]).total_cmp(&from(centres[b]))).unwrap();
                assert_eq!(nearest, group, "{topology}: vertex {v} nearest its own group");
            }
        }
    }

    #[test]
    fn a_cluster_is_its_machines_boxes_each_holding_its_cores_and_memory_switch() {
        for (p, dims) in [(12, [3, 4]), (11, [3, 4]), (30, [8, 4]), (40, [2, 20]), (1, [1, 1])] {
            let (topology, layout) = laid_out(TopologyKind::Cluster, p, &dims);
            let machines = dims[0];
            assert_eq!(layout.regions.len(), machines, "{topology}");
            for node in &layout.nodes {
                let place = topology.coords(node.id);
                let holding = holding(&layout, node);
                match place[..] {
                    [machine, ..] => {
                        assert_eq!(
                            holding,
                            [machine],
                            "{topology}: vertex {} in machine {machine}'s box only",
                            node.id
                        );
                        assert!(layout.regions[machine].members.contains(&node.id), "{topology}: {node:?}");
                    }
                    _ => assert!(holding.is_empty(), "{topology}: the cluster's switch is in no machine"),
                }
            }
            assert_eq!(
                layout.regions.iter().map(|r| r.members.len()).sum::<usize>(),
                topology.vertices() - usize::from(machines > 1)
            );
        }
    }

    #[test]
    fn the_svg_draws_every_vertex_link_and_region_once() {
        for &(kind, p, dims) in SHAPES {
            let (topology, layout) = laid_out(kind, p, dims);
            let text = super::super::svg(&topology);
            let doc = roxmltree::Document::parse(&text).expect("valid XML");
            let count = |class: &str| {
                doc.descendants()
                    .filter(|n| n.attribute("class").is_some_and(|c| c.split(' ').any(|c| c == class)))
                    .count()
            };
            assert_eq!(count("node"), topology.p(), "{topology}");
            assert_eq!(count("switch"), topology.switches(), "{topology}");
            assert_eq!(count("edge"), topology.edges().len(), "{topology}");
            assert_eq!(count("region"), layout.regions.len(), "{topology}");
        }
    }
}
