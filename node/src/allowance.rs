//! What a run lets each source queue at a node, and pass through it: the run's own
//! schedule, counted once by the coordinator for every node ([`limits_of_run`]) and sent
//! to each node in its start order (`RunLimits`), with the node's memory footprint by the
//! coordinator's tuning table. The count simulates one iteration of what the run does —
//! the runtime's barrier, the common-start announcement, then the collective (or the
//! dilation probe) — lengths only ([`topocomm_collectives::zeros`]: no payload takes
//! memory), watching every node ([`topocomm_collectives::simulator::watch`]). What the
//! simulator delivered to a node from each source, and what it passed on for each source,
//! is then that source's allowance there: messages of the algorithm once, runtime signals
//! twice (the next iteration's barrier may come before this one's collective is taken).
//! A node's mailbox and its outgoing queues cannot legitimately hold more of one source:
//! every node enters an iteration's barrier only once it has taken all of the last
//! iteration's messages, so at most one iteration's messages of a source (and the
//! signals around it) are ever untaken or unsent at once. Per link, the allowance is the
//! sum of the sources the topology's routes bring over it.
//!
//! When the simulation cannot run (no region of known zeros, or past [`PATIENCE`] of
//! wall time) the coordinator falls back to [`whole_run_bound`], the run's memory over
//! every node, for every source and link alike, and says so in its log. A node holds a
//! run to the rows it is sent ([`RunAllowance::accept`]), each capped at the memory it
//! has.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use topocomm_proto::spec::{LinkModel, RunSpec, class_models};
use topocomm_proto::{NodeId, Topology, reference};

use topocomm_collectives::algorithms::{self, barrier};
use topocomm_collectives::comm::mailbox::charge_of;
use topocomm_collectives::comm::{Comm, CommError};
use topocomm_collectives::simulator::{self, Options};
use topocomm_collectives::tuning::footprint::Footprint;
use topocomm_collectives::zeros;
use topocomm_proto::control::RunLimits;

use crate::steps::{probe, start};
use crate::transport::stream::STREAM_LINKS;

/// The most wall time a node spends counting a run's schedule before it falls back to
/// [`whole_run_bound`]. Measured here (opt-level 3, no LTO, 1 MiB): at p = 256 a ring
/// all-reduce 71 ms, a torus all-gather 9 ms, a hypercube all-to-all 136 ms, a ring
/// all-to-all 0.55 s, recursive doubling 1.4 s; at p = 4096 a torus all-gather 0.8 s,
/// while ring all-reduce, ring all-to-all and recursive doubling pass 20 s
/// (docs/DATA-PLANE-GUARDS.md): those fall back after this long.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// What one run lets each source have at one node, in bytes (payload and header of
/// every message or frame, see `mailbox::charge_of`), indexed by source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAllowance {
    /// Messages for this node, queued here until taken.
    pub delivered: Arc<[u64]>,
    /// Frames for other nodes, queued here until this node's links have written them.
    pub forwarded: Arc<[u64]>,
    /// Whether the figures are the schedule's (`false`: [`whole_run_bound`] for all).
    pub counted: bool,
}

impl RunAllowance {
    /// The same `bound` for every source of `p` nodes, for both queues.
    pub fn uniform(bound: u64, p: usize) -> Self {
        let each: Arc<[u64]> = vec![bound; p].into();
        RunAllowance { delivered: each.clone(), forwarded: each, counted: false }
    }

    /// Before the first run's spec is known: what the first iteration's runtime signals
    /// can bring from one source ([`signal_allowance`]).
    pub fn signals_only(p: usize) -> Self {
        Self::uniform(signal_allowance(p), p)
    }

    /// The allowance a node of a `p`-node run holds it to, from the rows the coordinator
    /// sent: one figure per source in each, every figure capped at `available_bytes`
    /// (the memory the node has, where it knows it), so that no spec, however formed,
    /// lets one source queue more than the node has.
    pub fn accept(limits: &RunLimits, p: usize, available_bytes: Option<u64>) -> Result<Self, LimitsRefusal> {
        for (queue, rows) in [("delivered", &limits.delivered), ("forwarded", &limits.forwarded)] {
            if rows.len() != p {
                return Err(LimitsRefusal::Rows { queue, rows: rows.len(), p });
            }
        }
        let cap = available_bytes.unwrap_or(u64::MAX);
        let capped = |rows: &[u64]| -> Arc<[u64]> { rows.iter().map(|&bytes| bytes.min(cap)).collect() };
        Ok(RunAllowance {
            delivered: capped(&limits.delivered),
            forwarded: capped(&limits.forwarded),
            counted: limits.counted,
        })
    }
}

