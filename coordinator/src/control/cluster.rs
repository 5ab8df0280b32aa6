//! The cluster as the coordinator holds it: who registered (by stable name), the id
//! each got, each node's control session, and the wiring in force. Registration runs
//! concurrently with everything; runs and wirings are driven by `run`, one at a time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;
use topocomm_proto::NodeId;
use topocomm_proto::control::{ClusterStatus, RegisteredNode, ToCoordinator, ToNode, TopologySpec};

/// A control session's number: a node that reconnects gets a new one.
pub type SessionId = u64;

/// What node sessions tell the orchestrator.
#[derive(Debug)]
pub enum Event {
    /// A node's message, holding one of its session's few places in the queue until
    /// the orchestrator is done with it.
    Message {
        session: SessionId,
        message: ToCoordinator,
        _place: OwnedSemaphorePermit,
    },
    Closed {
        session: SessionId,
    },
}

/// What an authenticated node says of itself when it registers.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Its stable name (checked by the handshake: short, no control characters).
    pub name: String,
    pub data_addr: String,
    /// The memory it has for runs, in bytes (0: unknown).
    pub memory_bytes: u64,
}

/// One registered node.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    pub data_addr: String,
    pub memory_bytes: u64,
    /// Assigned once the cluster has formed.
    pub id: Option<NodeId>,
    /// The live control session, if connected.
    pub session: Option<(SessionId, mpsc::UnboundedSender<ToNode>)>,
}

/// A node as a run sees it: id, name, address, session.
#[derive(Debug, Clone)]
pub struct Participant {
    pub id: NodeId,
    pub name: String,
    pub data_addr: String,
    /// The memory it said it has for runs, in bytes (0: unknown).
    pub memory_bytes: u64,
    pub session: SessionId,
    pub sender: mpsc::UnboundedSender<ToNode>,
}

#[derive(Default)]
struct Roster {
    members: Vec<Member>,
    next_session: SessionId,
    formed: bool,
}

/// Why a registering node is turned away; its text is the reason the node is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterRefusal {
    /// A connected node has the name already.
    #[error("a node named {name:?} is already connected; give each node its own --name")]
    NameTaken { name: String },
    /// Every place is taken by a connected node.
    #[error("the cluster is full ({nodes} nodes, all connected)")]
    Full { nodes: usize },
}

/// Not every expected node was registered and connected in time: who is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cluster is not complete after {patience:?}: {connected} of {expected} nodes connected{}{}",
    lost_text(.lost),
    unseen_text(*.unseen)
)]
pub struct Incomplete {
    pub patience: Duration,
    pub connected: usize,
    pub expected: usize,
    /// Registered nodes whose session is gone, numbered ones first in id order, then the
    /// ones the cluster never numbered: (id, name).
    pub lost: Vec<(Option<NodeId>, String)>,
    /// Expected nodes that never registered.
    pub unseen: usize,
}

fn lost_text(lost: &[(Option<NodeId>, String)]) -> String {
    if lost.is_empty() {
        return String::new();
    }
    let names: Vec<String> = lost
        .iter()
        .map(|(id, name)| match id {
            Some(id) => format!("node {id} ({name})"),
            None => name.clone(),
        })
        .collect();
    format!("; lost: {}", names.join(", "))
}

fn unseen_text(unseen: usize) -> String {
    if unseen == 0 { String::new() } else { format!("; {unseen} never registered") }
}

/// Registration and membership.
pub struct Cluster {
    expected: usize,
    roster: Mutex<Roster>,
    changed: Notify,
    events: mpsc::UnboundedSender<Event>,
    /// The wiring in force: its topology and the sessions it linked.
    wiring: Mutex<Option<(TopologySpec, Vec<SessionId>)>>,
    /// Whether the cluster is shutting down: a node leaving now is not lost.
    stopping: AtomicBool,
}

impl Cluster {
    /// A cluster of `expected` nodes (the handshake has checked their key before they
    /// register); also returns the receiver of node events, for the orchestrator.
    pub fn new(expected: usize) -> (Self, mpsc::UnboundedReceiver<Event>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let cluster = Cluster {
            expected,
            roster: Mutex::new(Roster::default()),
            changed: Notify::new(),
            events,
            wiring: Mutex::new(None),
            stopping: AtomicBool::new(false),
        };
        (cluster, receiver)
    }

