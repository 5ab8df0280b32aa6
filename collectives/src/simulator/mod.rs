//! The discrete-event simulator: the collective algorithms of `crate::algorithms`,
//! unchanged, on a virtual network of any size. Every node is one future, polled by the
//! engine here (no tasks, sockets, pipes or timers); its `Comm` sends into and receives
//! from the [`network::Network`], which moves frames hop by hop under the emulation's
//! physics in integer nanoseconds of virtual time. The engine polls every node that can
//! go on, then advances the clock to the next event (a frame reaching a node), and so on
//! until every node is done — or none can go on and some are not, which is a deadlock it
//! reports, naming a node and the message it waits for.
//!
//! Software takes no time: what a node does between receiving and sending is part of
//! t_s, as in the model of [GGKK 2.5]. So a run's time is exactly what the schedule of
//! its messages gives under the link physics, the cost model's definition; the same
//! command gives the same numbers, byte for byte.

pub mod network;
pub mod spec;

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use topocomm_proto::flow::FlowEvent;
use topocomm_proto::frame::{FrameHeader, Tag};
use topocomm_proto::spec::LinkModel;
use topocomm_proto::{NodeId, Topology};

use crate::comm::mailbox::Delivery;
use crate::comm::payload::Payload;
use crate::comm::{Comm, CommError, LinkCapabilities, Operation, OperationLog};
use network::{Network, Totals, UnknownNode};

/// One node's access to the virtual network (what its `Comm` sends and receives through).
#[derive(Clone)]
pub struct Port {
    shared: Arc<Shared>,
    id: NodeId,
}

struct Shared {
    topology: Topology,
    links: LinkCapabilities,
    network: Mutex<Network>,
    ready: ReadyQueue,
}

impl Shared {
    fn network(&self) -> MutexGuard<'_, Network> {
        // A node that panicked while holding the lock poisons it; the engine reports the
        // panic, so later users just go on.
        self.network.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Port {
    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// What the nodes' links let them count on ([`Options::links`]).
    pub fn links(&self) -> LinkCapabilities {
        self.shared.links
    }

    /// The virtual time now, in nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        self.shared.network().now_ns()
    }

    /// Sends a message from this node (see [`Network::originate`]).
    pub fn originate(&self, header: FrameHeader, payload: Payload, causal_ns: u64) -> Result<(), UnknownNode> {
        self.shared.network().originate(self.id, header, payload, causal_ns)
    }

    /// The oldest message from `src` with `tag`, if one is here.
    pub fn take(&self, src: NodeId, tag: Tag) -> Option<Delivery> {
        self.shared.network().take(self.id, src, tag, None)
    }

    /// Waits for the next message from `src` with `tag`.
    pub async fn receive(&self, src: NodeId, tag: Tag) -> Delivery {
        std::future::poll_fn(|cx| match self.shared.network().take(self.id, src, tag, Some(cx.waker())) {
            Some(arrived) => Poll::Ready(arrived),
            None => Poll::Pending,
        })
        .await
    }
}

/// The nodes the engine is to poll, in the order they were woken.
struct ReadyQueue {
    state: Mutex<Ready>,
}

struct Ready {
    queue: VecDeque<NodeId>,
    /// Whether each node is in the queue already (a node is polled once per wake-up).
    queued: Vec<bool>,
}

impl ReadyQueue {
    /// Every one of `p` nodes, ready to be polled in id order.
    fn all(p: usize) -> Self {
        ReadyQueue { state: Mutex::new(Ready { queue: (0..p).collect(), queued: vec![true; p] }) }
    }

    fn lock(&self) -> MutexGuard<'_, Ready> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, node: NodeId) {
        let mut ready = self.lock();
        if !std::mem::replace(&mut ready.queued[node], true) {
            ready.queue.push_back(node);
        }
    }

    fn pop(&self) -> Option<NodeId> {
        let mut ready = self.lock();
        let node = ready.queue.pop_front()?;
        ready.queued[node] = false;
        Some(node)
    }
}

/// Wakes one node: puts it in the ready queue.
struct NodeWaker {
    shared: Arc<Shared>,
    node: NodeId,
}

impl Wake for NodeWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.shared.ready.push(self.node);
    }
}

/// What to simulate beyond the algorithm: the run id its frames carry, whether to record
/// the message flow, how much wall time the simulation may take, and where to count
/// how far it has come.
#[derive(Debug, Clone)]
pub struct Options {
    pub run: u64,
    pub record: bool,
    /// Record every node's operations in order (`Simulation::operations`).
    pub operations: bool,
    /// The simulation gives up past this much wall time (`None`: never).
    pub wall_limit: Option<Duration>,
    /// What the nodes' links let them count on: the model's links by default; a real
    /// cluster's raw links (long vectors in segments, where the cost model keeps one
    /// message per start-up) for what the messages' lengths will be there, not for time.
    pub links: LinkCapabilities,
    /// Counts the engine keeps as it goes, for a progress display on another thread
    /// (`None`: none kept).
    pub live: Option<Arc<LiveCounts>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            run: 1,
            record: false,
            operations: false,
            wall_limit: None,
            links: LinkCapabilities::MODELLED,
            live: None,
        }
    }
}

/// How far a running simulation has come, updated by the engine at every event
/// ([`Options::live`]) and read from any thread.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// Nodes whose algorithm has finished.
    pub nodes_finished: AtomicUsize,
    /// Messages sent so far.
    pub messages: AtomicU64,
    /// The virtual time reached, in nanoseconds.
    pub virtual_ns: AtomicU64,
}

