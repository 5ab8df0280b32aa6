//! The dry run of an MSCCL-IR program: played with no data, it finds what would hang and
//! what would be left over.

use std::collections::{HashMap, VecDeque};

use super::ScheduleError;
use super::msccl::{Program, at};

impl Program {
    /// Plays the program with no data, every send buffered until its receive takes it
    /// (as the nodes' mailboxes hold messages), blocks in any order: a program that
    /// cannot finish this way cannot finish on any network. Refuses a program with a
    /// block that waits forever (a dependency cycle, a receive that no send feeds, a
    /// count that differs between a send and its receive) or a send that no receive
    /// takes, naming the blocks involved.
    pub fn dry_run(&self) -> Result<(), ScheduleError> {
        // The position of each block: its next step.
        let mut next: Vec<Vec<usize>> = self.gpus.iter().map(|gpu| vec![0; gpu.blocks.len()]).collect();
        // Messages in flight per (from, to, channel): (chunks, sender's block, step).
        let mut in_flight: HashMap<(usize, u32, u32), VecDeque<InFlight>> = HashMap::new();
        let mut progress = true;
        while progress {
            progress = false;
            for (g, gpu) in self.gpus.iter().enumerate() {
                for (b, block) in gpu.blocks.iter().enumerate() {
                    while let Some(step) = block.steps.get(next[g][b]) {
                        if let Some((dep_block, dep_step)) = step.after
                            && next[g][dep_block as usize] <= dep_step as usize
                        {
                            break;
                        }
                        if step.kind.receives() {
                            let from = block.recv.expect("checked: a receiving block has a peer");
                            let key = (from as usize, g as u32, block.channel);
                            let Some(&(count, sender, sender_step)) =
                                in_flight.get(&key).and_then(|queue| queue.front())
                            else {
                                break;
                            };
                            if count != step.count {
                                let sender_block = &self.gpus[from as usize].blocks[sender as usize];
                                let sent = &sender_block.steps[sender_step];
                                return Err(ScheduleError::Stuck(format!(
                                    "{} receives {} chunks, but the message it matches, from {}, carries {count}",
                                    at(g, block, Some((next[g][b], step))),
                                    step.count,
                                    at(from as usize, sender_block, Some((sender_step, sent))),
                                )));
                            }
                            in_flight.get_mut(&key).map(VecDeque::pop_front);
                        }
                        if step.kind.sends() {
                            let to = block.send.expect("checked: a sending block has a peer");
                            in_flight
                                .entry((g, to, block.channel))
                                .or_default()
                                .push_back((step.count, b as u32, next[g][b]));
                        }
                        next[g][b] += 1;
                        progress = true;
                    }
                }
            }
        }
        let waiting = self.describe_waits(&next);
        if !waiting.is_empty() {
            return Err(ScheduleError::Stuck(waiting));
        }
        let mut left: Vec<_> = in_flight.iter().filter(|(_, queue)| !queue.is_empty()).collect();
        left.sort_by_key(|(key, _)| **key);
        if let Some(&(&(from, to, channel), queue)) = left.first() {
            let (count, sender, sender_step) = queue[0];
            let block = &self.gpus[from].blocks[sender as usize];
            return Err(ScheduleError::Unmatched(format!(
                "{} sends {count} chunks to gpu {to} on channel {channel}, and no block of gpu {to} receives them{}",
                at(from, block, Some((sender_step, &block.steps[sender_step]))),
                if left.len() > 1 || queue.len() > 1 { " (and more after it)" } else { "" }
            )));
        }
        Ok(())
    }