    /// Admits a registering node; returns its session id or why it is refused.
    pub fn register(
        &self,
        registration: Registration,
        sender: mpsc::UnboundedSender<ToNode>,
    ) -> Result<SessionId, RegisterRefusal> {
        let Registration { name, data_addr, memory_bytes } = registration;
        let mut roster = self.roster.lock().expect("roster lock");
        roster.next_session += 1;
        let session = roster.next_session;
        let index = match roster.members.iter().position(|m| m.name == name) {
            Some(index) if roster.members[index].session.is_some() => {
                return Err(RegisterRefusal::NameTaken { name });
            }
            Some(index) => index,
            None if roster.members.len() < self.expected => {
                roster.members.push(Member {
                    name: name.clone(),
                    data_addr: String::new(),
                    memory_bytes: 0,
                    id: None,
                    session: None,
                });
                roster.members.len() - 1
            }
            None => match roster.members.iter().position(|m| m.session.is_none()) {
                // A replacement for a node that is gone takes its place and id.
                Some(index) => {
                    tracing::info!(old = %roster.members[index].name, new = %name, "a new node replaces a departed one");
                    roster.members[index].name = name.clone();
                    index
                }
                None => {
                    return Err(RegisterRefusal::Full { nodes: self.expected });
                }
            },
        };
        let member = &mut roster.members[index];
        member.data_addr = data_addr;
        member.memory_bytes = memory_bytes;
        member.session = Some((session, sender));
        if !roster.formed && roster.members.len() == self.expected {
            assign_ids(&mut roster.members);
            roster.formed = true;
            tracing::info!(nodes = self.expected, "cluster formed");
        }
        let member = roster.members.iter().find(|m| m.name == name).expect("just registered");
        tracing::info!(%name, id = ?member.id, addr = %member.data_addr, session, "node registered");
        drop(roster);
        self.changed.notify_waiters();
        Ok(session)
    }

    /// The cluster is shutting down (its nodes were told to stop, or are being stopped):
    /// from now on a node leaving is the normal end, not a node lost.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Whether [`Cluster::stop`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// A node's control session ended: a node lost (WARN) unless the cluster is stopping.
    pub fn disconnected(&self, session: SessionId) {
        let mut roster = self.roster.lock().expect("roster lock");
        if let Some(member) = roster.members.iter_mut().find(|m| m.session.as_ref().is_some_and(|(s, _)| *s == session))
        {
            if self.is_stopping() {
                tracing::info!(name = %member.name, id = ?member.id, "node left as the cluster stopped");
            } else {
                tracing::warn!(name = %member.name, id = ?member.id, "node disconnected");
            }
            member.session = None;
        }
        drop(roster);
        let _ = self.events.send(Event::Closed { session });
        self.changed.notify_waiters();
    }

    /// Passes a node's message to the orchestrator; it holds `place` until handled.
    pub fn forward(&self, session: SessionId, message: ToCoordinator, place: OwnedSemaphorePermit) {
        let _ = self.events.send(Event::Message { session, message, _place: place });
    }

    /// Waits until every expected node is registered and connected; returns them by id.
    pub async fn participants(&self, patience: Duration) -> Result<Vec<Participant>, Incomplete> {
        let deadline = Instant::now() + patience;
        loop {
            let notified = self.changed.notified();
            if let Some(all) = self.connected() {
                return Ok(all);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(self.shortfall(patience));
            }
        }
    }

    /// Who is missing after `patience`: the registered nodes that are gone (by id and
    /// name) and how many never registered.
    fn shortfall(&self, patience: Duration) -> Incomplete {
        let roster = self.roster.lock().expect("roster lock");
        let connected = roster.members.iter().filter(|m| m.session.is_some()).count();
        // Numbered members first, in id order, then the ones the cluster never numbered.
        let mut lost: Vec<(Option<NodeId>, String)> =
            roster.members.iter().filter(|m| m.session.is_none()).map(|m| (m.id, m.name.clone())).collect();
        lost.sort_by(|a, b| (a.0.is_none(), a).cmp(&(b.0.is_none(), b)));
        Incomplete { patience, connected, expected: self.expected, lost, unseen: self.expected - roster.members.len() }
    }

    fn connected(&self) -> Option<Vec<Participant>> {
        let roster = self.roster.lock().expect("roster lock");
        if !roster.formed {
            return None;
        }
        let mut all: Vec<Participant> = roster
            .members
            .iter()
            .map(|m| {
                let (session, sender) = m.session.clone()?;
                Some(Participant {
                    id: m.id?,
                    name: m.name.clone(),
                    data_addr: m.data_addr.clone(),
                    memory_bytes: m.memory_bytes,
                    session,
                    sender,
                })
            })
            .collect::<Option<_>>()?;
        all.sort_by_key(|p| p.id);
        Some(all)
    }

    /// The wiring in force, if it linked exactly these sessions.
    pub fn wiring_of(&self, sessions: &[SessionId]) -> Option<TopologySpec> {
        let wiring = self.wiring.lock().expect("wiring lock");
        wiring.as_ref().filter(|(_, linked)| linked == sessions).map(|(spec, _)| spec.clone())
    }

    /// Records (or, with `None`, forgets) the wiring in force.
    pub fn set_wiring(&self, wiring: Option<(TopologySpec, Vec<SessionId>)>) {
        *self.wiring.lock().expect("wiring lock") = wiring;
    }

    /// Every registered node, connected or not (the lab's page shows them all).
    #[cfg_attr(not(feature = "lab"), allow(dead_code))]
    pub fn members(&self) -> Vec<Member> {
        self.roster.lock().expect("roster lock").members.clone()
    }

