//! The port model on the simulator. One-port nodes ([GGKK 4]'s assumption, stated in the
//! project's seeds/000: a processor sends on one link at a time and receives on one) give
//! the textbook's step counts and times; all-port nodes (every link at once) what
//! topocomm always gave; and each step count `topocomm list` prints holds under the
//! port model it names.

use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self, Inputs, SimulatedRun};
use topocomm_proto::catalogue::{self, Entry, Steps};
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Ports, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

const TS: u64 = 50_000;
const TH: u64 = 3_000;
/// t_w in picoseconds per byte: 2.5 ns.
const TW_PS: u64 = 2_500;
/// The shift every count is taken with.
const SHIFT: usize = 3;

fn links(ports: Ports) -> LinkModel {
    LinkModel { ts_ns: TS, th_ns: TH, tw_ps: TW_PS, routing: Routing::Sf, packet_bytes: 0, ports }
}

fn simulate(collective: Collective, algorithm: Algorithm, topology: &Topology, m: u64, ports: Ports) -> SimulatedRun {
    let spec = RunSpec { size_bytes: m, shift: SHIFT, ..RunSpec::new(collective, algorithm) };
    let run = spec::run(&spec, topology, links(ports), Inputs::Reference, Options::default());
    let run = run.unwrap_or_else(|error| panic!("{collective} by {algorithm} on {topology}, {ports}-port: {error}"));
    assert!(run.verified, "{collective} by {algorithm} on {topology}, {ports}-port: not verified");
    run
}

/// The linear broadcast on a fully connected network of 8: one-port, the root's seven
/// sends go one after the other, (p - 1)(t_s + t_h + t_w m) and p - 1 steps, to the
/// nanosecond ([GGKK 4.1]'s naive broadcast); all-port, all at once: one message's time.
#[test]
fn the_linear_broadcast_is_p_minus_one_messages_one_port_and_one_all_port() {
    let topology = Topology::new(TopologyKind::Full, 8, None).expect("full of 8");
    let m = 1024;
    let message = TS + TH + m * TW_PS / 1000;
    let one = simulate(Collective::Broadcast, Algorithm::Linear, &topology, m, Ports::One);
    assert_eq!((one.time_ns, one.steps), (7 * message, 7));
    let all = simulate(Collective::Broadcast, Algorithm::Linear, &topology, m, Ports::All);
    assert_eq!((all.time_ns, all.steps), (message, 1));
    // Its dual: the root takes the seven messages one at a time.
    let gather = simulate(Collective::Gather, Algorithm::Linear, &topology, m, Ports::One);
    assert_eq!((gather.time_ns, gather.steps), (7 * message, 7));
}

/// The hypercube broadcast's root sends to 4, 2 and 1 in steps 1, 2 and 3 one-port, as
/// the textbook's figure draws it ([GGKK 4.1.3], Figure 4.6), not all in step 1.
#[test]
fn the_hypercube_broadcast_takes_one_dimension_a_step_one_port() {
    let topology = Topology::new(TopologyKind::Hypercube, 8, None).expect("a 3-cube");
    let spec = RunSpec { size_bytes: 1024, ..RunSpec::new(Collective::Broadcast, Algorithm::Hypercube) };
    let options = Options { record: true, ..Options::default() };
    let run = spec::run(&spec, &topology, links(Ports::One), Inputs::Reference, options).expect("a run");
    let mut root_sends: Vec<(usize, u16)> = run
        .events
        .iter()
        .filter(|event| event.kind == topocomm_proto::flow::FlowKind::Send && event.node == 0)
        .map(|event| (event.dst, event.step))
        .collect();
    root_sends.sort_by_key(|&(_, step)| step);
    assert_eq!(root_sends, [(4, 1), (2, 2), (1, 3)]);
    assert_eq!(run.steps, 3);
}

/// The shape an entry is counted on (a torus for the grid algorithms), if `p` makes one.
fn shape(entry: &Entry, p: usize) -> Option<Topology> {
    let kind = if entry.made_for.includes(TopologyKind::Torus) { TopologyKind::Torus } else { entry.made_for.first() };
    if kind == TopologyKind::Hypercube && !p.is_power_of_two() {
        return None;
    }
    let topology = Topology::new(kind, p, None).ok()?;
    let square = topology.dims().iter().all(|&side| side == topology.dims()[0]);
    (kind != TopologyKind::Torus || square).then_some(topology)
}

