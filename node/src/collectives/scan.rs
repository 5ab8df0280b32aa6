//! Prefix sums (scan): node i ends with the reduction of nodes 0..=i (0..i when
//! exclusive; node 0 then ends with an empty buffer).
//!
//! Two schedules: the hypercube prefix sums of Algorithm 4.9 (seed 001; Program 3.7 in
//! seed 000) and the pipeline along the ring of ids. Costs are for store-and-forward
//! routing on the topology each was made for (t_s start-up, t_w per byte, m bytes per
//! vector), plus the time of the combines. Every node's vector must have the same
//! length; a vector that cannot be combined fails the run with `CommError::Elements`.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use super::patterns::{Phase, Reduction, hypercube_dimension};
use crate::comm::{Comm, CommError};

/// Runs the scan `algorithm` names: node i returns the reduction of the vectors of nodes
/// 0..=i, or of 0..i with `exclusive` (node 0 then returns an empty buffer).
pub async fn run(
    comm: &Comm,
    algorithm: Algorithm,
    vector: Bytes,
    reduction: Reduction,
    exclusive: bool,
) -> Result<Bytes, CommError> {
    match algorithm {
        Algorithm::Hypercube => hypercube(comm, vector, reduction, exclusive).await,
        Algorithm::Linear => linear(comm, vector, reduction, exclusive).await,
        other => Err(super::unsupported(comm, Collective::Scan, other)),
    }
}

/// Hypercube prefix sums: Algorithm 4.9 (PREFIX_SUMS_HCUBE), line by line, d = ⌈log2 p⌉.
///
/// ```text
/// result := my_number              /* exclusive: result := nothing */
/// msg := my_number
/// for i := 0 to d - 1 do
///     partner := my_id XOR 2^i
///     if partner < p then          /* always, when p is a power of two */
///         send msg to partner
///         receive number from partner
///         msg := msg + number
///         if partner < my_id then result := result + number
/// endfor
/// ```
///
/// After step i, `msg` holds the sum over my (i+1)-dimensional subcube and `result` the
/// sum over the part of it below me (and me, unless exclusive).
///
/// When p is not a power of two the exchanges with partners ≥ p are skipped, with no
/// folding, and the result stays exact: node u's `result` only ever adds what a
/// *lower* partner sends, the sum over a subcube lying wholly below u < p, where every
/// partner exists and none was skipped. The sums a skip leaves incomplete belong to
/// subcubes that straddle p; they only travel to lower partners, which add them to
/// `msg` (never to `result`), and from there only on towards partners ≥ p, which do not
/// exist.
///
/// Steps: ⌈log2 p⌉ exchanges. Cost (t_s + t_w m) log p, plus up to 2 log p combines.
pub async fn hypercube(
    comm: &Comm,
    my_number: Bytes,
    reduction: Reduction,
    exclusive: bool,
) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let d = hypercube_dimension(p);
    let phase = Phase(0);
    let mut result = (!exclusive).then(|| my_number.clone());
    let mut msg = my_number;
    for i in 0..d {
        let partner = my_id ^ (1 << i);
        if partner < p {
            let number = comm.exchange(partner, partner, phase.tag(i), msg.clone()).await?;
            msg = reduction.combine(comm, msg, &number)?;
            if partner < my_id {
                result = Some(match result {
                    Some(sum) => reduction.combine(comm, sum, &number)?,
                    None => number,
                });
            }
        }
    }
    Ok(result.unwrap_or_default())
}

/// Linear prefix sums: a pipeline along the ring of ids 0, 1, ..., p-1 (seed 000, prefix
/// sums as a pipeline). Node i receives the prefix of nodes 0..i from node i-1, combines
/// its own vector in and passes the prefix of 0..=i on to node i+1.
///
/// ```text
/// prefix := nothing
/// if my_id > 0 then receive prefix from my_id - 1
/// sum := prefix + X                    /* X alone on node 0 */
/// if my_id < p - 1 then send sum to my_id + 1
/// result := sum                        /* exclusive: result := prefix */
/// ```
///
/// The combines run in node order, so the result matches the sequential reference bit
/// for bit. Steps: p - 1 (one hop each, strictly one after another). Cost
/// (p - 1)(t_s + t_w m) plus p - 1 combines on the critical path.
pub async fn linear(comm: &Comm, x: Bytes, reduction: Reduction, exclusive: bool) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = Phase(0);
    let prefix = if my_id > 0 { Some(comm.recv(my_id - 1, phase.tag(my_id)).await?) } else { None };
    let sum = match &prefix {
        Some(prefix) => reduction.combine(comm, prefix.clone(), &x)?,
        None => x,
    };
    if my_id + 1 < p {
        comm.send(my_id + 1, phase.tag(my_id + 1), sum.clone()).await?;
    }
    Ok(if exclusive { prefix.unwrap_or_default() } else { sum })
}
