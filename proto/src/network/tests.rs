//! The switched families against constructions of their own from the papers' words, and
//! their routes against breadth-first search.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::{Topology, TopologyKind};

pub(super) fn topology(kind: TopologyKind, p: usize, dims: &[usize]) -> Topology {
    Topology::new(kind, p, Some(dims)).unwrap_or_else(|e| panic!("{kind} {dims:?} for {p}: {e}"))
}

/// Every link once, `(a, b, class name)` with `a < b`, from the neighbour lists; checks
/// on the way that every link is seen from both ends with one class, and that
/// `link_class` agrees.
fn links(topology: &Topology) -> BTreeSet<(usize, usize, String)> {
    let names = topology.class_names();
    let switched = topology.switched().expect("a switched kind");
    let mut out = BTreeSet::new();
    for a in 0..topology.vertices() {
        for (b, class) in switched.neighbours(a) {
            assert_ne!(a, b, "{topology}: {a} links to itself");
            assert!(switched.neighbours(b).contains(&(a, class)), "{topology}: {a}-{b} is seen from {a} only");
            assert_eq!(topology.link_class(a, b), Some(class), "{topology}: link_class({a}, {b})");
            out.insert((a.min(b), a.max(b), names[class].to_owned()));
        }
    }
    out
}

fn per_class(links: &BTreeSet<(usize, usize, String)>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, _, class) in links {
        *out.entry(class.clone()).or_default() += 1;
    }
    out
}

/// Hop distances from `from` to every vertex, by breadth-first search.
pub(super) fn bfs(topology: &Topology, from: usize) -> Vec<usize> {
    let mut distance = vec![usize::MAX; topology.vertices()];
    distance[from] = 0;
    let mut queue = VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        for next in topology.neighbours(at) {
            if distance[next] == usize::MAX {
                distance[next] = distance[at] + 1;
                queue.push_back(next);
            }
        }
    }
    distance
}

/// Every route between ranks follows links, crosses only switches, and (where the
/// family routes shortest) is as short as breadth-first search says.
fn check_routes(topology: &Topology, shortest: bool) {
    let p = topology.p();
    for src in 0..p {
        let distance = bfs(topology, src);
        for (dst, &fewest_hops) in distance.iter().enumerate().take(p) {
            let route = topology.route(src, dst);
            assert_eq!((route[0], *route.last().unwrap()), (src, dst), "{topology}");
            for hop in route.windows(2) {
                assert!(topology.is_neighbour(hop[0], hop[1]), "{topology}: {route:?} jumps {hop:?}");
            }
            let between = if route.len() > 2 { &route[1..route.len() - 1] } else { &[] };
            assert!(between.iter().all(|&v| topology.is_switch(v)), "{topology}: {route:?}");
            assert!(route.len() - 1 <= topology.diameter(), "{topology}: {route:?} longer than the diameter");
            if shortest {
                assert_eq!(route.len() - 1, fewest_hops, "{topology}: {src} -> {dst} is {route:?}");
            }
        }
    }
    let longest = (0..p).flat_map(|a| (0..p).map(move |b| (a, b))).map(|(a, b)| topology.distance(a, b)).max();
    assert_eq!(longest.unwrap_or(0), topology.diameter(), "{topology}");
}

#[test]
fn a_fat_tree_is_the_tree_of_al_fares_et_al() {
    for k in [2, 4, 6, 8] {
        let half = k / 2;
        let hosts = k * k * k / 4;
        let tree = topology(TopologyKind::FatTree, hosts, &[k]);
        assert_eq!((tree.p(), tree.switches(), tree.hosts()), (hosts, 5 * k * k / 4, hosts), "k = {k}");
        // The paper's wiring, by where each vertex sits (coords), built on its own.
        let at: BTreeMap<Vec<usize>, usize> = (0..tree.vertices()).map(|v| (tree.coords(v), v)).collect();
        assert_eq!(at.len(), tree.vertices(), "k = {k}: two vertices sit at one place");
        let mut expected = BTreeSet::new();
        let mut link = |x: Vec<usize>, y: Vec<usize>, class| {
            let (a, b) = (at[&x], at[&y]);
            expected.insert((a.min(b), a.max(b), String::from(class)));
        };
        for pod in 0..k {
            for e in 0..half {
                for port in 0..half {
                    link(vec![0, pod, e, port], vec![1, pod, e], "edge");
                }
                for a in 0..half {
                    link(vec![1, pod, e], vec![2, pod, a], "aggregation");
                }
            }
            for a in 0..half {
                for j in 0..half {
                    link(vec![2, pod, a], vec![3, a, j], "core");
                }
            }
        }
        let built = links(&tree);
        assert_eq!(built, expected, "k = {k}");
        assert_eq!(built.len(), 3 * k * k * k / 4);
        let counts = per_class(&built);
        assert!(counts.values().all(|&n| n == hosts), "k = {k}: {counts:?}");
        for v in tree.p()..tree.vertices() {
            assert_eq!(tree.neighbours(v).len(), k, "k = {k}: switch {v} has not k ports");
        }
        check_routes(&tree, true);
    }
}