/// Whether `steps` counts any p (not only powers of four, where every count of the
/// catalogue holds): then it is checked on 9 and 15 nodes too, where the port models
/// part on an odd ring.
fn counts_any_p(steps: Steps) -> bool {
    matches!(
        steps,
        Steps::Exactly(_)
            | Steps::PMinusOne
            | Steps::HalfDown
            | Steps::HalfUp
            | Steps::HalfOnEven
            | Steps::TwicePMinusOne
            | Steps::ShortWay
            | Steps::TorusHalfSides
    )
}

/// Every step count `topocomm list` prints holds, on the topology its algorithm is made
/// for, under the port model it names (under both where it names none); one that names
/// a model gives another count under the other somewhere, so that no name is left on a
/// count that holds either way.
#[test]
fn every_listed_step_count_holds_under_the_port_model_it_names() {
    let mut checked = 0;
    for entry in catalogue::ENTRIES {
        let mut other_differs = false;
        for p in [16, 64, 9, 15] {
            if p < 16 && !counts_any_p(entry.steps) {
                continue;
            }
            let Some(topology) = shape(entry, p) else { continue };
            let spec = RunSpec { size_bytes: 1024, shift: SHIFT, ..RunSpec::new(entry.collective, entry.algorithm) };
            let Some(listed) = entry.steps.chain(p as u64, SHIFT as u64) else { continue };
            if spec.validate(p).is_err() {
                continue;
            }
            for ports in [Ports::One, Ports::All] {
                let steps = u64::from(simulate(entry.collective, entry.algorithm, &topology, 1024, ports).steps);
                let named = entry.steps_hold_under();
                if named.is_none_or(|named| named == ports) {
                    assert!(
                        listed.contains(&steps),
                        "{} by {} on {topology}, {ports}-port: `list` says {} ({listed:?}), the schedule is {steps} deep",
                        entry.collective,
                        entry.algorithm,
                        entry.steps_text()
                    );
                    checked += 1;
                } else {
                    other_differs |= !listed.contains(&steps);
                }
            }
        }
        assert!(
            entry.steps_hold_under().is_none() || other_differs,
            "{} by {}: `list` says its {} holds {:?} only, but it held under the other model everywhere",
            entry.collective,
            entry.algorithm,
            entry.steps,
            entry.steps_hold_under()
        );
    }
    assert!(checked > 150, "only {checked} step counts were checked");
}

