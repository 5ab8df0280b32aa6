//! The topocomm algorithm library: what the collective algorithms run on, the algorithms,
//! and the simulator that runs them on a virtual network. It opens no socket and knows no
//! transport; a node daemon (`topocomm-node`) hands it a network through [`comm::Fabric`],
//! and the simulator hands it its own.
//!
//! Layout, top down:
//!
//! * [`algorithms`]: the collectives, one file per operation family, each algorithm an
//!   async fn over [`Comm`] that reads like its pseudocode and cites it; `tree` (the
//!   binomial tree every tree algorithm reads), `patterns`, `blocks`, `folding` and
//!   `phases` are the building blocks they share; `schedule` runs MSCCL-IR and GOAL
//!   schedules written elsewhere.
//! * [`comm`]: the handle an algorithm gets — `send`, `recv`, `exchange` and their kin —
//!   with what it stands on: the mailbox messages wait in, results assembled in place,
//!   vectors in segments, and the [`comm::LinkCapabilities`] an algorithm may read.
//! * [`simulator`]: the discrete-event engine — every node's algorithm a future on a
//!   virtual network in integer nanoseconds — and [`physics`], the link physics it shares
//!   with the daemon's emulated links.
//! * [`tuning`]: what `--algorithm auto` picks, as data (a JSON table, overridable).
//! * [`zeros`]: known-zero buffers, so lengths-only runs carry no data (a run is lengths
//!   only by `simulator::Options::lengths_only`, which each node's `Comm` reads).
//! * [`files`]: the files a user names, read bounded and written without following links.
//!
//! Layers, bottom first (a module uses only its own layer and those beneath; held by
//! `tests/arrows.rs`): `zeros`, `files` ← the simulator's containers (`simulator::store`,
//! `simulator::event_queue`, `simulator::huge_pages`) ← `comm`, `physics`, `simulator` (what an algorithm
//! runs on: `Comm` holds the simulator's port as a concrete type, so the two are one
//! layer) ← `algorithms`, `tuning` ← `simulator::spec` (a `RunSpec` on the simulator). The
//! simulator's engine and network never name an algorithm.

pub mod algorithms;
pub mod comm;
pub mod files;
pub mod physics;
pub mod simulator;
pub mod tuning;
pub mod zeros;

pub use comm::{Comm, CommError};
