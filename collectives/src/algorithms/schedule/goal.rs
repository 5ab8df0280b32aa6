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

/// Why a GOAL file could not be read: where (line and column, 1-based; 0 where the fault
/// is the whole schedule's or the whole line's) and what was expected there. It never
/// quotes the file: a file named by mistake (or by someone else, through the lab) may
/// hold a secret, and the line and column find the fault as well.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", place(*line, *column))]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub reason: String,
}

/// "GOAL line 3, column 9: ", "GOAL line 3: " or "GOAL schedule: ".
fn place(line: usize, column: usize) -> String {
    match (line, column) {
        (0, _) => "GOAL schedule: ".to_owned(),
        (line, 0) => format!("GOAL line {line}: "),
        (line, column) => format!("GOAL line {line}, column {column}: "),
    }
}

/// The text with `//` and `/* */` comments blanked to spaces (line breaks kept), so that
/// every other character keeps its line and column.
fn strip_comments(text: &str) -> String {
    let blank = |comment: &str| comment.chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect::<String>();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            out.push_str(&blank(&rest[..end]));
            rest = &rest[end..];
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").map_or(rest.len(), |end| end + 4);
            out.push_str(&blank(&rest[..end]));
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// A word of a line and the column (1-based, in characters) it starts at.
#[derive(Debug, Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    column: usize,
}

/// The words of `line`: runs of characters between white space, with `{`, `}` and `:`
/// words of their own.
fn words(line: &str) -> Vec<Word<'_>> {
    let mut words = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    for (index, (at, c)) in line.char_indices().enumerate() {
        let single = matches!(c, '{' | '}' | ':');
        if c.is_whitespace() || single {
            if let Some((from, column)) = open.take() {
                words.push(Word { text: &line[from..at], column });
            }
            if single {
                words.push(Word { text: &line[at..at + 1], column: index + 1 });
            }
        } else if open.is_none() {
            open = Some((at, index + 1));
        }
    }
    if let Some((from, column)) = open {
        words.push(Word { text: &line[from..], column });
    }
    words
}

/// The rank being read: its number, operations, labels, and dependencies by label
/// (resolved when the rank closes, so a label may be used before its line).
struct OpenRank {
    rank: usize,
    ops: Vec<GoalOp>,
    labels: HashMap<String, u32>,
    dependencies: Vec<Dependency>,
}

/// `label requires on` (or `irequires`: `started`), read on line `line`, the two
/// labels at their columns.
struct Dependency {
    line: usize,
    label: (String, usize),
    on: (String, usize),
    started: bool,
}