/// Why a node refuses the limits it was sent for a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsRefusal {
    #[error("the run's limits give {rows} {queue} allowances for {p} nodes")]
    Rows { queue: &'static str, rows: usize, p: usize },
}

/// Why a run's schedule could not be counted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CountError {
    /// The lengths-only inputs need a region of zeros this long, and there is none.
    #[error("no region of known zeros of {bytes} bytes")]
    NoZeros { bytes: usize },
    /// A node's part of the counted iteration failed (the first to fail).
    #[error("node {node}: {source}")]
    Node {
        node: NodeId,
        #[source]
        source: CommError,
    },
    /// The simulation did not finish.
    #[error(transparent)]
    Simulation(#[from] simulator::SimulationError),
}

/// The allowances of `spec` on `topology` at each of `nodes`, from one simulation of an
/// iteration of the run; `Err` when the simulation could not run.
pub fn counted(spec: &RunSpec, topology: &Topology, nodes: &[NodeId]) -> Result<Vec<RunAllowance>, CountError> {
    let p = topology.p();
    let largest_input = (0..p).map(|node| reference::input_len(spec, p, node)).max().unwrap_or(0);
    if zeros::zeros(largest_input).is_none() {
        return Err(CountError::NoZeros { bytes: largest_input });
    }
    // Emulated physics change when messages go, and split them into packets as the
    // emulation does; raw links get nominal ones (store-and-forward, one frame each).
    let model = spec.emulation.unwrap_or(LinkModel::NOMINAL);
    let options = Options {
        run: spec.run,
        wall_limit: Some(PATIENCE),
        links: match spec.emulation {
            None => STREAM_LINKS,
            Some(_) => STREAM_LINKS.emulated(),
        },
        watch: nodes.to_vec(),
        lengths_only: true,
        // Each class's physics, as the run's links have them (a class the network lacks
        // is refused by the nodes, which then run nothing).
        class_models: class_models(model, &spec.classes, &topology.class_names()).unwrap_or_default(),
        ..Options::default()
    };
    let spec = Arc::new(spec.clone());
    let mut failed: Option<CountError> = None;
    let per_node = |comm: Comm| {
        let spec = spec.clone();
        async move { one_iteration(&comm, &spec).await }
    };
    let simulation = simulator::simulate(topology, model, options, per_node, |node, _, result| {
        if let Err(error) = result
            && failed.is_none()
        {
            failed = Some(CountError::Node { node, source: error });
        }
    })?;
    if let Some(failed) = failed {
        return Err(failed);
    }
    Ok(simulation
        .watched
        .into_iter()
        .map(|watched| {
            let allow = |counts: &simulator::watch::BySource| -> Arc<[u64]> {
                let twice = |runtime: u64| runtime.saturating_mul(2);
                counts.algorithm.iter().zip(&counts.runtime).map(|(&a, &r)| a.saturating_add(twice(r))).collect()
            };
            RunAllowance { delivered: allow(&watched.delivered), forwarded: allow(&watched.forwarded), counted: true }
        })
        .collect())
}

/// One iteration of `spec` as a daemon's driver runs it: the runtime's barrier, the
/// common-start announcement when the run has clock offsets, then the collective (or
/// the probe's steps), on lengths-only inputs.
async fn one_iteration(comm: &Comm, spec: &RunSpec) -> Result<(), CommError> {
    let (p, me) = (comm.p(), comm.id());
    barrier::runtime(comm).await?;
    // Offsets of every vertex (a switched network's switches after its ranks).
    if spec.clock_offsets_ns.len() >= p {
        start::announce_start(comm, 0).await?;
    }
    let len = reference::input_len(spec, p, me);
    let input = if len == 0 { Bytes::new() } else { zeros::zeros(len).unwrap_or_default() };
    match spec.probe {
        true => probe::relay(comm, input).await.map(drop),
        false => algorithms::run(comm, spec, input).await.map(drop),
    }
}

/// The rows of every vertex of `spec` on `topology` (ranks, then switches): each node's footprint by `footprint`
/// and its allowances, counted ([`counted`]) or, when the schedule cannot be counted,
/// [`whole_run_bound`] for every source (logged). Blocks for the simulation: call it
/// off the runtime's threads.
pub fn limits_of_run(spec: &RunSpec, topology: &Topology, footprint: &Footprint) -> Vec<RunLimits> {
    rows(spec, topology.p(), footprint, &allowances_of_run(spec, topology, footprint))
}

