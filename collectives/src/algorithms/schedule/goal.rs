//! GOAL schedules ([GOAL]; the text LogGOPSim's `txt2bin` reads and Schedgen writes: `num_ranks
//! N`, then per rank `rank R { ... }` with `label: send Nb to R tag T`, `recv Nb from R
//! tag T`, `calc N` and `A requires B` / `A irequires B` lines): reading one into
//! `topocomm_proto::schedule::Goal`, writing one, and running it over `Comm`.
//!
//! No crate reads GOAL; the grammar is line-based with a handful of keywords, so lines
//! are cut into words here. Running: every operation of a rank is a task that starts
//! once the operations it `requires` are done and those it `irequires` have started; a
//! send carries known zeros of its size (sizes only: nothing can be verified), the k-th
//! send from a rank to a peer with a tag is the peer's k-th receive from that rank with
//! that tag (MPI's non-overtaking order), and `calc` takes no time here (the simulator's
//! software takes none; its nanoseconds are reported, not waited).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::Notify;
use topocomm_proto::schedule::{Goal, GoalKind, GoalOp, GoalRank};

use crate::algorithms::phases::{Phase, SCHEDULE};
use crate::comm::{Comm, CommError, Operation};

/// Why a GOAL file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GOAL line {line}: {reason}")]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

