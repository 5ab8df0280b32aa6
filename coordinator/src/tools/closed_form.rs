//! The textbook's closed forms of the collectives' times, where one applies: an
//! algorithm on the topology it was made for, so that no two messages share a link at
//! once, under store-and-forward ([GGKK 4.1]-[GGKK 4.5], [KGGK94 3.2]-[KGGK94 3.7]),
//! and the cut-through ring broadcast of [GGKK 4.1.1]. Every message then crosses one
//! link, costing t_s + t_h + t_w m (the textbook's forms have no t_h: it enters once per
//! step). `topocomm simulate` prints them beside the simulator's times, and the tests
//! hold the two equal to the nanosecond at every p they reach.

use topocomm_proto::catalogue::{self, ClosedForm};
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Ports, Routing};
use topocomm_proto::{Topology, TopologyKind};

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
/// does not cover).
pub fn time_ns(
    collective: Collective,
    algorithm: Algorithm,
    topology: &Topology,
    m: u64,
    model: &LinkModel,
) -> Option<u64> {
    if model.packet_bytes > 0 {
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
    kind: TopologyKind,
    routing: Routing,
    ports: Ports,
) -> Option<&'static str> {
    form(collective, algorithm, kind, routing, ports).map(ClosedForm::formula)
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
        for topology in &shapes {
            for ((entry, met), other_model_differs) in
                topocomm_proto::catalogue::ENTRIES.iter().zip(&mut met).zip(&mut other_model_differs)
            {
                for (routing, ports) in [Routing::Sf, Routing::Ct].into_iter().flat_map(|r| PORTS.map(|p| (r, p))) {
                    for (th_ns, m) in [(0, 1024u64), (7_000, 8192)] {
                        let links = LinkModel { ts_ns: 100_000, th_ns, tw_ps: 3_000, routing, packet_bytes: 0, ports };
                        let spec = RunSpec { size_bytes: m, ..RunSpec::new(entry.collective, entry.algorithm) };
                        let Some(expected) = time_ns(entry.collective, entry.algorithm, topology, m, &links) else {
                            // A form that holds all-port only must fail one-port somewhere.
                            let all_port = LinkModel { ports: Ports::All, ..links };
                            if let Some(all_port_form) =
                                time_ns(entry.collective, entry.algorithm, topology, m, &all_port)
                            {
                                let got = model::predict(&spec, topology, links).expect("a prediction").time_ns;
                                *other_model_differs |= got != all_port_form;
                            }
                            continue;
                        };
                        assert!(formula(entry.collective, entry.algorithm, topology.kind(), routing, ports).is_some());
                        let got = model::predict(&spec, topology, links).expect("a prediction").time_ns;
                        checked += 1;
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
