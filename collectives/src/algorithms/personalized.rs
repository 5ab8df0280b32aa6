//! Building blocks the personalized collectives share (scatter, gather, all-to-all): a
//! [`Hand`] of blocks a node holds under known keys, packed into one message and
//! unpacked from one; and the three store-and-forward passes along a line group (a
//! ring, a row or a column of a grid) that [GGKK 4.4] and [GGKK 4.5] build them from —
//! [`scatter_along`], its dual [`gather_along`], and [`alltoall_along`].
//!
//! Messages are raw concatenations of blocks: sender and receiver both compute which
//! blocks a message holds, in which order (the schedule says), and the receiver checks
//! the length before it cuts. A message of the wrong length fails the run with a
//! `CommError::Link` naming the sender; nothing here panics on what a peer sent.
//!
//! Everything here speaks `Comm` (send, recv) and plain ids; nothing touches links or
//! timers, and nothing knows which collective called it.

use bytes::Bytes;
use rustc_hash::FxHashMap;
use topocomm_proto::NodeId;

use super::blocks::{BlockLayout, concat, kept_part};
use super::patterns::{Direction, LineGroup, PassPosition};
use super::phases::Phase;
use crate::comm::{Comm, CommError, MessageError};

/// Fails the run unless the message `data`, received from `src`, has the `expected`
/// length (a wrong one is the sender's fault: a link error naming it).
pub fn expect_message_len(comm: &Comm, src: NodeId, data: &Bytes, expected: usize) -> Result<(), CommError> {
    if data.len() == expected {
        return Ok(());
    }
    Err(CommError::Link { me: comm.id(), cause: MessageError::WrongLength { src, got: data.len(), expected } })
}

/// Fails the run unless this node's own input has the `expected` length.
pub fn expect_input(comm: &Comm, input: &Bytes, expected: usize) -> Result<(), CommError> {
    if input.len() == expected {
        return Ok(());
    }
    Err(CommError::Unsupported {
        me: comm.id(),
        algorithm: "personalized".into(),
        reason: format!("this node holds {} bytes where the layout needs {expected}", input.len()),
    })
}

/// The blocks a node holds in the middle of a personalized schedule, each under its key:
/// the index of the block in `layout` (a node id for scatter and gather; `s·p + d` for
/// the block node s sends to node d in an all-to-all). The layout gives every block's
/// length, so a message of several blocks needs no header. Only the blocks in hand take
/// room: a leaf of a hypercube scatter holds one entry, not one per node of the layout
/// (p² for an all-to-all).
pub struct Hand<'a> {
    layout: &'a BlockLayout,
    blocks: FxHashMap<usize, Bytes>,
}

impl<'a> Hand<'a> {
    /// Holding nothing.
    pub fn empty(layout: &'a BlockLayout) -> Self {
        Hand { layout, blocks: FxHashMap::default() }
    }

    /// Holding every block of `buffer` (which must be `layout.total()` bytes), uncopied.
    pub fn whole(comm: &Comm, layout: &'a BlockLayout, buffer: Bytes) -> Result<Self, CommError> {
        expect_input(comm, &buffer, layout.total())?;
        Ok(Hand { layout, blocks: layout.cut(&buffer, 0..layout.p()).into_iter().enumerate().collect() })
    }

    /// Bytes the blocks `keys` take, by the layout.
    pub fn len_of(&self, keys: &[usize]) -> usize {
        keys.iter().map(|&key| self.layout.len(key)).sum()
    }

    /// Puts block `key` in hand.
    pub fn put(&mut self, key: usize, block: Bytes) {
        self.blocks.insert(key, block);
    }

    /// Takes block `key` out of hand.
    pub fn take(&mut self, comm: &Comm, key: usize) -> Result<Bytes, CommError> {
        self.blocks.remove(&key).ok_or_else(|| CommError::Unsupported {
            me: comm.id(),
            algorithm: "personalized".into(),
            reason: format!("the schedule lost block {key}"),
        })
    }

    /// Takes the blocks `keys` out of hand, one after another in one message.
    pub fn pack(&mut self, comm: &Comm, keys: &[usize]) -> Result<Bytes, CommError> {
        Ok(concat(&self.pack_parts(comm, keys)?))
    }

    /// Takes the blocks `keys` out of hand as the parts of one message, uncopied (for
    /// `Comm::send_parts`).
    pub fn pack_parts(&mut self, comm: &Comm, keys: &[usize]) -> Result<Vec<Bytes>, CommError> {
        keys.iter().map(|&key| self.take(comm, key)).collect()
    }

    /// Puts the blocks `keys` of a message from `src` in hand (cut without copying).
    pub fn unpack(&mut self, comm: &Comm, src: NodeId, keys: &[usize], data: Bytes) -> Result<(), CommError> {
        expect_message_len(comm, src, &data, self.len_of(keys))?;
        let mut at = 0;
        for &key in keys {
            let len = self.layout.len(key);
            self.put(key, data.slice(at..at + len));
            at += len;
        }
        Ok(())
    }
}