/// The text with `//` and `/* */` comments blanked (line breaks kept).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find('\n').unwrap_or(after.len());
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").map_or(after.len(), |end| end + 2);
            out.extend(after[..end.min(after.len())].chars().filter(|&c| c == '\n'));
            rest = &after[end.min(after.len())..];
        } else {
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The rank being read: its number, operations, labels, and dependencies by label
/// (resolved when the rank closes, so a label may be used before its line).
struct OpenRank {
    rank: usize,
    ops: Vec<GoalOp>,
    labels: HashMap<String, u32>,
    dependencies: Vec<Dependency>,
}

/// `label requires on` (or `irequires`: `started`), read on line `line`.
struct Dependency {
    line: usize,
    label: String,
    on: String,
    started: bool,
}

/// Reads a GOAL schedule.
pub fn parse(text: &str) -> Result<Goal, ParseError> {
    let text = strip_comments(text);
    let mut ranks: Option<Vec<Option<GoalRank>>> = None;
    let mut open: Option<OpenRank> = None;
    for (number, line) in text.lines().enumerate() {
        let line_no = number + 1;
        let fail = |reason: String| ParseError { line: line_no, reason };
        let spaced = line.replace('{', " { ").replace('}', " } ").replace(':', " : ");
        let words: Vec<&str> = spaced.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        match (&mut open, words.as_slice()) {
            (None, ["num_ranks", n]) => {
                let n: usize = n.parse().map_err(|_| fail(format!("num_ranks {n} is not a number")))?;
                if n == 0 || n > topocomm_proto::schedule::MAX_GOAL_OPS {
                    return Err(fail(format!("num_ranks {n} is out of range")));
                }
                ranks = Some(vec![None; n]);
            }
            (None, ["rank", r, "{"]) => {
                let Some(ranks) = &ranks else { return Err(fail("a rank before num_ranks".into())) };
                let r: usize = r.parse().map_err(|_| fail(format!("rank {r} is not a number")))?;
                if r >= ranks.len() || ranks[r].is_some() {
                    return Err(fail(format!("rank {r} is not one of 0..{} seen once", ranks.len())));
                }
                open = Some(OpenRank { rank: r, ops: Vec::new(), labels: HashMap::new(), dependencies: Vec::new() });
            }
            (Some(_), ["}"]) => {
                let OpenRank { rank: r, mut ops, labels, dependencies } = open.take().expect("a rank is open");
                for Dependency { line, label, on, started } in dependencies {
                    let find = |name: &str| {
                        labels.get(name).copied().ok_or_else(|| ParseError {
                            line,
                            reason: format!("label {name} is not defined in rank {r}"),
                        })
                    };
                    let (op, on) = (find(&label)?, find(&on)?);
                    let list = if started { &mut ops[op as usize].irequires } else { &mut ops[op as usize].requires };
                    list.push(on);
                }
                ranks.as_mut().expect("num_ranks came first")[r] = Some(GoalRank { ops });
            }
            (Some(OpenRank { dependencies, .. }), [label, kind @ ("requires" | "irequires"), on]) => {
                dependencies.push(Dependency {
                    line: line_no,
                    label: (*label).to_owned(),
                    on: (*on).to_owned(),
                    started: *kind == "irequires",
                });
            }
            (Some(OpenRank { rank: r, ops, labels, .. }), words) => {
                let (label, words) = match words {
                    [label, ":", rest @ ..] => (Some(*label), rest),
                    rest => (None, rest),
                };
                let kind = operation(words).map_err(fail)?;
                if let Some(label) = label
                    && labels.insert(label.to_owned(), ops.len() as u32).is_some()
                {
                    return Err(fail(format!("label {label} is defined twice in rank {r}")));
                }
                ops.push(GoalOp { kind, requires: Vec::new(), irequires: Vec::new() });
                if ops.len() > topocomm_proto::schedule::MAX_GOAL_OPS {
                    return Err(fail("too many operations".into()));
                }
            }
            (None, words) => {
                return Err(fail(format!("expected num_ranks or rank R {{, found \"{}\"", words.join(" "))));
            }
        }
    }
    if let Some(OpenRank { rank: r, .. }) = open {
        return Err(ParseError { line: text.lines().count(), reason: format!("rank {r} is not closed with }}") });
    }
    let ranks = ranks.ok_or(ParseError { line: 1, reason: "no num_ranks line".into() })?;
    let ranks: Vec<GoalRank> = ranks.into_iter().map(|rank| rank.unwrap_or(GoalRank { ops: Vec::new() })).collect();
    let goal = Goal { ranks };
    goal.check().map_err(|error| ParseError { line: 0, reason: error.to_string() })?;
    Ok(goal)
}

/// One operation's words: `send 8b to 3 tag 1`, `recv 8b from 2`, `calc 100` (with
/// `cpu` and `nic` options, read and ignored).
fn operation(words: &[&str]) -> Result<GoalKind, String> {
    let number = |word: &str, what: &str| -> Result<u64, String> {
        word.parse().map_err(|_| format!("{what} \"{word}\" is not a non-negative number"))
    };
    let bytes = |word: &str| number(word.strip_suffix('b').unwrap_or(word), "the size");
    let (kind, rest) = words.split_first().ok_or("an empty operation")?;
    let mut tag = 0;
    let options = |rest: &[&str], tag: &mut u64| -> Result<(), String> {
        for pair in rest.chunks(2) {
            match pair {
                ["tag", value] => *tag = number(value, "the tag (any tag, -1, is not supported)")?,
                ["cpu" | "nic", value] => {
                    number(value, "the cpu or nic")?;
                }
                other => return Err(format!("unexpected \"{}\"", other.join(" "))),
            }
        }
        Ok(())
    };
    match (*kind, rest) {
        ("send", [size, "to", peer, rest @ ..]) | ("recv", [size, "from", peer, rest @ ..]) => {
            options(rest, &mut tag)?;
            let peer = number(peer, "the peer (any source, -1, is not supported)")?;
            let (bytes, peer, tag) = (bytes(size)?, u32::try_from(peer).map_err(|_| "the peer is too large")?, tag);
            let tag = u32::try_from(tag).map_err(|_| "the tag is too large")?;
            Ok(if *kind == "send" { GoalKind::Send { bytes, peer, tag } } else { GoalKind::Recv { bytes, peer, tag } })
        }
        ("calc", [ns, rest @ ..]) => {
            options(rest, &mut tag)?;
            Ok(GoalKind::Calc { ns: number(ns, "the time")? })
        }
        _ => Err(format!("\"{}\" is not send Nb to R, recv Nb from R or calc N", words.join(" "))),
    }
}

/// Writes `goal` as GOAL text (`l<i>` labels, one `requires`/`irequires` line per
/// dependency): what `parse` reads back to the same schedule.
pub fn write(goal: &Goal) -> String {
    let mut text = format!("num_ranks {}\n", goal.ranks.len());
    for (r, rank) in goal.ranks.iter().enumerate() {
        text.push_str(&format!("\nrank {r} {{\n"));
        for (i, op) in rank.ops.iter().enumerate() {
            let line = match op.kind {
                GoalKind::Send { bytes, peer, tag } => format!("l{i}: send {bytes}b to {peer} tag {tag}\n"),
                GoalKind::Recv { bytes, peer, tag } => format!("l{i}: recv {bytes}b from {peer} tag {tag}\n"),
                GoalKind::Calc { ns } => format!("l{i}: calc {ns}\n"),
            };
            text.push_str(&line);
            for on in &op.requires {
                text.push_str(&format!("l{i} requires l{on}\n"));
            }
            for on in &op.irequires {
                text.push_str(&format!("l{i} irequires l{on}\n"));
            }
        }
        text.push_str("}\n");
    }
    text
}

/// The GOAL schedule of what every node did (`operations[node]`, in the order the node
/// did it, as the simulator records it): each receive `requires` the node's receive
/// before it and each send the node's last receive before it (the send follows from what
/// the node had taken, as in the algorithm), and each send `irequires` the node's send
/// before it (same-instant sends keep their order). Tags are numbered densely in the
/// order they first appear, so they fit GOAL's range and match as the originals did.
pub fn from_operations(operations: &[Vec<Operation>]) -> Goal {
    let mut tags: HashMap<u32, u32> = HashMap::new();
    let mut dense = |tag: u32| {
        let next = tags.len() as u32;
        *tags.entry(tag).or_insert(next)
    };
    let ranks = operations
        .iter()
        .map(|done| {
            let (mut last_recv, mut last_send) = (None, None);
            let ops = done
                .iter()
                .enumerate()
                .map(|(i, operation)| {
                    let i = i as u32;
                    match *operation {
                        Operation::Send { dst, tag, bytes } => {
                            let op = GoalOp {
                                kind: GoalKind::Send { bytes: bytes as u64, peer: dst as u32, tag: dense(tag) },
                                requires: last_recv.into_iter().collect(),
                                irequires: last_send.into_iter().collect(),
                            };
                            last_send = Some(i);
                            op
                        }
                        Operation::Recv { src, tag, bytes } => {
                            let op = GoalOp {
                                kind: GoalKind::Recv { bytes: bytes as u64, peer: src as u32, tag: dense(tag) },
                                requires: last_recv.into_iter().collect(),
                                irequires: Vec::new(),
                            };
                            last_recv = Some(i);
                            op
                        }
                    }
                })
                .collect();
            GoalRank { ops }
        })
        .collect();
    Goal { ranks }
}

/// For each operation of rank `me`, the place of its message in the stream between its
/// two ranks (all tags together, in the sender's order): its tag's step.
fn message_places(goal: &Goal, me: usize) -> Vec<Option<usize>> {
    // Per sender s: the places of its messages to `me`, by GOAL tag, in order.
    let mut from: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    let senders: std::collections::BTreeSet<u32> = goal.ranks[me]
        .ops
        .iter()
        .filter_map(|op| match op.kind {
            GoalKind::Recv { peer, .. } => Some(peer),
            _ => None,
        })
        .collect();
    for sender in senders {
        let mut place = 0;
        for op in &goal.ranks[sender as usize].ops {
            if let GoalKind::Send { peer, tag, .. } = op.kind
                && peer as usize == me
            {
                from.entry((sender, tag)).or_default().push(place);
                place += 1;
            }
        }
    }
    let mut sent: HashMap<u32, usize> = HashMap::new();
    let mut taken: HashMap<(u32, u32), usize> = HashMap::new();
    goal.ranks[me]
        .ops
        .iter()
        .map(|op| match op.kind {
            GoalKind::Send { peer, .. } => {
                let next = sent.entry(peer).or_default();
                *next += 1;
                Some(*next - 1)
            }
            GoalKind::Recv { peer, tag, .. } => {
                let next = taken.entry((peer, tag)).or_default();
                *next += 1;
                from.get(&(peer, tag)).and_then(|places| places.get(*next - 1)).copied()
            }
            GoalKind::Calc { .. } => None,
        })
        .collect()
}

/// Runs rank `comm.id()` of `goal`: every operation as soon as its dependencies allow.
pub async fn run(comm: &Comm, goal: &Goal) -> Result<(), CommError> {
    let me = comm.id();
    let rank = goal.ranks.get(me).ok_or_else(|| CommError::Unsupported {
        me,
        algorithm: "goal".into(),
        reason: format!("the schedule has no rank {me}"),
    })?;
    let state = RankState {
        comm,
        places: message_places(goal, me),
        started: rank.ops.iter().map(|_| AtomicBool::new(false)).collect(),
        done: rank.ops.iter().map(|_| AtomicBool::new(false)).collect(),
        notify: Notify::new(),
    };
    futures::future::try_join_all(rank.ops.iter().enumerate().map(|(i, op)| state.run_op(i, op))).await?;
    Ok(())
}

/// What the operations of one rank share.
struct RankState<'a> {
    comm: &'a Comm,
    /// Each operation's place in the stream of messages between its two ranks.
    places: Vec<Option<usize>>,
    started: Vec<AtomicBool>,
    done: Vec<AtomicBool>,
    /// Woken whenever an operation starts or ends.
    notify: Notify,
}

