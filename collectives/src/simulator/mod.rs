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

mod event_queue;
mod huge_pages;
pub mod network;
pub mod spec;
mod store;
pub mod watch;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::thread::LocalKey;
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
/// The network itself is the simulating thread's (see [`NETWORK`]): a port holds only
/// which simulation it belongs to.
#[derive(Clone)]
pub struct Port {
    shared: Arc<Shared>,
    id: NodeId,
}

struct Shared {
    topology: Topology,
    links: LinkCapabilities,
    /// Whether the run is lengths only ([`Options::lengths_only`]).
    lengths_only: bool,
    /// Which simulation this is (the one whose network [`NETWORK`] must hold).
    simulation: u64,
}

/// Numbers the simulations of this process, so that a port finds its own network.
static SIMULATIONS: AtomicU64 = AtomicU64::new(0);

/// A simulation's network, installed on the thread that runs it.
struct Installed {
    simulation: u64,
    network: Network,
}

thread_local! {
    /// The network of the simulation this thread runs. The engine polls one node at a
    /// time on its own thread, so a node reaches the network through this thread's slot,
    /// with no lock to take several times a message.
    static NETWORK: RefCell<Option<Installed>> = const { RefCell::new(None) };
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

    /// Whether the run is lengths only ([`Options::lengths_only`]).
    pub fn lengths_only(&self) -> bool {
        self.shared.lengths_only
    }

    /// Runs `action` on this port's network.
    ///
    /// # Panics
    ///
    /// Outside its simulation's thread, or after it ended (the engine reports a node
    /// that panics).
    fn network<R>(&self, action: impl FnOnce(&mut Network) -> R) -> R {
        NETWORK.with(|installed| match installed.borrow_mut().as_mut() {
            Some(installed) if installed.simulation == self.shared.simulation => action(&mut installed.network),
            _ => panic!("node {}: a simulated port used outside its simulation", self.id),
        })
    }

    /// The virtual time now, in nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        self.network(|network| network.now_ns())
    }

    /// Sends a message from this node (see [`Network::originate`]).
    pub fn originate(&self, header: FrameHeader, payload: Payload, causal_ns: u64) -> Result<(), UnknownNode> {
        self.network(|network| network.originate(self.id, header, payload, causal_ns))
    }

    /// The oldest message from `src` with `tag`, if one is here.
    pub fn take(&self, src: NodeId, tag: Tag) -> Option<Delivery> {
        self.network(|network| network.take(self.id, src, tag, None))
    }

    /// The oldest message from `src` with `tag`, if one is here; if not, `waker` is woken
    /// when one comes.
    pub fn take_or_wait(&self, src: NodeId, tag: Tag, waker: &Waker) -> Option<Delivery> {
        self.network(|network| network.take(self.id, src, tag, Some(waker)))
    }
}

/// The nodes the engine is to poll, in the order they were woken.
#[derive(Default)]
struct Ready {
    queue: VecDeque<u32>,
    /// Whether each node is in the queue already (a node is polled once per wake-up).
    queued: Vec<bool>,
}

impl Ready {
    /// Every one of `p` nodes, ready to be polled in id order.
    fn all(p: usize) -> Self {
        Ready { queue: huge_pages::vec_of(p, |node| node as u32).into(), queued: huge_pages::vec_of(p, |_| true) }
    }

    fn push(&mut self, node: usize) {
        // A node of no simulation running on this thread (a waker woken elsewhere) is
        // ignored: that node then waits for nothing, which the engine reports.
        if let Some(queued) = self.queued.get_mut(node)
            && !std::mem::replace(queued, true)
        {
            self.queue.push_back(node as u32);
        }
    }

    /// The node to be polled next, if any.
    fn next(&self) -> Option<usize> {
        self.queue.front().map(|&node| node as usize)
    }

    fn pop(&mut self) -> Option<usize> {
        let node = self.queue.pop_front()? as usize;
        self.queued[node] = false;
        Some(node)
    }
}

