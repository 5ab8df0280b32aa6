//! The textbook's closed forms of the collectives' times, where one applies: an
//! algorithm on the topology it was made for, so that no two messages share a link at
//! once, under store-and-forward ([GGKK 4.1]-[GGKK 4.5], [KGGK94 3.2]-[KGGK94 3.7]),
//! and the cut-through ring broadcast of [GGKK 4.1.1]. Every message then crosses one
//! link, costing t_s + t_h + t_w m (the textbook's forms have no t_h: it enters once per
//! step). On a switched network a message crosses several links, each costing t_h +
//! t_w m under store-and-forward; the forms that hold there ([`SwitchedForm`]) count
//! them. `topocomm simulate` prints them beside the simulator's times, and the tests
//! hold the two equal to the nanosecond at every p they reach.

use topocomm_collectives::physics::first_link_model;
use topocomm_proto::catalogue::{self, ClosedForm};
use topocomm_proto::network::{Family, Flow, Routes};
use topocomm_proto::spec::{Algorithm, ClassPhysics, Collective, LinkModel, Ports, Routing, class_models};
use topocomm_proto::{Topology, TopologyKind};

/// A closed form of a switched network: a chain of messages none of which waits for a
/// link, each costing under store-and-forward the start-up of the slowest-starting class
/// its route crosses ([`topocomm_collectives::physics::first_link_model`]) and every
/// link's own t_h + t_w m ([`message_ns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SwitchedForm {
    /// The hypercube's pairs r, r xor 2^j ([GGKK 4.1.3] broadcast, [GGKK 4.3] reduce and
    /// recursive-doubling all-reduce) on a k-port fat-tree whose k/2 is a power of two,
    /// p = 2^d ranks on the first p hosts: a pair shares an edge switch where 2^j < k/2
    /// (2 links), a pod where 2^j < k²/4 (4 links), else it crosses the core (6 links).
    /// The run ends with a chain of one message at each distance, none waiting for a link:
    /// the broadcast's chain to its last leaf goes through every node's first send (a
    /// node's later sends queue behind it on its own link, off that chain), the reduce is
    /// its dual, and in recursive doubling every node sends one message a step, which
    /// d-mod-k carries on distinct links: the messages out of one edge switch go to
    /// distinct destinations mod k/2, so up through distinct aggregation switches and on
    /// through distinct core switches (Al-Fares et al. 2008 §3.3), and every down path is
    /// its destination's own. So Σ_j message(0, 2^j, m).
    FatTreeBinomial,
    /// The ring all-reduce (a ring reduce-scatter, then a ring all-gather, 2(p − 1) steps
    /// of m/p) on a cluster of machines, ranks machine by machine: the ring's hop from a
    /// machine's last core to the next machine's first crosses both machines' ports
    /// (intra, inter, inter, intra), every other hop its machine's memory switch (intra,
    /// intra). Each machine's port carries one message a step, each core's link one, so
    /// nothing waits for a link and a rank's step-s message leaves when its step s − 1
    /// message has arrived: the run ends with the slowest chain of 2(p − 1) consecutive
    /// hops of the ring, max_r Σ_{i=1}^{2p−2} message(r − i, r − i + 1, m/p). Only under
    /// one physics for every link: where the machine is faster inside, a machine's cores
    /// run ahead of its port and their messages queue there (the simulator's 6.31 ms
    /// against this chain's 1.41 ms on cluster 4x8 with intra 20× faster); and only on
    /// machines of three cores or more: on two (hops alternating inside and between
    /// machines) the simulator takes two link transfers more than the chain, not derived.
    ClusterRing,
}

impl SwitchedForm {
    /// The form `collective` by `algorithm` has on `topology` under `routing` and
    /// `ports` with `m` bytes per node, where one holds.
    fn of(
        collective: Collective,
        algorithm: Algorithm,
        topology: &Topology,
        m: u64,
        routing: Routing,
        ports: Ports,
    ) -> Option<SwitchedForm> {
        // Both forms count on the ranks sitting on the first hosts in order (consecutive
        // ranks under one edge switch, machine by machine): another placement shares
        // ports and links the chains do not.
        if routing != Routing::Sf || ports != Ports::All || topology.p() < 2 || !topology.placement().is_linear() {
            return None;
        }
        let p = topology.p();
        match (topology.switched()?.family(), collective, algorithm) {
            // d-mod-k's distinct links only: ECMP's hashes may put two messages on one.
            (Family::FatTree(tree), Collective::Broadcast | Collective::Reduce, Algorithm::Hypercube)
            | (Family::FatTree(tree), Collective::Allreduce, Algorithm::RecursiveDoubling) => {
                ((tree.k() / 2).is_power_of_two() && p.is_power_of_two() && topology.routes() == Routes::DModK)
                    .then_some(SwitchedForm::FatTreeBinomial)
            }
            // Pieces of m/p bytes whatever the element's size (up to 8 bytes); machines of
            // at least three cores (see `ClusterRing`).
            (Family::Machines(machines), Collective::Allreduce, Algorithm::Ring) => {
                (m.is_multiple_of(8 * p as u64) && machines.cores() >= 3).then_some(SwitchedForm::ClusterRing)
            }
            _ => None,
        }
    }

