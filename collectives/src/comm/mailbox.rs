//! Where delivered messages wait for the algorithm's `recv`, keyed by (run, iteration,
//! source, tag). A link fault wakes every waiter with the fault's reason. A waiting
//! receive may offer a place of an assembled result (see `assembly`), which the link
//! reader then fills straight from the socket. Every new waiting receive is announced
//! (`Mailbox::posted`), so a link reader that holds back a large message nobody asked
//! for yet learns when someone does. What each source (the frames' `src`) and each link
//! has queued here and nobody has taken yet is counted, and held to an [`Allowance`]
//! (see `Router::begin_run`): a neighbour cannot fill this node's memory with messages
//! it never asks for, and a flood relayed by honest nodes is charged to its source, not
//! to the last hop. A link fault drops whatever was queued at once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use bytesize::ByteSize;
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, oneshot};

use topocomm_proto::NodeId;
use topocomm_proto::frame::{FrameHeader, Tag};

use crate::comm::assembly::Place;
use crate::comm::fault::LinkFault;

/// Identifies one expected message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageKey {
    pub run: u64,
    pub iteration: u32,
    pub src: NodeId,
    pub tag: Tag,
}

/// A delivered message and the step its sender was at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub payload: Bytes,
    pub step: u16,
    /// Under emulation: when the message's tail arrived, on the emulated timeline (0: not
    /// emulated; see `FrameHeader::due_ns`).
    pub due_ns: u64,
}

/// What a waiting receive gets: the message, and its place back unless the message was
/// read straight into it (then the payload is the filled place).
#[derive(Debug)]
pub struct Arrival {
    pub delivery: Delivery,
    pub place: Option<Place>,
}

type Waiter = oneshot::Sender<Result<Arrival, LinkFault>>;

/// A message that arrived before anyone asked for it, and the link it came in on
/// (`None`: this node sent it to itself), which it is charged to until taken.
struct Queued {
    delivery: Delivery,
    via: Option<NodeId>,
}

impl Queued {
    /// What it is charged: its payload and the header it came with.
    fn charge(&self) -> u64 {
        charge_of(self.delivery.payload.len())
    }
}

/// The bytes a message of `payload_len` bytes is charged while queued: its payload and
/// the header it came with (so that a flood of empty messages is bounded too).
pub fn charge_of(payload_len: usize) -> u64 {
    (payload_len + FrameHeader::ENCODED_LEN) as u64
}

enum Slot {
    /// Messages that arrived before anyone asked, oldest first.
    Queued(VecDeque<Queued>),
    /// A `recv` waiting for the next message, maybe with a place for it to land in.
    Waiting(Waiter, Option<Place>),
}

/// A bound for each node: the same for all, or one each (indexed by node id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    Each(u64),
    ByNode(Arc<[u64]>),
}

impl Bound {
    /// The bound of `node` (0 for a node the list does not have).
    pub fn of(&self, node: NodeId) -> u64 {
        match self {
            Bound::Each(bound) => *bound,
            Bound::ByNode(bounds) => bounds.get(node).copied().unwrap_or(0),
        }
    }
}

/// What may be queued here and not taken yet, in bytes (messages and partial packets,
/// each message with its header, see [`charge_of`]): by each source, and by each link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    /// By the frames' source (`src`): what that node's messages may hold here.
    pub source: Bound,
    /// By the neighbour whose link brought them.
    pub link: Bound,
}

/// Bytes queued here and not taken yet, by source and by link.
#[derive(Default)]
struct Held {
    by_source: HashMap<NodeId, u64>,
    by_link: HashMap<NodeId, u64>,
}

#[derive(Default)]
struct State {
    slots: HashMap<MessageKey, Slot>,
    /// Set once a link of this wiring failed; every wait fails with it from then on.
    fault: Option<LinkFault>,
    /// Messages of runs older than this are dropped.
    oldest_run: u64,
    /// Bytes each source and each link has queued here (messages and partial packets
    /// not yet taken).
    held: Held,
    /// The most each may hold (`None`: no bound, for in-process clusters).
    allowance: Option<Allowance>,
}

impl State {
    /// Charges `bytes` from `src` that came in over `via`'s link (`None`: from this node
    /// itself, never charged), unless that would take the source or the link past its
    /// allowance: the source is checked first, so a flood is charged to the node its
    /// frames name as their source, not to the neighbour that relayed them last.
    fn charge(&mut self, via: Option<NodeId>, src: NodeId, bytes: u64) -> Result<(), Overdrawn> {
        let Some(via) = via else { return Ok(()) };
        let by_source = self.held.by_source.get(&src).copied().unwrap_or(0);
        let by_link = self.held.by_link.get(&via).copied().unwrap_or(0);
        if let Some(allowance) = &self.allowance {
            for (charged, held, allowance) in [
                (Charged::Source(src), by_source, allowance.source.of(src)),
                (Charged::Link(via), by_link, allowance.link.of(via)),
            ] {
                if held.saturating_add(bytes) > allowance {
                    return Err(Overdrawn { charged, held, adding: bytes, allowance });
                }
            }
        }
        self.held.by_source.insert(src, by_source.saturating_add(bytes));
        self.held.by_link.insert(via, by_link.saturating_add(bytes));
        Ok(())
    }

