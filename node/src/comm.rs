//! The handle an algorithm gets: who am I (`id`), how many are we (`p`), the topology,
//! `send(dst, tag, bytes)` and `recv(src, tag)`, scoped to one iteration of one run with
//! a deadline. Nothing below it (links, sockets, codecs) is visible to an algorithm.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use bytes::Bytes;
use tokio::time::Instant;
use topocomm_proto::elements::ElementsError;
use topocomm_proto::frame::{FrameHeader, Tag};
use topocomm_proto::{NodeId, Topology};

use crate::mailbox::{Delivery, MessageKey, Take};
use crate::router::{RouteError, Router};

/// Why a communication step failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommError {
    #[error("node {me}: no message from node {src} (tag {tag}) before the deadline ({timeout_ms} ms)")]
    Timeout { me: NodeId, src: NodeId, tag: Tag, timeout_ms: u64 },
    #[error("node {me}: {reason}")]
    Link { me: NodeId, reason: String },
    #[error("node {me}: peer {peer} is not a node of this {p}-node cluster")]
    NoSuchPeer { me: NodeId, peer: NodeId, p: usize },
    #[error("node {me}: {reason}")]
    Route { me: NodeId, reason: String },
    #[error("node {me}: {source}")]
    Elements { me: NodeId, source: ElementsError },
    #[error("node {me}: algorithm {algorithm} cannot run here: {reason}")]
    Unsupported { me: NodeId, algorithm: String, reason: String },
}

/// One node's view of the cluster for one iteration of one run.
#[derive(Clone)]
pub struct Comm {
    router: Arc<Router>,
    run: u64,
    iteration: u32,
    deadline: Instant,
    timeout_ms: u64,
    /// The deepest step this node has received from (shared by clones of the handle).
    step: Arc<AtomicU16>,
}

impl Comm {
    /// A handle whose every wait ends at `deadline`.
    pub fn new(router: Arc<Router>, run: u64, iteration: u32, deadline: Instant) -> Self {
        let timeout_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        Comm { router, run, iteration, deadline, timeout_ms, step: Arc::new(AtomicU16::new(0)) }
    }

    /// This node's id, 0..p-1.
    pub fn id(&self) -> NodeId {
        self.router.id()
    }

    /// The number of nodes.
    pub fn p(&self) -> usize {
        self.router.topology().p()
    }

    /// The topology the cluster is wired as (algorithms made for a grid read its shape).
    pub fn topology(&self) -> &Topology {
        self.router.topology()
    }

    /// The iteration this handle belongs to.
    pub fn iteration(&self) -> u32 {
        self.iteration
    }

    /// Sends `data` to node `dst` (any node: the router carries it hop by hop).
    pub async fn send(&self, dst: NodeId, tag: Tag, data: Bytes) -> Result<(), CommError> {
        self.check_peer(dst)?;
        let header = FrameHeader {
            run: self.run,
            iteration: self.iteration,
            src: self.id() as u32,
            dst: dst as u32,
            tag,
            hops: 0,
            step: self.step.load(Ordering::Relaxed).saturating_add(1),
            packet: 0,
            last: true,
        };
        self.router.originate(header, data).map_err(|error| self.route_error(error))
    }

    /// Waits for the next message from node `src` with `tag`.
    pub async fn recv(&self, src: NodeId, tag: Tag) -> Result<Bytes, CommError> {
        self.check_peer(src)?;
        let key = MessageKey { run: self.run, iteration: self.iteration, src, tag };
        let mailbox = self.router.mailbox();
        let waiting = match mailbox.take(key) {
            Ok(Take::Ready(delivery)) => return Ok(self.received(delivery)),
            Ok(Take::Wait(waiting)) => waiting,
            Err(reason) => {
                return Err(CommError::Link { me: self.id(), reason });
            }
        };
        match tokio::time::timeout_at(self.deadline, waiting).await {
            Ok(Ok(Ok(delivery))) => Ok(self.received(delivery)),
            Ok(Ok(Err(reason))) => Err(CommError::Link { me: self.id(), reason }),
            Ok(Err(_closed)) => Err(CommError::Link { me: self.id(), reason: "the wiring was closed".into() }),
            Err(_elapsed) => {
                mailbox.abandon(key);
                Err(CommError::Timeout { me: self.id(), src, tag, timeout_ms: self.timeout_ms })
            }
        }
    }

    /// The number of steps on the longest chain of messages that reached this node.
    pub fn steps(&self) -> u16 {
        self.step.load(Ordering::Relaxed)
    }

    fn received(&self, delivery: Delivery) -> Bytes {
        self.step.fetch_max(delivery.step, Ordering::Relaxed);
        delivery.payload
    }

    /// Sends to `dst` and then receives from `src`: one exchange step.
    pub async fn exchange(&self, dst: NodeId, src: NodeId, tag: Tag, data: Bytes) -> Result<Bytes, CommError> {
        self.send(dst, tag, data).await?;
        self.recv(src, tag).await
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

    fn route_error(&self, error: RouteError) -> CommError {
        CommError::Route { me: self.id(), reason: error.to_string() }
    }
}
