//! The topocomm node daemon as a library: neighbour links, the hop-by-hop router,
//! the `Comm` handle algorithms get, the collective algorithms themselves, the run
//! driver and the control loop that ties them to a coordinator.

pub mod assembly;
pub mod collectives;
pub mod comm;
pub mod daemon;
pub mod handshake;
pub mod limits;
pub mod logging;
pub mod mailbox;
pub mod memory;
pub mod memory_cluster;
pub mod pacing;
pub mod probe;
pub mod router;
pub mod run;
pub mod secure;
pub mod security;
pub mod segments;
pub mod simulator;
pub mod timebase;
pub mod transport;
pub mod zeros;

pub use comm::{Comm, CommError};
