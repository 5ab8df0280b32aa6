//! A whole cluster in one process: the real router and link tasks of every node, each
//! topology edge an in-memory link instead of TCP — a byte pipe (`tokio::io::duplex`,
//! the stream link's codec included) or a frame channel ([`ChannelLink`]). The tests run
//! every algorithm on it; on tokio's paused clock it was the cost model's engine before
//! the simulator ([`time_on_routers`]), and stays as the proof and baseline of the
//! simulator.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use topocomm_proto::flow::FlowEvent;
use topocomm_proto::frame::DEFAULT_MAX_FRAME;
use topocomm_proto::reference;
use topocomm_proto::spec::{Collective, LinkModel, RunSpec};
use topocomm_proto::{NodeId, Topology};

use crate::allowance;
use crate::router::Router;
use crate::transport::Link;
use crate::transport::channel::ChannelLink;
use crate::transport::pacing::{Clock, Timeline};
use crate::transport::stream::StreamLink;
use topocomm_collectives::algorithms;
use topocomm_collectives::comm::{Comm, CommError};
use topocomm_collectives::simulator::spec::RunFailure;

/// Bytes an in-memory pipe buffers per direction before its writer waits.
const PIPE_CAPACITY: usize = 256 * 1024;

/// What an in-memory cluster's edges are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wires {
    /// Byte pipes carrying the frames as a TCP link does ([`StreamLink`]).
    #[default]
    BytePipes,
    /// Channels handing frames over as values ([`ChannelLink`]).
    FrameChannels,
}

/// Every node of a topology, wired in memory.
pub struct InProcessCluster {
    routers: Vec<Arc<Router>>,
}

impl InProcessCluster {
    /// Wires `topology` with full-speed links measured on the wall clock (call inside a
    /// tokio runtime).
    pub fn start(topology: &Topology) -> Self {
        Self::with_clock(topology, Clock::Real)
    }

    /// Wires `topology`, measuring emulated delays on `clock` (`Clock::Virtual` in a
    /// paused runtime makes every run take exactly its emulated time).
    pub fn with_clock(topology: &Topology, clock: Clock) -> Self {
        Self::wired(topology, clock, Wires::BytePipes)
    }

    /// Wires `topology` with `wires`, measuring emulated delays on `clock`.
    pub fn wired(topology: &Topology, clock: Clock, wires: Wires) -> Self {
        // One base for every node, so that their frames' times compare.
        let timeline = Timeline::of(clock, Instant::now());
        let routers = match wires {
            Wires::BytePipes => Self::start_routers(topology, timeline, || {
                let (a, b) = tokio::io::duplex(PIPE_CAPACITY);
                (StreamLink::new(a, DEFAULT_MAX_FRAME), StreamLink::new(b, DEFAULT_MAX_FRAME))
            }),
            Wires::FrameChannels => Self::start_routers(topology, timeline, ChannelLink::pair),
        };
        InProcessCluster { routers }
    }

    /// Starts every node's router, each edge of `topology` a link from `pair`.
    /// A switched network's switches get routers too (ids `p..vertices`): they forward.
    fn start_routers<L: Link>(topology: &Topology, timeline: Timeline, pair: impl Fn() -> (L, L)) -> Vec<Arc<Router>> {
        let mut links: Vec<Vec<(NodeId, L)>> = (0..topology.vertices()).map(|_| Vec::new()).collect();
        for (a, b) in topology.edges() {
            let (end_a, end_b) = pair();
            links[a].push((b, end_a));
            links[b].push((a, end_b));
        }
        links.into_iter().enumerate().map(|(id, links)| Router::start(id, topology.clone(), links, timeline)).collect()
    }

    /// The router of node `id`.
    pub fn router(&self, id: NodeId) -> &Arc<Router> {
        &self.routers[id]
    }

    /// One `Comm` per node (rank: a switch runs none) for `iteration` of `run`, each with
    /// `timeout` to finish.
    pub fn comms(&self, run: u64, iteration: u32, timeout: Duration) -> Vec<Comm> {
        let deadline = Instant::now() + timeout;
        self.ranks().iter().map(|router| Comm::new(router.clone(), run, iteration, deadline)).collect()
    }

    /// The ranks' routers, by id (a switched network's switches' come after them).
    fn ranks(&self) -> &[Arc<Router>] {
        &self.routers[..self.routers[0].topology().p()]
    }

    /// Runs `algorithm` on every node at once (each on its own task) and returns each
    /// node's result in id order.
    pub async fn run_all<T, F, Fut>(&self, run: u64, timeout: Duration, algorithm: F) -> Vec<Result<T, CommError>>
    where
        T: Send + 'static,
        F: Fn(Comm) -> Fut,
        Fut: Future<Output = Result<T, CommError>> + Send + 'static,
    {
        let tasks: Vec<_> = self.comms(run, 0, timeout).into_iter().map(|comm| tokio::spawn(algorithm(comm))).collect();
        join_all(tasks).await.into_iter().map(|joined| joined.expect("algorithm task panicked")).collect()
    }
}

