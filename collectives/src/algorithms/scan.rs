//! Prefix sums (scan): node i ends with the reduction of nodes 0..=i (0..i when
//! exclusive; node 0 then ends with an empty buffer).
//!
//! Four schedules: the hypercube prefix sums of Algorithm 4.9 ([GGKK 4.3];
//! [KGGK94 Program 3.7]), the pipeline along the ring of ids, that pipeline segmented
//! for large vectors, and the work-efficient tree of Brent and Kung (up a binomial tree
//! and back down; [Brent-Kung 1982], [Blelloch 1990]). Costs are for store-and-forward
//! routing on the topology each was made for (t_s start-up, t_w per byte, m bytes per
//! vector), plus the time of the combines. Every node's vector must have the same
//! length; a vector that cannot be combined fails the run with `CommError::Elements`.

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::elements::element_count;
use topocomm_proto::spec::{Algorithm, Collective};

use super::Running;
use super::blocks::{BlockLayout, concat};
use super::patterns::{Reduction, hypercube_dimension};
use super::phases::SINGLE;
use crate::comm::{Comm, CommError};

/// Runs the scan `algorithm` names: node i returns the reduction of the vectors of nodes
/// 0..=i, or of 0..i with `exclusive` (node 0 then returns an empty buffer).
pub fn run(comm: &Comm, algorithm: Algorithm, vector: Bytes, reduction: Reduction, exclusive: bool) -> Running<'_> {
    match algorithm {
        // Each algorithm's future in a box of its own size, handed to the caller (see `super::run`).
        Algorithm::Hypercube => Box::pin(hypercube(comm, vector, reduction, exclusive)),
        Algorithm::Linear => Box::pin(linear(comm, vector, reduction, exclusive)),
        Algorithm::Pipeline => Box::pin(pipeline(comm, vector, reduction, exclusive)),
        Algorithm::Tree => Box::pin(tree(comm, vector, reduction, exclusive)),
        other => super::failed(super::unsupported(comm, Collective::Scan, other)),
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
    let phase = SINGLE;
    let mut result = (!exclusive).then(|| my_number.clone());
    let mut msg = my_number;
    for i in 0..d {
        let partner = my_id ^ (1 << i);
        if partner < p {
            let number = comm.exchange(partner, partner, phase.tag(i), msg.clone()).await?;
            if partner < my_id {
                result = Some(match result {
                    Some(sum) => reduction.combine(comm, sum, &number)?,
                    None => number.clone(),
                });
            }
            // msg + number, computed as number + msg (the same bits: every operator is
            // commutative) in the buffer that arrived, while msg may still be on its way.
            msg = reduction.combine(comm, number, &msg)?;
        }
    }
    Ok(result.unwrap_or_default())
}

/// Linear prefix sums: a pipeline along the ring of ids 0, 1, ..., p-1 (prefix sums as
/// a pipeline, [GGKK 4.3]). Node i receives the prefix of nodes 0..i from node i-1,
/// combines its own vector in and passes the prefix of 0..=i on to node i+1.
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
/// (p - 1)(t_s + t_w m) plus p - 1 combines on the critical path. It is [`pipeline`]
/// with one segment.
pub async fn linear(comm: &Comm, x: Bytes, reduction: Reduction, exclusive: bool) -> Result<Bytes, CommError> {
    segmented(comm, x, reduction, exclusive, 1).await
}

/// The longest segment of [`pipeline`]: large enough that a message's fixed costs stay
/// small beside its bytes, small enough that the chain fills quickly (the measurements
/// behind it: docs/PERFORMANCE-NOTES.md).
pub const SEGMENT: usize = 1024 * 1024;

/// The shortest segment of [`pipeline`]: a vector of up to 4 [`SEGMENT`]s is cut into
/// four segments, none shorter than this, so that even a 1 MiB vector overlaps its
/// combines down the chain (docs/PERFORMANCE-NOTES.md).
pub const MIN_SEGMENT: usize = 256 * 1024;