impl RankState<'_> {
    /// Runs operation `i` once what it requires is done and what it irequires started.
    async fn run_op(&self, i: usize, op: &GoalOp) -> Result<(), CommError> {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let ready = op.requires.iter().all(|&on| self.done[on as usize].load(Ordering::Acquire))
                && op.irequires.iter().all(|&on| self.started[on as usize].load(Ordering::Acquire));
            if ready {
                break;
            }
            notified.await;
        }
        self.started[i].store(true, Ordering::Release);
        self.notify.notify_waiters();
        let me = self.comm.id();
        let tag = |peer: u32| -> Result<u32, CommError> {
            self.places[i].filter(|&place| place < Phase::MAX_STEPS).map(|place| SCHEDULE.tag(place)).ok_or_else(|| {
                CommError::Unsupported {
                    me,
                    algorithm: "goal".into(),
                    reason: format!("operation {i}: no message of rank {peer} matches it"),
                }
            })
        };
        match op.kind {
            GoalKind::Send { bytes, peer, .. } => {
                let len = bytes as usize;
                let data = crate::zeros::zeros(len).unwrap_or_else(|| Bytes::from(vec![0; len]));
                self.comm.send(peer as usize, tag(peer)?, data).await?;
            }
            GoalKind::Recv { peer, .. } => {
                self.comm.recv(peer as usize, tag(peer)?).await?;
            }
            GoalKind::Calc { .. } => {}
        }
        self.done[i].store(true, Ordering::Release);
        self.notify.notify_waiters();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TREE: &str = "num_ranks 3
