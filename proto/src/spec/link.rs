//! The physics emulated links give every message: the routing, the port model and the
//! link model.

use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, EnumString, IntoStaticStr, VariantNames};

/// How a message crosses intermediate nodes ([GGKK 2.5.1]; [KGGK94 3.2] for the
/// figures).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Store-and-forward: each hop receives the whole message, then sends it on.
    Sf,
    /// Cut-through: the message moves in packets that each hop passes on as they arrive.
    Ct,
}

/// How many transfers a node's links carry at once ([GGKK 4], "Basic Communication
/// Operations": the textbook's costs assume one-port nodes; the scanned notes the project
/// was built from, seeds/000, state it: "processor can send on only one link at a time
/// [and] receive on [one]").
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    EnumIter,
    IntoStaticStr,
    VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
#[serde(rename_all = "kebab-case")]
pub enum Ports {
    /// One-port: a node has one output port and one input port. Its outgoing frames cross
    /// its links one at a time, whichever link each takes, and it receives one frame at a
    /// time, whichever link it comes over; forwarding at a hop goes through its ports too.
    One,
    /// All-port: every link direction carries its own frames, all of a node's links at once.
    #[default]
    All,
}

impl Ports {
    /// How outputs name the port model: "one-port" or "all-port".
    pub fn describe(self) -> &'static str {
        match self {
            Ports::One => "one-port",
            Ports::All => "all-port",
        }
    }
}

/// The physics emulated links give every message: start-up time t_s (paid once, when the
/// source sends), per-hop time t_h and per-byte time t_w, the routing, and the port model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinkModel {
    pub ts_ns: u64,
    pub th_ns: u64,
    /// Per-byte time in picoseconds (10 ns/byte = 10_000).
    pub tw_ps: u64,
    pub routing: Routing,
    /// Cut-through packet size in bytes; 0 (the default) emulates cut-through in the limit
    /// of small packets without cutting frames: each further hop passes a message on t_h
    /// after its tail arrived. Store-and-forward sends whole messages either way.
    pub packet_bytes: u32,
    /// How many of a node's links carry frames at once ([`Ports::All`] unless told; a
    /// file written before there was a choice, such as a calibration, reads as all-port).
    #[serde(default)]
    pub ports: Ports,
}

impl LinkModel {
    /// A small cut-through packet, for runs that ask for real packets.
    pub const DEFAULT_PACKET: u32 = 1024;

    /// Whether messages travel as real packets (cut-through with a packet size).
    pub fn packetized(&self) -> bool {
        self.routing == Routing::Ct && self.packet_bytes > 0
    }

    /// Whether messages cut through as whole frames (cut-through without a packet size).
    pub fn cuts_through_whole(&self) -> bool {
        self.routing == Routing::Ct && self.packet_bytes == 0
    }

    /// t_w · bytes, in nanoseconds.
    pub fn transfer_ns(&self, bytes: usize) -> u64 {
        (bytes as u128 * self.tw_ps as u128 / 1000) as u64
    }

    /// Bytes a message travels per packet under this routing.
    pub fn packet_len(&self, message: usize) -> usize {
        match self.routing {
            Routing::Ct if self.packet_bytes > 0 => (self.packet_bytes as usize).min(message.max(1)),
            Routing::Sf | Routing::Ct => message.max(1),
        }
    }
}