    fn formula(self) -> &'static str {
        match self {
            SwitchedForm::FatTreeBinomial => {
                "Σ_j (t_s + h_j (t_h + t_w m)), h_j = 2, 4, 6 links as 2^j < k/2, < k²/4, beyond (fat-tree, d-mod-k)"
            }
            SwitchedForm::ClusterRing => {
                "max_r Σ_{i=1}^{2(p-1)} (t_s + Σ_links (t_h + t_w m/p)) over the ring's hops r-i → r-i+1 (2 intra links, or 2 intra and 2 inter between machines)"
            }
        }
    }

    /// The form's time in nanoseconds, every class of links under its own model
    /// (`class_models`, by class id).
    fn time_ns(self, topology: &Topology, m: u64, class_models: &[LinkModel]) -> u64 {
        let p = topology.p();
        let message = |src: usize, dst: usize, bytes: u64| message_ns(topology, class_models, src, dst, bytes);
        match self {
            SwitchedForm::FatTreeBinomial => (0..p.trailing_zeros()).map(|j| message(0, 1 << j, m)).sum(),
            SwitchedForm::ClusterRing => {
                // hop[e]: the ring's hop e → e + 1; the chain ending at r is the 2p − 2
                // hops before it, once round the ring and p − 2 more.
                let hop: Vec<u64> = (0..p).map(|e| message(e, (e + 1) % p, m / p as u64)).collect();
                let round: u64 = hop.iter().sum();
                let rest = |r: usize| (1..=p - 2).map(|i| hop[(r + 2 * p - i) % p]).sum::<u64>();
                (0..p).map(|r| round + rest(r)).max().unwrap_or(0)
            }
        }
    }
}

/// One message of `bytes` from `src` to `dst` that waits for no link, store-and-forward:
/// the start-up of the slowest-starting class its route crosses, then every link's own
/// t_h + t_w · bytes.
fn message_ns(topology: &Topology, class_models: &[LinkModel], src: usize, dst: usize, bytes: u64) -> u64 {
    let start = first_link_model(topology, class_models, src, Flow::new(src, dst, 0)).ts_ns;
    let route = topology.route(src, dst);
    let model_of = |a: usize, b: usize| class_models[topology.link_class(a, b).expect("a route follows links")];
    let links: u64 = route
        .windows(2)
        .map(|hop| {
            let link = model_of(hop[0], hop[1]);
            link.th_ns + link.transfer_ns(bytes as usize)
        })
        .sum();
    start + links
}

/// The closed form the catalogue gives `collective` by `algorithm`, where it holds: on
/// `kind` under `routing`.
fn form(
    collective: Collective,
    algorithm: Algorithm,
    kind: TopologyKind,
    routing: Routing,
    ports: Ports,
) -> Option<ClosedForm> {
    let form = catalogue::find(collective, algorithm)?.closed_form?;
    (form.topology() == kind && form.routing() == routing && form.ports().is_none_or(|only| only == ports))
        .then_some(form)
}