thread_local! {
    /// The ready queue of the simulation this thread runs: the engine polls one node at a
    /// time on its own thread, so a node's waker needs no more than the node's id (no
    /// allocation, no reference count per node).
    static READY: RefCell<Ready> = const { RefCell::new(Ready { queue: VecDeque::new(), queued: Vec::new() }) };
}

/// Installs a simulation's value (its ready queue, its network) in a slot of this thread
/// while it lives, and puts back what was there before.
struct OnThisThread<T: Default + 'static> {
    slot: &'static LocalKey<RefCell<T>>,
    before: T,
}

impl<T: Default + 'static> OnThisThread<T> {
    fn install(slot: &'static LocalKey<RefCell<T>>, value: T) -> Self {
        OnThisThread { slot, before: slot.with(|current| current.replace(value)) }
    }

    /// Runs `action` on the installed value (the engine's; never while a node is polled,
    /// which reaches its network through its port and its queue through its waker).
    fn with<R>(&self, action: impl FnOnce(&mut T) -> R) -> R {
        self.slot.with(|current| action(&mut current.borrow_mut()))
    }
}

impl OnThisThread<Option<Installed>> {
    /// Runs `action` on the installed network.
    fn network<R>(&self, action: impl FnOnce(&mut Network) -> R) -> R {
        self.with(|slot| action(&mut slot.as_mut().expect("installed while the engine runs").network))
    }
}

impl<T: Default + 'static> Drop for OnThisThread<T> {
    fn drop(&mut self) {
        self.slot.with(|current| current.replace(std::mem::take(&mut self.before)));
    }
}

/// A node's waker: its id in the data pointer; waking it puts it in this thread's ready
/// queue.
#[allow(unsafe_code)] // a node's waker is its id in a raw waker's data word, with no allocation per node.
fn node_waker(node: NodeId) -> Waker {
    // A static, not a constant: one address, so that `Waker::will_wake` knows a node's
    // waker wherever it was made (the network keeps no copy of it: `network::NodeState`).
    static VTABLE: RawWakerVTable =
        RawWakerVTable::new(|data| RawWaker::new(data, &VTABLE), wake_node, wake_node, |_| {});
    fn wake_node(data: *const ()) {
        READY.with(|ready| ready.borrow_mut().push(data.addr()));
    }
    // SAFETY: the data pointer is a plain number, never dereferenced; cloning copies it
    // and dropping does nothing, and waking touches only the waking thread's own queue,
    // so every function of the table may run on any thread, as `Waker` requires.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::without_provenance(node), &VTABLE)) }
}

/// How many polls and instants may pass between two readings of the wall clock for
/// [`Options::wall_limit`].
const CLOCK_READ_EVERY: u32 = 4096;

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
    /// Every frame enters its links through an event of its own, as the engine did
    /// before it carried a frame ready now at once (`Network::entering_by_events`): the
    /// same results, more slowly; for the tests that hold the two ways against each
    /// other.
    pub entering_by_events: bool,
    /// Nodes whose deliveries and forwards are counted by source
    /// (`Simulation::watched`).
    pub watch: Vec<NodeId>,
    /// Lengths only: every buffer is known zeros, results are assembled as known zeros
    /// that take no memory (`Comm::assembly`), and a part that is data is an error.
    pub lengths_only: bool,
    /// Each link class's physics, by class id (`spec::class_models`); empty: every link
    /// has the model `simulate` is given.
    pub class_models: Vec<LinkModel>,
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
            entering_by_events: false,
            watch: Vec::new(),
            lengths_only: false,
            class_models: Vec::new(),
        }
    }
}

/// How far a running simulation has come, updated by the engine at every event
/// ([`Options::live`]) and read from any thread; and a request from any thread to stop it.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// Nodes whose algorithm has finished.
    pub nodes_finished: AtomicUsize,
    /// Messages sent so far.
    pub messages: AtomicU64,
    /// The virtual time reached, in nanoseconds.
    pub virtual_ns: AtomicU64,
    /// Set (from any thread) to stop the simulation before its next poll, with
    /// [`SimulationError::Stopped`]: a watcher of the process's memory does.
    pub stop: AtomicBool,
}