    /// What every unfinished block waits for, a dependency cycle first if there is one;
    /// empty when every block finished.
    fn describe_waits(&self, next: &[Vec<usize>]) -> String {
        let mut lines = Vec::new();
        let mut cycle = None;
        for (g, gpu) in self.gpus.iter().enumerate() {
            for (b, block) in gpu.blocks.iter().enumerate() {
                let Some(step) = block.steps.get(next[g][b]) else { continue };
                let here = at(g, block, Some((next[g][b], step)));
                if let Some((dep_block, dep_step)) = step.after
                    && next[g][dep_block as usize] <= dep_step as usize
                {
                    let target = &gpu.blocks[dep_block as usize];
                    lines.push(format!("{here} waits for tb {} step {dep_step}", target.id));
                    if cycle.is_none() {
                        cycle = self.dependency_cycle(g, b, next);
                    }
                } else {
                    let from = block.recv.unwrap_or_default();
                    lines.push(format!("{here} waits for a message from gpu {from} on channel {}", block.channel));
                }
            }
        }
        if lines.is_empty() {
            return String::new();
        }
        const SHOWN: usize = 8;
        let more = lines.len().saturating_sub(SHOWN);
        lines.truncate(SHOWN);
        let mut text = match cycle {
            Some(cycle) => format!("a dependency cycle: {cycle}; "),
            None => "every block left waits on another (a receive no send feeds, or a deadlock): ".to_owned(),
        };
        text.push_str(&lines.join("; "));
        if more > 0 {
            text.push_str(&format!("; and {more} more"));
        }
        text
    }

    /// The cycle of dependencies (within gpu `g`) that the block `b` waits on, if it is
    /// on one: "tb 1 → tb 2 → tb 1".
    fn dependency_cycle(&self, g: usize, b: usize, next: &[Vec<usize>]) -> Option<String> {
        let blocks = &self.gpus[g].blocks;
        let waits_on = |block: usize| -> Option<usize> {
            let step = blocks[block].steps.get(next[g][block])?;
            let (dep_block, dep_step) = step.after?;
            (next[g][dep_block as usize] <= dep_step as usize).then_some(dep_block as usize)
        };
        let mut path = vec![b];
        let mut current = b;
        for _ in 0..=blocks.len() {
            current = waits_on(current)?;
            if let Some(start) = path.iter().position(|&seen| seen == current) {
                let names: Vec<String> =
                    path[start..].iter().chain([&current]).map(|&i| format!("tb {}", blocks[i].id)).collect();
                return Some(format!("gpu {g} {}", names.join(" → ")));
            }
            path.push(current);
        }
        None
    }
}

/// A message of the dry run, in flight: (chunks, sender's block, sender's step).
type InFlight = (u32, u32, usize);

#[cfg(test)]
mod tests {
    use super::super::msccl::StepKind;
    use super::super::msccl::fixtures::{block, program, step};

    #[test]
    fn a_matched_exchange_finishes() {
        let p = program(vec![
            vec![block(0, Some(1), Some(1), vec![step(StepKind::Send, 0, None), step(StepKind::Recv, 1, None)])],
            vec![block(0, Some(0), Some(0), vec![step(StepKind::Send, 1, None), step(StepKind::Recv, 0, None)])],
        ]);
        p.check().unwrap();
        p.dry_run().unwrap();
    }

    #[test]
    fn a_dependency_cycle_is_named() {
        let p = program(vec![
            vec![
                block(0, None, None, vec![step(StepKind::Nop, 0, Some((1, 0)))]),
                block(1, None, None, vec![step(StepKind::Nop, 0, Some((0, 0)))]),
            ],
            vec![],
        ]);
        p.check().unwrap();
        let error = p.dry_run().unwrap_err().to_string();
        assert!(error.contains("a dependency cycle: gpu 0 tb 0 → tb 1 → tb 0"), "{error}");
    }

    #[test]
    fn a_send_nobody_receives_is_named() {
        let p = program(vec![vec![block(0, Some(1), None, vec![step(StepKind::Send, 0, None)])], vec![]]);
        let error = p.dry_run().unwrap_err().to_string();
        assert_eq!(
            error,
            "a send with no matching receive: gpu 0 tb 0 step 0 (s) sends 1 chunks to gpu 1 on channel 0, and no block of gpu 1 receives them"
        );
    }
}
