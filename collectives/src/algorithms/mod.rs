//! The collective algorithms, one file per operation family, each algorithm one async
//! fn over `Comm` that reads like its pseudocode and cites it. `run` picks the one a
//! run specification names; `patterns` and `blocks` hold the building blocks they share.

pub mod allgather;
pub mod allreduce;
pub mod alltoall;
pub mod barrier;
pub mod blocks;
pub mod broadcast;
pub mod folding;
pub mod hierarchy;
pub mod patterns;
pub mod personalized;
pub mod phases;
pub mod pingpong;
pub mod reduce;
pub mod reduce_scatter;
pub mod scan;
pub mod scatter_gather;
pub mod schedule;
pub mod shift;
pub mod tree;
pub mod two_level;

use std::pin::Pin;

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective, RunSpec};

use crate::comm::{Comm, CommError};
use patterns::Reduction;

/// Runs this node's part of the collective `spec` names, from `input`; returns what the
/// node ends with (see `topocomm_proto::reference` for what that must be, and for the
/// data layout of each collective: `block` below is `spec.size_bytes`).
pub fn run<'a>(comm: &'a Comm, spec: &'a RunSpec, input: Bytes) -> Running<'a> {
    let (algorithm, root, block) = (spec.algorithm, spec.root, spec.size_bytes as usize);
    let reduction = Reduction { dtype: spec.dtype, op: spec.op };
    if let Some(schedule) = &spec.schedule {
        return Box::pin(schedule::run(comm, spec, schedule, input));
    }
    // Each algorithm's future in a box of its own size: a node's future is then as large
    // as its own algorithm's state, not the largest of all (the simulator holds one per
    // node, a million at a time). A family whose `run` only picks its algorithm hands
    // that box back ([`Running`]) as it is, one box a node (the simulator reaches it at
    // every poll: a box between them was a cache miss each time); the others lay out
    // blocks first, and their own future is boxed here.
    match spec.collective {
        Collective::Broadcast => broadcast::run(comm, algorithm, root, input),
        Collective::Reduce => reduce::run(comm, algorithm, root, input, spec.dtype, spec.op),
        Collective::Allgather => Box::pin(allgather::run(comm, algorithm, input)),
        Collective::ReduceScatter => Box::pin(reduce_scatter::run(comm, algorithm, input, block, reduction)),
        Collective::Allreduce => allreduce::run(comm, algorithm, input, reduction),
        Collective::Scan => scan::run(comm, algorithm, input, reduction, spec.exclusive),
        Collective::Scatter => Box::pin(scatter_gather::scatter(comm, algorithm, root, input, block)),
        Collective::Gather => Box::pin(scatter_gather::gather(comm, algorithm, root, input)),
        Collective::Alltoall => alltoall::run(comm, algorithm, input, block),
        Collective::Shift => shift::run(comm, algorithm, input, spec.shift),
        Collective::PingPong => Box::pin(pingpong::run(comm, algorithm, root, input, spec.shift)),
        Collective::Barrier => Box::pin(async move { barrier::run(comm, algorithm).await.map(|()| Bytes::new()) }),
    }
}

/// A node's algorithm on its way, in a box of its own size: what a family's `run`
/// returns when it does no more than pick the algorithm.
pub type Running<'a> = Pin<Box<dyn Future<Output = Result<Bytes, CommError>> + Send + 'a>>;

/// A run that fails before it starts, with `error`.
pub fn failed<'a>(error: CommError) -> Running<'a> {
    Box::pin(std::future::ready(Err(error)))
}

/// The error for an algorithm a collective does not have.
pub fn unsupported(comm: &Comm, collective: Collective, algorithm: Algorithm) -> CommError {
    let reason = topocomm_proto::catalogue::check(collective, algorithm)
        .err()
        .map(|error| error.to_string())
        .unwrap_or_else(|| format!("{collective} with {algorithm} is not implemented on the node"));
    CommError::Unsupported { me: comm.id(), algorithm: algorithm.to_string(), reason }
}