/// What a simulation gives beyond each node's result (which goes to the caller as each
/// node finishes): the time, and what the network carried.
pub struct Simulation {
    /// Virtual nanoseconds until the last node finished.
    pub time_ns: u64,
    pub totals: Totals,
    /// The link direction that carried the most bytes, and how many: ((from, to), bytes)
    /// (of equals, the lowest (from, to)).
    pub busiest_link: Option<((NodeId, NodeId), u64)>,
    /// Messages delivered and never taken, as (node, count).
    pub unclaimed: Vec<(NodeId, usize)>,
    /// The message flow, when recorded.
    pub events: Vec<FlowEvent>,
    /// Times a node's future was polled.
    pub polls: u64,
    /// Each node's operations in the order it did them, when asked (`Options::operations`).
    pub operations: Vec<Vec<Operation>>,
    /// What each watched node was delivered and passed on (`Options::watch`).
    pub watched: Vec<watch::Watched>,
}

/// What a panic said: its message where it is text (as `panic!` and `expect` give it).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_owned(),
        (_, Some(text)) => text.clone(),
        _ => "a panic with no message".to_owned(),
    }
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
    /// A node's algorithm panicked: a bug, with the panic's own message (said once).
    #[error("node {node}'s algorithm panicked: {message}")]
    Panicked { node: NodeId, message: String },
    #[error("the simulation took longer than {limit:?} of wall time (virtual time reached {at_ns} ns)")]
    WallLimit { limit: Duration, at_ns: u64 },
    #[error("the simulation was stopped at {at_ns} ns of virtual time")]
    Stopped { at_ns: u64 },
}

type NodeFuture<T> = Pin<Box<dyn Future<Output = Result<T, CommError>> + Send>>;

/// Where a node stands.
enum NodeSlot<T> {
    /// Not polled yet: its future is made when it is first polled (in id order), so that
    /// making it and running it to its first wait touch the same memory once.
    Unborn,
    /// Its first poll did nothing but wait for a message (sent nothing, took nothing):
    /// its future was dropped, and is made again when that message comes. A node of a
    /// broadcast, scatter or pipeline waits so for most of the run; without its future
    /// it takes 60 bytes instead of about a kilobyte.
    Dormant,
    Running(NodeFuture<T>),
    Done,
}

/// How much of a node's memory, from its future on, the engine asks the processor to
/// fetch while it polls the node before it ([`NodeSlot::prefetch`]): about what a node of
/// a grid all-reduce holds (its future, its algorithm's, their layouts).
const PREFETCHED_BYTES: usize = 1536;

impl<T> NodeSlot<T> {
    /// Asks the processor to start loading this node's memory, so that polling it next
    /// does not wait for it line by line. A node's future and what its first poll
    /// allocated (its algorithm's future, its pieces' layout) were allocated one after
    /// another, so they lie together from the future's address on; a run of tens of
    /// thousands of nodes does not fit in the caches, and polling each node touches
    /// memory the engine last touched a whole step ago, one dependent miss after another.
    /// A prefetch is a hint: it never faults, and where the memory is elsewhere it only
    /// loads lines that are not needed (docs/PERFORMANCE-NOTES.md, part five).
    fn prefetch(&self) {
        if let NodeSlot::Running(future) = self {
            prefetch(std::ptr::from_ref(&**future).cast(), PREFETCHED_BYTES);
        }
    }
}

