//! The handle an algorithm gets: who am I (`id`), how many are we (`p`), the topology,
//! `send(dst, tag, bytes)` and `recv(src, tag)`, scoped to one iteration of one run with
//! a deadline. Two more for large messages: `send_parts` sends blocks as one message
//! without copying them together, and `post_into` + `wait` receive a message into its
//! place of a result assembled in place (see `assembly`), and `exchange_combining`
//! exchanges a long vector in segments, combining each as it comes. Nothing below it
//! (links, sockets, codecs) is visible to an algorithm: what it may know of its links
//! reaches it as a [`LinkCapabilities`] value.
//!
//! Submodules: [`exchange`] (the exchange step's future), [`fabric`] (what a live node's router provides), [`mailbox`] (where
//! messages wait to be taken), [`assembly`] (results assembled in place), [`segments`]
//! (long vectors in pieces), [`payload`] (what a message carries), [`fault`] (why a link
//! stopped).

pub mod assembly;
pub mod exchange;
pub mod fabric;
pub mod fault;
pub mod mailbox;
pub mod payload;
pub mod segments;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::time::Instant;
use topocomm_proto::elements::ElementsError;
use topocomm_proto::frame::{FrameHeader, Tag};
use topocomm_proto::{NodeId, Topology};

use crate::simulator::Port;
use assembly::{AssemblyError, Place};
pub use exchange::Exchange;
pub use fabric::{CarrierError, Fabric, LinkCapabilities};
use fault::LinkFault;
use mailbox::{Arrival, Delivery, MessageKey, Take};
use payload::{Payload, Written};
use segments::{Loan, Segment, SegmentList, Segments};

/// The piece a vector is cut into by [`Comm::segments`] on raw links.
pub const SEGMENT_LEN: usize = 512 * 1024;

/// Resolves when a link is done with a message ([`Written`]).
type Done = tokio::sync::oneshot::Receiver<()>;

/// [`Done`], or the deadline (see [`Comm::written_wait`]).
type WrittenWait = Pin<Box<tokio::time::Timeout<Done>>>;

/// Why a communication step failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommError {
    #[error("node {me}: no message from node {src} (tag {tag}) before the deadline ({timeout_ms} ms)")]
    Timeout { me: NodeId, src: NodeId, tag: Tag, timeout_ms: u64 },
    #[error("node {me}: {cause}")]
    Link {
        me: NodeId,
        #[source]
        cause: MessageError,
    },
    #[error("node {me}: {fault}")]
    Fault { me: NodeId, fault: LinkFault },
    #[error("node {me}: peer {peer} is not a node of this {p}-node cluster")]
    NoSuchPeer { me: NodeId, peer: NodeId, p: usize },
    #[error("node {me}: {cause}")]
    Route {
        me: NodeId,
        #[source]
        cause: CarrierError,
    },
    #[error("node {me}: {source}")]
    Elements { me: NodeId, source: ElementsError },
    #[error("node {me}: algorithm {algorithm} cannot run here: {reason}")]
    Unsupported { me: NodeId, algorithm: String, reason: String },
}

/// What was wrong with a message a node received, or with sending one
/// ([`CommError::Link`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// It did not fit its place in a result assembled in place.
    #[error("{0}")]
    Assembly(#[from] AssemblyError),
    /// Its link did not drop it (write it) before the deadline.
    #[error("the message to node {dst} (tag {tag}) was not written before the deadline")]
    NotWritten { dst: NodeId, tag: Tag },
    /// A peer sent a message of another length than the schedule says.
    #[error("node {src} sent {got} bytes where the schedule expects {expected}")]
    WrongLength { src: NodeId, got: usize, expected: usize },
    /// A message that breaks what the algorithm expects, as the algorithm says it (a
    /// broadcast length that is not 8 bytes, say).
    #[error("{0}")]
    Malformed(String),
}

/// One operation of a node, in the order the node did it: what `explain --goal` writes
/// as a GOAL schedule (recorded only when asked, see [`Comm::logged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A message handed to the network.
    Send { dst: NodeId, tag: Tag, bytes: usize },
    /// A message taken by a receive (when the schedule took it, not when it arrived).
    Recv { src: NodeId, tag: Tag, bytes: usize },
}