#[test]
fn fat_tree_routes_go_up_then_down_and_spread_by_destination() {
    let k = 8;
    let half = k / 2;
    let tree = topology(TopologyKind::FatTree, k * k * k / 4, &[k]);
    let level = |v: usize| tree.coords(v)[0];
    for src in (0..tree.p()).step_by(3) {
        for dst in 0..tree.p() {
            let levels: Vec<usize> = tree.route(src, dst).iter().map(|&v| level(v)).collect();
            let top = levels.iter().position(|&l| l == *levels.iter().max().unwrap()).unwrap();
            assert!(levels[..=top].windows(2).all(|w| w[1] == w[0] + 1), "{src} -> {dst}: {levels:?}");
            assert!(levels[top..].windows(2).all(|w| w[1] + 1 == w[0]), "{src} -> {dst}: {levels:?}");
        }
    }
    // d-mod-k: from one host, the (k/2)² hosts of another pod are each reached through a
    // core switch of their own.
    let pod_hosts = half * half;
    let cores: BTreeSet<usize> = (pod_hosts..2 * pod_hosts).map(|dst| tree.route(0, dst)[3]).collect();
    assert_eq!(cores.len(), pod_hosts);
    assert!(cores.iter().all(|&c| tree.coords(c)[0] == 3));
}

#[test]
fn a_dragonfly_is_the_network_of_kim_et_al() {
    for (a, p, h) in [(1, 1, 1), (2, 1, 1), (2, 2, 1), (4, 2, 2), (3, 2, 2), (2, 3, 3)] {
        let groups = a * h + 1;
        let hosts = groups * a * p;
        let dragonfly = topology(TopologyKind::Dragonfly, hosts, &[a, p, h]);
        assert_eq!(dragonfly.switches(), groups * a);
        let built = links(&dragonfly);
        let counts = per_class(&built);
        let want = |class: &str| counts.get(class).copied().unwrap_or(0);
        assert_eq!(want("terminal"), hosts, "{a}x{p}x{h}");
        assert_eq!(want("local"), groups * a * (a - 1) / 2, "{a}x{p}x{h}");
        assert_eq!(want("global"), groups * (groups - 1) / 2, "{a}x{p}x{h}");
        let group = |v: usize| dragonfly.coords(v)[0];
        // Every two groups share exactly one global link; a group's routers are all linked.
        let mut pairs = BTreeSet::new();
        for (x, y, class) in &built {
            let (x, y) = (*x, *y);
            match class.as_str() {
                "global" => assert!(pairs.insert((group(x).min(group(y)), group(x).max(group(y))))),
                "local" => assert_eq!(group(x), group(y)),
                _ => {}
            }
        }
        assert_eq!(pairs.len(), groups * (groups - 1) / 2);
        for router in dragonfly.p()..dragonfly.vertices() {
            assert_eq!(dragonfly.neighbours(router).len(), p + a - 1 + h, "{a}x{p}x{h}: router {router}");
        }
        check_routes(&dragonfly, false);
        // Minimal: at most one global hop, and at most one local hop in each group.
        for src in 0..hosts {
            for dst in 0..hosts {
                let route = dragonfly.route(src, dst);
                let classes: Vec<&str> = route
                    .windows(2)
                    .map(|w| dragonfly.class_names()[dragonfly.link_class(w[0], w[1]).unwrap()])
                    .collect();
                assert!(classes.iter().filter(|&&c| c == "global").count() <= 1, "{classes:?}");
                let same_group = group(src) == group(dst);
                assert_eq!(classes.contains(&"global"), !same_group, "{src} -> {dst}: {classes:?}");
            }
        }
    }
}