/// Bytes the parcels of the members at `distances` from position `root` take, in the
/// half of a pass along `group` that goes `direction`.
fn parcels_len(
    group: &LineGroup<'_>,
    root: usize,
    direction: Direction,
    distances: std::ops::RangeInclusive<usize>,
    parcel_len: impl Fn(usize) -> usize,
) -> usize {
    distances.map(|distance| parcel_len(group.away(root, direction, distance))).sum()
}

/// Store-and-forward scatter along `group` from the member at position `root`
/// ([GGKK 4.4], one-to-all personalized on a ring, and its line variant): the root
/// sends each half, in one message, the parcels of its members nearest first; every
/// member keeps the first parcel of what it receives and passes the rest on.
///
/// ```text
/// if I am the root then
///     for each half (Up, Down) that is not empty:
///         send the parcels of its members, nearest first, to its first member
/// else                          /* the δ-th member of my half */
///     receive the parcels of members δ, δ+1, ... of my half from the member before me
///     keep the first (mine); send the rest to the member after me (if any)
/// ```
///
/// The root passes `parcels`, one per position (others pass none); `parcel_len(j)` is
/// the length of position j's parcel, known to every member. Every member returns its
/// parcel. The message to distance δ travels with tag `phase.tag(δ)`.
///
/// Steps: the larger half, plus one when the root sends both ways: ⌈n/2⌉ on a ring of
/// n. With parcels of M bytes, the half of h members costs Σ_{δ=1..h} (t_s + t_w M (h-δ+1))
/// = h t_s + t_w M h(h+1)/2; on a ring of p with one block each, about
/// t_s⌈p/2⌉ + t_w m p²/8.
pub async fn scatter_along(
    comm: &Comm,
    group: &LineGroup<'_>,
    root: usize,
    mut parcels: Vec<Bytes>,
    parcel_len: impl Fn(usize) -> usize,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let me = group.members.my_position(comm)?;
    match group.place(me, root) {
        PassPosition::Root => {
            if parcels.len() != group.members.len() {
                return Err(CommError::Unsupported {
                    me: comm.id(),
                    algorithm: "scatter along a line".into(),
                    reason: format!("the root holds {} parcels for {} members", parcels.len(), group.members.len()),
                });
            }
            for direction in Direction::BOTH {
                let reach = group.reach(root, direction);
                if reach >= 1 {
                    let message = (1..=reach).map(|delta| parcels[group.away(root, direction, delta)].clone());
                    comm.send_parts(group.next(root, direction), phase.tag(1), message).await?;
                }
            }
            Ok(std::mem::take(&mut parcels[root]))
        }
        PassPosition::Half { direction, distance: delta } => {
            let reach = group.reach(root, direction);
            let from = group.next(me, direction.reverse());
            let x = comm.recv(from, phase.tag(delta)).await?;
            expect_message_len(comm, from, &x, parcels_len(group, root, direction, delta..=reach, &parcel_len))?;
            let mine = kept_part(&x, 0..parcel_len(me));
            if delta < reach {
                let rest = x.slice(parcel_len(me)..);
                comm.send(group.next(me, direction), phase.tag(delta + 1), rest).await?;
            }
            Ok(mine)
        }
    }
}

/// Store-and-forward gather along `group` to the member at position `root`: the dual of
/// [`scatter_along`], the same hops in reverse order. The far end of each half sends its
/// parcel towards the root; every member puts its own parcel in front of what it
/// received from further out and passes the lot on.
///
/// ```text
/// if I am the root then
///     for each half (Up, Down) that is not empty:
///         receive the parcels of its members, nearest first, from its first member
/// else                          /* the δ-th member of my half */
///     X := my parcel
///     if there is a member after me then
///         receive the parcels of members δ+1, ... from it;  X := X followed by them
///     send X to the member before me
/// ```
///
/// The root gets `Some(parcels)`, one per position (its own included), every other
/// member `None`. The hop from distance δ to δ-1 carries tag `phase.tag(δ)`. Steps and
/// cost as for the scatter.
pub async fn gather_along(
    comm: &Comm,
    group: &LineGroup<'_>,
    root: usize,
    mine: Bytes,
    parcel_len: impl Fn(usize) -> usize,
    phase: Phase,
) -> Result<Option<Vec<Bytes>>, CommError> {
    let me = group.members.my_position(comm)?;
    match group.place(me, root) {
        PassPosition::Root => {
            let mut parcels = vec![Bytes::new(); group.members.len()];
            parcels[root] = mine;
            for direction in Direction::BOTH {
                let reach = group.reach(root, direction);
                if reach >= 1 {
                    let from = group.next(root, direction);
                    let x = comm.recv(from, phase.tag(1)).await?;
                    expect_message_len(comm, from, &x, parcels_len(group, root, direction, 1..=reach, &parcel_len))?;
                    let mut at = 0;
                    for delta in 1..=reach {
                        let j = group.away(root, direction, delta);
                        parcels[j] = x.slice(at..at + parcel_len(j));
                        at += parcel_len(j);
                    }
                }
            }
            Ok(Some(parcels))
        }
        PassPosition::Half { direction, distance: delta } => {
            let reach = group.reach(root, direction);
            let mut x = vec![mine];
            if delta < reach {
                let from = group.next(me, direction);
                let further = comm.recv(from, phase.tag(delta + 1)).await?;
                let expected = parcels_len(group, root, direction, delta + 1..=reach, &parcel_len);
                expect_message_len(comm, from, &further, expected)?;
                x.push(further);
            }
            comm.send_parts(group.next(me, direction.reverse()), phase.tag(delta), x).await?;
            Ok(None)
        }
    }
}

