//! The textbook's closed forms of the collectives' times, where one applies: an
//! algorithm on the topology it was made for, so that no two messages share a link at
//! once, under store-and-forward ([GGKK 4.1]-[GGKK 4.5], [KGGK94 3.2]-[KGGK94 3.7]),
//! and the cut-through ring broadcast of [GGKK 4.1.1]. Every message then crosses one
//! link, costing t_s + t_h + t_w m (the textbook's forms have no t_h: it enters once per
//! step). `topocomm simulate` prints them beside the simulator's times, and the tests
//! hold the two equal to the nanosecond at every p they reach.

use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Routing};
use topocomm_proto::{Topology, TopologyKind};

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
    let p = topology.p() as u64;
    let (ts, th) = (model.ts_ns, model.th_ns);
    // t_w · bytes, exact whenever t_w is a whole number of picoseconds per byte times
    // the bytes is a whole number of nanoseconds (the simulator rounds each message).
    let tw = |bytes: u64| model.transfer_ns(bytes as usize);
    let hop = ts + th;
    let log_p =
        || (topology.kind() == TopologyKind::Hypercube || p.is_power_of_two()).then(|| u64::from(p.trailing_zeros()));
    let torus = || match (topology.kind(), topology.dims()) {
        (TopologyKind::Torus, &[rows, cols]) => Some((rows as u64, cols as u64)),
        _ => None,
    };
    use Algorithm as A;
    use Collective as C;
    use TopologyKind as K;
    match (model.routing, collective, algorithm, topology.kind()) {
        // [GGKK 4.1.1] cut-through (small packets): t_s log p + t_w m log p + t_h (p - 1).
        (Routing::Ct, C::Broadcast, A::RecursiveDoubling, K::Ring) => {
            let log_p = log_p()?;
            Some(ts * log_p + tw(m) * log_p + th * (p - 1))
        }
        (Routing::Ct, ..) => None,
        // [KGGK94 3.2]: (t_s + t_w m)⌊p/2⌋ (the two halves of the ring at once).
        (_, C::Broadcast | C::Reduce, A::Ring, K::Ring) => Some((hop + tw(m)) * (p / 2)),
        // [GGKK 4.1.2]: a ring broadcast along a row, then along every column.
        (_, C::Broadcast | C::Reduce, A::Mesh, K::Torus) => {
            let (rows, cols) = torus()?;
            Some((hop + tw(m)) * (rows / 2 + cols / 2))
        }
        // [GGKK 4.1.3]: (t_s + t_w m) log p.
        (_, C::Broadcast | C::Reduce, A::Hypercube, K::Hypercube) => Some((hop + tw(m)) * log_p()?),
        // [GGKK 4.2.1]: (t_s + t_w m)(p - 1).
        (_, C::Allgather | C::ReduceScatter, A::Ring, K::Ring) => Some((hop + tw(m)) * (p - 1)),
        // [GGKK 4.2.2]: 2 t_s (√p - 1) + t_w m (p - 1); on R x C, t_s (R + C - 2).
        (_, C::Allgather | C::ReduceScatter, A::Mesh, K::Torus) => {
            let (rows, cols) = torus()?;
            Some(hop * (rows + cols - 2) + tw(m) * (p - 1))
        }
        // [GGKK 4.2.3], [GGKK 4.4]: t_s log p + t_w m (p - 1).
        (_, C::Allgather | C::ReduceScatter | C::Scatter | C::Gather, A::Hypercube, K::Hypercube) => {
            Some(hop * log_p()? + tw(m) * (p - 1))
        }
        // [GGKK 4.3]: recursive doubling, (t_s + t_w m) log p.
        (_, C::Allreduce, A::RecursiveDoubling, K::Hypercube) => Some((hop + tw(m)) * log_p()?),
        // [GGKK 4.5.1]: (t_s + ½ t_w m p)(p - 1).
        (_, C::Alltoall, A::Ring, K::Ring) => Some(hop * (p - 1) + tw(m * p * (p - 1) / 2)),
        // [GGKK 4.5.2]: (2 t_s + t_w m p)(√p - 1); on R x C, (t_s + ½ t_w m p)(R + C - 2).
        (_, C::Alltoall, A::Mesh, K::Torus) => {
            let (rows, cols) = torus()?;
            Some(hop * (rows + cols - 2) + tw(m * p * (rows + cols - 2) / 2))
        }
        // [GGKK 4.5.3]: (t_s + ½ t_w m p) log p.
        (_, C::Alltoall, A::Hypercube, K::Hypercube) => Some((hop + tw(m * p / 2)) * log_p()?),
        // Brent-Kung tree scan: 2 log p - 1 messages of the whole vector on the longest chain.
        (_, C::Scan, A::Tree, K::Hypercube) => Some((hop + tw(m)) * (2 * log_p()? - 1)),
        _ => None,
    }
}