/// Each vertex's row: a rank's footprint of `spec` on p ranks by `footprint` (a switch
/// holds no data: 0, its queues bounded by its allowances), and its allowances.
fn rows(spec: &RunSpec, p: usize, footprint: &Footprint, allowances: &[RunAllowance]) -> Vec<RunLimits> {
    allowances
        .iter()
        .enumerate()
        .map(|(node, allowance)| RunLimits {
            footprint_bytes: match node < p {
                true => footprint.of_node(spec, p, node).unwrap_or(u64::MAX),
                false => 0,
            },
            delivered: allowance.delivered.to_vec(),
            forwarded: allowance.forwarded.to_vec(),
            counted: allowance.counted,
        })
        .collect()
}

/// Every vertex's allowance of `spec` on `topology` (a switched network's switches too,
/// from the same simulation), counted or the whole run's bound.
fn allowances_of_run(spec: &RunSpec, topology: &Topology, footprint: &Footprint) -> Vec<RunAllowance> {
    let (p, vertices) = (topology.p(), topology.vertices());
    let nodes: Vec<NodeId> = (0..vertices).collect();
    match counted(spec, topology, &nodes) {
        Ok(allowances) if allowances.len() == vertices => allowances,
        outcome => {
            let reason = outcome.err().map_or_else(|| "not every node was watched".into(), |error| error.to_string());
            let bound = whole_run_bound(spec, p, footprint);
            tracing::warn!(run = spec.run, %reason, bound, "could not count the run's schedule: every source and link may queue the whole run's memory");
            vec![RunAllowance::uniform(bound, p); vertices]
        }
    }
}

/// The last run shape counted on one topology, with every node's allowances: the next
/// run of the same shape (the same collective, sizes and algorithm; another run id,
/// iteration count or deadline) on the same topology reuses them.
#[derive(Default)]
pub struct Cache {
    last: Mutex<Option<Counted>>,
}

/// A run shape ([`shape`]) and topology counted, with every node's allowance.
type Counted = (RunSpec, Topology, Arc<[RunAllowance]>);

impl Cache {
    /// The rows of every node of `spec` on `topology` ([`limits_of_run`]), the
    /// allowances counted unless the last run had the same shape and topology (the
    /// footprint is the run's own: it counts its iterations' timings).
    pub fn limits_of_run(&self, spec: &RunSpec, topology: &Topology, footprint: &Footprint) -> Vec<RunLimits> {
        let shape = shape(spec);
        let cached = match &*self.last.lock().expect("allowance cache lock") {
            Some((last, on, allowances)) if *last == shape && on == topology => Some(allowances.clone()),
            _ => None,
        };
        let allowances = cached.unwrap_or_else(|| {
            let counted: Arc<[RunAllowance]> = allowances_of_run(spec, topology, footprint).into();
            *self.last.lock().expect("allowance cache lock") = Some((shape, topology.clone(), counted.clone()));
            counted
        });
        rows(spec, topology.p(), footprint, &allowances)
    }
}

/// What of `spec` decides its messages' lengths and routes: everything but the run's id,
/// seed, iteration counts, deadline, dilation, outputs and clock offsets' values (whether
/// there are offsets decides the start announcement).
fn shape(spec: &RunSpec) -> RunSpec {
    RunSpec {
        run: 0,
        seed: 0,
        warmup: 0,
        iterations: 0,
        timeout_ms: 0,
        dump: false,
        trace: false,
        dilation: Default::default(),
        clock_offsets_ns: vec![0; spec.clock_offsets_ns.len()],
        ..spec.clone()
    }
}

/// A bound no schedule of `spec` can legitimately pass at one node, whatever it sends
/// where: the whole run's memory estimate, every node's summed (input, output and
/// messages in flight: no message is made of more than what the nodes hold), plus the
/// headers of the messages two iterations may bring ([`signal_allowance`] and one
/// message from every node per round of a logarithmic schedule). The fallback when the
/// schedule cannot be counted ([`limits_of_run`]).
pub fn whole_run_bound(spec: &RunSpec, p: usize, footprint: &Footprint) -> u64 {
    let data = footprint.of_nodes(spec, p, 0..p).unwrap_or(u64::MAX);
    let messages = (p as u64).saturating_mul(u64::from(rounds(p)) + 1).saturating_mul(2);
    data.saturating_add(messages.saturating_mul(charge_of(0))).saturating_add(signal_allowance(p))
}

/// What one source may have queued at a node before the node knows the run: the
/// runtime's signals of one iteration, which may reach it before the run's spec does
/// (each round of the runtime barrier, the butterfly's signal and release, the start
/// announcement of 8 bytes), twice over.
pub fn signal_allowance(p: usize) -> u64 {
    let signals = 2 * u64::from(rounds(p)) + 3;
    2 * signals * charge_of(std::mem::size_of::<u64>())
}