/// Where a node's operations are recorded.
pub type OperationLog = Arc<std::sync::Mutex<Vec<Operation>>>;

/// A receive posted with [`Comm::post_into`] (or by `recv`), to [`Comm::wait`] for.
pub struct Posted(Pending);

enum Pending {
    Ready(MessageKey, Delivery, Option<Place>),
    Waiting {
        key: MessageKey,
        waiting: tokio::sync::oneshot::Receiver<Result<Arrival, LinkFault>>,
    },
    /// A receive on the simulator's virtual network.
    Simulated {
        key: MessageKey,
        place: Option<Place>,
    },
}

/// A receive on its way ([`Comm::recv`], [`Comm::wait`]): a future written out by hand,
/// not an `async fn`, because an algorithm's future holds its receives inline and
/// nested `async fn`s hold their arguments twice; a simulated node's receive holds its
/// key and place, 120 bytes, where the two levels of `async fn` held 700 (the simulator
/// holds a future per node, up to millions at a time). A routed receive that has to wait
/// waits in a box of its own (a busy poll, then a timer).
pub struct Receive<'a> {
    comm: &'a Comm,
    state: ReceiveState<'a>,
}

type RoutedWait<'a> = Pin<Box<dyn Future<Output = Result<Bytes, CommError>> + Send + 'a>>;

enum ReceiveState<'a> {
    Unposted { src: NodeId, tag: Tag },
    Posted(Pending),
    Routed(MessageKey, RoutedWait<'a>),
    Done,
}

impl Future for Receive<'_> {
    type Output = Result<Bytes, CommError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Receive { comm, state } = self.get_mut();
        loop {
            match std::mem::replace(state, ReceiveState::Done) {
                // A simulated receive looks for its message once, waiting if it must
                // (posting first would look twice).
                ReceiveState::Unposted { src, tag } if matches!(comm.carrier, Carrier::Simulated(_)) => {
                    if let Err(error) = comm.check_peer(src) {
                        return Poll::Ready(Err(error));
                    }
                    *state = ReceiveState::Posted(Pending::Simulated { key: comm.key(src, tag), place: None });
                }
                ReceiveState::Unposted { src, tag } => match comm.post(src, tag) {
                    Ok(posted) => *state = ReceiveState::Posted(posted.0),
                    Err(error) => return Poll::Ready(Err(error)),
                },
                // Taken in at the wait, not the post: the message counts as received
                // (its step too) when the schedule takes it.
                ReceiveState::Posted(Pending::Ready(key, delivery, place)) => {
                    return Poll::Ready(comm.received(key, comm.arrived(delivery, place)));
                }
                ReceiveState::Posted(Pending::Simulated { key, place }) => {
                    let Carrier::Simulated(port) = &comm.carrier else {
                        unreachable!("a simulated receive belongs to a simulated handle")
                    };
                    match port.take_or_wait(key.src, key.tag, cx.waker()) {
                        Some(delivery) => return Poll::Ready(comm.received(key, comm.arrived(delivery, place))),
                        None => {
                            *state = ReceiveState::Posted(Pending::Simulated { key, place });
                            return Poll::Pending;
                        }
                    }
                }
                ReceiveState::Posted(Pending::Waiting { key, waiting }) => {
                    *state = ReceiveState::Routed(key, Box::pin(comm.wait_routed(key, waiting)));
                }
                ReceiveState::Routed(key, mut waiting) => match waiting.as_mut().poll(cx) {
                    Poll::Ready(message) => return Poll::Ready(comm.received(key, message)),
                    Poll::Pending => {
                        *state = ReceiveState::Routed(key, waiting);
                        return Poll::Pending;
                    }
                },
                ReceiveState::Done => panic!("a receive polled after it completed"),
            }
        }
    }
}

/// What a node's messages travel over: the router of a real (or in-memory) cluster, or
/// the simulator's virtual network.
enum Carrier {
    Routed(Box<Routed>),
    Simulated(Port),
}

/// A routed handle's carrier: the router, and when every wait of the handle ends (held
/// apart, so that a simulated node's handle, which never times out, is smaller by them).
struct Routed {
    fabric: Arc<dyn Fabric>,
    deadline: Instant,
    timeout_ms: u64,
}

