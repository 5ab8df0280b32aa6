//! The control plane: forming a cluster of node daemons (local or registered with a
//! serving coordinator), planning and executing run requests, and the client that asks a
//! serving coordinator. Uses neither `tools` nor `render`.

pub mod calibration;
pub mod client;
pub mod cluster;
pub mod local;
pub mod parse;
pub mod request;
pub mod run;
pub mod server;
pub mod target;
pub mod tuning;