    /// Connected nodes and the wiring, for `topocomm status`.
    pub fn status(&self) -> ClusterStatus {
        let roster = self.roster.lock().expect("roster lock");
        let mut registered: Vec<RegisteredNode> = roster
            .members
            .iter()
            .filter(|m| m.session.is_some())
            .map(|m| RegisteredNode { id: m.id, name: m.name.clone(), data_addr: m.data_addr.clone() })
            .collect();
        // Numbered nodes first, in id order, then the ones the cluster never numbered.
        registered.sort_by(|a, b| {
            (a.id.is_none(), a.id, &a.name, &a.data_addr).cmp(&(b.id.is_none(), b.id, &b.name, &b.data_addr))
        });
        let topology = self.wiring.lock().expect("wiring lock").as_ref().map(|(spec, _)| spec.clone());
        ClusterStatus { expected: self.expected, registered, topology }
    }
}

/// Ids in a stable order: the members' names, compared the way people sort them
/// (`node-2` before `node-10`).
fn assign_ids(members: &mut [Member]) {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| natural_key(&members[a].name).cmp(&natural_key(&members[b].name)));
    for (id, index) in order.into_iter().enumerate() {
        members[index].id = Some(id);
    }
}

/// Splits a name into text and number runs so that numbers compare by value.
fn natural_key(name: &str) -> Vec<(String, u128)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((std::mem::take(&mut text), digits.parse().unwrap_or(u128::MAX)));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((text, if digits.is_empty() { 0 } else { digits.parse().unwrap_or(u128::MAX) }));
    key
}

/// Each member's id by name.
#[cfg(test)]
fn ids_by_name(cluster: &Cluster) -> std::collections::BTreeMap<String, NodeId> {
    let roster = cluster.roster.lock().expect("roster lock");
    roster.members.iter().filter_map(|m| Some((m.name.clone(), m.id?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender() -> mpsc::UnboundedSender<ToNode> {
        mpsc::unbounded_channel().0
    }

    fn node(name: &str, data_addr: &str) -> Registration {
        Registration { name: name.into(), data_addr: data_addr.into(), memory_bytes: 1 << 30 }
    }

    #[test]
    fn ids_follow_natural_name_order_and_survive_a_restart() {
        let (cluster, _events) = Cluster::new(3);
        let s10 = cluster.register(node("node-10", "a:1"), sender()).unwrap();
        cluster.register(node("node-2", "a:2"), sender()).unwrap();
        cluster.register(node("node-1", "a:3"), sender()).unwrap();
        let ids = ids_by_name(&cluster);
        assert_eq!(ids["node-1"], 0);
        assert_eq!(ids["node-2"], 1);
        assert_eq!(ids["node-10"], 2);
        cluster.disconnected(s10);
        cluster.register(node("node-10", "a:9"), sender()).unwrap();
        assert_eq!(ids_by_name(&cluster)["node-10"], 2);
    }

    /// Issue 45, item 9: a node leaving a cluster that is stopping is its normal end (logged
    /// at info, not WARN), and is still a leaving: the run driver hears it, the roster drops it.
    #[test]
    fn a_node_leaving_a_stopping_cluster_is_still_a_leaving() {
        let (cluster, mut events) = Cluster::new(1);
        let session = cluster.register(node("a", "a:1"), sender()).unwrap();
        assert!(!cluster.is_stopping());
        cluster.stop();
        assert!(cluster.is_stopping());
        cluster.disconnected(session);
        assert!(matches!(events.try_recv(), Ok(Event::Closed { session: s }) if s == session));
        assert!(cluster.members().iter().all(|m| m.session.is_none()));
    }

    #[tokio::test]
    async fn an_incomplete_cluster_names_who_is_missing() {
        let (cluster, _events) = Cluster::new(3);
        cluster.register(node("a", "a:1"), sender()).unwrap();
        let gone = cluster.register(node("b", "a:2"), sender()).unwrap();
        let error = cluster.participants(Duration::from_millis(10)).await.unwrap_err();
        assert_eq!((error.connected, error.expected, error.unseen), (2, 3, 1));
        assert!(error.to_string().ends_with(": 2 of 3 nodes connected; 1 never registered"), "{error}");
        cluster.register(node("c", "a:3"), sender()).unwrap();
        cluster.disconnected(gone);
        let error = cluster.participants(Duration::from_millis(10)).await.unwrap_err();
        assert_eq!(error.lost, vec![(Some(1), "b".to_owned())]);
        assert!(error.to_string().ends_with(": 2 of 3 nodes connected; lost: node 1 (b)"), "{error}");
    }

    #[test]
    fn duplicates_and_extras_are_refused() {
        let (cluster, _events) = Cluster::new(1);
        cluster.register(node("n", "a:1"), sender()).unwrap();
        let taken = cluster.register(node("n", "a:1"), sender()).unwrap_err();
        assert_eq!(taken, RegisterRefusal::NameTaken { name: "n".into() });
        assert!(taken.to_string().contains("already connected"), "{taken}");
        let full = cluster.register(node("m", "a:2"), sender()).unwrap_err();
        assert_eq!(full, RegisterRefusal::Full { nodes: 1 });
        assert!(full.to_string().contains("full"), "{full}");
    }
}