    /// Gives `bytes` back to `src` and `via`'s link.
    fn release(&mut self, via: Option<NodeId>, src: NodeId, bytes: u64) {
        let Some(via) = via else { return };
        for (held, key) in [(&mut self.held.by_source, src), (&mut self.held.by_link, via)] {
            if let Some(held) = held.get_mut(&key) {
                *held = held.saturating_sub(bytes);
            }
        }
    }
}

/// Whom an overdrawn allowance was charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charged {
    /// The node the frames name as their source.
    Source(NodeId),
    /// The neighbour whose link brought them.
    Link(NodeId),
}

/// A source (or a link) would hold more than its allowance of messages nobody has taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "it would hold {} of messages {} nobody asked for yet (+{}), over the {} this run lets {}",
    ByteSize(held.saturating_add(*adding)), self.whose(), ByteSize(*adding), ByteSize(*allowance), self.allowed_whom()
)]
pub struct Overdrawn {
    pub charged: Charged,
    pub held: u64,
    pub adding: u64,
    pub allowance: u64,
}

impl Overdrawn {
    /// The node this is charged to: the frames' source, or the link's neighbour.
    pub fn charged_node(&self) -> NodeId {
        match self.charged {
            Charged::Source(node) | Charged::Link(node) => node,
        }
    }

    fn whose(&self) -> String {
        match self.charged {
            Charged::Source(src) => format!("from node {src}"),
            Charged::Link(via) => format!("over the link from node {via}"),
        }
    }

    fn allowed_whom(&self) -> String {
        match self.charged {
            Charged::Source(src) => format!("node {src} queue here"),
            Charged::Link(via) => format!("the link from node {via} queue here"),
        }
    }
}

/// The per-wiring mailbox of one node.
#[derive(Default)]
pub struct Mailbox {
    state: Mutex<State>,
    /// Notified whenever a receive starts waiting (or the wiring fails).
    posted: Notify,
}

/// What `Mailbox::take` hands back: the message (and the place, unused), or a receiver
/// to wait on.
pub enum Take {
    Ready(Delivery, Option<Place>),
    Wait(oneshot::Receiver<Result<Arrival, LinkFault>>),
}

impl Mailbox {
    /// Hands a message that came in over the link from `via` (`None`: from this node
    /// itself) to its waiter, or queues it, charged to that link; refuses to queue it
    /// past the link's allowance.
    pub fn deliver(&self, key: MessageKey, payload: Delivery, via: Option<NodeId>) -> Result<(), Overdrawn> {
        let mut state = self.state.lock().expect("mailbox lock");
        if key.run < state.oldest_run {
            tracing::debug!(run = key.run, "dropping a frame of a finished run");
            return Ok(());
        }
        let queued = match state.slots.remove(&key) {
            Some(Slot::Waiting(waiter, place)) => match waiter.send(Ok(Arrival { delivery: payload, place })) {
                Ok(()) => return Ok(()),
                // The waiter gave up (deadline): keep the message for a later recv.
                Err(Ok(arrival)) => Queued { delivery: arrival.delivery, via },
                Err(Err(_)) => return Ok(()),
            },
            Some(Slot::Queued(queue)) => {
                state.slots.insert(key, Slot::Queued(queue));
                Queued { delivery: payload, via }
            }
            None => Queued { delivery: payload, via },
        };
        state.charge(via, key.src, queued.charge())?;
        match state.slots.get_mut(&key) {
            Some(Slot::Queued(queue)) => queue.push_back(queued),
            _ => {
                state.slots.insert(key, Slot::Queued(VecDeque::from([queued])));
            }
        }
        Ok(())
    }

    /// Charges `bytes` of a message from `src` still coming in packets over the link from
    /// `via`, unless that would take either past its allowance.
    pub fn hold_partial(&self, via: NodeId, src: NodeId, bytes: u64) -> Result<(), Overdrawn> {
        self.state.lock().expect("mailbox lock").charge(Some(via), src, bytes)
    }

    /// Gives back what [`Mailbox::hold_partial`] charged, once the message is whole.
    pub fn release_partial(&self, via: NodeId, src: NodeId, bytes: u64) {
        self.state.lock().expect("mailbox lock").release(Some(via), src, bytes);
    }

    /// Bytes the link from `via` has queued here that nobody has taken yet (messages and
    /// partial packets, each with its header).
    pub fn held_from(&self, via: NodeId) -> u64 {
        self.state.lock().expect("mailbox lock").held.by_link.get(&via).copied().unwrap_or(0)
    }

    /// Bytes of messages from `src` queued here that nobody has taken yet.
    pub fn held_by_source(&self, src: NodeId) -> u64 {
        self.state.lock().expect("mailbox lock").held.by_source.get(&src).copied().unwrap_or(0)
    }

