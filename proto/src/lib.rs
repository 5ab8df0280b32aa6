//! The contract every other part of topocomm speaks: topologies and their routes,
//! the data-plane frame and its codec, coordinator <-> node control messages, the
//! names users type (collectives, algorithms, ops, dtypes) and the sequential
//! reference that says what every node must end with.

pub mod auth;
pub mod catalogue;
pub mod codec;
pub mod control;
pub mod elements;
pub mod flow;
pub mod frame;
pub mod reference;
pub mod schedule;
pub mod spec;
pub mod topology;

pub use topology::{NodeId, Topology, TopologyError, TopologyKind};