/// The closed form's time, in nanoseconds, of `collective` by `algorithm` on `topology`
/// with `m` bytes per node under `model`; `None` where the textbook gives none (another
/// topology, packets, cut-through where the form is store-and-forward's, a shape the form
/// does not cover, a class of links with physics of its own in `classes`).
pub fn time_ns(
    collective: Collective,
    algorithm: Algorithm,
    topology: &Topology,
    m: u64,
    model: &LinkModel,
    classes: &[ClassPhysics],
) -> Option<u64> {
    if model.packet_bytes > 0 {
        return None;
    }
    if topology.kind().is_switched() {
        let form = SwitchedForm::of(collective, algorithm, topology, m, model.routing, model.ports)?;
        let classes_differ = classes.iter().any(|class| class.applied_to(*model) != *model);
        if form == SwitchedForm::ClusterRing && classes_differ {
            return None;
        }
        let class_models = class_models(*model, classes, &topology.class_names()).ok()?;
        return Some(form.time_ns(topology, m, &class_models));
    }
    if classes.iter().any(|class| class.applied_to(*model) != *model) {
        return None;
    }
    let form = form(collective, algorithm, topology.kind(), model.routing, model.ports)?;
    let p = topology.p() as u64;
    let (ts, th) = (model.ts_ns, model.th_ns);
    // t_w · bytes, exact whenever t_w is a whole number of picoseconds per byte times
    // the bytes is a whole number of nanoseconds (the simulator rounds each message).
    let tw = |bytes: u64| model.transfer_ns(bytes as usize);
    let hop = ts + th;
    let log_p =
        || (topology.kind() == TopologyKind::Hypercube || p.is_power_of_two()).then(|| u64::from(p.trailing_zeros()));
    let torus = || match topology.dims() {
        &[rows, cols] => Some((rows as u64, cols as u64)),
        _ => None,
    };
    use ClosedForm as F;
    match form {
        // [GGKK 4.1.1] cut-through (small packets): t_s log p + t_w m log p + t_h (p - 1).
        F::CutThroughRingDoubling => {
            let log_p = log_p()?;
            Some(ts * log_p + tw(m) * log_p + th * (p - 1))
        }
        // [KGGK94 3.2]: (t_s + t_w m)⌊p/2⌋ (the two halves of the ring at once).
        F::RingTree => Some((hop + tw(m)) * (p / 2)),
        // [GGKK 4.1.2]: a ring broadcast along a row, then along every column.
        F::TorusTree => {
            let (rows, cols) = torus()?;
            Some((hop + tw(m)) * (rows / 2 + cols / 2))
        }
        // [GGKK 4.1.3]: (t_s + t_w m) log p; [GGKK 4.3]: recursive doubling, the same.
        F::HypercubeTree | F::HypercubeExchange => Some((hop + tw(m)) * log_p()?),
        // [GGKK 4.2.1]: (t_s + t_w m)(p - 1).
        F::RingGather => Some((hop + tw(m)) * (p - 1)),
        // [GGKK 4.2.2]: 2 t_s (√p - 1) + t_w m (p - 1); on R x C, t_s (R + C - 2).
        F::TorusGather => {
            let (rows, cols) = torus()?;
            Some(hop * (rows + cols - 2) + tw(m) * (p - 1))
        }
        // [GGKK 4.2.3], [GGKK 4.4]: t_s log p + t_w m (p - 1).
        F::HypercubeGather => Some(hop * log_p()? + tw(m) * (p - 1)),
        // [Chen 2005]: one block, then p/2 - 1 steps of two: t_s p/2 + t_w m (p - 1).
        F::RingNeighbourExchange => p.is_multiple_of(2).then(|| hop * (p / 2) + tw(m) + tw(2 * m) * (p / 2 - 1)),
        // [GGKK 4.5.1]: (t_s + ½ t_w m p)(p - 1).
        F::RingPersonalized => Some(hop * (p - 1) + tw(m * p * (p - 1) / 2)),
        // [GGKK 4.5.2]: (2 t_s + t_w m p)(√p - 1); on R x C, (t_s + ½ t_w m p)(R + C - 2).
        F::TorusPersonalized => {
            let (rows, cols) = torus()?;
            Some(hop * (rows + cols - 2) + tw(m * p * (rows + cols - 2) / 2))
        }
        // [GGKK 4.5.3]: (t_s + ½ t_w m p) log p.
        F::HypercubePersonalized => Some((hop + tw(m * p / 2)) * log_p()?),
        // Brent-Kung tree scan: 2 log p - 1 messages of the whole vector on the longest chain.
        F::TreeScan => Some((hop + tw(m)) * (2 * log_p()? - 1)),
    }
}