/// Asks the processor to start loading the `bytes` from `start` into its caches (on
/// x86-64; elsewhere it does nothing). A hint, which never faults whatever the address.
#[allow(unsafe_code)] // a prefetch hint, which reads nothing and cannot fault.
fn prefetch(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..bytes).step_by(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE, which the instruction needs, is part of every x86-64 processor; a
        // prefetch reads nothing the program sees and never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}

/// Runs `per_node`'s future for every node of `topology` (given that node's `Comm`)
/// over links of physics `model`, to the end: see the module docs. `done(node, at_ns,
/// result)` gets each node's result as it finishes, at virtual time `at_ns`, so that a
/// caller keeps what it needs of it (a run of millions of nodes keeps no per-node list).
///
/// `per_node` may be called more than once for a node: a node whose first poll did
/// nothing but wait for a message is dropped and made again when the message comes
/// (see `NodeSlot::Dormant`), so what it does before its first wait must depend on its
/// `Comm` alone, as an algorithm's does.
pub fn simulate<T, F, Fut, D>(
    topology: &Topology,
    model: LinkModel,
    options: Options,
    mut per_node: F,
    mut done: D,
) -> Result<Simulation, SimulationError>
where
    F: FnMut(Comm) -> Fut,
    Fut: Future<Output = Result<T, CommError>> + Send + 'static,
    D: FnMut(NodeId, u64, Result<T, CommError>),
{
    let p = topology.p();
    let simulation = SIMULATIONS.fetch_add(1, Ordering::Relaxed);
    let shared = Arc::new(Shared {
        topology: topology.clone(),
        links: options.links,
        lengths_only: options.lengths_only,
        simulation,
    });
    let mut network = Network::new(topology.clone(), model, options.record).with_class_models(options.class_models);
    if options.entering_by_events {
        network = network.entering_by_events();
    }
    if !options.watch.is_empty() {
        network = network.watching(&options.watch);
    }
    let installed = OnThisThread::install(&NETWORK, Some(Installed { simulation, network }));
    let logs: Vec<OperationLog> = match options.operations {
        true => (0..p).map(|_| OperationLog::default()).collect(),
        false => Vec::new(),
    };
    let mut nodes: Vec<NodeSlot<T>> = huge_pages::vec_of(p, |_| NodeSlot::Unborn);
    let ready = OnThisThread::install(&READY, Ready::all(p));
    let (mut remaining, mut polls, mut time_ns) = (p, 0u64, 0u64);
    let started = Instant::now();
    // Polls and instants since the clock was last read for the wall limit (a ring's
    // instants hold an event or two each, and reading the clock at every one of them was
    // 2 % of the instructions).
    let mut since_clock_read = 0u32;
    loop {
        while let Some(node) = ready.with(Ready::pop) {
            if let Some(live) = &options.live
                && live.stop.load(Ordering::Relaxed)
            {
                return Err(SimulationError::Stopped { at_ns: installed.network(|network| network.now_ns()) });
            }
            if let Some(next) = ready.with(|ready| ready.next()) {
                nodes[next].prefetch();
            }
            let first_poll = matches!(nodes[node], NodeSlot::Unborn | NodeSlot::Dormant);
            let future = match &mut nodes[node] {
                NodeSlot::Done => continue,
                NodeSlot::Running(future) => future,
                unborn @ (NodeSlot::Unborn | NodeSlot::Dormant) => {
                    let mut comm = Comm::simulated(Port { shared: shared.clone(), id: node }, options.run, 0);
                    if let Some(log) = logs.get(node) {
                        comm = comm.logged(log.clone());
                    }
                    *unborn = NodeSlot::Running(Box::pin(per_node(comm)));
                    let NodeSlot::Running(future) = unborn else { unreachable!("just made") };
                    future
                }
            };
            polls += 1;
            since_clock_read += 1;
            let waker = node_waker(node);
            let mut cx = Context::from_waker(&waker);
            let acted = installed.network(|network| network.acted());
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
            match polled {
                Err(payload) => return Err(SimulationError::Panicked { node, message: panic_message(&*payload) }),
                Ok(Poll::Pending) => {
                    if first_poll && installed.network(|network| network.only_waits(node, acted)) {
                        nodes[node] = NodeSlot::Dormant;
                    }
                }
                Ok(Poll::Ready(result)) => {
                    nodes[node] = NodeSlot::Done;
                    let at_ns = installed.network(|network| network.now_ns());
                    time_ns = time_ns.max(at_ns);
                    remaining -= 1;
                    if let Some(live) = &options.live {
                        live.nodes_finished.fetch_add(1, Ordering::Relaxed);
                    }
                    done(node, at_ns, result);
                }
            }
        }
        let advanced = installed.network(|network| {
            let next_ns = network.next_event_ns()?;
            since_clock_read += 1;
            if let Some(limit) = options.wall_limit
                && since_clock_read >= CLOCK_READ_EVERY
            {
                since_clock_read = 0;
                if started.elapsed() > limit {
                    return Some(Err(SimulationError::WallLimit { limit, at_ns: network.now_ns() }));
                }
            }
            network.advance_to(next_ns);
            if let Some(live) = &options.live {
                live.messages.store(network.totals().messages, Ordering::Relaxed);
                live.virtual_ns.store(next_ns, Ordering::Relaxed);
            }
            Some(Ok(()))
        });
        match advanced {
            None => break,
            Some(Err(error)) => return Err(error),
            Some(Ok(())) => {}
        }
    }
    if remaining > 0 {
        let node = nodes.iter().position(|slot| !matches!(slot, NodeSlot::Done)).expect("a node is not done");
        return Err(installed.network(|network| {
            let at_ns = network.now_ns();
            match network.waiting_for(node) {
                Some((src, tag)) => SimulationError::Deadlock { at_ns, stuck: remaining, node, src, tag },
                None => SimulationError::Stalled { at_ns, node },
            }
        }));
    }
    let simulation = installed.network(|network| Simulation {
        time_ns,
        totals: network.totals(),
        busiest_link: network.busiest_link(),
        unclaimed: network.unclaimed(),
        events: network.take_recording(),
        polls,
        operations: logs
            .iter()
            .map(|log| std::mem::take(&mut *log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())))
            .collect(),
        watched: network.take_watched(),
    });
    Ok(simulation)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop asked for from outside (the memory watcher's) ends the run before its next
    /// poll, with the virtual time it had reached; a run nobody stops goes to its end.
    #[test]
    fn a_simulation_stops_when_asked_and_only_then() {
        use topocomm_proto::TopologyKind;
        let topology = Topology::new(TopologyKind::Hypercube, 64, None).expect("a hypercube");
        let model = LinkModel {
            ts_ns: 10_000,
            th_ns: 0,
            tw_ps: 1_000,
            routing: topocomm_proto::spec::Routing::Sf,
            packet_bytes: 0,
            ports: topocomm_proto::spec::Ports::All,
        };
        let run = |stop_after: Option<usize>| {
            let live = Arc::new(LiveCounts::default());
            let options = Options { live: Some(live.clone()), ..Options::default() };
            let mut finished = 0;
            let per_node = |comm: Comm| async move {
                let partner = comm.id() ^ 1;
                comm.send(partner, 1, bytes::Bytes::from_static(b"x")).await?;
                comm.recv(partner, 1).await.map(|_| ())
            };
            simulate(&topology, model, options, per_node, |_, _, _| {
                finished += 1;
                if stop_after.is_some_and(|after| finished >= after) {
                    live.stop.store(true, Ordering::Relaxed);
                }
            })
        };
        assert!(run(None).is_ok());
        assert!(matches!(run(Some(1)), Err(SimulationError::Stopped { at_ns }) if at_ns > 0));
    }

    /// A prefetch is only a hint: asking for memory nothing is mapped at, or for far more
    /// than a node's future holds, loads nothing and must not fault (a read would).
    #[test]
    fn a_prefetch_of_memory_that_is_not_there_does_not_fault() {
        let empty: NodeSlot<()> = NodeSlot::Running(Box::pin(async { Ok(()) }));
        let small: NodeSlot<u8> = NodeSlot::Running(Box::pin(async { Ok(7u8) }));
        for slot in [empty, NodeSlot::Unborn, NodeSlot::Dormant, NodeSlot::Done] {
            slot.prefetch();
        }
        small.prefetch();
        prefetch(std::ptr::null(), PREFETCHED_BYTES);
        prefetch(std::ptr::without_provenance(usize::MAX - 4095), 2 * PREFETCHED_BYTES);
    }
}
