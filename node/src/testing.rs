//! An in-memory cluster for tests: the real router and link tasks of every node,
//! with each topology edge an in-memory byte pipe (`tokio::io::duplex`) instead of TCP.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use topocomm_proto::frame::DEFAULT_MAX_FRAME;
use topocomm_proto::{NodeId, Topology};

use crate::comm::{Comm, CommError};
use crate::pacing::Clock;
use crate::router::Router;

/// Bytes an in-memory pipe buffers per direction before its writer waits.
const PIPE_CAPACITY: usize = 256 * 1024;

/// Every node of a topology, wired with in-memory pipes.
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
        let p = topology.p();
        let mut streams: Vec<Vec<(NodeId, tokio::io::DuplexStream)>> = (0..p).map(|_| Vec::new()).collect();
        for (a, b) in topology.edges() {
            let (end_a, end_b) = tokio::io::duplex(PIPE_CAPACITY);
            streams[a].push((b, end_a));
            streams[b].push((a, end_b));
        }
        let routers = streams
            .into_iter()
            .enumerate()
            .map(|(id, links)| Router::start(id, topology.clone(), links, DEFAULT_MAX_FRAME, clock))
            .collect();
        MemoryCluster { routers }
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

impl Drop for MemoryCluster {
    fn drop(&mut self) {
        for router in &self.routers {
            router.shutdown();
        }
    }
}
