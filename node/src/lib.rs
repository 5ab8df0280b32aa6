//! The topocomm node daemon as a library: what carries a node's messages to its
//! neighbours and what ties the node to a coordinator. The algorithms it runs, and the
//! `Comm` handle they get, are `topocomm-collectives`; this crate hands them its router
//! as their [`topocomm_collectives::comm::Fabric`].
//!
//! Layout:
//!
//! * [`router`]: the hop-by-hop router — delivers a frame for this node to its mailbox,
//!   passes any other on towards its destination, guards what neighbours send.
//! * [`allowance`]: what a run lets each source queue at a node and pass through it, the
//!   run's schedule counted on the simulator once by the coordinator for every node, and
//!   how a node takes the rows it is sent; [`forwarding`]: what a node holds of the
//!   frames it passes on, charged to their sources.
//! * [`transport`]: the links beneath the router — frames over byte streams (TCP, raw or
//!   encrypted) or in-memory channels, TCP sockets, and the emulation's physics and
//!   clock (`emulated`, `pacing`) laid over any of them.
//! * [`security`]: who may connect — the shared settings (token, encryption), the mutual
//!   handshake and the encrypted channel, caps on connections still in their handshake.
//! * [`daemon`]: the process — the control loop with the coordinator, the run driver,
//!   the allocator's tuning, logs, operating-system limits.
//! * [`steps`]: what a run's nodes run besides their collective (the common start, the
//!   dilation probe), which the driver runs and the allowances count; [`timebase`]: the
//!   node's clock for traces.
//! * `in_process` (cargo feature `in-process`, for tests and benches only): a whole
//!   cluster in one process (every node's router, links in memory) on tokio's paused
//!   clock, for the tests and as the simulator's baseline.
//!
//! Layers, bottom first (a module uses only its own layer and those beneath; held by
//! `collectives/tests/arrows.rs`): `timebase`, `steps`, `forwarding` ← `transport` ←
//! `security` ← `allowance` ← `router` ← `daemon` ← `in_process`.

pub mod allowance;
pub mod daemon;
pub mod forwarding;
#[cfg(feature = "in-process")]
pub mod in_process;
pub mod router;
pub mod security;
pub mod steps;
pub mod timebase;
pub mod transport;
