//! A simulation's plan: every point (topology, algorithm, p) checked, with what its
//! messages carry and the memory it is estimated to need; and a point's summary once
//! simulated.

use anyhow::{Context, bail};
use bytesize::ByteSize;
use topocomm_collectives::simulator::spec::with_known;
use topocomm_collectives::simulator::spec::{Inputs, SimulatedRun};
use topocomm_proto::spec::{Algorithm, LinkModel, RunSpec};
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::control::request::{self, Repetition};
use crate::render::quantity::size_text;
use crate::render::report::{self, BusiestLink, LinkPhysics, TimeStats};
use crate::render::simulation::{Cost, SimulationSummary};
use crate::tools::closed_form;
use crate::tools::memory::estimate;
use crate::tools::simulate::args::{PayloadMode, SimulateArgs};
use crate::tools::sweep::Algorithms;

/// One point to simulate.
pub(crate) struct Planned {
    pub(crate) topology: Topology,
    pub(crate) spec: RunSpec,
    pub(crate) inputs: Inputs,
    pub(crate) estimate: u64,
}

/// Every point to simulate, in order (topology, algorithm, p), each checked and with its
/// memory estimated; a point whose data would not fit runs with lengths only when the
/// payload is `auto`, and is refused otherwise.
pub(crate) fn plan(args: &SimulateArgs, links: LinkModel) -> anyhow::Result<Vec<Planned>> {
    anyhow::ensure!(
        args.dims.is_none() || (args.topology.len() == 1 && args.nodes.len() == 1),
        "--dims gives the shape of one topology: give one --topology and one --nodes with it"
    );
    let available = topocomm_node::daemon::allocator::available_bytes();
    let schedule = match (&args.schedule, &args.goal) {
        (Some(path), _) => Some(Box::new(request::read_schedule(path, args.collective)?)),
        (None, Some(path)) => {
            Some(Box::new(topocomm_collectives::algorithms::schedule::read_goal(path).map_err(anyhow::Error::msg)?))
        }
        (None, None) => None,
    };
    if let Some(schedule) = &schedule {
        eprintln!("{}", topocomm_collectives::algorithms::schedule::summary(schedule));
    }
    let tuning = args.tuning.load()?;
    let mut planned = Vec::new();
    let network = args.network.as_deref().map(request::network_topology).transpose()?;
    let kinds = if network.is_some() { vec![TopologyKind::Graph] } else { args.topology.clone() };
    for (kind, routes) in kinds.iter().filter_map(|&kind| Some((kind, args.routes?))) {
        kind.check_routes(routes)?;
    }
    let nodes = match &network {
        Some(topology) => vec![topology.p()],
        None => args.nodes.clone(),
    };
    for &kind in &kinds {
        let algorithms: Vec<Algorithm> = match &args.algorithm {
            None => vec![catalogue::default_algorithm(args.collective, kind)],
            Some(Algorithms::All) => catalogue::algorithms(args.collective).map(|entry| entry.algorithm).collect(),
            Some(Algorithms::Named(named)) => named.clone(),
        };
        for &algorithm in &algorithms {
            catalogue::check(args.collective, algorithm)?;
            for &p in &nodes {
                let topology = match &network {
                    Some(topology) => topology.clone(),
                    None => {
                        Topology::new(kind, p, args.dims.as_deref()).with_context(|| format!("{kind} of {p} nodes"))?
                    }
                }
                .routed(args.routes)?
                .placed(args.placement)?;
                let once = Repetition { warmup: 0, iterations: 1, timeout: args.timeout, dump: false };
                let spec = RunSpec {
                    run: 1,
                    schedule: schedule.clone(),
                    classes: request::class_physics(&topology, &args.links.classes),
                    ..request::run_spec(args.collective, algorithm, args.size, &args.data, once)?
                };
                let resolved = with_known(&spec, &topology, Some(links), |known| tuning.resolve_known(&spec, known));
                let spec = RunSpec { algorithm: resolved, ..spec };
                spec.validate(p).with_context(|| format!("{} on a {topology}", args.collective))?;
                let (inputs, estimate) = fit(&spec, &topology, args.payload, available)?;
                planned.push(Planned { topology, spec, inputs, estimate });
            }
        }
    }
    Ok(planned)
}

/// The inputs a point runs with under `mode`, and the memory it is estimated to need;
/// refuses, with the figures, what would not fit in `available`.
fn fit(
    spec: &RunSpec,
    topology: &Topology,
    mode: PayloadMode,
    available: Option<u64>,
) -> anyhow::Result<(Inputs, u64)> {
    let (with_data, lengths_only) = estimate(spec, topology);
    let fits = |bytes: u64| available.is_none_or(|available| bytes <= available);
    let have =
        available.map_or_else(|| "an unknown amount".to_owned(), |bytes| ByteSize(bytes).display().iec().to_string());
    let what = format!("{} on a {topology}, {} per node", spec.collective, size_text(spec.size_bytes));
    match mode {
        PayloadMode::Data | PayloadMode::Auto if fits(with_data) => Ok((Inputs::Reference, with_data)),
        PayloadMode::Data => bail!(
            "simulating {what} with data needs about {} and this machine has {have} available; --payload lengths \
             needs about {} (nothing is verified then)",
            ByteSize(with_data).display().iec(),
            ByteSize(lengths_only).display().iec()
        ),
        PayloadMode::Auto | PayloadMode::Lengths if fits(lengths_only) => Ok((Inputs::Lengths, lengths_only)),
        PayloadMode::Auto | PayloadMode::Lengths => bail!(
            "simulating {what} needs about {} even with lengths only, and this machine has {have} available",
            ByteSize(lengths_only).display().iec()
        ),
    }
}