/// The formula [`time_ns`] evaluates, as the textbook writes it (for tables): the
/// catalogue's, where the form holds.
pub fn formula(
    collective: Collective,
    algorithm: Algorithm,
    topology: &Topology,
    m: u64,
    routing: Routing,
    ports: Ports,
) -> Option<&'static str> {
    match topology.kind().is_switched() {
        true => SwitchedForm::of(collective, algorithm, topology, m, routing, ports).map(SwitchedForm::formula),
        false => form(collective, algorithm, topology.kind(), routing, ports).map(ClosedForm::formula),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::model;
    use topocomm_proto::network::Placement;
    use topocomm_proto::spec::RunSpec;

    /// Both port models: every closed form is checked under each it holds under.
    const PORTS: [Ports; 2] = [Ports::All, Ports::One];

    /// Every pair with a closed form, at every p up to 256 its topology takes (and a few
    /// shapes of torus), both sizes, with and without t_h, one-port and all-port: the
    /// simulator gives exactly the closed form wherever the form holds under the port
    /// model, every closed form of the catalogue is met somewhere, and one that names a
    /// port model misses under the other somewhere. `simulate`'s
    /// benchmark holds them at p = 65,536 as well.
    #[test]
    fn the_simulator_meets_every_closed_form_exactly() {
        let (mut checked, mut mismatches) = (0, Vec::new());
        let mut met = vec![false; topocomm_proto::catalogue::ENTRIES.len()];
        let mut other_model_differs = met.clone();
        let mut shapes: Vec<Topology> = Vec::new();
        for p in [2usize, 3, 4, 5, 8, 9, 16, 33, 64, 256] {
            shapes.push(Topology::new(TopologyKind::Ring, p, None).expect("a ring"));
        }
        for p in [2usize, 4, 8, 16, 64, 256] {
            shapes.push(Topology::new(TopologyKind::Hypercube, p, None).expect("a hypercube"));
        }
        for dims in [[2usize, 2], [3, 3], [2, 4], [4, 4], [3, 5], [8, 8], [16, 16]] {
            shapes.push(Topology::new(TopologyKind::Torus, dims[0] * dims[1], Some(&dims)).expect("a torus"));
        }
        // Fat-trees, whole and with fewer ranks than hosts, k/2 a power of two or not
        // (k = 6: no form, and none claimed).
        for (k, p) in [(2usize, 2usize), (4, 2), (4, 4), (4, 8), (4, 16), (6, 32), (8, 16), (8, 64), (8, 128)] {
            shapes.push(Topology::new(TopologyKind::FatTree, p, Some(&[k])).expect("a fat-tree"));
        }
        // Clusters of machines: one machine, two cores a machine (no form), full and partly
        // filled.
        for (dims, p) in [([1usize, 4], 4usize), ([2, 2], 4), ([4, 4], 16), ([8, 2], 16), ([4, 8], 32), ([4, 4], 8)] {
            shapes.push(Topology::new(TopologyKind::Cluster, p, Some(&dims)).expect("a cluster"));
        }
        let mut switched_checked = 0;
        for topology in &shapes {
            for ((entry, met), other_model_differs) in
                topocomm_proto::catalogue::ENTRIES.iter().zip(&mut met).zip(&mut other_model_differs)
            {
                for (routing, ports) in [Routing::Sf, Routing::Ct].into_iter().flat_map(|r| PORTS.map(|p| (r, p))) {
                    for (th_ns, m) in [(0, 1024u64), (7_000, 8192)] {
                        let links = LinkModel { ts_ns: 100_000, th_ns, tw_ps: 3_000, routing, packet_bytes: 0, ports };
                        let spec = RunSpec { size_bytes: m, ..RunSpec::new(entry.collective, entry.algorithm) };
                        let Some(expected) = time_ns(entry.collective, entry.algorithm, topology, m, &links, &[])
                        else {
                            // A form that holds all-port only must fail one-port somewhere.
                            let all_port = LinkModel { ports: Ports::All, ..links };
                            if let Some(all_port_form) =
                                time_ns(entry.collective, entry.algorithm, topology, m, &all_port, &[])
                            {
                                let got = model::predict(&spec, topology, links).expect("a prediction").time_ns;
                                *other_model_differs |= got != all_port_form;
                            }
                            continue;
                        };
                        assert!(formula(entry.collective, entry.algorithm, topology, m, routing, ports).is_some());
                        let got = model::predict(&spec, topology, links).expect("a prediction").time_ns;
                        checked += 1;
                        switched_checked += usize::from(topology.kind().is_switched());
                        *met = true;
                        if got != expected {
                            mismatches.push(format!(
                                "{} {} on {topology}, m = {m}, {routing}, {ports}-port, t_h {th_ns}: simulator {got}, \
                                 closed form {expected}",
                                entry.collective, entry.algorithm
                            ));
                        }
                    }
                }
            }
        }
        assert!(checked > 200, "only {checked} cases have a closed form");
        // Three pairs on the eight fat-trees whose k/2 is a power of two and the ring
        // all-reduce on the four clusters of three cores a machine or more, two sizes each.
        assert_eq!(switched_checked, (3 * 8 + 4) * 2, "the switched forms held on every shape they claim");
        for ((entry, met), differs) in topocomm_proto::catalogue::ENTRIES.iter().zip(met).zip(other_model_differs) {
            if let Some(form) = entry.closed_form {
                assert!(met, "{} {}: its closed form ({form:?}) held on no shape", entry.collective, entry.algorithm);
                assert!(
                    form.ports().is_none() || differs,
                    "{} {}: its closed form ({form:?}) says it holds {:?} only, but held under the other model too",
                    entry.collective,
                    entry.algorithm,
                    form.ports()
                );
            }
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    }

    /// The fat-tree's form with its classes of links under physics of their own (edge and
    /// core links each their own t_s, t_h and t_w): the simulator exactly on the form, and
    /// the classes changed it. The cluster's ring has no form there: its ports queue.
    #[test]
    fn the_switched_forms_hold_under_each_class_of_links_physics() {
        let class = |name: &str, ts_ns, th_ns, tw_ps| ClassPhysics {
            name: name.to_owned(),
            ts_ns: Some(ts_ns),
            th_ns: Some(th_ns),
            tw_ps: Some(tw_ps),
        };
        let topology = Topology::new(TopologyKind::FatTree, 16, Some(&[4])).expect("fat-tree 4");
        let classes = vec![class("edge", 5_000, 500, 500), class("core", 200_000, 20_000, 20_000)];
        let links = LinkModel { ts_ns: 100_000, th_ns: 10_000, tw_ps: 10_000, ..LinkModel::NOMINAL };
        let m = 8 * 32 * 64;
        for (collective, algorithm) in
            [(Collective::Broadcast, Algorithm::Hypercube), (Collective::Allreduce, Algorithm::RecursiveDoubling)]
        {
            let spec = RunSpec { size_bytes: m, classes: classes.clone(), ..RunSpec::new(collective, algorithm) };
            let expected = time_ns(collective, algorithm, &topology, m, &links, &classes).expect("a form");
            let plain = time_ns(collective, algorithm, &topology, m, &links, &[]).expect("a form");
            let got = model::predict(&spec, &topology, links).expect("a prediction").time_ns;
            assert_eq!(got, expected, "{collective} {algorithm} on {topology} under {classes:?}");
            assert_ne!(expected, plain, "{collective} {algorithm} on {topology}: the classes changed nothing");
        }
        let ring = Topology::new(TopologyKind::Cluster, 32, Some(&[4, 8])).expect("cluster 4x8");
        let intra = [class("intra", 1, 1, 1)];
        assert_eq!(time_ns(Collective::Allreduce, Algorithm::Ring, &ring, m, &links, &intra), None);
    }

    /// The switched forms hold for the ranks placed linearly and, on a fat-tree, routed
    /// d-mod-k only: under another placement or ECMP there is none.
    #[test]
    fn the_switched_forms_hold_only_placed_linearly_and_routed_d_mod_k() {
        let links = LinkModel { ts_ns: 100_000, th_ns: 10_000, tw_ps: 10_000, ..LinkModel::NOMINAL };
        let m = 8 * 32 * 64;
        let tree = Topology::new(TopologyKind::FatTree, 16, Some(&[4])).expect("fat-tree 4");
        let ring = Topology::new(TopologyKind::Cluster, 32, Some(&[4, 8])).expect("cluster 4x8");
        let (broadcast, allreduce) = (Collective::Broadcast, Collective::Allreduce);
        assert!(time_ns(broadcast, Algorithm::Hypercube, &tree, m, &links, &[]).is_some());
        assert!(time_ns(allreduce, Algorithm::Ring, &ring, m, &links, &[]).is_some());
        let ecmp = tree.clone().with_routes(Routes::Ecmp).expect("ecmp");
        assert_eq!(time_ns(broadcast, Algorithm::Hypercube, &ecmp, m, &links, &[]), None);
        for placement in [Placement::RoundRobin, Placement::Random { seed: 1 }] {
            let tree = tree.clone().placed(placement).expect("placed");
            assert_eq!(time_ns(broadcast, Algorithm::Hypercube, &tree, m, &links, &[]), None, "{tree}");
            let ring = ring.clone().placed(placement).expect("placed");
            assert_eq!(time_ns(allreduce, Algorithm::Ring, &ring, m, &links, &[]), None, "{ring}");
        }
    }
}