/// How many segments [`pipeline`] cuts `len` bytes into: four where each is at least
/// [`MIN_SEGMENT`], then as many as it takes to keep them within [`SEGMENT`].
pub fn segments(len: usize) -> usize {
    len.div_ceil((len / 4).clamp(MIN_SEGMENT, SEGMENT)).max(1)
}

/// Pipelined prefix sums: the linear pipeline above with the vector cut into k
/// element-aligned segments (see [`segments`]) that follow one another down the chain
/// 0, 1, ..., p-1, so that node i combines segment s while node i+1 combines segment
/// s-1 (MPI libraries' segmented pipelines).
///
/// ```text
/// cut X into k segments X_1, ..., X_k
/// for s := 1 to k do
///     prefix_s := nothing
///     if my_id > 0 then receive prefix_s from my_id - 1
///     sum_s := prefix_s + X_s                      /* X_s alone on node 0 */
///     if my_id < p - 1 then send sum_s to my_id + 1
/// result := sum_1 ∪ ... ∪ sum_k          /* exclusive: prefix_1 ∪ ... ∪ prefix_k */
/// ```
///
/// One segment (m ≤ [`MIN_SEGMENT`]) is exactly [`linear`]. The combines run in node order,
/// as there. Steps: p - 1 + k - 1. Cost (p - 1 + k - 1)(t_s + t_w m/k) plus as many
/// combines of m/k on the critical path: for large m about t_w m + (p - 1)(t_s + t_w m/k),
/// against (p - 1)(t_s + t_w m) unsegmented.
pub async fn pipeline(comm: &Comm, x: Bytes, reduction: Reduction, exclusive: bool) -> Result<Bytes, CommError> {
    let k = segments(x.len());
    segmented(comm, x, reduction, exclusive, k).await
}

/// The chain of [`pipeline`] with `x` cut into `k` element-aligned segments.
async fn segmented(comm: &Comm, x: Bytes, reduction: Reduction, exclusive: bool, k: usize) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    element_count(reduction.dtype, x.len()).map_err(|error| comm.elements_error(error))?;
    let segments = BlockLayout::split(x.len(), k, reduction.dtype.size());
    let mut result = Vec::with_capacity(k);
    for s in 0..k {
        let x_s = segments.slice(&x, s..s + 1);
        let prefix = if my_id > 0 { Some(comm.recv(my_id - 1, phase.tag(s)).await?) } else { None };
        // The sum is formed in the buffer that arrived, unless that is kept (exclusive).
        let (sum, kept) = match prefix {
            None => (x_s, Bytes::new()),
            Some(prefix) if exclusive => (reduction.combine(comm, prefix.clone(), &x_s)?, prefix),
            Some(prefix) => (reduction.combine(comm, prefix, &x_s)?, Bytes::new()),
        };
        if my_id + 1 < p {
            comm.send(my_id + 1, phase.tag(s), sum.clone()).await?;
        }
        result.push(if exclusive { kept } else { sum });
    }
    Ok(concat(&result))
}

