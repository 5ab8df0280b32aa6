//! Circular q-shift: node (i + q) mod p ends with node i's vector.
//!
//! Three schedules, one per [`Algorithm`], from the textbook's section 4.6 (circular
//! shift): neighbour passes round a ring, the mesh shift (a row shift, a compensating
//! column shift for what wrapped round the row, a column shift), and the hypercube shift
//! as a sum of shifts by powers of two. q may be anything: the shift is by q mod p, and
//! 0 moves nothing. Costs are for store-and-forward routing: t_s start-up, t_w per
//! byte, m bytes per vector.

use bytes::Bytes;
use topocomm_proto::spec::{Algorithm, Collective};

use super::Running;
use super::patterns::{Grid, LineGroup, hypercube_dimension};
use super::phases::{self, Phase, SINGLE};
use crate::comm::{Comm, CommError};

/// Runs the shift `algorithm` names.
pub fn run(comm: &Comm, algorithm: Algorithm, vector: Bytes, q: usize) -> Running<'_> {
    let q = q % comm.p();
    match algorithm {
        // Each algorithm's future in a box of its own size, handed to the caller (see `super::run`).
        Algorithm::Ring => Box::pin(ring(comm, vector, q)),
        Algorithm::Mesh => Box::pin(mesh(comm, vector, q)),
        Algorithm::Hypercube => Box::pin(hypercube(comm, vector, q)),
        other => super::failed(super::unsupported(comm, Collective::Shift, other)),
    }
}

/// Shifts `x` by `delta` positions round `group` (taken as a ring of its members,
/// position j to position j + delta mod n) by neighbour passes the shorter way round:
/// delta passes Up, or n - delta passes Down, whichever is fewer. Every member sends
/// what it holds to one neighbour and receives from the other in each pass, with tag
/// `phase.tag(pass)`. On a wrapping group each pass crosses one link; on a line without
/// the wrap link, the pass from one end to the other travels the topology's route.
///
/// Steps: min(delta, n - delta). Cost (t_s + t_w m) min(delta, n - delta).
async fn shift_along(
    comm: &Comm,
    group: &LineGroup<'_>,
    delta: usize,
    x: Bytes,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let n = group.members.len();
    let me = group.members.my_position(comm)?;
    let delta = delta % n;
    let (up, down) = (group.members.at((me + 1) % n), group.members.at((me + n - 1) % n));
    let (passes, to, from) = if delta <= n - delta { (delta, up, down) } else { (n - delta, down, up) };
    let mut x = x;
    for pass in 1..=passes {
        x = comm.exchange(to, from, phase.tag(pass), x).await?;
    }
    Ok(x)
}

/// Ring shift (textbook 4.6, on a ring): the vectors move q places clockwise or p - q
/// places counter-clockwise, whichever is shorter, one neighbour pass per step (so on a
/// ring every message crosses one link and the store-and-forward hops are the steps;
/// the alternative, one message straight to node (my_id + q) mod p, would leave the
/// hops to the router).
///
/// ```text
/// if q ≤ p - q then (passes, to, from) := (q, my_id + 1, my_id - 1)
///              else (passes, to, from) := (p - q, my_id - 1, my_id + 1)   /* mod p */
/// for k := 1 to passes do
///     send X to `to`; receive X from `from`
/// ```
///
/// Steps: min(q, p - q). Cost (t_s + t_w m) min(q, p - q).
pub async fn ring(comm: &Comm, vector: Bytes, q: usize) -> Result<Bytes, CommError> {
    shift_along(comm, &LineGroup::ring(comm.p()), q, vector, SINGLE).await
}

/// Mesh shift (textbook 4.6, circular q-shift on a 2-D mesh with wraparound): with
/// p = rows x cols and row-major ids, a row shift by q mod cols; then the vectors that
/// wrapped round their row (now in a column below q mod cols) move one row further, the
/// compensating column shift; then a column shift by ⌊q/cols⌋. On a 3-D grid the same
/// repeats one dimension further (mixed-radix addition of q, carry by carry). Every
/// line shift is [`shift_along`] (neighbour passes the shorter way round the line); the
/// grid is the topology's own on a mesh, torus, mesh3d or torus3d, the squarest 2-D
/// grid of p otherwise (`patterns::Grid`).
///
/// ```text
/// for dim := last downto 0 do              /* 2-D: the row (dim 1), then the column (dim 0) */
///     stride := product of the extents after dim       /* 1 for the row, cols for the column */
///     if my_id mod stride < q mod stride then          /* what I hold wrapped round: carry */
///         X := shift X by 1 along my line of dim
///     X := shift X by ⌊q / stride⌋ mod extent(dim) along my line of dim
/// ```
///
/// (The vector now at position x came from x - q; it carried out of the dims after dim
/// exactly when x's part in those dims is below q's.)
///
/// Steps on a √p x √p torus: at most ⌊√p/2⌋ + 1 + ⌊√p/2⌋. Cost
/// (t_s + t_w m)(2⌊√p/2⌋ + 1) at most. On a mesh without wraparound the passes across
/// the missing wrap link travel the route back along the line.
pub async fn mesh(comm: &Comm, vector: Bytes, q: usize) -> Result<Bytes, CommError> {
    let my_id = comm.id();
    let grid = Grid::of(comm.topology());
    let dims = grid.dims();
    let mut x = vector;
    for (step, dim) in (0..dims.len()).rev().enumerate() {
        let stride: usize = dims[dim + 1..].iter().product();
        let line = grid.line(my_id, dim);
        let (carry, shift) = (phases::mesh_shift_carry(step), phases::mesh_shift(step));
        if my_id % stride < q % stride {
            x = shift_along(comm, &line, 1, x, carry).await?;
        }
        x = shift_along(comm, &line, (q / stride) % dims[dim], x, shift).await?;
    }
    Ok(x)
}

/// Hypercube shift (textbook 4.6): q is a sum of powers of two, and a q-shift is the
/// shifts by 2^k for the bits k set in q, one after another. The textbook maps the ring
/// onto the hypercube by a Gray code so that a shift by 2^k takes at most two steps
/// between neighbours; here the shifts are on the ids themselves (node my_id to
/// my_id + 2^k mod p), each one message that the topology routes (E-cube on a
/// hypercube: as many hops as the bits in which my_id and my_id + 2^k differ).
///
/// ```text
/// for k := 0 to ⌈log p⌉ - 1 do
///     if bit k of q is 1 then
///         send X to (my_id + 2^k) mod p; receive X from (my_id - 2^k) mod p
/// ```
///
/// Steps: the number of bits set in q, at most ⌈log p⌉. Cost (t_s + t_w m) per step,
/// plus t_w m per extra hop (store-and-forward).
pub async fn hypercube(comm: &Comm, vector: Bytes, q: usize) -> Result<Bytes, CommError> {
    let (my_id, p) = (comm.id(), comm.p());
    let phase = SINGLE;
    let mut x = vector;
    for k in 0..hypercube_dimension(p) {
        if q & (1 << k) != 0 {
            let (to, from) = ((my_id + (1 << k)) % p, (my_id + p - (1 << k)) % p);
            x = comm.exchange(to, from, phase.tag(k), x).await?;
        }
    }
    Ok(x)
}
