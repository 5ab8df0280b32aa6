//! The contract every other part of topocomm speaks: topologies and their routes,
//! the data-plane frame and its codec, coordinator <-> node control messages, the
//! names users type (collectives, algorithms, ops, dtypes) and the sequential
//! reference that says what every node must end with.
//!
//! Layout:
//!
//! * [`topology`]: the shapes, ids, neighbours, edges and routes; [`network`]: the switched
//!   families (fat-tree, dragonfly, machines of many cores) a switched topology holds;
//!   [`netfile`]: networks read from files (topocomm's JSON, SimGrid platforms), validated
//!   and routed;
//! * [`frame`], [`codec`]: the data-plane frame header and the one binary encoding;
//! * [`control`]: coordinator ↔ node messages and client requests; [`auth`]: the handshake's
//!   messages and proofs;
//! * [`names`]: the names users type; [`spec`]: the `RunSpec` every node gets, with the
//!   link physics and time dilation (in `spec::link`, `spec::dilation`) and the names
//!   re-exported; [`catalogue`]: which
//!   algorithms serve which collective, and each topology's default; [`schedule`]:
//!   schedules users bring (MSCCL-IR, GOAL), typed and bounded;
//! * [`reference`]: what every node must end with; [`elements`]: the reduction operators;
//! * [`flow`]: message-flow events for traces and diagrams.
//!
//! Layers, bottom first (a module uses only its own layer and those beneath; held by
//! `collectives/tests/arrows.rs`): `spec::link`, `network`, `netfile` ← `topology`, `codec`,
//! `names`, `spec::dilation` ← `frame`, `flow`, `auth`,
//! `schedule` ← `spec` ← `elements`, `catalogue`, `reference`, `control`.

pub mod auth;
pub mod catalogue;
pub mod codec;
pub mod control;
pub mod elements;
pub mod flow;
pub mod frame;
pub mod names;
pub mod netfile;
pub mod network;
pub mod reference;
pub mod schedule;
pub mod spec;
pub mod topology;

pub use topology::{NodeId, Topology, TopologyError, TopologyKind};
