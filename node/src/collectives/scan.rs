//! Prefix sums (scan): node i ends with the reduction of nodes 0..=i (0..i when exclusive).

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use super::patterns::Reduction;
use crate::comm::{Comm, CommError};

/// Runs the scan `algorithm` names.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    vector: Bytes,
    reduction: Reduction,
    exclusive: bool,
) -> Result<Bytes, CommError> {
    let _ = (vector, reduction, exclusive);
    Err(super::unsupported(comm, Collective::Scan, algorithm))
}