/// The textbook's step counts of its algorithms ([GGKK 4.1]-[GGKK 4.6]), written here
/// from the book rather than read from the catalogue, under its one-port model, at
/// p = 16 and 64 (q = 3 for the shift): each algorithm's schedule on its topology is
/// exactly that deep. √p: a side of the square torus; log p: the hypercube's dimension.
#[test]
fn the_textbook_algorithms_take_the_books_steps_one_port() {
    use Algorithm as A;
    use Collective as C;
    use TopologyKind as T;
    #[allow(clippy::type_complexity)]
    let book: &[(C, A, T, &str, fn(u64) -> u64)] = &[
        // [GGKK 4.1]: the naive broadcast, p - 1 sends of the root; its dual.
        (C::Broadcast, A::Linear, T::Full, "4.1 naive", |p| p - 1),
        (C::Reduce, A::Linear, T::Full, "4.1 naive", |p| p - 1),
        // [GGKK 4.1.1]: recursive doubling on a ring, log p.
        (C::Broadcast, A::RecursiveDoubling, T::Ring, "4.1.1", |p| u64::from(p.ilog2())),
        (C::Reduce, A::RecursiveHalving, T::Ring, "4.1.1", |p| u64::from(p.ilog2())),
        // [KGGK94 3.2] (seeds/003): a ring along a row, then along every column, 2⌊√p/2⌋.
        (C::Broadcast, A::Mesh, T::Torus, "KGGK94 3.2", |p| 2 * (p.isqrt() / 2)),
        // [GGKK 4.1.3], Algorithms 4.1-4.3: one dimension a step, log p.
        (C::Broadcast, A::Hypercube, T::Hypercube, "4.1.3", |p| u64::from(p.ilog2())),
        (C::Reduce, A::Hypercube, T::Hypercube, "4.1.3", |p| u64::from(p.ilog2())),
        // [GGKK 4.2]: all-to-all broadcast, ring p - 1, mesh 2(√p - 1), hypercube log p.
        (C::Allgather, A::Ring, T::Ring, "4.2.1", |p| p - 1),
        (C::Allgather, A::Mesh, T::Torus, "4.2.2", |p| 2 * (p.isqrt() - 1)),
        (C::Allgather, A::Hypercube, T::Hypercube, "4.2.3", |p| u64::from(p.ilog2())),
        (C::ReduceScatter, A::Ring, T::Ring, "4.2.1 dual", |p| p - 1),
        (C::ReduceScatter, A::Hypercube, T::Hypercube, "4.2.3 dual", |p| u64::from(p.ilog2())),
        // [GGKK 4.3]: all-reduce by recursive doubling, log p; prefix sums, log p.
        (C::Allreduce, A::RecursiveDoubling, T::Hypercube, "4.3", |p| u64::from(p.ilog2())),
        (C::Scan, A::Hypercube, T::Hypercube, "4.3", |p| u64::from(p.ilog2())),
        // [GGKK 4.4]: scatter and gather, log p on a hypercube, p - 1 naive.
        (C::Scatter, A::Hypercube, T::Hypercube, "4.4", |p| u64::from(p.ilog2())),
        (C::Gather, A::Hypercube, T::Hypercube, "4.4", |p| u64::from(p.ilog2())),
        (C::Scatter, A::Linear, T::Full, "4.4 naive", |p| p - 1),
        (C::Gather, A::Linear, T::Full, "4.4 naive", |p| p - 1),
        // [GGKK 4.5]: all-to-all personalized, ring p - 1, mesh 2(√p - 1), hypercube
        // log p, and the E-cube pairwise exchange p - 1.
        (C::Alltoall, A::Ring, T::Ring, "4.5.1", |p| p - 1),
        (C::Alltoall, A::Mesh, T::Torus, "4.5.2", |p| 2 * (p.isqrt() - 1)),
        (C::Alltoall, A::Hypercube, T::Hypercube, "4.5.3", |p| u64::from(p.ilog2())),
        (C::Alltoall, A::PairwiseXor, T::Hypercube, "4.5.3 E-cube", |p| p - 1),
        // [GGKK 4.6]: a circular q-shift on a ring, min(q, p - q) steps.
        (C::Shift, A::Ring, T::Ring, "4.6", |p| (SHIFT as u64).min(p - SHIFT as u64)),
    ];
    for &(collective, algorithm, kind, section, steps) in book {
        for p in [16usize, 64] {
            let topology = Topology::new(kind, p, None).expect("a shape");
            let run = simulate(collective, algorithm, &topology, 1024, Ports::One);
            assert_eq!(
                u64::from(run.steps),
                steps(p as u64),
                "[GGKK {section}] {collective} by {algorithm} on {topology}, one-port"
            );
        }
    }
    // [GGKK 4.6] on a hypercube: a shift takes at most 2 log p steps (a q that is no
    // power of two, as a sum of its bits, each a shift up a dimension and back).
    for p in [16usize, 64] {
        let topology = Topology::new(TopologyKind::Hypercube, p, None).expect("a hypercube");
        let run = simulate(Collective::Shift, Algorithm::Hypercube, &topology, 1024, Ports::One);
        assert!(u64::from(run.steps) <= 2 * u64::from(p.ilog2()), "{} steps on {topology}", run.steps);
    }
}

/// One-port is never faster than all-port and carries the same messages, for every
/// algorithm on its own topology (that all-port is what the network always did, the
/// simulator's and the closed forms' tests hold, unchanged).
#[test]
fn one_port_is_never_faster_and_carries_the_same_messages() {
    for entry in catalogue::ENTRIES {
        let Some(topology) = shape(entry, 16) else { continue };
        let spec = RunSpec { size_bytes: 3000, shift: SHIFT, ..RunSpec::new(entry.collective, entry.algorithm) };
        if spec.validate(16).is_err() {
            continue;
        }
        let all = simulate(entry.collective, entry.algorithm, &topology, 3000, Ports::All);
        let one = simulate(entry.collective, entry.algorithm, &topology, 3000, Ports::One);
        assert!(
            one.time_ns >= all.time_ns,
            "{} by {} on {topology}: one-port {} ns before all-port {} ns",
            entry.collective,
            entry.algorithm,
            one.time_ns,
            all.time_ns
        );
        assert_eq!(one.totals, all.totals, "{} by {}: the same messages either way", entry.collective, entry.algorithm);
    }
}