// a comment
rank 0 {
l1: send 8b to 1 tag 0
l2: send 8b to 2 tag 0 cpu 0
}
rank 1 {
l1: recv 8b from 0 tag 0 /* inline */
l2: calc 100
l2 requires l1
}
rank 2 {
a: recv 8b from 0
}
";

    #[test]
    fn a_schedule_reads_and_writes_back_the_same() {
        let goal = parse(TREE).unwrap();
        assert_eq!(
            goal.ranks[1].ops[1],
            GoalOp { kind: GoalKind::Calc { ns: 100 }, requires: vec![0], irequires: vec![] }
        );
        assert_eq!(parse(&write(&goal)).unwrap(), goal);
    }

    #[test]
    fn an_undefined_label_is_named() {
        let error = parse(&TREE.replace("l2 requires l1", "l2 requires l9")).unwrap_err().to_string();
        assert_eq!(error, "GOAL line 10: label l9 is not defined in rank 1");
    }

    #[test]
    fn a_receive_with_no_send_is_refused() {
        let error = parse(&TREE.replace("l2: send 8b to 2 tag 0 cpu 0", "")).unwrap_err().to_string();
        assert!(error.contains("rank 2 receives 1 messages from rank 0 with tag 0, and rank 0 sends 0"), "{error}");
    }
}
