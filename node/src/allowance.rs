//! What a run lets each source queue at a node, and pass through it: the run's own
//! schedule, counted. Once per run (and per distinct run shape: a repeated run reuses
//! it) a node simulates one iteration of what its run does — the runtime's barrier, the
//! common-start announcement, then the collective (or the dilation probe) — lengths only
//! ([`topocomm_collectives::zeros`]: no payload takes memory), watching itself
//! ([`topocomm_collectives::simulator::watch`]). What the simulator delivered to it from
//! each source, and what it passed on for each source, is then that source's allowance:
//! messages of the algorithm once, runtime signals twice (the next iteration's barrier
//! may come before this one's collective is taken). A node's mailbox and its outgoing
//! queues cannot legitimately hold more of one source: every node enters an iteration's
//! barrier only once it has taken all of the last iteration's messages, so at most one
//! iteration's messages of a source (and the signals around it) are ever untaken or
//! unsent at once. Per link, the allowance is the sum of the sources the topology's
//! routes bring over it.
//!
//! When the simulation cannot run (no region of known zeros, or past [`PATIENCE`] of
//! wall time) the node falls back to [`whole_run_bound`], the run's memory over every
//! node, for every source and link alike, and says so in its log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use topocomm_proto::spec::{LinkModel, Routing, RunSpec};
use topocomm_proto::{NodeId, Topology, reference};

use topocomm_collectives::algorithms::{self, barrier};
use topocomm_collectives::comm::mailbox::charge_of;
use topocomm_collectives::comm::{Comm, CommError};
use topocomm_collectives::simulator::{self, Options};
use topocomm_collectives::tuning::Tuning;
use topocomm_collectives::zeros;

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
}

/// The allowances of `spec` on `topology` at each of `nodes`, from one simulation of an
/// iteration of the run; `Err` (in words) when the simulation could not run.
pub fn counted(spec: &RunSpec, topology: &Topology, nodes: &[NodeId]) -> Result<Vec<RunAllowance>, String> {
    let p = topology.p();
    let largest_input = (0..p).map(|node| reference::input_len(spec, p, node)).max().unwrap_or(0);
    if zeros::zeros(largest_input).is_none() {
        return Err(format!("no region of known zeros of {largest_input} bytes"));
    }
    // Emulated physics change when messages go, and split them into packets as the
    // emulation does; raw links get nominal ones (store-and-forward, one frame each).
    let model =
        spec.emulation.unwrap_or(LinkModel { ts_ns: 1000, th_ns: 0, tw_ps: 0, routing: Routing::Sf, packet_bytes: 0 });
    let options = Options {
        run: spec.run,
        wall_limit: Some(PATIENCE),
        links: match spec.emulation {
            None => STREAM_LINKS,
            Some(_) => STREAM_LINKS.emulated(),
        },
        watch: nodes.to_vec(),
        lengths_only: true,
        ..Options::default()
    };
    let spec = Arc::new(spec.clone());
    let mut failed: Option<String> = None;
    let per_node = |comm: Comm| {
        let spec = spec.clone();
        async move { one_iteration(&comm, &spec).await }
    };
    let simulation = simulator::simulate(topology, model, options, per_node, |node, _, result| {
        if let Err(error) = result
            && failed.is_none()
        {
            failed = Some(format!("node {node}: {error}"));
        }
    })
    .map_err(|error| error.to_string())?;
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
    if spec.clock_offsets_ns.len() == p {
        start::announce_start(comm, 0).await?;
    }
    let len = reference::input_len(spec, p, me);
    let input = if len == 0 { Bytes::new() } else { zeros::zeros(len).unwrap_or_default() };
    match spec.probe {
        true => probe::relay(comm, input).await.map(drop),
        false => algorithms::run(comm, spec, input).await.map(drop),
    }
}

/// The largest cluster whose nodes each count their run's schedule. Every node counts
/// the whole schedule, so a host of many nodes pays the count once per node: at p = 256,
/// 71 ms (ring all-reduce) to 1.4 s (recursive doubling) a node, and 256 containers on
/// two cores would spend minutes counting before each run of a new shape. Larger
/// clusters keep [`whole_run_bound`] until the coordinator counts once for all of them.
pub const MOST_NODES_COUNTED: usize = 64;

/// The allowance of `spec` at node `me` of `topology`: counted ([`counted`]) on a
/// cluster of at most [`MOST_NODES_COUNTED`], or [`whole_run_bound`] for every source
/// when it is larger or cannot be counted (logged).
pub fn of_run(spec: &RunSpec, topology: &Topology, me: NodeId) -> RunAllowance {
    if topology.p() > MOST_NODES_COUNTED {
        let bound = whole_run_bound(spec, topology.p());
        tracing::debug!(run = spec.run, p = topology.p(), bound, "too many nodes to count the schedule on each");
        return RunAllowance::uniform(bound, topology.p());
    }
    match counted(spec, topology, &[me]) {
        Ok(mut allowances) if allowances.len() == 1 => allowances.remove(0),
        outcome => {
            let reason = outcome.err().unwrap_or_else(|| "this node was not watched".into());
            let bound = whole_run_bound(spec, topology.p());
            tracing::warn!(run = spec.run, %reason, bound, "could not count the run's schedule: every source and link may queue the whole run's memory");
            RunAllowance::uniform(bound, topology.p())
        }
    }
}

/// The last run shape counted, with its allowance: the next run of the same shape (the
/// same collective, sizes and algorithm; another run id, iteration count or deadline)
/// reuses it.
#[derive(Default)]
pub struct Cache {
    last: Mutex<Option<(RunSpec, Arc<RunAllowance>)>>,
}

impl Cache {
    /// The allowance of `spec` at `me`, counted unless the last run had the same shape.
    /// Blocks for the simulation: call it off the runtime's threads.
    pub fn of_run(&self, spec: &RunSpec, topology: &Topology, me: NodeId) -> Arc<RunAllowance> {
        let shape = shape(spec);
        if let Some((last, allowance)) = &*self.last.lock().expect("allowance cache lock")
            && *last == shape
        {
            return allowance.clone();
        }
        let allowance = Arc::new(of_run(spec, topology, me));
        *self.last.lock().expect("allowance cache lock") = Some((shape, allowance.clone()));
        allowance
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
/// schedule cannot be counted ([`of_run`]).
pub fn whole_run_bound(spec: &RunSpec, p: usize) -> u64 {
    let data = Tuning::built_in_ref().footprint.of_nodes(spec, p, 0..p).unwrap_or(u64::MAX);
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
