//! Fuzzes the check every node runs on a schedule it is sent (`RunSpec::validate`:
//! `Schedule::check`, then an MSCCL-IR program's collective and `Program::layout`), and
//! what the nodes and the coordinator compute from a checked schedule (`bytes_held`,
//! `longest_message`, `Program::dry_run`). The first input byte picks the form: even, the
//! rest is a `Schedule` as it crosses the wire (bincode, `codec::decode`); odd, the rest
//! drives a small generator of well-formed values (so that most inputs reach the check's
//! inner loops instead of failing to decode). Nothing may panic or run away, a checked
//! schedule is refused on any other cluster size, and every schedule round-trips through
//! the codec.

#![no_main]

use libfuzzer_sys::fuzz_target;
use topocomm_fuzz::assert_round_trips;
use topocomm_proto::codec;
use topocomm_proto::schedule::{
    Block, Buffer, Chunks, Goal, GoalKind, GoalOp, GoalRank, Gpu, Program, Schedule, ScheduleError, Step, StepKind,
};
use topocomm_proto::spec::{Algorithm, Collective, Dtype, RunSpec};

/// The input's bytes, one at a time; zeros once they run out.
struct Bytes<'a>(std::slice::Iter<'a, u8>);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }

    fn below(&mut self, n: u8) -> u32 {
        u32::from(self.next() % n)
    }

    /// A peer: mostly one of a few ranks, sometimes none, sometimes far out of range.
    fn peer(&mut self) -> Option<u32> {
        match self.next() {
            0..=199 => Some(u32::from(self.next() % 9)),
            200..=249 => None,
            _ => Some(u32::MAX - self.below(3)),
        }
    }

    /// A number of a few bits, now and then one near the top of `u32`.
    fn number(&mut self) -> u32 {
        match self.next() {
            0..=239 => self.below(9),
            _ => u32::MAX - self.below(5),
        }
    }
}

const COLLECTIVES: [Collective; 7] = [
    Collective::Allreduce,
    Collective::Allgather,
    Collective::ReduceScatter,
    Collective::Alltoall,
    Collective::Broadcast,
    Collective::Reduce,
    Collective::Barrier,
];

fn program(b: &mut Bytes) -> Program {
    let ranks = 1 + b.below(6) as usize;
    let gpus = (0..ranks)
        .map(|_| Gpu {
            input_chunks: b.number(),
            output_chunks: b.number(),
            scratch_chunks: b.number(),
            blocks: (0..b.below(4))
                .map(|id| Block {
                    id: if b.next() < 240 { id } else { b.number() },
                    send: b.peer(),
                    recv: b.peer(),
                    channel: b.below(3),
                    steps: (0..b.below(6))
                        .map(|_| {
                            let mut chunks = || Chunks {
                                buffer: [Buffer::Input, Buffer::Output, Buffer::Scratch][b.below(3) as usize],
                                index: b.number(),
                            };
                            let (src, dst) = (chunks(), chunks());
                            Step {
                                kind: StepKind::ALL[b.below(9) as usize].0,
                                src,
                                dst,
                                count: b.number(),
                                after: (b.next() > 160).then(|| (b.number(), b.number())),
                            }
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Program {
        name: "fuzzed".into(),
        collective: COLLECTIVES[b.below(7) as usize],
        inplace: b.next() % 2 == 0,
        protocol: "Simple".into(),
        chunks_per_loop: b.number(),
        channels: b.below(4),
        gpus,
    }
}

fn goal(b: &mut Bytes) -> Goal {
    let ranks = 1 + b.below(6) as usize;
    let ranks = (0..ranks)
        .map(|_| GoalRank {
            ops: (0..b.below(6))
                .map(|_| {
                    let bytes = match b.next() {
                        0..=239 => u64::from(b.next()),
                        _ => u64::MAX - u64::from(b.next()),
                    };
                    let (peer, tag) = (b.peer().unwrap_or(0), b.number());
                    let kind = match b.below(3) {
                        0 => GoalKind::Send { bytes, peer, tag },
                        1 => GoalKind::Recv { bytes, peer, tag },
                        _ => GoalKind::Calc { ns: bytes },
                    };
                    let requires = (0..b.below(3)).map(|_| b.number()).collect();
                    let irequires = (0..b.below(2)).map(|_| b.number()).collect();
                    GoalOp { kind, requires, irequires }
                })
                .collect(),
        })
        .collect();
    Goal { ranks }
}

/// What a node and the coordinator do with a schedule that came to them.
fn exercise(schedule: Schedule) {
    let p = schedule.ranks();
    let checked = schedule.check(p);
    // Checked or not, it is refused on a cluster of another size, and names both sizes.
    assert_eq!(schedule.check(p + 1), Err(ScheduleError::Ranks { ranks: p, p: p + 1 }));
    let collective = match &schedule {
        Schedule::Msccl(program) => program.collective,
        Schedule::Goal(_) => Collective::Allreduce,
    };
    for (size_bytes, dtype) in [(0, Dtype::F64), (64, Dtype::F64), (4096, Dtype::I32), (u64::MAX - 7, Dtype::F64)] {
        let spec = RunSpec {
            size_bytes,
            dtype,
            schedule: Some(Box::new(schedule.clone())),
            ..RunSpec::new(collective, Algorithm::Auto)
        };
        let validated = spec.validate(p);
        if checked.is_err() {
            assert!(validated.is_err(), "a schedule its check refuses passed validation: {checked:?}");
            continue;
        }
        // What the nodes compute from a checked schedule (the memory check, the report).
        for node in 0..p {
            let _ = schedule.bytes_held(node, p, size_bytes, dtype);
        }
        let _ = schedule.longest_message(p, size_bytes, dtype);
    }
    if checked.is_ok()
        && let Schedule::Msccl(program) = &schedule
    {
        let _ = program.dry_run();
    }
    let bytes = codec::encode(&schedule).expect("a schedule encodes");
    assert_round_trips(&bytes, &schedule, |s| codec::encode(s).unwrap(), |b| codec::decode(b).ok());
}

fuzz_target!(|data: &[u8]| {
    let Some((&form, body)) = data.split_first() else { return };
    match form % 4 {
        0 | 2 => {
            if let Ok(schedule) = codec::decode::<Schedule>(body) {
                assert_round_trips(body, &schedule, |s| codec::encode(s).unwrap(), |b| codec::decode(b).ok());
                exercise(schedule);
            }
        }
        1 => exercise(Schedule::Msccl(program(&mut Bytes(body.iter())))),
        _ => exercise(Schedule::Goal(goal(&mut Bytes(body.iter())))),
    }
});
