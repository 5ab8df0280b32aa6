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
    /// Nominal physics, for counting a schedule where the links run raw (how long its
    /// messages are, what each link carries): 1 µs start-up, store-and-forward, every
    /// message one frame, all ports.
    pub const NOMINAL: LinkModel =
        LinkModel { ts_ns: 1000, th_ns: 0, tw_ps: 0, routing: Routing::Sf, packet_bytes: 0, ports: Ports::All };

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

/// One class of links' own physics (`--class NAME:ts=1us,th=50ns,tw=0.05ns`, or a
/// network file's classes): what it leaves out, the run's default link model gives;
/// routing and packets are the run's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClassPhysics {
    /// The class, as the network names it (a fat-tree's `edge`, a cluster's `intra`).
    pub name: String,
    /// Start-up time t_s, in nanoseconds.
    pub ts_ns: Option<u64>,
    /// Per-hop time t_h, in nanoseconds.
    pub th_ns: Option<u64>,
    /// Per-byte time t_w, in picoseconds per byte.
    pub tw_ps: Option<u64>,
}

impl ClassPhysics {
    /// A class with no physics of its own: every value is the run's default.
    pub fn named(name: impl Into<String>) -> Self {
        Self { name: name.into(), ts_ns: None, th_ns: None, tw_ps: None }
    }

    /// `base` with this class's own times in place of its.
    pub fn applied_to(&self, base: LinkModel) -> LinkModel {
        LinkModel {
            ts_ns: self.ts_ns.unwrap_or(base.ts_ns),
            th_ns: self.th_ns.unwrap_or(base.th_ns),
            tw_ps: self.tw_ps.unwrap_or(base.tw_ps),
            ..base
        }
    }
}

/// A `--class` naming no class of the network's links.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no link of this network has class `{class}` (its classes: {known})")]
pub struct UnknownClass {
    pub class: String,
    pub known: String,
}

/// The link model of every class of a network whose classes are `names` (by class id):
/// `base`, with each of `classes` applied to the class it names (a class named twice:
/// the last wins).
pub fn class_models(base: LinkModel, classes: &[ClassPhysics], names: &[&str]) -> Result<Vec<LinkModel>, UnknownClass> {
    let mut models = vec![base; names.len().max(1)];
    for physics in classes {
        let Some(id) = names.iter().position(|&name| name == physics.name) else {
            return Err(UnknownClass { class: physics.name.clone(), known: names.join(", ") });
        };
        models[id] = physics.applied_to(base);
    }
    Ok(models)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: LinkModel =
        LinkModel { ts_ns: 100, th_ns: 10, tw_ps: 1000, routing: Routing::Sf, packet_bytes: 0, ports: Ports::All };

    #[test]
    fn a_class_overrides_only_what_it_gives() {
        let intra = ClassPhysics { name: "intra".into(), ts_ns: None, th_ns: Some(1), tw_ps: Some(50) };
        let models = class_models(BASE, &[intra], &["intra", "inter"]).unwrap();
        assert_eq!(models[0], LinkModel { th_ns: 1, tw_ps: 50, ..BASE });
        assert_eq!(models[1], BASE);
    }

    #[test]
    fn an_unknown_class_names_the_known_ones() {
        let core = ClassPhysics { name: "core".into(), ts_ns: Some(1), th_ns: None, tw_ps: None };
        let error = class_models(BASE, &[core], &["intra", "inter"]).unwrap_err();
        assert_eq!(error.to_string(), "no link of this network has class `core` (its classes: intra, inter)");
    }
}