/// What a simulation gives: each node's result and finish time, and what the network
/// carried.
pub struct Simulation<T> {
    /// Each node's result, in id order.
    pub results: Vec<Result<T, CommError>>,
    /// When each node finished, in virtual nanoseconds since the start.
    pub finished_ns: Vec<u64>,
    /// Virtual nanoseconds until the last node finished.
    pub time_ns: u64,
    pub totals: Totals,
    /// Bytes each link direction carried, as ((from, to), bytes), in no order.
    pub link_bytes: Vec<((NodeId, NodeId), u64)>,
    /// Messages delivered and never taken, as (node, count).
    pub unclaimed: Vec<(NodeId, usize)>,
    /// The message flow, when recorded.
    pub events: Vec<FlowEvent>,
    /// Times a node's future was polled.
    pub polls: u64,
    /// Each node's operations in the order it did them, when asked (`Options::operations`).
    pub operations: Vec<Vec<Operation>>,
}

/// Why a simulation did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimulationError {
    #[error(
        "deadlock at {at_ns} ns: {stuck} nodes never finished; node {node} waits for a message from node {src} (tag {tag}) that no node sends"
    )]
    Deadlock { at_ns: u64, stuck: usize, node: NodeId, src: NodeId, tag: Tag },
    #[error("deadlock at {at_ns} ns: node {node} never finished and waits for no message")]
    Stalled { at_ns: u64, node: NodeId },
    #[error("node {node} panicked")]
    Panicked { node: NodeId },
    #[error("the simulation took longer than {limit:?} of wall time (virtual time reached {at_ns} ns)")]
    WallLimit { limit: Duration, at_ns: u64 },
}

type NodeFuture<T> = Pin<Box<dyn Future<Output = Result<T, CommError>> + Send>>;

/// Runs `per_node`'s future for every node of `topology` (given that node's `Comm`)
/// over links of physics `model`, to the end: see the module docs.
pub fn simulate<T, F, Fut>(
    topology: &Topology,
    model: LinkModel,
    options: Options,
    mut per_node: F,
) -> Result<Simulation<T>, SimulationError>
where
    F: FnMut(Comm) -> Fut,
    Fut: Future<Output = Result<T, CommError>> + Send + 'static,
{
    let p = topology.p();
    let shared = Arc::new(Shared {
        topology: topology.clone(),
        links: options.links,
        network: Mutex::new(Network::new(topology.clone(), model, options.record)),
        ready: ReadyQueue::all(p),
    });
    let logs: Vec<OperationLog> = match options.operations {
        true => (0..p).map(|_| OperationLog::default()).collect(),
        false => Vec::new(),
    };
    let mut futures: Vec<Option<NodeFuture<T>>> = (0..p)
        .map(|id| {
            let mut comm = Comm::simulated(Port { shared: shared.clone(), id }, options.run, 0);
            if let Some(log) = logs.get(id) {
                comm = comm.logged(log.clone());
            }
            Some(Box::pin(per_node(comm)) as NodeFuture<T>)
        })
        .collect();
    let wakers: Vec<Waker> =
        (0..p).map(|node| Waker::from(Arc::new(NodeWaker { shared: shared.clone(), node }))).collect();
    let mut results: Vec<Option<Result<T, CommError>>> = (0..p).map(|_| None).collect();
    let mut finished_ns = vec![0u64; p];
    let mut remaining = p;
    let mut polls = 0u64;
    let started = Instant::now();
    loop {
        while let Some(node) = shared.ready.pop() {
            let Some(future) = futures[node].as_mut() else { continue };
            polls += 1;
            let mut cx = Context::from_waker(&wakers[node]);
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
            match polled {
                Err(_) => return Err(SimulationError::Panicked { node }),
                Ok(Poll::Pending) => {}
                Ok(Poll::Ready(result)) => {
                    futures[node] = None;
                    results[node] = Some(result);
                    finished_ns[node] = shared.network().now_ns();
                    remaining -= 1;
                    if let Some(live) = &options.live {
                        live.nodes_finished.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        let mut network = shared.network();
        let Some(next_ns) = network.next_event_ns() else { break };
        if let Some(limit) = options.wall_limit
            && started.elapsed() > limit
        {
            return Err(SimulationError::WallLimit { limit, at_ns: network.now_ns() });
        }
        network.advance_to(next_ns);
        if let Some(live) = &options.live {
            live.messages.store(network.totals().messages, Ordering::Relaxed);
            live.virtual_ns.store(next_ns, Ordering::Relaxed);
        }
    }
    let mut network = shared.network();
    if remaining > 0 {
        let at_ns = network.now_ns();
        let node = results.iter().position(Option::is_none).expect("a node is not done");
        return Err(match network.waiting_for(node) {
            Some((src, tag)) => SimulationError::Deadlock { at_ns, stuck: remaining, node, src, tag },
            None => SimulationError::Stalled { at_ns, node },
        });
    }
    let mut link_bytes: Vec<((NodeId, NodeId), u64)> =
        network.links().map(|(link, state)| (link, state.bytes)).collect();
    link_bytes.sort_unstable();
    let simulation = Simulation {
        results: results.into_iter().map(|result| result.expect("every node is done")).collect(),
        time_ns: finished_ns.iter().copied().max().unwrap_or(0),
        finished_ns,
        totals: network.totals(),
        link_bytes,
        unclaimed: network.unclaimed(),
        events: network.take_recording(),
        polls,
        operations: logs
            .iter()
            .map(|log| std::mem::take(&mut *log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())))
            .collect(),
    };
    drop(network);
    // The futures are done; wakers and ports hold the network until they go.
    drop(futures);
    Ok(simulation)
}