/// Reads a GOAL schedule, every message at most
/// [`MAX_GOAL_MESSAGE_BYTES`](topocomm_proto::schedule::MAX_GOAL_MESSAGE_BYTES) and every
/// count within the schedule's bounds; errors name the line and column, never the text.
pub fn parse(text: &str) -> Result<Goal, ParseError> {
    use topocomm_proto::schedule::MAX_GOAL_OPS;
    let text = strip_comments(text);
    let mut ranks: Option<Vec<Option<GoalRank>>> = None;
    let mut open: Option<OpenRank> = None;
    let mut total_ops = 0usize;
    let mut last_line = 0;
    for (number, line) in text.lines().enumerate() {
        let line_no = number + 1;
        last_line = line_no;
        let at = |word: &Word, reason: String| ParseError { line: line_no, column: word.column, reason };
        let words = words(line);
        let texts: Vec<&str> = words.iter().map(|word| word.text).collect();
        let Some(first) = words.first() else { continue };
        match (&mut open, texts.as_slice()) {
            (None, ["num_ranks", _]) => {
                let fail = || at(&words[1], format!("expected the number of ranks, 1 to {MAX_GOAL_OPS}"));
                let n: usize = words[1].text.parse().map_err(|_| fail())?;
                if n == 0 || n > MAX_GOAL_OPS {
                    return Err(fail());
                }
                ranks = Some(vec![None; n]);
            }
            (None, ["rank", _, "{"]) => {
                let Some(ranks) = &ranks else { return Err(at(first, "a rank before num_ranks".into())) };
                let fail = || at(&words[1], format!("expected a rank of 0..{} not seen before", ranks.len()));
                let r: usize = words[1].text.parse().map_err(|_| fail())?;
                if r >= ranks.len() || ranks[r].is_some() {
                    return Err(fail());
                }
                open = Some(OpenRank { rank: r, ops: Vec::new(), labels: HashMap::new(), dependencies: Vec::new() });
            }
            (Some(_), ["}"]) => {
                let OpenRank { rank: r, mut ops, labels, dependencies } = open.take().expect("a rank is open");
                for Dependency { line, label, on, started } in dependencies {
                    let find = |(name, column): &(String, usize)| {
                        labels.get(name).copied().ok_or_else(|| ParseError {
                            line,
                            column: *column,
                            reason: format!("this label is not defined in rank {r}"),
                        })
                    };
                    let (op, on) = (find(&label)?, find(&on)?);
                    let list = if started { &mut ops[op as usize].irequires } else { &mut ops[op as usize].requires };
                    list.push(on);
                }
                ranks.as_mut().expect("num_ranks came first")[r] = Some(GoalRank { ops });
            }
            (Some(OpenRank { dependencies, .. }), [_, kind @ ("requires" | "irequires"), _]) => {
                dependencies.push(Dependency {
                    line: line_no,
                    label: (words[0].text.to_owned(), words[0].column),
                    on: (words[2].text.to_owned(), words[2].column),
                    started: *kind == "irequires",
                });
            }
            (Some(OpenRank { rank: r, ops, labels, .. }), _) => {
                let (label, operation_words) = match words.as_slice() {
                    [label, colon, rest @ ..] if colon.text == ":" => (Some(label), rest),
                    rest => (None, rest),
                };
                let kind = operation(operation_words).map_err(|(word, reason)| ParseError {
                    line: line_no,
                    column: word.map_or(first.column, |word| word.column),
                    reason,
                })?;
                if let Some(label) = label
                    && labels.insert(label.text.to_owned(), ops.len() as u32).is_some()
                {
                    return Err(at(label, format!("this label is defined twice in rank {r}")));
                }
                ops.push(GoalOp { kind, requires: Vec::new(), irequires: Vec::new() });
                total_ops += 1;
                if total_ops > MAX_GOAL_OPS {
                    return Err(at(first, format!("too many operations (at most {MAX_GOAL_OPS} in all)")));
                }
            }
            (None, _) => return Err(at(first, "expected num_ranks N or rank R {".into())),
        }
    }
    if let Some(OpenRank { rank: r, .. }) = open {
        return Err(ParseError { line: last_line, column: 0, reason: format!("rank {r} is not closed with }}") });
    }
    let ranks = ranks.ok_or(ParseError { line: 1, column: 0, reason: "no num_ranks line".into() })?;
    let ranks: Vec<GoalRank> = ranks.into_iter().map(|rank| rank.unwrap_or(GoalRank { ops: Vec::new() })).collect();
    let goal = Goal { ranks };
    goal.check().map_err(|error| ParseError { line: 0, column: 0, reason: error.to_string() })?;
    Ok(goal)
}

/// Why an operation's words are wrong: the word at fault (`None`: the operation as a
/// whole) and what was expected there.
type OperationError<'a> = (Option<&'a Word<'a>>, String);

