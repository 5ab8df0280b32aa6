//! A whole cluster in one process: the real router and link tasks of every node, each
//! topology edge an in-memory link instead of TCP — a byte pipe (`tokio::io::duplex`,
//! the stream link's codec included) or a frame channel ([`MemoryLink`]). The cost
//! model runs on it with the virtual clock; the tests run every algorithm on it.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use topocomm_proto::frame::DEFAULT_MAX_FRAME;
use topocomm_proto::reference;
use topocomm_proto::spec::{Collective, RunSpec};
use topocomm_proto::{NodeId, Topology};

use crate::collectives;
use crate::comm::{Comm, CommError};
use crate::pacing::{Clock, Timeline};
use crate::router::Router;
use crate::transport::Link;
use crate::transport::memory::MemoryLink;
use crate::transport::stream::StreamLink;

/// Bytes an in-memory pipe buffers per direction before its writer waits.
const PIPE_CAPACITY: usize = 256 * 1024;

/// What an in-memory cluster's edges are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wires {
    /// Byte pipes carrying the frames as a TCP link does ([`StreamLink`]).
    #[default]
    BytePipes,
    /// Channels handing frames over as values ([`MemoryLink`]).
    FrameChannels,
}

/// Every node of a topology, wired in memory.
pub struct MemoryCluster {
    routers: Vec<Arc<Router>>,
}

impl MemoryCluster {
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
            Wires::FrameChannels => Self::start_routers(topology, timeline, MemoryLink::pair),
        };
        MemoryCluster { routers }
    }

    /// Starts every node's router, each edge of `topology` a link from `pair`.
    fn start_routers<L: Link>(topology: &Topology, timeline: Timeline, pair: impl Fn() -> (L, L)) -> Vec<Arc<Router>> {
        let mut links: Vec<Vec<(NodeId, L)>> = (0..topology.p()).map(|_| Vec::new()).collect();
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

    /// One `Comm` per node for `iteration` of `run`, each with `timeout` to finish.
    pub fn comms(&self, run: u64, iteration: u32, timeout: Duration) -> Vec<Comm> {
        let deadline = Instant::now() + timeout;
        self.routers.iter().map(|router| Comm::new(router.clone(), run, iteration, deadline)).collect()
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

impl MemoryCluster {
    /// Runs `spec` on every node from the reference's inputs, holds every node's output
    /// against the reference and checks that no message was left unclaimed; returns the
    /// deepest step any node received from, or what went wrong (naming the node).
    pub async fn verify(&self, spec: &RunSpec, timeout: Duration) -> Result<u16, String> {
        let p = self.routers.len();
        let shared = Arc::new(spec.clone());
        let outputs = self
            .run_all(spec.run, timeout, move |comm| {
                let spec = shared.clone();
                async move {
                    let input = reference::input(&spec, comm.p(), comm.id());
                    let output = collectives::run(&comm, &spec, input).await?;
                    Ok((output, comm.steps()))
                }
            })
            .await;
        // Where every node must end with the same result, build it once.
        let same = matches!(spec.collective, Collective::Broadcast | Collective::Allgather | Collective::Allreduce)
            .then(|| reference::expected(spec, p, 0));
        let mut steps = 0;
        for (node, output) in outputs.into_iter().enumerate() {
            let (output, node_steps) = output.map_err(|error| format!("node {node} failed: {error}"))?;
            let checked = match &same {
                Some(expected) => expected.check(&output),
                None => reference::check(spec, p, node, &output),
            };
            checked.map_err(|mismatch| format!("node {node}: {mismatch}"))?;
            steps = steps.max(node_steps);
        }
        for (node, router) in self.routers.iter().enumerate() {
            let queued = router.mailbox().queued();
            if queued > 0 {
                return Err(format!("node {node} holds {queued} messages nobody took"));
            }
        }
        Ok(steps)
    }
}

impl Drop for MemoryCluster {
    fn drop(&mut self) {
        for router in &self.routers {
            router.shutdown();
        }
    }
}
