//! Circular q-shift: node (i + q) mod p ends with node i's vector.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use crate::comm::{Comm, CommError};

/// Runs the shift `algorithm` names.
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    vector: Bytes,
    q: usize,
) -> Result<Bytes, CommError> {
    let _ = (vector, q);
    Err(super::unsupported(comm, Collective::Shift, algorithm))
}