/// One operation's words: `send 8b to 3 tag 1`, `recv 8b from 2`, `calc 100` (with
/// `cpu` and `nic` options, read and ignored).
fn operation<'a>(words: &'a [Word<'a>]) -> Result<GoalKind, OperationError<'a>> {
    use topocomm_proto::schedule::MAX_GOAL_MESSAGE_BYTES;
    let number = |word: &'a Word<'a>, what: &str| -> Result<u64, OperationError<'a>> {
        word.text.parse().map_err(|_| (Some(word), format!("expected {what}, a whole number of 0 or more")))
    };
    let bytes = |word: &'a Word<'a>| -> Result<u64, OperationError<'a>> {
        let expected =
            || (Some(word), format!("expected the message's size in bytes, 0 to {MAX_GOAL_MESSAGE_BYTES} (8b or 8)"));
        let bytes: u64 = word.text.strip_suffix('b').unwrap_or(word.text).parse().map_err(|_| expected())?;
        if bytes > MAX_GOAL_MESSAGE_BYTES {
            return Err(expected());
        }
        Ok(bytes)
    };
    let too_large = |word: &'a Word<'a>, what: &str| (Some(word), format!("{what} is too large"));
    let texts: Vec<&str> = words.iter().map(|word| word.text).collect();
    let options = |rest: &'a [Word<'a>], tag: &mut u32| -> Result<(), OperationError<'a>> {
        for pair in rest.chunks(2) {
            match pair {
                [name, value] if name.text == "tag" => {
                    let number = number(value, "the tag (any tag, -1, is not supported)")?;
                    *tag = u32::try_from(number).map_err(|_| too_large(value, "the tag"))?;
                }
                [name, value] if matches!(name.text, "cpu" | "nic") => {
                    number(value, "the cpu or nic")?;
                }
                [other, ..] => return Err((Some(other), "expected tag T, cpu N or nic N".into())),
                [] => {}
            }
        }
        Ok(())
    };
    let mut tag = 0;
    match texts.as_slice() {
        ["send", _, "to", _, ..] | ["recv", _, "from", _, ..] => {
            let (size, peer) = (&words[1], &words[3]);
            options(&words[4..], &mut tag)?;
            let bytes = bytes(size)?;
            let peer_number = number(peer, "the peer (any source, -1, is not supported)")?;
            let peer = u32::try_from(peer_number).map_err(|_| too_large(peer, "the peer"))?;
            Ok(if texts[0] == "send" {
                GoalKind::Send { bytes, peer, tag }
            } else {
                GoalKind::Recv { bytes, peer, tag }
            })
        }
        ["calc", _, ..] => {
            options(&words[2..], &mut tag)?;
            Ok(GoalKind::Calc { ns: number(&words[1], "the time in nanoseconds")? })
        }
        _ => Err((None, "expected send Nb to R, recv Nb from R or calc N".into())),
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
                let data = zeros_to_send(me, bytes)?;
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

/// `bytes` zeros for a send: known zeros where the region holds them (no memory), else a
/// buffer this node can have; an error, never an abort, where it cannot.
fn zeros_to_send(me: usize, bytes: u64) -> Result<Bytes, CommError> {
    let refuse = || CommError::Unsupported {
        me,
        algorithm: "goal".into(),
        reason: format!("a message of {bytes} B is more than this node can hold"),
    };
    let len = usize::try_from(bytes).map_err(|_| refuse())?;
    if let Some(zeros) = crate::zeros::zeros(len) {
        return Ok(zeros);
    }
    let mut buffer = Vec::new();
    buffer.try_reserve_exact(len).map_err(|_| refuse())?;
    buffer.resize(len, 0);
    Ok(Bytes::from(buffer))
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
        assert_eq!(error, "GOAL line 10, column 13: this label is not defined in rank 1");
    }

    #[test]
    fn a_receive_with_no_send_is_refused() {
        let error = parse(&TREE.replace("l2: send 8b to 2 tag 0 cpu 0", "")).unwrap_err().to_string();
        assert!(error.contains("rank 2 receives 1 messages from rank 0 with tag 0, and rank 0 sends 0"), "{error}");
    }

    /// A file named by mistake (or by a stranger, through the lab): the error names the
    /// line and column and what was expected, never what the file holds.
    #[test]
    fn an_error_never_quotes_the_file() {
        let secret = "root:$6$Zx9Qv2kS$s3cr3tHashThatMustNotLeak:19000:0:99999:7:::\nnum_ranks 2\n";
        let error = parse(secret).unwrap_err().to_string();
        assert_eq!(error, "GOAL line 1, column 1: expected num_ranks N or rank R {");
        let words = ["root", "s3cr3t", "Zx9Qv2kS", "19000"];
        for bad in [
            "num_ranks s3cr3t\n",
            "num_ranks 2\nrank s3cr3t {\n}\n",
            "num_ranks 2\nrank 0 {\nl1: send s3cr3tb to 1\n}\n",
            "num_ranks 2\nrank 0 {\nl1: send 8b to s3cr3t\n}\n",
            "num_ranks 2\nrank 0 {\nl1: send 8b to 1 s3cr3t 19000\n}\n",
            "num_ranks 2\nrank 0 {\nl1: calc s3cr3t\n}\n",
            "num_ranks 2\nrank 0 {\nroot s3cr3t Zx9Qv2kS\n}\n",
            "num_ranks 2\nrank 0 {\nl1: calc 1\nl1 requires s3cr3t\n}\n",
            "num_ranks 2\nrank 0 {\ns3cr3t: calc 1\ns3cr3t: calc 1\n}\n",
        ] {
            let error = parse(bad).unwrap_err().to_string();
            assert!(error.starts_with("GOAL line "), "{bad:?}: {error}");
            for word in words {
                assert!(!error.contains(word), "{bad:?}: {error}");
            }
        }
        let error = parse("num_ranks 2\nrank 0 {\nl1: send 8b to 1 s3cr3t 1\n}\n").unwrap_err().to_string();
        assert_eq!(error, "GOAL line 3, column 18: expected tag T, cpu N or nic N");
    }

    /// 10^15 B aborted the node that sent it (its buffer could not be had), 2^64 - 1 B
    /// panicked with `capacity overflow`: both are one line at parse.
    #[test]
    fn an_absurd_message_size_is_refused_at_parse() {
        for size in ["1000000000000000b", "18446744073709551615b", "18446744073709551616"] {
            let text = format!("num_ranks 2\nrank 0 {{\nl1: send {size} to 1\n}}\nrank 1 {{\nl1: recv 8b from 0\n}}\n");
            let error = parse(&text).unwrap_err().to_string();
            assert_eq!(
                error, "GOAL line 3, column 10: expected the message's size in bytes, 0 to 1099511627776 (8b or 8)",
                "{size}"
            );
        }
        let most = topocomm_proto::schedule::MAX_GOAL_MESSAGE_BYTES;
        let text =
            format!("num_ranks 2\nrank 0 {{\nl1: send {most}b to 1\n}}\nrank 1 {{\nl1: recv {most}b from 0\n}}\n");
        assert!(parse(&text).is_ok());
    }
}
