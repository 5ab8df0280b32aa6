//! What a simulation counts at the nodes it watches ([`super::Options::watch`]): by source,
//! the bytes of the messages each watched node was delivered and of the frames it passed
//! on for others, runtime signals (system tags) apart from the algorithm's. A daemon
//! derives from it what each source may have queued at it and in its outgoing links
//! (the daemon's allowance module): a schedule's own traffic is exactly what it carries.

use topocomm_proto::NodeId;
use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE, Tag};

/// Bytes by source node, each frame or message counted with its header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BySource {
    /// Of the algorithm's tags.
    pub algorithm: Vec<u64>,
    /// Of the runtime's (system) tags: barriers, start signals.
    pub runtime: Vec<u64>,
}

impl BySource {
    fn new(p: usize) -> Self {
        BySource { algorithm: vec![0; p], runtime: vec![0; p] }
    }

    fn add(&mut self, src: u32, tag: Tag, bytes: usize) {
        let counts = if tag < SYSTEM_TAG_BASE { &mut self.algorithm } else { &mut self.runtime };
        if let Some(count) = counts.get_mut(src as usize) {
            *count = count.saturating_add((FrameHeader::ENCODED_LEN + bytes) as u64);
        }
    }
}

/// What passed through one watched node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub node: NodeId,
    /// The whole messages delivered to it (reassembled from their packets), by source:
    /// payload and one header each.
    pub delivered: BySource,
    /// The frames it passed on towards their destination, by source: payload and header
    /// of every frame (every packet of a cut-through message).
    pub forwarded: BySource,
}

/// The counts a network keeps for the watched nodes.
pub(super) struct Watch {
    /// `slot[node]`: where node's counts are in `watched`, `u32::MAX` if not watched.
    slot: Vec<u32>,
    watched: Vec<Watched>,
}

impl Watch {
    /// Counts for `nodes` of a network of `vertices` vertices (a switched network's
    /// switches after its ranks) whose frames come from `p` ranks (`None`: no node to
    /// watch).
    pub(super) fn of(nodes: &[NodeId], vertices: usize, p: usize) -> Option<Self> {
        let nodes: Vec<NodeId> = nodes.iter().copied().filter(|&node| node < vertices).collect();
        if nodes.is_empty() {
            return None;
        }
        let mut slot = vec![u32::MAX; vertices];
        let mut watched = Vec::with_capacity(nodes.len());
        for node in nodes {
            if slot[node] == u32::MAX {
                slot[node] = watched.len() as u32;
                watched.push(Watched { node, delivered: BySource::new(p), forwarded: BySource::new(p) });
            }
        }
        Some(Watch { slot, watched })
    }

    fn at(&mut self, node: NodeId) -> Option<&mut Watched> {
        let slot = *self.slot.get(node)?;
        self.watched.get_mut(slot as usize)
    }

    /// A whole message of `bytes` bytes of payload was delivered to `node`.
    pub(super) fn delivered(&mut self, node: NodeId, header: &FrameHeader, bytes: usize) {
        if let Some(watched) = self.at(node) {
            watched.delivered.add(header.src, header.tag, bytes);
        }
    }

    /// `node` passed on a frame of `bytes` bytes of payload that some other node sent.
    pub(super) fn forwarded(&mut self, node: NodeId, header: &FrameHeader, bytes: usize) {
        if let Some(watched) = self.at(node) {
            watched.forwarded.add(header.src, header.tag, bytes);
        }
    }

    pub(super) fn into_watched(self) -> Vec<Watched> {
        self.watched
    }
}
