//! All-reduce: every node ends with the reduction of every node's vector.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use super::patterns::Reduction;
use crate::comm::{Comm, CommError};

/// Runs the all-reduce `algorithm` names.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    vector: Bytes,
    reduction: Reduction,
) -> Result<Bytes, CommError> {
    let _ = (vector, reduction);
    Err(super::unsupported(comm, Collective::Allreduce, algorithm))
}
