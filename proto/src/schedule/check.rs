//! The structural check of an MSCCL-IR program, run by every node on what it is sent.

use std::collections::HashMap;

use super::msccl::{Buffer, Program, StepKind, at};
use super::{MAX_BLOCKS, MAX_CHANNELS, MAX_CHUNKS, MAX_STEPS, ScheduleError};

impl Program {
    /// Checks the structure: sizes within the limits, every chunk index inside its
    /// buffer, every peer a rank other than its own, every dependency a step that
    /// exists, no two blocks of a rank sending (or receiving) to the same peer on the
    /// same channel, sends only from blocks with a send peer and receives only into
    /// blocks with a receive peer.
    pub fn check(&self) -> Result<(), ScheduleError> {
        let ranks = self.gpus.len();
        let steps: usize = self.gpus.iter().flat_map(|gpu| &gpu.blocks).map(|block| block.steps.len()).sum();
        if steps > MAX_STEPS {
            return Err(ScheduleError::TooLarge { what: format!("{steps} steps"), limit: MAX_STEPS });
        }
        if self.channels > MAX_CHANNELS {
            return Err(ScheduleError::TooLarge {
                what: format!("{} channels", self.channels),
                limit: MAX_CHANNELS as usize,
            });
        }
        if self.chunks_per_loop == 0 || self.chunks_per_loop > MAX_CHUNKS {
            return Err(ScheduleError::Invalid {
                at: "the algo".into(),
                reason: format!("nchunksperloop {} is not 1 to {MAX_CHUNKS}", self.chunks_per_loop),
            });
        }
        for (g, gpu) in self.gpus.iter().enumerate() {
            if gpu.blocks.len() > MAX_BLOCKS {
                return Err(ScheduleError::TooLarge {
                    what: format!("gpu {g} has {} blocks", gpu.blocks.len()),
                    limit: MAX_BLOCKS,
                });
            }
            for buffer in [Buffer::Input, Buffer::Output, Buffer::Scratch] {
                if gpu.chunks(buffer) > MAX_CHUNKS {
                    return Err(ScheduleError::TooLarge {
                        what: format!("gpu {g} has {} {} chunks", gpu.chunks(buffer), buffer.name()),
                        limit: MAX_CHUNKS as usize,
                    });
                }
            }
            let mut streams: HashMap<(bool, u32, u32), u32> = HashMap::new();
            for block in &gpu.blocks {
                let invalid = |reason: String| ScheduleError::Invalid { at: at(g, block, None), reason };
                if block.channel >= self.channels {
                    return Err(invalid(format!("channel {} is not below nchannels {}", block.channel, self.channels)));
                }
                for (sending, peer) in [(true, block.send), (false, block.recv)] {
                    let Some(peer) = peer else { continue };
                    let role = if sending { "send" } else { "recv" };
                    if peer as usize >= ranks || peer as usize == g {
                        return Err(invalid(format!("{role} peer {peer} is not another of the {ranks} ranks")));
                    }
                    if let Some(other) = streams.insert((sending, peer, block.channel), block.id) {
                        return Err(invalid(format!(
                            "tb {other} already {role}s with rank {peer} on channel {}: one block per peer and channel",
                            block.channel
                        )));
                    }
                }
                for (s, step) in block.steps.iter().enumerate() {
                    let invalid = |reason: String| ScheduleError::Invalid { at: at(g, block, Some((s, step))), reason };
                    if step.kind.sends() && block.send.is_none() {
                        return Err(invalid("sends, but its block has no send peer (send=\"-1\")".into()));
                    }
                    if step.kind.receives() && block.recv.is_none() {
                        return Err(invalid("receives, but its block has no receive peer (recv=\"-1\")".into()));
                    }
                    if step.kind != StepKind::Nop && step.count == 0 {
                        return Err(invalid("moves 0 chunks (cnt must be at least 1)".into()));
                    }
                    let mut touched = Vec::new();
                    if step.kind.reads_src() {
                        touched.push(("src", step.src));
                    }
                    if step.kind.writes_dst() || step.kind == StepKind::Reduce {
                        touched.push(("dst", step.dst));
                    }
                    for (role, chunks) in touched {
                        let available = gpu.chunks(chunks.buffer);
                        let end = u64::from(chunks.index) + u64::from(step.count);
                        if end > u64::from(available) {
                            return Err(invalid(format!(
                                "{role} chunks {}..{end} of the {} buffer ({}) are out of range: it has {available} chunks",
                                chunks.index,
                                chunks.buffer.name(),
                                chunks.buffer.letter(),
                            )));
                        }
                    }
                    if let Some((dep_block, dep_step)) = step.after {
                        let Some(target) = gpu.blocks.get(dep_block as usize) else {
                            return Err(invalid(format!("depends on a block this rank does not have ({dep_block})")));
                        };
                        if dep_step as usize >= target.steps.len() {
                            return Err(invalid(format!(
                                "depends on step {dep_step} of tb {}, which has {} steps",
                                target.id,
                                target.steps.len()
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
