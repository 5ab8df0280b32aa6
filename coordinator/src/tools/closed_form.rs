//! The textbook's closed forms of the collectives' times, where one applies: an
//! algorithm on the topology it was made for, so that no two messages share a link at
//! once, under store-and-forward ([GGKK 4.1]-[GGKK 4.5], [KGGK94 3.2]-[KGGK94 3.7]),
//! and the cut-through ring broadcast of [GGKK 4.1.1]. Every message then crosses one
//! link, costing t_s + t_h + t_w m (the textbook's forms have no t_h: it enters once per
//! step). On a switched network a message crosses several links, each costing t_h +
//! t_w m under store-and-forward; the forms that hold there ([`SwitchedForm`]) count
//! them. `topocomm simulate` prints them beside the simulator's times, and the tests
//! hold the two equal to the nanosecond at every p they reach.

use topocomm_proto::catalogue::{self, ClosedForm};
use topocomm_proto::network::Family;
use topocomm_proto::spec::{Algorithm, ClassPhysics, Collective, LinkModel, Ports, Routing};
use topocomm_proto::{Topology, TopologyKind};

/// A closed form of a switched network.
///
/// `FatTreeBinomial`: the hypercube's pairs r, r xor 2^j ([GGKK 4.1.3] broadcast,
/// [GGKK 4.3] reduce and recursive-doubling all-reduce) on a k-port fat-tree whose k/2
/// is a power of two, p = 2^d ranks on the first p hosts: a pair shares an edge switch
/// where 2^j < k/2 (2 links), a pod where 2^j < k²/4 (4 links), else it crosses the
/// core (6 links). No two messages of a step share a link: d-mod-k sends the messages
/// out of one edge switch to distinct destinations mod k/2 up through distinct
/// aggregation switches and on through distinct core switches (Al-Fares et al. 2008
/// §3.3), and every down path is its destination's own. So, all-port and
/// store-and-forward, Σ_j (t_s + h_j (t_h + t_w m)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SwitchedForm {
    FatTreeBinomial,
}

impl SwitchedForm {
    /// The form `collective` by `algorithm` has on `topology` under `routing` and
    /// `ports`, where one holds.
    fn of(
        collective: Collective,
        algorithm: Algorithm,
        topology: &Topology,
        routing: Routing,
        ports: Ports,
    ) -> Option<(SwitchedForm, usize)> {
        let Family::FatTree(tree) = topology.switched()?.family() else { return None };
        let binomial = matches!(
            (collective, algorithm),
            (Collective::Broadcast | Collective::Reduce, Algorithm::Hypercube)
                | (Collective::Allreduce, Algorithm::RecursiveDoubling)
        );
        let half = tree.k() / 2;
        (binomial
            && routing == Routing::Sf
            && ports == Ports::All
            && half.is_power_of_two()
            && topology.p().is_power_of_two()
            && topology.p() >= 2)
            .then_some((SwitchedForm::FatTreeBinomial, half))
    }

    fn formula(self) -> &'static str {
        match self {
            SwitchedForm::FatTreeBinomial => {
                "Σ_j (t_s + h_j (t_h + t_w m)), h_j = 2, 4, 6 links as 2^j < k/2, < k²/4, beyond (fat-tree, d-mod-k)"
            }
        }
    }

    /// The form's time in nanoseconds: `half` is the fat-tree's k/2.
    fn time_ns(self, half: usize, p: usize, m: u64, model: &LinkModel) -> u64 {
        match self {
            SwitchedForm::FatTreeBinomial => (0..p.trailing_zeros())
                .map(|j| {
                    let distance = 1usize << j;
                    let links = if distance < half {
                        2
                    } else if distance < half * half {
                        4
                    } else {
                        6
                    };
                    model.ts_ns + links * (model.th_ns + model.transfer_ns(m as usize))
                })
                .sum(),
        }
    }
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
    if model.packet_bytes > 0 || classes.iter().any(|class| class.applied_to(*model) != *model) {
        return None;
    }
    if topology.kind().is_switched() {
        let (form, half) = SwitchedForm::of(collective, algorithm, topology, model.routing, model.ports)?;
        return Some(form.time_ns(half, topology.p(), m, model));
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
    routing: Routing,
    ports: Ports,
) -> Option<&'static str> {
    match topology.kind().is_switched() {
        true => SwitchedForm::of(collective, algorithm, topology, routing, ports).map(|(form, _)| form.formula()),
        false => form(collective, algorithm, topology.kind(), routing, ports).map(ClosedForm::formula),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::model;
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
                        assert!(formula(entry.collective, entry.algorithm, topology, routing, ports).is_some());
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
        // Three pairs on the eight fat-trees whose k/2 is a power of two, two sizes each.
        assert_eq!(switched_checked, 3 * 8 * 2, "the fat-tree forms held on every shape they claim");
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
}
