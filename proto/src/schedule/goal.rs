//! A GOAL schedule (the text LogGOPSim reads), typed, and its check.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{MAX_GOAL_MESSAGE_BYTES, MAX_GOAL_OPS, MAX_GOAL_TAG, ScheduleError};

/// One operation of a GOAL schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GoalKind {
    /// `send Nb to R tag T`.
    Send { bytes: u64, peer: u32, tag: u32 },
    /// `recv Nb from R tag T`.
    Recv { bytes: u64, peer: u32, tag: u32 },
    /// `calc N`: N nanoseconds of local work.
    Calc { ns: u64 },
}

/// A GOAL operation and the operations of its rank it waits for (by position).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalOp {
    pub kind: GoalKind,
    /// `requires`: these must be done before this one starts.
    pub requires: Vec<u32>,
    /// `irequires`: these must have started before this one starts.
    pub irequires: Vec<u32>,
}

/// A rank of a GOAL schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalRank {
    pub ops: Vec<GoalOp>,
}

/// A GOAL schedule: per rank, operations and their dependencies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goal {
    pub ranks: Vec<GoalRank>,
}

impl Goal {
    /// Checks sizes, peers, tags and dependencies (every one an earlier-or-later
    /// operation of the same rank that exists, none on itself).
    pub fn check(&self) -> Result<(), ScheduleError> {
        let ops: usize = self.ranks.iter().map(|rank| rank.ops.len()).sum();
        if ops > MAX_GOAL_OPS {
            return Err(ScheduleError::TooLarge { what: format!("{ops} operations"), limit: MAX_GOAL_OPS });
        }
        let ranks = self.ranks.len();
        for (r, rank) in self.ranks.iter().enumerate() {
            for (i, op) in rank.ops.iter().enumerate() {
                let invalid = |reason: String| ScheduleError::Invalid { at: format!("rank {r} operation {i}"), reason };
                if let GoalKind::Send { peer, tag, bytes } | GoalKind::Recv { peer, tag, bytes } = op.kind {
                    if bytes > MAX_GOAL_MESSAGE_BYTES {
                        return Err(invalid(format!(
                            "a message of {bytes} B, over the {MAX_GOAL_MESSAGE_BYTES} B (1 TiB) a GOAL message may carry"
                        )));
                    }
                    if peer as usize >= ranks || peer as usize == r {
                        return Err(invalid(format!("peer {peer} is not another of the {ranks} ranks")));
                    }
                    if tag > MAX_GOAL_TAG {
                        return Err(invalid(format!("tag {tag} is over {MAX_GOAL_TAG}")));
                    }
                }
                for &dep in op.requires.iter().chain(&op.irequires) {
                    if dep as usize >= rank.ops.len() || dep as usize == i {
                        return Err(invalid(format!(
                            "depends on operation {dep}, which is not another of the rank's {}",
                            rank.ops.len()
                        )));
                    }
                }
            }
        }
        // Every receive needs a send: count them per (from, to, tag).
        let mut counts: HashMap<(u32, u32, u32), (usize, usize)> = HashMap::new();
        for (r, rank) in self.ranks.iter().enumerate() {
            for op in &rank.ops {
                match op.kind {
                    GoalKind::Send { peer, tag, .. } => counts.entry((r as u32, peer, tag)).or_default().0 += 1,
                    GoalKind::Recv { peer, tag, .. } => counts.entry((peer, r as u32, tag)).or_default().1 += 1,
                    GoalKind::Calc { .. } => {}
                }
            }
        }
        let mut unmatched: Vec<_> = counts.into_iter().filter(|(_, (sends, recvs))| sends != recvs).collect();
        unmatched.sort();
        if let Some(&((from, to, tag), (sends, recvs))) = unmatched.first() {
            return Err(ScheduleError::Unmatched(format!(
                "rank {to} receives {recvs} messages from rank {from} with tag {tag}, and rank {from} sends {sends}"
            )));
        }
        Ok(())
    }
}