/// A simulated point summarised with `run`'s keys, its closed form beside it where one
/// applies.
pub(crate) fn describe(point: &Planned, simulated: &SimulatedRun, links: &LinkModel) -> SimulationSummary {
    let spec = &point.spec;
    let time_us = simulated.time_ns as f64 / 1e3;
    let closed_form_ns = match spec.schedule {
        None => closed_form::time_ns(
            spec.collective,
            spec.algorithm,
            &point.topology,
            spec.size_bytes,
            links,
            &spec.classes,
        ),
        Some(_) => None,
    };
    SimulationSummary {
        collective: spec.what_collective(),
        algorithm: spec.what_runs(),
        topology: point.topology.kind().to_string(),
        dims: point.topology.dims().to_vec(),
        placement: point.topology.placement(),
        route_policy: report::switched_routes(point.topology.kind(), Some(point.topology.routes())),
        nodes: point.topology.p(),
        size_bytes: spec.size_bytes,
        root: spec.root,
        dtype: spec.dtype.to_string(),
        op: spec.op.to_string(),
        verified: simulated.verified,
        payload: if point.inputs == Inputs::Lengths { "lengths" } else { "data" },
        time_us: TimeStats::of(&[time_us]),
        frames_sent: simulated.totals.messages,
        frames_forwarded: simulated.totals.forwarded,
        busiest_link: simulated.busiest_link.map(|((from, to), bytes)| BusiestLink { from, to, bytes }),
        steps: simulated.steps,
        links: LinkPhysics::of(links, false),
        closed_form_us: closed_form_ns.map(|ns| ns as f64 / 1e3),
        closed_form: closed_form_ns.and(closed_form::formula(
            spec.collective,
            spec.algorithm,
            &point.topology,
            spec.size_bytes,
            links.routing,
            links.ports,
        )),
        simulation: Cost {
            frame_hops: simulated.totals.frame_hops,
            polls: simulated.polls,
            memory_estimate_bytes: point.estimate,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_proto::TopologyKind;
    use topocomm_proto::spec::Collective;

    const GIB: u64 = 1 << 30;

    fn spec(collective: Collective, algorithm: Algorithm) -> RunSpec {
        RunSpec { size_bytes: 8, ..RunSpec::new(collective, algorithm) }
    }

    fn hypercube(p: usize) -> Topology {
        Topology::new(TopologyKind::Hypercube, p, None).expect("a power of two")
    }

    /// The runs whose state grows with p on every node (an all-to-all's blocks, the ring
    /// all-gather's) are refused before they start where they would not fit: at 16,384
    /// nodes the all-to-all took more than this machine's 23 GiB and was killed.
    #[test]
    fn an_all_to_all_too_big_for_the_memory_is_refused_before_it_starts() {
        let refused = fit(
            &spec(Collective::Alltoall, Algorithm::Pairwise),
            &hypercube(16384),
            PayloadMode::Lengths,
            Some(23 * GIB),
        )
        .expect_err("64 GiB of blocks");
        assert!(refused.to_string().contains("even with lengths only"), "{refused}");
        let ring = Topology::new(TopologyKind::Ring, 65536, None).expect("a ring");
        assert!(fit(&spec(Collective::Allgather, Algorithm::Ring), &ring, PayloadMode::Auto, Some(23 * GIB)).is_err());
        let (_, estimate) = fit(
            &spec(Collective::Alltoall, Algorithm::Pairwise),
            &hypercube(2048),
            PayloadMode::Lengths,
            Some(23 * GIB),
        )
        .expect("2,048 nodes fit");
        // 2,048 nodes took 621 MiB (lengths only): the estimate is above it.
        assert!(estimate > 621 << 20, "{estimate}");
    }

    /// A rooted tree's nodes hold no future while they wait, so the 2^24-node broadcast
    /// (2.3 GiB resident, data verified) is not refused on a machine of 23 GiB.
    #[test]
    fn a_broadcast_of_sixteen_million_nodes_fits_where_it_runs() {
        let big = hypercube(1 << 24);
        let (inputs, estimate) =
            fit(&spec(Collective::Broadcast, Algorithm::Hypercube), &big, PayloadMode::Auto, Some(23 * GIB))
                .expect("fits");
        assert_eq!(inputs, Inputs::Reference);
        assert!(estimate > 5 * GIB / 2 && estimate < 23 * GIB, "{estimate}");
        // The composite broadcast holds every node's future: the larger estimate.
        let composite = spec(Collective::Broadcast, Algorithm::ScatterAllgather);
        assert!(fit(&composite, &big, PayloadMode::Lengths, Some(23 * GIB)).is_err());
    }
}