impl InProcessCluster {
    /// Runs `spec` on every node from the reference's inputs, holds every node's output
    /// against the reference and checks that no message was left unclaimed; returns the
    /// deepest step any node received from, or what went wrong (naming the node). The
    /// routers guard the run as a daemon's do (`Router::begin_run`: what each source
    /// and link may queue held to the run's schedule, counted for every node by one
    /// simulation), then take any run again.
    pub async fn verify(&self, spec: &RunSpec, timeout: Duration) -> Result<u16, RunFailure> {
        let nodes: Vec<NodeId> = (0..self.routers.len()).collect();
        let topology = self.routers[0].topology().clone();
        let allowances = allowance::counted(spec, &topology, &nodes)
            .map_err(|reason| RunFailure::Node { node: 0, reason: format!("its allowances: {reason}") })?;
        for (router, allowance) in self.routers.iter().zip(&allowances) {
            router.begin_run(spec, allowance);
        }
        let verified = self.verify_guarded(spec, timeout).await;
        for router in &self.routers {
            router.take_any_run();
        }
        verified
    }

    async fn verify_guarded(&self, spec: &RunSpec, timeout: Duration) -> Result<u16, RunFailure> {
        let p = self.ranks().len();
        let shared = Arc::new(spec.clone());
        let outputs = self
            .run_all(spec.run, timeout, move |comm| {
                let spec = shared.clone();
                async move {
                    let input = reference::input(&spec, comm.p(), comm.id());
                    let output = algorithms::run(&comm, &spec, input).await?;
                    Ok((output, comm.steps()))
                }
            })
            .await;
        // Where every node must end with the same result, build it once.
        let same = matches!(spec.collective, Collective::Broadcast | Collective::Allgather | Collective::Allreduce)
            .then(|| reference::expected(spec, p, 0));
        let mut steps = 0;
        for (node, output) in outputs.into_iter().enumerate() {
            let (output, node_steps) = output.map_err(|error| RunFailure::Node { node, reason: error.to_string() })?;
            let checked = match &same {
                Some(expected) => expected.check(&output),
                None => reference::check(spec, p, node, &output),
            };
            checked.map_err(|mismatch| RunFailure::Mismatch {
                node,
                reason: format!("{mismatch}{}", algorithms::schedule::locate(spec, p, &mismatch)),
            })?;
            steps = steps.max(node_steps);
        }
        for (node, router) in self.routers.iter().enumerate() {
            let queued = router.mailbox().queued();
            if queued > 0 {
                return Err(RunFailure::Unclaimed { node, count: queued });
            }
        }
        Ok(steps)
    }
}

impl Drop for InProcessCluster {
    fn drop(&mut self) {
        for router in &self.routers {
            router.shutdown();
        }
    }
}

/// What the routers on a paused clock give a run (see [`time_on_routers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterTiming {
    /// Emulated nanoseconds until the last node was done.
    pub time_ns: u64,
    pub steps: u16,
    pub messages: u64,
    pub forwarded: u64,
    /// Every send, forward and delivery, in time order.
    pub events: Vec<FlowEvent>,
}

/// Long enough for any emulated run (the virtual clock counts one emulated ns per ms).
const FOREVER: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The cost model's earlier engine: `spec` on the real routers of every node, wired by
/// byte pipes, under link physics `model` on tokio's paused clock (one emulated
/// nanosecond per millisecond of it), from zero inputs of the right lengths. Its links
/// carry frames in the order they became ready, of those ready at once the ones from the
/// lowest-numbered neighbour first and a node's own last ([`crate::transport::departures`]),
/// as the simulator's do (`topocomm_collectives::simulator::network`): the two give a run
/// the same time and the same flow, event by event (`node/tests/switched.rs`).
pub fn time_on_routers(spec: &RunSpec, topology: &Topology, model: LinkModel) -> Result<RouterTiming, RunFailure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|error| RunFailure::Runtime { reason: error.to_string() })?;
    runtime.block_on(async {
        let cluster = InProcessCluster::with_clock(topology, Clock::Virtual);
        let vertices = topology.vertices();
        for id in 0..vertices {
            cluster.router(id).set_emulation(Some(model), 0);
            cluster
                .router(id)
                .set_link_classes(&spec.classes)
                .map_err(|error| RunFailure::Node { node: id, reason: error.to_string() })?;
            cluster.router(id).start_recording();
        }
        let spec = Arc::new(spec.clone());
        let start = Instant::now();
        let shared = spec.clone();
        let finished = cluster
            .run_all(spec.run, FOREVER, move |comm| {
                let spec = shared.clone();
                async move {
                    let input = bytes::Bytes::from(vec![0u8; reference::input_len(&spec, comm.p(), comm.id())]);
                    algorithms::run(&comm, &spec, input).await?;
                    Ok((Instant::now(), comm.steps()))
                }
            })
            .await;
        let (mut time_ns, mut steps) = (0, 0);
        for (node, result) in finished.into_iter().enumerate() {
            let (done, node_steps) = result.map_err(|error| RunFailure::Node { node, reason: error.to_string() })?;
            time_ns = time_ns.max(Clock::Virtual.nanos(done - start));
            steps = steps.max(node_steps);
        }
        let (mut messages, mut forwarded, mut events) = (0, 0, Vec::new());
        for id in 0..vertices {
            let router = cluster.router(id);
            let traffic = router.traffic();
            messages += traffic.frames_sent;
            forwarded += traffic.frames_forwarded;
            events.extend(router.take_recording());
        }
        events.sort_by_key(|e| (e.at_ns, e.node));
        Ok(RouterTiming { time_ns, steps, messages, forwarded, events })
    })
}