/// Tree prefix sums (Brent and Kung 1982, the up-sweep and down-sweep of Blelloch 1990):
/// the sums of ever larger blocks of nodes go up a binomial tree, then the prefix of each
/// block comes back down it. Partners differ in one bit of their ids, so on a hypercube
/// every message crosses one link; the vector moves 2(p - 1) - log p times in all, where
/// Algorithm 4.9 moves it p log p times, and the longest chain is 2 log p - 1 messages,
/// where the pipeline's is p - 1 (and its hops from i to i + 1 are up to log p links long
/// on a hypercube).
///
/// ```text
/// /* at level k, my block B := [start, start + 2^(k+1)) ∩ [0, p), start := my_id with its
///    low k + 1 bits cleared; its left half L ends at l := start + 2^k - 1, its right half
///    R := [start + 2^k, ...) ∩ [0, p) at r := min(start + 2^(k+1), p) - 1 */
/// sum := my_number
/// for k := 0 to d - 1 do                         /* up-sweep: r learns the sum of B */
///     if R is not empty then
///         if my_id = l then send sum to r
///         if my_id = r then receive left_k from l; sum := left_k + sum
/// prefix := nothing                              /* what all nodes before my block bring */
/// for k := d - 1 downto 0 do                     /* down-sweep: B's prefix goes to L */
///     if R is not empty then
///         if my_id = r then
///             if start > 0 then send prefix to l
///             prefix := prefix + left_k          /* R's prefix */
///         if my_id = l and start > 0 then receive prefix from r
/// result := prefix + my_number                   /* exclusive: result := prefix */
/// ```
///
/// The owner of a block (its last node) holds its sum after the up-sweep's level k and
/// its prefix at the down-sweep's. Steps: 2⌈log2 p⌉ - 1 for p > 1. Cost
/// (2 log p - 1)(t_s + t_w m) plus as many combines on the critical path.
pub async fn tree(comm: &Comm, my_number: Bytes, reduction: Reduction, exclusive: bool) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let d = hypercube_dimension(p);
    let phase = SINGLE;
    element_count(reduction.dtype, my_number.len()).map_err(|error| comm.elements_error(error))?;
    let block = |k: usize| TreeBlock::at(my_id, k, p);
    let mut sum = my_number.clone();
    let mut left: Vec<Option<Bytes>> = vec![None; d];
    for (k, left_k) in left.iter_mut().enumerate() {
        let Some(b) = block(k) else { continue };
        if my_id == b.l {
            comm.send(b.r, phase.tag(k), sum.clone()).await?;
        } else if my_id == b.r {
            let received = comm.recv(b.l, phase.tag(k)).await?;
            sum = reduction.combine(comm, sum, &received)?;
            *left_k = Some(received);
        }
    }
    drop(sum);
    let mut prefix: Option<Bytes> = None;
    for k in (0..d).rev() {
        let Some(b) = block(k) else { continue };
        // r of this block, the one node that received left_k in the up-sweep.
        if let Some(left_k) = left[k].take() {
            if let Some(prefix) = &prefix {
                comm.send(b.l, phase.tag(d + k), prefix.clone()).await?;
            }
            // prefix + left_k, formed in left_k's buffer (every operator is commutative).
            prefix = Some(match prefix {
                Some(prefix) => reduction.combine(comm, left_k, &prefix)?,
                None => left_k,
            });
        } else if my_id == b.l && b.start > 0 {
            prefix = Some(comm.recv(b.r, phase.tag(d + k)).await?);
        }
    }
    Ok(match (prefix, exclusive) {
        (Some(prefix), false) => reduction.combine(comm, prefix, &my_number)?,
        (None, false) => my_number,
        (prefix, true) => prefix.unwrap_or_default(),
    })
}

/// The block of [`tree`] that holds a node at level k, when its right half is not empty.
struct TreeBlock {
    /// Its first node.
    start: NodeId,
    /// The last node of its left half.
    l: NodeId,
    /// Its last node (the last of its right half).
    r: NodeId,
}

impl TreeBlock {
    fn at(node: NodeId, k: usize, p: usize) -> Option<Self> {
        let start = node >> (k + 1) << (k + 1);
        let right = start + (1 << k);
        (right < p).then(|| TreeBlock { start, l: right - 1, r: (start + (2 << k)).min(p) - 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_segments_are_four_of_at_least_256_kib_then_at_most_1_mib() {
        const KIB: usize = 1024;
        assert_eq!(segments(0), 1);
        assert_eq!(segments(8), 1);
        assert_eq!(segments(256 * KIB), 1);
        assert_eq!(segments(256 * KIB + 8), 2);
        assert_eq!(segments(512 * KIB), 2);
        assert_eq!(segments(1024 * KIB), 4);
        assert_eq!(segments(2048 * KIB), 4);
        assert_eq!(segments(4096 * KIB), 4);
        assert_eq!(segments(8192 * KIB), 8);
        assert_eq!(segments(8192 * KIB + 8), 9);
    }
}