#[test]
fn a_cluster_keeps_a_machines_traffic_inside_it_and_shares_its_port() {
    for (machines, cores) in [(1, 1), (1, 4), (4, 4), (3, 5), (4, 8)] {
        let cluster = topology(TopologyKind::Cluster, machines * cores, &[machines, cores]);
        assert_eq!(cluster.switches(), machines + usize::from(machines > 1));
        let counts = per_class(&links(&cluster));
        assert_eq!(counts.get("intra").copied(), Some(machines * cores));
        assert_eq!(counts.get("inter").copied().unwrap_or(0), if machines > 1 { machines } else { 0 });
        check_routes(&cluster, true);
        let class = |a: usize, b: usize| cluster.class_names()[cluster.link_class(a, b).unwrap()];
        for src in 0..cluster.p() {
            // Every route to another machine leaves over the one port of src's machine.
            let ports: BTreeSet<(usize, usize)> = (0..cluster.p())
                .filter(|dst| dst / cores != src / cores)
                .map(|dst| {
                    let route = cluster.route(src, dst);
                    (route[1], route[2])
                })
                .collect();
            assert!(ports.len() <= 1, "{ports:?}");
            for dst in 0..cluster.p() {
                let route = cluster.route(src, dst);
                let inter = route.windows(2).filter(|w| class(w[0], w[1]) == "inter").count();
                assert_eq!(inter, if src / cores == dst / cores { 0 } else { 2 }, "{src} -> {dst}: {route:?}");
            }
        }
    }
}

#[test]
fn fewer_ranks_than_hosts_leave_the_rest_out() {
    let tree = topology(TopologyKind::FatTree, 5, &[4]);
    assert_eq!((tree.p(), tree.hosts(), tree.switches(), tree.vertices()), (5, 16, 20, 25));
    // Host 4 is the first of pod 1: its edge switch's other host has no rank, so is no vertex.
    let edge = tree.switched().unwrap().attachment(4);
    let ranks: Vec<usize> = tree.neighbours(edge).into_iter().filter(|&v| v < 5).collect();
    assert_eq!(ranks, [4]);
    assert_eq!(tree.diameter(), 6);
    check_routes(&tree, true);
    let dragonfly = topology(TopologyKind::Dragonfly, 7, &[2, 2, 1]);
    check_routes(&dragonfly, false);
}

#[test]
fn bad_shapes_say_what_fits() {
    let error = |kind, p, dims: Option<&[usize]>| Topology::new(kind, p, dims).unwrap_err().to_string();
    assert!(
        error(TopologyKind::FatTree, 4, Some(&[3])).contains("even K"),
        "{}",
        error(TopologyKind::FatTree, 4, Some(&[3]))
    );
    assert!(error(TopologyKind::FatTree, 4, Some(&[0])).contains("even K"));
    assert!(error(TopologyKind::FatTree, 4, Some(&[4, 4])).contains("one dim"));
    assert!(error(TopologyKind::FatTree, 17, Some(&[4])).contains("do not fit on the 16 hosts"));
    assert!(error(TopologyKind::Dragonfly, 4, Some(&[2, 0, 1])).contains("at least 1"));
    assert!(error(TopologyKind::Dragonfly, 4, Some(&[2, 2])).contains("AxPxH"));
    assert!(error(TopologyKind::Dragonfly, 13, Some(&[2, 2, 1])).contains("do not fit on the 12 hosts"));
    assert!(error(TopologyKind::Cluster, 4, None).contains("MxC"));
    assert!(error(TopologyKind::Cluster, 4, Some(&[0, 4])).contains("at least one machine"));
    assert!(error(TopologyKind::Cluster, 17, Some(&[4, 4])).contains("do not fit"));
    assert!(error(TopologyKind::FatTree, 4, Some(&[1 << 20])).contains("beyond"));
}

#[test]
fn without_dims_the_smallest_shape_that_holds_the_ranks() {
    assert_eq!(Topology::new(TopologyKind::FatTree, 16, None).unwrap().dims(), [4]);
    assert_eq!(Topology::new(TopologyKind::FatTree, 17, None).unwrap().dims(), [6]);
    assert_eq!(Topology::new(TopologyKind::Dragonfly, 6, None).unwrap().dims(), [2, 1, 1]);
    assert_eq!(Topology::new(TopologyKind::Dragonfly, 7, None).unwrap().dims(), [4, 2, 2]);
}

#[test]
fn a_large_fat_tree_and_dragonfly_route_without_tables() {
    let tree = topology(TopologyKind::FatTree, 65_536, &[64]);
    assert_eq!((tree.switches(), tree.diameter()), (5_120, 6));
    assert_eq!(tree.route(0, 65_535).len(), 7);
    let dragonfly = topology(TopologyKind::Dragonfly, 16 * 8 * 129, &[16, 8, 8]);
    assert_eq!(dragonfly.diameter(), 5);
    let route = dragonfly.route(0, dragonfly.p() - 1);
    assert!(route.len() <= 6, "{route:?}");
}