    /// Takes the oldest message for `key`, or registers to wait for it.
    pub fn take(&self, key: MessageKey) -> Result<Take, LinkFault> {
        self.take_into(key, None)
    }

    /// [`Mailbox::take`], offering `place` for the message to be read into when it has
    /// not arrived yet (see [`Mailbox::landing`]).
    pub fn take_into(&self, key: MessageKey, place: Option<Place>) -> Result<Take, LinkFault> {
        let mut state = self.state.lock().expect("mailbox lock");
        if let Some(Slot::Queued(queue)) = state.slots.get_mut(&key) {
            let queued = queue.pop_front().expect("queues are never left empty");
            if queue.is_empty() {
                state.slots.remove(&key);
            }
            state.release(queued.via, key.src, queued.charge());
            return Ok(Take::Ready(queued.delivery, place));
        }
        if let Some(fault) = &state.fault {
            return Err(fault.clone());
        }
        let (tx, rx) = oneshot::channel();
        state.slots.insert(key, Slot::Waiting(tx, place));
        drop(state);
        self.posted.notify_waiters();
        Ok(Take::Wait(rx))
    }

    /// Resolves at the next receive that starts waiting (or at a fault); create it before
    /// looking at the state with [`Mailbox::is_waiting`] so that no post is missed.
    pub fn posted(&self) -> Notified<'_> {
        self.posted.notified()
    }

    /// Whether a receive waits for a message that `wanted` accepts (or the wiring failed).
    pub fn is_waiting(&self, wanted: impl Fn(&MessageKey) -> bool) -> bool {
        let state = self.state.lock().expect("mailbox lock");
        state.fault.is_some() || state.slots.iter().any(|(key, slot)| matches!(slot, Slot::Waiting(..)) && wanted(key))
    }

    /// The place a waiting receive offers for the message `key`, if it is `len` bytes
    /// long: the link reader then reads the payload straight into it (once).
    pub fn landing(&self, key: MessageKey, len: usize) -> Option<Place> {
        let mut state = self.state.lock().expect("mailbox lock");
        match state.slots.get_mut(&key) {
            Some(Slot::Waiting(_, place)) if place.as_ref().is_some_and(|place| place.len() == len) => place.take(),
            _ => None,
        }
    }

    /// Forgets a waiter that timed out, so a late message is queued instead.
    pub fn abandon(&self, key: MessageKey) {
        let mut state = self.state.lock().expect("mailbox lock");
        if matches!(state.slots.get(&key), Some(Slot::Waiting(..))) {
            state.slots.remove(&key);
        }
    }

    /// Marks the wiring broken: every present and future wait fails with `fault`, and
    /// every message queued here is dropped at once (no receive will take it: the run
    /// fails), so a flood that ended the run does not stay in memory until the next one.
    pub fn fail(&self, fault: LinkFault) {
        let mut state = self.state.lock().expect("mailbox lock");
        if state.fault.is_none() {
            state.fault = Some(fault.clone());
        }
        let slots: Vec<Slot> = state.slots.drain().map(|(_, slot)| slot).collect();
        state.held = Held::default();
        drop(state);
        let waiters = slots.into_iter().filter(|slot| matches!(slot, Slot::Waiting(..)));
        self.posted.notify_waiters();
        for slot in waiters {
            if let Slot::Waiting(waiter, _) = slot {
                let _ = waiter.send(Err(fault.clone()));
            }
        }
    }

    /// The fault of this wiring, if any.
    pub fn fault(&self) -> Option<LinkFault> {
        self.state.lock().expect("mailbox lock").fault.clone()
    }

    /// Starts run `run`, each source and link holding at most `allowance` of messages not
    /// yet taken (`None`: no bound): drops what is left of other runs, keeps early frames
    /// of this one and the next.
    pub fn begin_run(&self, run: u64, allowance: Option<Allowance>) {
        let mut state = self.state.lock().expect("mailbox lock");
        state.oldest_run = run;
        state.allowance = allowance;
        let dropped: Vec<(MessageKey, Slot)> =
            state.slots.extract_if(|key, _| key.run != run && key.run != run.saturating_add(1)).collect();
        for (key, slot) in dropped {
            if let Slot::Queued(queue) = slot {
                for queued in queue {
                    state.release(queued.via, key.src, queued.charge());
                }
            }
        }
    }

    /// What each source and link may hold now (`None`: no bound).
    pub fn allowance(&self) -> Option<Allowance> {
        self.state.lock().expect("mailbox lock").allowance.clone()
    }

    /// Bounds what each source and link may hold (before the first run's spec is known).
    pub fn set_allowance(&self, allowance: Option<Allowance>) {
        self.state.lock().expect("mailbox lock").allowance = allowance;
    }

    /// Messages queued and not yet taken (for tests and diagnostics).
    pub fn queued(&self) -> usize {
        let state = self.state.lock().expect("mailbox lock");
        state
            .slots
            .values()
            .map(|slot| match slot {
                Slot::Queued(q) => q.len(),
                Slot::Waiting(..) => 0,
            })
            .sum()
    }
}