/// All-to-all personalized along `group` by the ring method of [GGKK 4.5.1]: every
/// member consolidates the parcels it sends into one message to its neighbour; in every
/// later step it keeps the parcel meant for it from what it receives and passes the
/// rest on, so messages shrink by one parcel a step.
///
/// On a wrapping group (a ring, a torus row) everything goes one way round:
///
/// ```text
/// X := my parcels for positions me+1, me+2, ..., me+n-1   /* nearest first */
/// for k := 1 to n - 1 do
///     send X to the member after me                      /* tag k */
///     receive X from the member before me   /* member me-k's parcels for me, me+1, ... */
///     keep the first parcel of X (from member me-k); X := the rest
/// ```
///
/// On a line without the wrap link (a mesh row) the same runs both ways at once: the Up
/// pass carries the parcels for higher positions, the Down pass those for lower ones,
/// each one hop per step (at step k member i forwards member i-k+1's parcels Up and
/// member i+k-1's Down, when those exist), so every message still crosses one link.
///
/// `parcels[j]` is this member's parcel for position j, as the blocks it is made of
/// (uncopied: each message is built from them in one copy), every parcel `parcel` bytes;
/// returns the parcels from every position (its own included), in position order, in
/// one buffer. Each kept parcel is copied into that buffer as it arrives, so a member
/// holds what it keeps and the messages in flight, not every message it received (a
/// slice would keep each message's whole buffer alive: 28 parcels instead of 7 on a
/// line of 8).
///
/// Steps: n - 1. Cost (t_s + ½ t_w M n)(n - 1) with parcels of M bytes; on a ring of p
/// with blocks of m, (t_s + ½ t_w m p)(p - 1).
pub async fn alltoall_along(
    comm: &Comm,
    group: &LineGroup<'_>,
    parcels: Vec<Vec<Bytes>>,
    parcel: usize,
    phase: Phase,
) -> Result<Bytes, CommError> {
    let me = group.members.my_position(comm)?;
    let n = group.members.len();
    let member = |position: usize| group.members.at(position % n);
    let own = concat(&parcels[me]);
    expect_input(comm, &own, parcel)?;
    let mut received = comm.assembly(n * parcel);
    let mut keep = |position: usize, part: &[u8]| {
        received.copy_in(position * parcel, part).map(drop).map_err(|error| comm.assembly_error(error))
    };
    keep(me, &own)?;
    drop(own);
    if group.wraps {
        let mut x = concat((1..n).flat_map(|k| &parcels[(me + k) % n]));
        drop(parcels);
        for k in 1..n {
            comm.send(member(me + 1), phase.tag(k), x).await?;
            let from = member(me + n - 1);
            let y = comm.recv(from, phase.tag(k)).await?;
            expect_message_len(comm, from, &y, (n - k) * parcel)?;
            keep((me + n - k) % n, &y[..parcel])?;
            x = y.slice(parcel..);
        }
    } else {
        let mut up = concat(parcels[me + 1..].iter().flatten());
        let mut down = concat(parcels[..me].iter().rev().flatten());
        drop(parcels);
        for k in 1..n {
            if me + 1 < n && k <= me + 1 {
                comm.send(member(me + 1), phase.tag(k), up.clone()).await?;
            }
            if me >= 1 && k <= n - me {
                comm.send(member(me - 1), phase.tag(k), down.clone()).await?;
            }
            if k <= me {
                let from = member(me - 1);
                let y = comm.recv(from, phase.tag(k)).await?;
                expect_message_len(comm, from, &y, (n - me) * parcel)?;
                keep(me - k, &y[..parcel])?;
                up = y.slice(parcel..);
            }
            if k < n - me {
                let from = member(me + 1);
                let y = comm.recv(from, phase.tag(k)).await?;
                expect_message_len(comm, from, &y, (me + 1) * parcel)?;
                keep(me + k, &y[..parcel])?;
                down = y.slice(parcel..);
            }
        }
    }
    received.finish().map_err(|error| comm.assembly_error(error))
}