/// One node's view of the cluster for one iteration of one run. Not `Clone`: a node's
/// causal chain is its handle's, held inline (the simulator's nodes reach it once a
/// message, and an allocation of its own was a cache miss each time).
pub struct Comm {
    carrier: Carrier,
    run: u64,
    iteration: u32,
    /// The longest chain of messages that reached this node.
    causal: CausalChain,
    /// Where this node's operations are recorded, when asked.
    log: Option<OperationLog>,
}

/// The longest chain of messages that reached one node: how far its schedule has come
/// (the deepest step it took a message of) and the instant its sends follow from.
#[derive(Default)]
struct CausalChain {
    /// The deepest step this node has received from.
    step: AtomicU16,
    /// Under emulation: the latest instant, as frames stamp it (`Timeline::stamp`), that this node's
    /// sends follow from — the iteration's start, then the arrival of each message it
    /// took (0: none yet). A send is ready to go at this instant, not when the software
    /// got to it: what a node does between taking a message and sending is part of t_s,
    /// as on the machines the model describes.
    causal_ns: AtomicU64,
}

impl CausalChain {
    /// A message of `step`, due at `due_ns`, was taken: each rises to it if it is higher.
    ///
    /// A node's schedule runs as one task, whose futures share its handle but are polled
    /// one at a time: the fields have one writer at a time, so a load and a store raise
    /// them, not a locked read-modify-write (two per message received, each a full
    /// barrier on x86).
    fn took(&self, step: u16, due_ns: u64) {
        if step > self.step.load(Ordering::Relaxed) {
            self.step.store(step, Ordering::Relaxed);
        }
        if due_ns > self.causal_ns.load(Ordering::Relaxed) {
            self.causal_ns.store(due_ns, Ordering::Relaxed);
        }
    }
}

impl Comm {
    /// A handle whose every wait ends at `deadline`.
    pub fn new(fabric: Arc<dyn Fabric>, run: u64, iteration: u32, deadline: Instant) -> Self {
        let timeout_ms =
            u64::try_from(deadline.saturating_duration_since(Instant::now()).as_millis()).unwrap_or(u64::MAX);
        Comm {
            carrier: Carrier::Routed(Box::new(Routed { fabric, deadline, timeout_ms })),
            run,
            iteration,
            causal: CausalChain::default(),
            log: None,
        }
    }

    /// The handle of a node of the simulator's virtual network (see `crate::simulator`):
    /// it never times out, since the simulator finds a deadlock itself.
    pub fn simulated(port: Port, run: u64, iteration: u32) -> Self {
        Comm { carrier: Carrier::Simulated(port), run, iteration, causal: CausalChain::default(), log: None }
    }

    /// This handle, recording every send and every receive taken into `log`, in order.
    pub fn logged(mut self, log: OperationLog) -> Self {
        self.log = Some(log);
        self
    }

    #[inline]
    fn record(&self, operation: impl FnOnce() -> Operation) {
        if let Some(log) = &self.log {
            log.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(operation());
        }
    }

    /// This handle, its iteration started at `start` (under emulation, the first sends
    /// are ready to go then).
    pub fn started_at(self, start: Instant) -> Self {
        if let Carrier::Routed(routed) = &self.carrier
            && let Some(stamp) = routed.fabric.emulated_stamp(start)
        {
            self.causal.causal_ns.fetch_max(stamp, Ordering::Relaxed);
        }
        self
    }

    /// This node's id, 0..p-1.
    pub fn id(&self) -> NodeId {
        match &self.carrier {
            Carrier::Routed(routed) => routed.fabric.id(),
            Carrier::Simulated(port) => port.id(),
        }
    }

    /// The number of nodes.
    pub fn p(&self) -> usize {
        self.topology().p()
    }

    /// The topology the cluster is wired as (algorithms made for a grid read its shape).
    pub fn topology(&self) -> &Topology {
        match &self.carrier {
            Carrier::Routed(routed) => routed.fabric.topology(),
            Carrier::Simulated(port) => port.topology(),
        }
    }

