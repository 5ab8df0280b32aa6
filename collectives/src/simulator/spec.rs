//! A run specification on the simulator: every node's input (the reference's, or zeros
//! when only the timing matters), the collective the spec names, and — with the
//! reference's data — every node's result held against `topocomm_proto::reference` as
//! soon as the node is done, as a real run's nodes check theirs.

use std::sync::Arc;

use bytes::Bytes;
use topocomm_proto::flow::FlowEvent;
use topocomm_proto::reference::{self, Expected};
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, RunSpec};
use topocomm_proto::{NodeId, Topology};

use super::network::Totals;
use super::{Options, SimulationError, simulate};
use crate::algorithms;
use crate::comm::{Comm, Operation};
use crate::tuning::Known;

/// What the nodes start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// The reference's inputs; every result is verified.
    Reference,
    /// Zeros of the right lengths: the timing is the same (it depends on lengths only),
    /// nothing is verified.
    Zeros,
    /// Lengths only: every buffer is known zeros that take no memory (`crate::zeros`),
    /// so p × size may exceed the machine's memory; nothing is verified.
    Lengths,
}

/// A simulated run of one specification.
#[derive(Debug, Clone)]
pub struct SimulatedRun {
    /// Virtual nanoseconds until the last node finished.
    pub time_ns: u64,
    /// Messages on the longest chain of the schedule.
    pub steps: u16,
    pub totals: Totals,
    /// The link direction that carried the most bytes, and how many: ((from, to), bytes).
    pub busiest_link: Option<((NodeId, NodeId), u64)>,
    /// Whether every node's result was held against the reference (and matched).
    pub verified: bool,
    /// The message flow, when recorded.
    pub events: Vec<FlowEvent>,
    /// Times a node's future was polled.
    pub polls: u64,
    /// Each node's operations in order, when asked (`Options::operations`).
    pub operations: Vec<Vec<Operation>>,
}

/// Why a run in one process (simulated, or on a `InProcessCluster`) failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunFailure {
    #[error(transparent)]
    Simulation(#[from] SimulationError),
    #[error("node {node} failed: {reason}")]
    Node { node: NodeId, reason: String },
    #[error("node {node}: {reason}")]
    Mismatch { node: NodeId, reason: String },
    #[error("node {node} holds {count} messages nobody took")]
    Unclaimed { node: NodeId, count: usize },
    #[error("lengths only needs a region of known zeros of at least {len} bytes, which this system refused")]
    NoZeros { len: usize },
    #[error("cannot start a runtime: {reason}")]
    Runtime { reason: String },
    #[error(transparent)]
    UnknownClass(#[from] topocomm_proto::spec::UnknownClass),
}

/// Runs `spec` (its algorithm resolved) on `topology` over links of physics `model`.
pub fn run(
    spec: &RunSpec,
    topology: &Topology,
    model: LinkModel,
    inputs: Inputs,
    options: Options,
) -> Result<SimulatedRun, RunFailure> {
    let p = topology.p();
    // A GOAL schedule carries sizes only: there is nothing to verify.
    let inputs = if spec.runs_goal() { Inputs::Lengths } else { inputs };
    let spec = Arc::new(spec.clone());
    // Where every node must end with the same result, the reference is built once.
    let shared_expected: Option<Arc<Expected>> = (inputs == Inputs::Reference
        && matches!(spec.collective, Collective::Broadcast | Collective::Allgather | Collective::Allreduce))
    .then(|| Arc::new(reference::expected(&spec, p, 0)));
    let largest_input = (0..p).map(|node| reference::input_len(&spec, p, node)).max().unwrap_or(0);
    if inputs == Inputs::Lengths && crate::zeros::zeros(largest_input).is_none() {
        return Err(RunFailure::NoZeros { len: largest_input });
    }
    let class_models = topocomm_proto::spec::class_models(model, &spec.classes, &topology.class_names())?;
    let options = Options { lengths_only: options.lengths_only || inputs == Inputs::Lengths, class_models, ..options };
    // The failure of the lowest node, as each finishes; the deepest step.
    let (mut failure, mut steps): (Option<(NodeId, RunFailure)>, u16) = (None, 0);
    let per_node = |comm: Comm| {
        let (spec, shared_expected) = (spec.clone(), shared_expected.clone());
        async move {
            let (p, me) = (comm.p(), comm.id());
            let len = reference::input_len(&spec, p, me);
            let input = match inputs {
                // Most nodes of a broadcast or scatter start with nothing: no generator to seed.
                _ if len == 0 => Bytes::new(),
                Inputs::Reference => reference::input(&spec, p, me),
                Inputs::Zeros => Bytes::from(vec![0u8; len]),
                Inputs::Lengths => crate::zeros::zeros(len).unwrap_or_default(),
            };
            let output = algorithms::run(&comm, &spec, input).await?;
            let checked = match (inputs, &shared_expected) {
                (Inputs::Zeros | Inputs::Lengths, _) => Ok(()),
                (Inputs::Reference, Some(expected)) => expected.check(&output),
                (Inputs::Reference, None) => reference::check(&spec, p, me, &output),
            };
            Ok((comm.steps(), checked.map_err(|mismatch| mismatch.to_string())))
        }
    };
    let simulation = simulate(topology, model, options, per_node, |node, _, result| {
        let failed = match result {
            Err(error) => RunFailure::Node { node, reason: error.to_string() },
            Ok((node_steps, Ok(()))) => {
                steps = steps.max(node_steps);
                return;
            }
            Ok((_, Err(reason))) => RunFailure::Mismatch { node, reason },
        };
        if failure.as_ref().is_none_or(|(lowest, _)| node < *lowest) {
            failure = Some((node, failed));
        }
    })?;
    if let Some((_, failed)) = failure {
        return Err(failed);
    }
    if let Some(&(node, count)) = simulation.unclaimed.iter().min() {
        return Err(RunFailure::Unclaimed { node, count });
    }
    let mut events = simulation.events;
    events.sort_by_key(|event| (event.at_ns, event.node));
    Ok(SimulatedRun {
        time_ns: simulation.time_ns,
        steps,
        totals: simulation.totals,
        busiest_link: simulation.busiest_link,
        verified: inputs == Inputs::Reference,
        events,
        polls: simulation.polls,
        operations: simulation.operations,
    })
}

/// The model's time of `spec` run by `algorithm` on `topology` under `links`: the
/// simulator, lengths only; `None` where the algorithm does not run there. What
/// `--algorithm auto` asks of a switched network ([`Known::Modelled`]).
pub fn model_time_ns(spec: &RunSpec, topology: &Topology, links: LinkModel, algorithm: Algorithm) -> Option<u64> {
    let spec = RunSpec { algorithm, warmup: 0, iterations: 1, ..spec.clone() };
    spec.validate(topology.p()).ok()?;
    let options = Options { run: spec.run, ..Options::default() };
    run(&spec, topology, links, Inputs::Lengths, options).ok().map(|run| run.time_ns)
}

/// `then` given what `auto` knows of `spec`'s run on `topology`: the model of the run
/// over `links` ([`model_time_ns`]), or, on raw links (`None`), which no model
/// describes, its shape only.
pub fn with_known<R>(
    spec: &RunSpec,
    topology: &Topology,
    links: Option<LinkModel>,
    then: impl FnOnce(Known<'_>) -> R,
) -> R {
    match links {
        None => then(Known::Shape(topology.kind(), topology.p())),
        Some(links) => {
            let model = |algorithm| model_time_ns(spec, topology, links, algorithm);
            then(Known::Modelled(topology.kind(), topology.p(), &model))
        }
    }
}