/// The formula [`time_ns`] evaluates, as the textbook writes it (for tables).
pub fn formula(
    collective: Collective,
    algorithm: Algorithm,
    kind: TopologyKind,
    routing: Routing,
) -> Option<&'static str> {
    use Algorithm as A;
    use Collective as C;
    use TopologyKind as K;
    Some(match (routing, collective, algorithm, kind) {
        (Routing::Ct, C::Broadcast, A::RecursiveDoubling, K::Ring) => "t_s log p + t_w m log p + t_h (p-1)",
        (Routing::Ct, ..) => return None,
        (_, C::Broadcast | C::Reduce, A::Ring, K::Ring) => "(t_s + t_w m) ⌊p/2⌋",
        (_, C::Broadcast | C::Reduce, A::Mesh, K::Torus) => "(t_s + t_w m)(⌊R/2⌋ + ⌊C/2⌋)",
        (_, C::Broadcast | C::Reduce, A::Hypercube, K::Hypercube) => "(t_s + t_w m) log p",
        (_, C::Allgather | C::ReduceScatter, A::Ring, K::Ring) => "(t_s + t_w m)(p-1)",
        (_, C::Allgather | C::ReduceScatter, A::Mesh, K::Torus) => "t_s (R+C-2) + t_w m (p-1)",
        (_, C::Allgather | C::ReduceScatter | C::Scatter | C::Gather, A::Hypercube, K::Hypercube) => {
            "t_s log p + t_w m (p-1)"
        }
        (_, C::Allreduce, A::RecursiveDoubling, K::Hypercube) => "(t_s + t_w m) log p",
        (_, C::Alltoall, A::Ring, K::Ring) => "(t_s + ½ t_w m p)(p-1)",
        (_, C::Alltoall, A::Mesh, K::Torus) => "(t_s + ½ t_w m p)(R+C-2)",
        (_, C::Alltoall, A::Hypercube, K::Hypercube) => "(t_s + ½ t_w m p) log p",
        (_, C::Scan, A::Tree, K::Hypercube) => "(t_s + t_w m)(2 log p - 1)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::model;
    use topocomm_proto::spec::RunSpec;

    /// Every pair with a closed form, at every p up to 256 its topology takes (and a few
    /// shapes of torus), both sizes, with and without t_h: the simulator gives exactly the
    /// closed form. `simulate`'s benchmark holds them at p = 65,536 as well.
    #[test]
    fn the_simulator_meets_every_closed_form_exactly() {
        let (mut checked, mut mismatches) = (0, Vec::new());
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
            for entry in topocomm_proto::catalogue::ENTRIES {
                for routing in [Routing::Sf, Routing::Ct] {
                    for (th_ns, m) in [(0, 1024u64), (7_000, 8192)] {
                        let links = LinkModel { ts_ns: 100_000, th_ns, tw_ps: 3_000, routing, packet_bytes: 0 };
                        let Some(expected) = time_ns(entry.collective, entry.algorithm, topology, m, &links) else {
                            continue;
                        };
                        assert!(formula(entry.collective, entry.algorithm, topology.kind(), routing).is_some());
                        let spec = RunSpec { size_bytes: m, ..RunSpec::new(entry.collective, entry.algorithm) };
                        let got = model::predict(&spec, topology, links).expect("a prediction").time_ns;
                        checked += 1;
                        if got != expected {
                            mismatches.push(format!(
                                "{} {} on {topology}, m = {m}, {routing}, t_h {th_ns}: simulator {got}, closed form {expected}",
                                entry.collective, entry.algorithm
                            ));
                        }
                    }
                }
            }
        }
        assert!(checked > 200, "only {checked} cases have a closed form");
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    }
}