    /// Whether this run is lengths only (a simulation's `Options::lengths_only`; a live
    /// node's runs carry data).
    pub fn lengths_only(&self) -> bool {
        match &self.carrier {
            Carrier::Routed(_) => false,
            Carrier::Simulated(port) => port.lengths_only(),
        }
    }

    /// An empty result of `len` bytes assembled in place: known zeros that take no
    /// memory in a lengths-only run, allocated otherwise.
    pub fn assembly(&self, len: usize) -> assembly::Assembly {
        match self.lengths_only() {
            true => assembly::Assembly::lengths_only(len),
            false => assembly::Assembly::new(len),
        }
    }

    /// The iteration this handle belongs to.
    pub fn iteration(&self) -> u32 {
        self.iteration
    }

    /// Sends `data` to node `dst` (any node: the router carries it hop by hop).
    pub async fn send(&self, dst: NodeId, tag: Tag, data: Bytes) -> Result<(), CommError> {
        self.send_payload(dst, tag, self.next_step(), Payload::One(data), None)
    }

    /// Sends the concatenation of `parts` to node `dst` as one message, without copying
    /// them together (the link writes them back to back); the receiver gets one buffer.
    pub async fn send_parts(
        &self,
        dst: NodeId,
        tag: Tag,
        parts: impl IntoIterator<Item = Bytes>,
    ) -> Result<(), CommError> {
        self.send_payload(dst, tag, self.next_step(), Payload::of(parts), None)
    }

    /// Sends the concatenation of `parts` to `dst` as [`Comm::send_parts`] does, and,
    /// if its link cuts it into writes that take turns
    /// ([`LinkCapabilities::cuts_into_writes`]: up to 1 MiB on TCP), returns
    /// only once the link has written it (as `MPI_Send` returns once its buffer may be
    /// reused). A node that sends to several nodes in successive steps, a binomial
    /// tree's root and inner nodes, then sends in the textbook's order, each message
    /// whole before the next, rather than all at once, their writes taking turns: the
    /// first child, whose subtree is the largest, starts forwarding soonest. A longer
    /// message goes out as the socket takes it, and waiting for it measured 0.96x to
    /// 1.16x on 8 and 16 nodes (docs/PERFORMANCE-NOTES.md, "How much one write may
    /// carry"). Only for sends that cannot wait on each other in a cycle (a tree): a
    /// long message is read once its receive is posted, so such a cycle would wait for
    /// the deadline.
    pub async fn send_in_turn(
        &self,
        dst: NodeId,
        tag: Tag,
        parts: impl IntoIterator<Item = Bytes>,
    ) -> Result<(), CommError> {
        let payload = Payload::of(parts);
        if !self.links().cuts_into_writes(payload.len()) {
            return self.send_payload(dst, tag, self.next_step(), payload, None);
        }
        let done = self.send_tracked(dst, tag, self.next_step(), payload)?;
        self.written(done, dst, tag).await
    }

    /// The step of a message sent now: one past the deepest this node has received from.
    fn next_step(&self) -> u16 {
        self.causal.step.load(Ordering::Relaxed).saturating_add(1)
    }

    /// Hands a message of `step` to the router; `written` goes with it to its link.
    fn send_payload(
        &self,
        dst: NodeId,
        tag: Tag,
        step: u16,
        data: Payload,
        written: Option<Written>,
    ) -> Result<(), CommError> {
        self.check_peer(dst)?;
        self.record(|| Operation::Send { dst, tag, bytes: data.len() });
        let header = FrameHeader {
            run: self.run,
            iteration: self.iteration,
            src: self.id() as u32,
            dst: dst as u32,
            tag,
            hops: 0,
            step,
            packet: 0,
            last: true,
            due_ns: 0,
        };
        let causal_ns = self.causal.causal_ns.load(Ordering::Relaxed);
        match &self.carrier {
            Carrier::Routed(routed) => routed
                .fabric
                .originate(header, data, causal_ns, written)
                .map_err(|cause| CommError::Route { me: self.id(), cause }),
            // The virtual network takes the frame at once: it is written as it is sent.
            Carrier::Simulated(port) => port
                .originate(header, data, causal_ns)
                .map_err(|error| CommError::Route { me: self.id(), cause: CarrierError::new(error) }),
        }
    }