/// ⌈log2 p⌉: the rounds of a logarithmic schedule over p nodes.
fn rounds(p: usize) -> u32 {
    p.max(1).next_power_of_two().trailing_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_collectives::tuning::footprint::Factor;
    use topocomm_proto::TopologyKind;
    use topocomm_proto::spec::{Algorithm, Collective};

    /// A switched network's switches get rows too, from the same simulation: nothing is
    /// delivered to a switch and it holds no data; what it may queue to pass on is what
    /// the schedule routes through it, by source (an edge switch of a fat-tree carries
    /// its own two hosts' vectors out, each step's).
    #[test]
    fn a_switch_is_allowed_what_the_schedule_routes_through_it() {
        let topology = Topology::new(TopologyKind::FatTree, 16, Some(&[4])).unwrap();
        let spec = RunSpec { size_bytes: 4096, ..RunSpec::new(Collective::Allreduce, Algorithm::RecursiveDoubling) };
        let rows = limits_of_run(&spec, &topology, &Footprint::default());
        assert_eq!(rows.len(), topology.vertices());
        let edge = topology.switched().unwrap().attachment(0);
        for (vertex, row) in rows.iter().enumerate().skip(topology.p()) {
            assert!(row.counted, "switch {vertex}: {row:?}");
            assert_eq!(row.footprint_bytes, 0, "switch {vertex}");
            assert!(row.delivered.iter().all(|&bytes| bytes == 0), "switch {vertex}: {row:?}");
            assert_eq!(row.forwarded.len(), topology.p(), "switch {vertex}: by source");
        }
        let at_edge = &rows[edge].forwarded;
        assert!(at_edge[0] > 4096 && at_edge[1] > 4096, "{at_edge:?}");
    }

    #[test]
    fn a_node_takes_its_rows_capped_at_the_memory_it_has() {
        let limits =
            RunLimits { footprint_bytes: 0, delivered: vec![10, u64::MAX], forwarded: vec![0, 99], counted: true };
        let taken = RunAllowance::accept(&limits, 2, Some(50)).expect("two rows of two");
        assert_eq!((&*taken.delivered, &*taken.forwarded, taken.counted), (&[10, 50][..], &[0, 50][..], true));
        let unknown = RunAllowance::accept(&limits, 2, None).expect("two rows of two");
        assert_eq!(&*unknown.delivered, &[10, u64::MAX]);
        let short = RunLimits { forwarded: vec![0], ..limits };
        assert_eq!(
            RunAllowance::accept(&short, 2, None).unwrap_err().to_string(),
            "the run's limits give 1 forwarded allowances for 2 nodes"
        );
    }

    /// The coordinator's rows: one per node, each node's footprint by the table it is
    /// given, the allowances counted and the same the cache returns for a run of the
    /// same shape.
    #[test]
    fn the_rows_of_a_run_carry_each_nodes_footprint_and_counted_allowances() {
        let topology = Topology::new(TopologyKind::Ring, 4, None).unwrap();
        let spec = RunSpec { size_bytes: 4096, iterations: 3, ..RunSpec::new(Collective::Allgather, Algorithm::Ring) };
        let footprint = Footprint::default();
        let rows = limits_of_run(&spec, &topology, &footprint);
        assert_eq!(rows.len(), 4);
        for (node, row) in rows.iter().enumerate() {
            assert_eq!(Some(row.footprint_bytes), footprint.of_node(&spec, 4, node));
            assert!(row.counted && row.delivered.len() == 4 && row.forwarded.len() == 4);
            // The ring's blocks come from the neighbour behind, p - 1 of them and more.
            let behind = (node + 3) % 4;
            assert!(row.delivered[behind] > 3 * 4096, "{row:?}");
        }
        let mut doubled = footprint.clone();
        doubled.default_in_flight = Factor { times: 4, over: 1 };
        doubled.in_flight.clear();
        let cache = Cache::default();
        let again = cache.limits_of_run(&RunSpec { run: 9, ..spec.clone() }, &topology, &doubled);
        assert!(again.iter().zip(&rows).all(|(a, b)| a.delivered == b.delivered && a.forwarded == b.forwarded));
        assert!(again.iter().zip(&rows).all(|(a, b)| a.footprint_bytes > b.footprint_bytes), "the file's factors");
        let more = RunSpec { iterations: 1000, ..spec };
        let timed = cache.limits_of_run(&more, &topology, &doubled);
        assert_eq!(
            timed[0].footprint_bytes,
            again[0].footprint_bytes + 997 * 8,
            "the run's own timings, not the cache's"
        );
    }
}
