//! The common start of a run's iterations: node 0 announces the instant every node
//! times the collective from. The driver runs it before every iteration
//! (`daemon::driver`); the allowances count its messages (`allowance::counted`).

use bytes::Bytes;
use topocomm_collectives::algorithms::barrier;
use topocomm_collectives::comm::{Comm, CommError, MessageError};
use topocomm_proto::frame::Tag;

/// The tag of the common-start announcement (the runtime's range, never emulated).
const START_TAG: Tag = barrier::RUNTIME_BARRIER_TAG + 0x100;

/// The messages of the common start: node 0 sends `start_ns` to every other node, which
/// returns what it announced (node 0 returns `start_ns`). The allowances count them too
/// (`allowance::counted`).
pub async fn announce_start(comm: &Comm, start_ns: u64) -> Result<u64, CommError> {
    let me = comm.id();
    if me == 0 {
        for node in 1..comm.p() {
            comm.send(node, START_TAG, Bytes::copy_from_slice(&start_ns.to_le_bytes())).await?;
        }
        return Ok(start_ns);
    }
    let announcement = comm.recv(0, START_TAG).await?;
    let bytes: [u8; 8] = announcement[..].try_into().map_err(|_| CommError::Link {
        me,
        cause: MessageError::Malformed(format!("node 0 announced a start of {} bytes, not 8", announcement.len())),
    })?;
    Ok(u64::from_le_bytes(bytes))
}