    /// Waits for the next message from node `src` with `tag` (posted when first polled).
    pub fn recv(&self, src: NodeId, tag: Tag) -> Receive<'_> {
        Receive { comm: self, state: ReceiveState::Unposted { src, tag } }
    }

    /// Announces a receive of the next message from `src` with `tag`, to [`Comm::wait`]
    /// for later (messages wait in the mailbox either way; see [`Comm::post_into`]).
    pub fn post(&self, src: NodeId, tag: Tag) -> Result<Posted, CommError> {
        self.post_maybe_into(src, tag, None)
    }

    /// Announces that the next message from `src` with `tag` belongs in `place` of an
    /// assembled result; [`Comm::wait`] then returns it as that part. If it arrives after
    /// this call, the link reads it straight into the place; if it came before, it is
    /// copied there. Posting every receive of a schedule up front lets each message land
    /// wherever it arrives.
    pub fn post_into(&self, src: NodeId, tag: Tag, place: Place) -> Result<Posted, CommError> {
        self.post_maybe_into(src, tag, Some(place))
    }

    /// [`Comm::post_into`] when there is a place, [`Comm::post`] when there is none.
    pub fn post_maybe_into(&self, src: NodeId, tag: Tag, place: Option<Place>) -> Result<Posted, CommError> {
        self.check_peer(src)?;
        let key = self.key(src, tag);
        let fabric = match &self.carrier {
            Carrier::Routed(routed) => &routed.fabric,
            Carrier::Simulated(port) => {
                return Ok(Posted(match port.take(src, tag) {
                    Some(delivery) => Pending::Ready(key, delivery, place),
                    None => Pending::Simulated { key, place },
                }));
            }
        };
        match fabric.mailbox().take_into(key, place) {
            Ok(Take::Ready(delivery, place)) => Ok(Posted(Pending::Ready(key, delivery, place))),
            Ok(Take::Wait(waiting)) => Ok(Posted(Pending::Waiting { key, waiting })),
            Err(fault) => Err(CommError::Fault { me: self.id(), fault }),
        }
    }

    /// The key of the next message from `src` with `tag` in this handle's run and iteration.
    fn key(&self, src: NodeId, tag: Tag) -> MessageKey {
        MessageKey { run: self.run, iteration: self.iteration, src, tag }
    }

    /// Waits for a posted receive: the message, or its part of the assembly.
    pub fn wait(&self, posted: Posted) -> Receive<'_> {
        Receive { comm: self, state: ReceiveState::Posted(posted.0) }
    }

    /// A receive's message, taken in and recorded.
    fn received(&self, key: MessageKey, message: Result<Bytes, CommError>) -> Result<Bytes, CommError> {
        let message = message?;
        self.record(|| Operation::Recv { src: key.src, tag: key.tag, bytes: message.len() });
        Ok(message)
    }

    /// Waits on a router for a message that had not arrived when it was posted.
    async fn wait_routed(
        &self,
        key: MessageKey,
        mut waiting: tokio::sync::oneshot::Receiver<Result<Arrival, LinkFault>>,
    ) -> Result<Bytes, CommError> {
        let Carrier::Routed(routed) = &self.carrier else {
            unreachable!("a routed receive belongs to a routed handle")
        };
        let fabric = &routed.fabric;
        if let Some(busy_poll) = fabric.busy_poll() {
            // Poll for a while before sleeping, as MPI's progress engine does: a message
            // is then taken when it comes (on emulated links: at its due time), not a
            // wake-up later (60-120 µs on a virtual machine). Between looks the poll
            // gives the processor to any other process that wants it, then lets the
            // runtime poll the sockets; resumed, it looks first, since the message may be
            // what resumed it and another process's turn costs tens of microseconds
            // (why this order: docs/PERFORMANCE-NOTES.md).
            let until = Instant::now() + busy_poll;
            while Instant::now() < until {
                match waiting.try_recv() {
                    Ok(arrival) => return self.took(Some(arrival)),
                    Err(tokio::sync::oneshot::error::TryRecvError::Closed) => return self.took(None),
                    Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {
                        std::thread::yield_now();
                        tokio::task::yield_now().await;
                    }
                }
            }
        }
        match tokio::time::timeout_at(routed.deadline, waiting).await {
            Ok(Ok(arrival)) => self.took(Some(arrival)),
            Ok(Err(_closed)) => self.took(None),
            Err(_elapsed) => {
                fabric.mailbox().abandon(key);
                let (src, tag) = (key.src, key.tag);
                Err(CommError::Timeout { me: self.id(), src, tag, timeout_ms: routed.timeout_ms })
            }
        }
    }

    /// What a waiting receive got: its message, a link's fault, or (`None`) the end of
    /// the wiring.
    fn took(&self, arrival: Option<Result<Arrival, LinkFault>>) -> Result<Bytes, CommError> {
        match arrival {
            Some(Ok(Arrival { delivery, place })) => self.arrived(delivery, place),
            Some(Err(fault)) => Err(CommError::Fault { me: self.id(), fault }),
            None => Err(CommError::Fault { me: self.id(), fault: LinkFault::WiringClosed }),
        }
    }

    /// A message that reached this node: as it came, or copied into the place it did not
    /// land in.
    fn arrived(&self, delivery: Delivery, place: Option<Place>) -> Result<Bytes, CommError> {
        self.causal.took(delivery.step, delivery.due_ns);
        if let Carrier::Routed(routed) = &self.carrier
            && delivery.due_ns > 0
        {
            routed.fabric.taken(delivery.due_ns);
        }
        match place {
            None => Ok(delivery.payload),
            Some(place) => place.fill_from(&delivery.payload).map_err(|error| self.assembly_error(error)),
        }
    }

    /// Wraps an assembly failure (a message of the wrong length for its place).
    pub fn assembly_error(&self, error: AssemblyError) -> CommError {
        CommError::Link { me: self.id(), cause: error.into() }
    }

    /// The number of steps on the longest chain of messages that reached this node.
    pub fn steps(&self) -> u16 {
        self.causal.step.load(Ordering::Relaxed)
    }

    /// Sends to `dst` and then receives from `src`: one exchange step. Like
    /// `MPI_Sendrecv` it returns only once the link has written what it sent, so the
    /// sent buffer is free by the next step: an exchange loop holds its input, the
    /// vector it sends and the one it receives, never a fourth.
    pub async fn exchange(&self, dst: NodeId, src: NodeId, tag: Tag, data: Bytes) -> Result<Bytes, CommError> {
        let done = self.send_tracked(dst, tag, self.next_step(), Payload::One(data))?;
        let received = self.recv(src, tag).await?;
        self.written(done, dst, tag).await?;
        Ok(received)
    }

    /// `vector` cut as [`Comm::exchange_combining`] takes it: into pieces of
    /// [`SEGMENT_LEN`] on raw links when it is at least two of them long, else whole.
    /// Emulated links and the simulator (unless told its links are raw) take it whole, so
    /// that the model's one start-up per message holds there exactly as before.
    pub fn segments(&self, vector: Bytes) -> Segments {
        match self.links().raw && vector.len() >= 2 * SEGMENT_LEN {
            true => Segments::cut(vector, SEGMENT_LEN),
            false => Segments::whole(vector),
        }
    }

    /// What the links beneath let an algorithm count on ([`LinkCapabilities`]): whether
    /// they are raw (only there may an algorithm send more messages than its textbook
    /// schedule to save copies), and which messages are read straight into their place.
    pub fn links(&self) -> LinkCapabilities {
        match &self.carrier {
            Carrier::Routed(routed) => routed.fabric.links(),
            Carrier::Simulated(port) => port.links(),
        }
    }

    /// One exchange step with `partner` of a vector in segments (see
    /// [`Comm::segments`]), each combined with the partner's as it comes:
    /// `combine(own, theirs)` runs for a segment once the partner's has arrived and this
    /// node's own is back from its link (so that, on a socket, it can take the result in
    /// place), while the next segment is already on its way: a pipeline of depth two, as
    /// MPI libraries segment large reductions. A node then holds its vector and about two
    /// of its partner's segments, not both whole vectors. Every segment is a message of
    /// the same step.
    ///
    /// A vector in one segment (every exchange of the simulator's, and of vectors shorter
    /// than two segments) is the pipeline of one stage, held inline in the [`Exchange`]
    /// (about 200 bytes); the pipeline of several waits in a box of its own, so that an
    /// algorithm's future holds what one segment needs (recursive doubling's, held for
    /// every simulated node).
    pub fn exchange_combining<F>(&self, partner: NodeId, tag: Tag, vector: Segments, combine: F) -> Exchange<'_, F>
    where
        F: FnMut(Segment, Bytes) -> Result<Segment, CommError> + Send,
    {
        Exchange::new(self, partner, tag, vector, combine)
    }

    /// [`Comm::exchange_combining`]'s pipeline of depth two over several segments.
    async fn exchange_pipelined<F>(
        &self,
        partner: NodeId,
        tag: Tag,
        step: u16,
        vector: Segments,
        mut combine: F,
    ) -> Result<Segments, CommError>
    where
        F: FnMut(Segment, Bytes) -> Result<Segment, CommError>,
    {
        let mut combined = SegmentList::with_capacity(vector.count());
        let mut own = vector.into_parts().into_iter();
        let mut in_flight = own.next().map(|first| self.lend(partner, tag, step, first)).transpose()?;
        while let Some((loan, done)) = in_flight.take() {
            let theirs = self.recv(partner, tag).await?;
            self.written(done, partner, tag).await?;
            in_flight = own.next().map(|next| self.lend(partner, tag, step, next)).transpose()?;
            combined.push(combine(loan.settle(), theirs)?);
        }
        Ok(Segments::from_parts(combined))
    }

    /// Sends `segment` as a message of `step`, lent: see [`Segment::lend`].
    fn lend(&self, dst: NodeId, tag: Tag, step: u16, segment: Segment) -> Result<(Loan, Option<Done>), CommError> {
        let (bytes, loan) = segment.lend();
        let done = self.send_tracked(dst, tag, step, Payload::One(bytes))?;
        Ok((loan, done))
    }

    /// Sends `data` as a message of `step`; returns what resolves once its link is done
    /// with it (nothing to wait for on the simulator's network, which takes a frame at
    /// once).
    fn send_tracked(&self, dst: NodeId, tag: Tag, step: u16, data: Payload) -> Result<Option<Done>, CommError> {
        let (written, done) = match &self.carrier {
            Carrier::Routed(_) => {
                let (written, done) = Written::new();
                (Some(written), Some(done))
            }
            Carrier::Simulated(_) => (None, None),
        };
        self.send_payload(dst, tag, step, data, written)?;
        Ok(done)
    }

    /// Waits until the link has dropped the message to `dst` with `tag`, written or not.
    async fn written(&self, done: Option<Done>, dst: NodeId, tag: Tag) -> Result<(), CommError> {
        let Some(done) = done else { return Ok(()) };
        match self.written_wait(done).await {
            Ok(_dropped) => Ok(()),
            Err(_elapsed) => Err(self.not_written(dst, tag)),
        }
    }

    /// Resolves once the link has dropped a message (`done`), or at the deadline. The
    /// timer in a box, as in `wait_routed`: only a routed send has one, and an algorithm's
    /// future holds this one inline.
    fn written_wait(&self, done: Done) -> WrittenWait {
        let Carrier::Routed(routed) = &self.carrier else {
            unreachable!("only a routed send is tracked (`send_tracked`)")
        };
        Box::pin(tokio::time::timeout_at(routed.deadline, done))
    }

    /// Why a send failed when its link did not drop it by the deadline.
    fn not_written(&self, dst: NodeId, tag: Tag) -> CommError {
        CommError::Link { me: self.id(), cause: MessageError::NotWritten { dst, tag } }
    }

    /// Wraps an element-wise operation failure.
    pub fn elements_error(&self, source: ElementsError) -> CommError {
        CommError::Elements { me: self.id(), source }
    }

    fn check_peer(&self, peer: NodeId) -> Result<(), CommError> {
        if peer >= self.p() {
            return Err(CommError::NoSuchPeer { me: self.id(), peer, p: self.p() });
        }
        Ok(())
    }
}
