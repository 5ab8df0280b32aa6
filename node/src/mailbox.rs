//! Where delivered messages wait for the algorithm's `recv`, keyed by (run, iteration,
//! source, tag). A link fault wakes every waiter with the fault's reason. A waiting
//! receive may offer a place of an assembled result (see `assembly`), which the link
//! reader then fills straight from the socket. Every new waiting receive is announced
//! (`Mailbox::posted`), so a link reader that holds back a large message nobody asked
//! for yet learns when someone does.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, oneshot};

use topocomm_proto::NodeId;
use topocomm_proto::frame::Tag;

use crate::assembly::Place;
use crate::transport::LinkFault;

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

enum Slot {
    /// Messages that arrived before anyone asked, oldest first.
    Queued(VecDeque<Delivery>),
    /// A `recv` waiting for the next message, maybe with a place for it to land in.
    Waiting(Waiter, Option<Place>),
}

#[derive(Default)]
struct State {
    slots: HashMap<MessageKey, Slot>,
    /// Set once a link of this wiring failed; every wait fails with it from then on.
    fault: Option<LinkFault>,
    /// Messages of runs older than this are dropped.
    oldest_run: u64,
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
    /// Hands a message to its waiter, or queues it.
    pub fn deliver(&self, key: MessageKey, payload: Delivery) {
        let mut state = self.state.lock().expect("mailbox lock");
        if key.run < state.oldest_run {
            tracing::debug!(run = key.run, "dropping a frame of a finished run");
            return;
        }
        match state.slots.remove(&key) {
            Some(Slot::Waiting(waiter, place)) => {
                if let Err(Ok(arrival)) = waiter.send(Ok(Arrival { delivery: payload, place })) {
                    // The waiter gave up (deadline): keep the message for a later recv.
                    state.slots.insert(key, Slot::Queued(VecDeque::from([arrival.delivery])));
                }
            }
            Some(Slot::Queued(mut queue)) => {
                queue.push_back(payload);
                state.slots.insert(key, Slot::Queued(queue));
            }
            None => {
                state.slots.insert(key, Slot::Queued(VecDeque::from([payload])));
            }
        }
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
            let payload = queue.pop_front().expect("queues are never left empty");
            if queue.is_empty() {
                state.slots.remove(&key);
            }
            return Ok(Take::Ready(payload, place));
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

    /// Marks the wiring broken: every present and future wait fails with `fault`.
    pub fn fail(&self, fault: LinkFault) {
        let mut state = self.state.lock().expect("mailbox lock");
        if state.fault.is_none() {
            state.fault = Some(fault.clone());
        }
        let waiters: Vec<Slot> =
            state.slots.extract_if(|_, slot| matches!(slot, Slot::Waiting(..))).map(|(_, slot)| slot).collect();
        drop(state);
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

    /// Starts run `run`: drops what is left of older runs, keeps early frames of this one.
    pub fn begin_run(&self, run: u64) {
        let mut state = self.state.lock().expect("mailbox lock");
        state.oldest_run = run;
        state.slots.retain(|key, _| key.run >= run);
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
