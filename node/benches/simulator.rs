//! The simulator's benchmark: each case in a child process of its own, timed from
//! outside (wall time, processor time and peak resident memory of the whole process,
//! from `wait4`), printing the simulated time, the closed form where the case has one,
//! the messages and the rate; beside it LogGOPSim on the same schedule, same machine,
//! same run, when its binaries are given; and the cost model's earlier engine (routers
//! on tokio's paused clock) at p = 1,024 and 4,096 as the baseline.
//!
//! `cargo bench -p topocomm-node --bench simulator` runs every case; give case names
//! (`cargo bench -p topocomm-node --bench simulator -- allreduce-65536`) to run some.
//! `LOGGOPSIM=/path/to/LogGOPSim TXT2BIN=/path/to/txt2bin` adds LogGOPSim (spcl/LogGOPSim,
//! built outside this repository) on the cases marked for it: the schedule is the one
//! `topocomm explain --goal` writes, converted once by `txt2bin` (not timed), and
//! LogGOPSim simulates the binary schedule with L = t_s + t_h + t_w, o = g = 0,
//! G = t_w; its finishing time must equal topocomm's. `TOPOCOMM_BENCH_REPEAT=N` runs
//! each case N times and prints every run.
//!
//! The group "switched networks at scale" (`-- switched`): the recursive-doubling
//! all-reduce on a fat-tree 64 (65,536 hosts, 5,120 switches) and a dragonfly 32x16x16
//! (262,656 hosts, 16,416 routers), every host a rank and every rank's result verified,
//! beside the hypercubes of 65,536 and 262,144 nodes; each case runs at least three times
//! and the group ends with a table of medians and spreads: wall time, peak memory,
//! messages, frames forwarded, messages a second and µs a frame-hop, and a switched
//! network's µs a frame-hop over its direct network's. `TOPOCOMM_BENCH_QUICK=1` runs the
//! group at a size for a quick check (fat-tree 16, dragonfly 8x4x4, hypercube 1,024).

// Wait4 and a zeroed rusage, to read a child's peak memory.
#![allow(unsafe_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use topocomm_collectives::algorithms::schedule::goal;
use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self, Inputs};
use topocomm_node::in_process::time_on_routers;
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Ports, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

/// Which engine a case runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    Simulator,
    /// The routers on a paused clock (the earlier model).
    Routers,
}

struct Case {
    name: String,
    engine: Engine,
    collective: Collective,
    algorithm: Algorithm,
    kind: TopologyKind,
    p: usize,
    routing: Routing,
    /// Data verified against the reference, or lengths only.
    inputs: Inputs,
    /// The textbook's time in ns, where it applies.
    closed_form_ns: Option<u64>,
    /// Whether LogGOPSim runs the same schedule beside it (when its binaries are given).
    loggopsim: bool,
    /// A switched network's shape (`--dims`).
    dims: Option<Vec<usize>>,
    group: Group,
}

/// How a case's runs are reported.
#[derive(Clone, PartialEq, Eq)]
enum Group {
    /// Line by line.
    Plain,
    /// In "switched networks at scale" (line by line, then summarised); a switched
    /// network names the direct case of its p that its cost per frame-hop is held against.
    Scale { direct: Option<String> },
}

/// The shapes of "switched networks at scale": (kind, `--dims`, hosts), each beside the
/// hypercube of the power of two at or below its hosts.
fn scale_shapes() -> Vec<(TopologyKind, Vec<usize>, usize)> {
    let quick = std::env::var_os("TOPOCOMM_BENCH_QUICK").is_some_and(|value| value != "0");
    let (fat_tree, dragonfly) = if quick { (16, [8, 4, 4]) } else { (64, [32, 16, 16]) };
    let (a, p, h) = (dragonfly[0], dragonfly[1], dragonfly[2]);
    vec![
        (TopologyKind::FatTree, vec![fat_tree], fat_tree * fat_tree * fat_tree / 4),
        (TopologyKind::Dragonfly, dragonfly.to_vec(), a * p * (a * h + 1)),
    ]
}

/// The physics of `topocomm explain allreduce --size 8B --ts 10us --tw 1ns`: t_s 10 µs,
/// t_w 1 ns/B; the tori add t_h 1 µs.
fn links(case: &Case) -> LinkModel {
    let th_ns = if case.kind == TopologyKind::Torus { 1_000 } else { 0 };
    LinkModel { ts_ns: 10_000, th_ns, tw_ps: 1_000, routing: case.routing, packet_bytes: 0, ports: Ports::All }
}

const SIZE: u64 = 8;

fn cases() -> Vec<Case> {
    // (t_s + t_w m) log p for the hypercube's broadcast and recursive-doubling all-reduce.
    let hypercube = |p: usize| Some((10_000 + SIZE) * u64::from(p.trailing_zeros()));
    let case = |name: String, collective, algorithm, kind, p: usize| Case {
        name,
        engine: Engine::Simulator,
        collective,
        algorithm,
        kind,
        p,
        routing: Routing::Sf,
        inputs: Inputs::Reference,
        closed_form_ns: None,
        loggopsim: false,
        dims: None,
        group: Group::Plain,
    };
    let mut cases = Vec::new();
    for p in [1024, 4096] {
        for (engine, name) in [(Engine::Routers, "routers"), (Engine::Simulator, "simulator")] {
            cases.push(Case {
                engine,
                closed_form_ns: hypercube(p),
                ..case(
                    format!("baseline-{name}-{p}"),
                    Collective::Allreduce,
                    Algorithm::RecursiveDoubling,
                    TopologyKind::Hypercube,
                    p,
                )
            });
        }
    }
    for log_p in [16, 18, 20, 24] {
        let p = 1 << log_p;
        let broadcast = |name| case(name, Collective::Broadcast, Algorithm::Hypercube, TopologyKind::Hypercube, p);
        if log_p < 24 {
            cases.push(Case { closed_form_ns: hypercube(p), loggopsim: true, ..broadcast(format!("broadcast-{p}")) });
        }
        if log_p >= 20 {
            let name = format!("broadcast-{p}-lengths");
            cases.push(Case { closed_form_ns: hypercube(p), inputs: Inputs::Lengths, ..broadcast(name) });
        }
    }
    for log_p in [14, 16, 18, 20] {
        let p = 1 << log_p;
        let allreduce =
            |name| case(name, Collective::Allreduce, Algorithm::RecursiveDoubling, TopologyKind::Hypercube, p);
        cases.push(Case {
            closed_form_ns: hypercube(p),
            loggopsim: log_p <= 18,
            ..allreduce(format!("allreduce-{p}"))
        });
        if log_p == 16 {
            let name = format!("allreduce-{p}-lengths");
            cases.push(Case { closed_form_ns: hypercube(p), inputs: Inputs::Lengths, ..allreduce(name) });
        }
    }
    cases.push(case("ring-allreduce-4096".into(), Collective::Allreduce, Algorithm::Ring, TopologyKind::Ring, 4096));
    for (routing, tag) in [(Routing::Sf, "sf"), (Routing::Ct, "ct")] {
        let torus = |name: &str, collective| Case {
            routing,
            ..case(format!("torus-{name}-{tag}"), collective, Algorithm::Mesh, TopologyKind::Torus, 1 << 16)
        };
        // [GGKK 4.1.2] on 256 x 256: (t_s + t_h + t_w m)(128 + 128).
        cases.push(Case {
            closed_form_ns: Some((10_000 + 1_000 + SIZE) * 256),
            ..torus("broadcast", Collective::Broadcast)
        });
        if routing == Routing::Sf {
            cases.push(torus("allreduce", Collective::Allreduce));
        }
    }
    let allreduce = |name, kind, p| case(name, Collective::Allreduce, Algorithm::RecursiveDoubling, kind, p);
    for (kind, dims, hosts) in scale_shapes() {
        let direct_p = 1 << hosts.ilog2();
        let direct = format!("switched-direct-hypercube-{direct_p}");
        if !cases.iter().any(|case: &Case| case.name == direct) {
            cases.push(Case {
                closed_form_ns: hypercube(direct_p),
                group: Group::Scale { direct: None },
                ..allreduce(direct.clone(), TopologyKind::Hypercube, direct_p)
            });
        }
        let shape = dims.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
        cases.push(Case {
            dims: Some(dims),
            group: Group::Scale { direct: Some(direct) },
            ..allreduce(format!("switched-{kind}-{shape}"), kind, hosts)
        });
    }
    cases
}

fn run_spec(case: &Case) -> RunSpec {
    RunSpec { size_bytes: SIZE, ..RunSpec::new(case.collective, case.algorithm) }
}

fn topology(case: &Case) -> Topology {
    Topology::new(case.kind, case.p, case.dims.as_deref()).expect("a valid shape")
}

/// Runs one case in this process and prints its line (tab-separated, for the parent).
fn run_case(case: &Case) {
    let (topology, model, spec) = (topology(case), links(case), run_spec(case));
    let (time_ns, counts, verified) = match case.engine {
        Engine::Simulator => {
            let run = spec::run(&spec, &topology, model, case.inputs, Options::default()).expect("a simulation");
            let totals = run.totals;
            (
                run.time_ns,
                Counts { messages: totals.messages, forwarded: totals.forwarded, frame_hops: totals.frame_hops },
                run.verified,
            )
        }
        Engine::Routers => {
            let timing = time_on_routers(&spec, &topology, model).expect("the routers' run");
            // Whole messages (no packets): a frame-hop for each message and each forward.
            let (messages, forwarded) = (timing.messages, timing.forwarded);
            (timing.time_ns, Counts { messages, forwarded, frame_hops: messages + forwarded }, false)
        }
    };
    println!("{time_ns}\t{}\t{}\t{}\t{verified}", counts.messages, counts.forwarded, counts.frame_hops);
}

/// Writes the case's schedule as GOAL to `path`, as `topocomm explain --goal` does.
fn write_goal(case: &Case, path: &Path) {
    let options = Options { operations: true, ..Options::default() };
    let recorded =
        spec::run(&run_spec(case), &topology(case), links(case), Inputs::Lengths, options).expect("a recording");
    std::fs::write(path, goal::write(&goal::from_operations(&recorded.operations))).expect("writing the schedule");
}

/// What a run carried.
#[derive(Clone, Copy)]
struct Counts {
    messages: u64,
    /// Messages passed on by a switch or an intermediate node.
    forwarded: u64,
    /// Frames that crossed a link.
    frame_hops: u64,
}

/// What a finished child process took, as the kernel counted it.
struct Usage {
    wall: Duration,
    cpu: Duration,
    peak_bytes: u64,
    stdout: String,
}

/// Runs `command` to the end; panics with its output if it fails.
#[expect(clippy::zombie_processes, reason = "reaped by `wait4`, which also gives its resource usage")]
fn measured(command: &mut Command) -> Usage {
    let began = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting a child process");
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child.stdout.take().expect("piped").read_to_string(&mut stdout).expect("the child's output");
    child.stderr.take().expect("piped").read_to_string(&mut stderr).expect("the child's errors");
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, which nothing else reaps; both pointers are valid.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = began.elapsed();
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{command:?} failed: {stderr}");
    let seconds = |time: libc::timeval| Duration::new(time.tv_sec as u64, time.tv_usec as u32 * 1_000);
    Usage {
        wall,
        cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        peak_bytes: usage.ru_maxrss as u64 * 1024,
        stdout,
    }
}

/// LogGOPSim's binaries, when given.
struct LogGopSim {
    simulator: PathBuf,
    txt2bin: PathBuf,
    schedules: PathBuf,
}

impl LogGopSim {
    fn from_env() -> Option<Self> {
        let (simulator, txt2bin) = (std::env::var_os("LOGGOPSIM")?, std::env::var_os("TXT2BIN")?);
        let schedules = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("loggopsim-schedules");
        std::fs::create_dir_all(&schedules).expect("a directory for the schedules");
        Some(LogGopSim { simulator: simulator.into(), txt2bin: txt2bin.into(), schedules })
    }

    /// The case's binary schedule, written and converted once (not timed).
    fn schedule(&self, case: &Case, me: &Path) -> PathBuf {
        let (text, binary) =
            (self.schedules.join(format!("{}.goal", case.name)), self.schedules.join(format!("{}.bin", case.name)));
        if !binary.exists() {
            measured(Command::new(me).env("TOPOCOMM_BENCH_GOAL", &case.name).env("TOPOCOMM_BENCH_GOAL_FILE", &text));
            measured(Command::new(&self.txt2bin).arg("-i").arg(&text).arg("-o").arg(&binary));
            std::fs::remove_file(&text).expect("removing the text schedule");
        }
        binary
    }

    /// Simulates the case's schedule; returns what it took and its finishing time in ns.
    fn run(&self, case: &Case, me: &Path) -> (Usage, u64) {
        let model = links(case);
        let tw_ns = model.tw_ps / 1_000;
        let l_ns = model.ts_ns + model.th_ns + tw_ns;
        let schedule = self.schedule(case, me);
        let usage = measured(Command::new(&self.simulator).arg("-f").arg(&schedule).args([
            "-L".to_owned(),
            l_ns.to_string(),
            "-o".into(),
            "0".into(),
            "-g".into(),
            "0".into(),
            "-G".into(),
            tw_ns.to_string(),
            "-b".into(),
        ]));
        let finish = usage
            .stdout
            .lines()
            .find_map(|line| {
                line.strip_prefix("Maximum finishing time at host ")?
                    .split(": ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{}: no finishing time in LogGOPSim's output: {}", case.name, usage.stdout));
        (usage, finish)
    }
}

/// The machine the figures come from.
fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map_or("?", |rest| rest.trim_start_matches([' ', '\t', ':']));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "machine: {model}, {cores} cores, Linux {}, load average {}",
        read("/proc/sys/kernel/osrelease").trim(),
        load()
    )
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
}

fn main() {
    let cases = cases();
    let find = |name: &str| cases.iter().find(|case| case.name == name).expect("a known case");
    if let Ok(name) = std::env::var("TOPOCOMM_BENCH_CASE") {
        run_case(find(&name));
        return;
    }
    if let (Ok(name), Some(path)) = (std::env::var("TOPOCOMM_BENCH_GOAL"), std::env::var_os("TOPOCOMM_BENCH_GOAL_FILE"))
    {
        write_goal(find(&name), Path::new(&path));
        return;
    }
    let wanted: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    let repeat: usize = std::env::var("TOPOCOMM_BENCH_REPEAT").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
    let me = std::env::current_exe().expect("this benchmark's path");
    let loggopsim = LogGopSim::from_env();
    println!("{}", machine());
    if loggopsim.is_none() {
        println!("LogGOPSim: not run (give LOGGOPSIM and TXT2BIN, the paths of its built LogGOPSim and txt2bin)");
    }
    println!(
        "{:<32} {:>9} {:>9} {:>11} {:>11} {:>10} {:>8} {:>8} {:>11} {:>9} {:>8}",
        "case",
        "engine",
        "p",
        "time µs",
        "closed µs",
        "messages",
        "wall s",
        "cpu s",
        "messages/s",
        "peak MiB",
        "verified"
    );
    let (mut total_messages, mut total_cpu) = (0u64, 0f64);
    let mut at_scale: Vec<(&Case, Counts, Vec<Usage>)> = Vec::new();
    let selected =
        cases.iter().filter(|case| wanted.is_empty() || wanted.iter().any(|w| case.name.contains(w.as_str())));
    for case in selected {
        // A median and a spread need three runs.
        let runs = if case.group == Group::Plain { repeat } else { repeat.max(3) };
        let mut usages = Vec::new();
        let mut counted = None;
        for _ in 0..runs {
            let usage = measured(Command::new(&me).env("TOPOCOMM_BENCH_CASE", &case.name));
            let fields: Vec<&str> = usage.stdout.trim().split('\t').collect();
            let [time_ns, messages, forwarded, frame_hops, verified] = fields[..] else {
                panic!("{}: {}", case.name, usage.stdout)
            };
            let count = |field: &str| -> u64 { field.parse().expect("a count") };
            let (time_ns, counts) = (
                count(time_ns),
                Counts { messages: count(messages), forwarded: count(forwarded), frame_hops: count(frame_hops) },
            );
            if let Some(closed) = case.closed_form_ns {
                assert_eq!(time_ns, closed, "{}: the closed form holds exactly", case.name);
            }
            if case.engine == Engine::Simulator {
                total_messages += counts.messages;
                total_cpu += usage.cpu.as_secs_f64();
            }
            let engine = if case.engine == Engine::Simulator { "topocomm" } else { "routers" };
            let verified = match (verified, case.inputs) {
                ("true", _) => "yes",
                (_, Inputs::Lengths) => "lengths",
                _ => "no",
            };
            assert!(case.group == Group::Plain || verified == "yes", "{}: every node verified", case.name);
            print_line(case, engine, time_ns, counts.messages, &usage, verified);
            if let Some(loggopsim) = loggopsim.as_ref().filter(|_| case.loggopsim) {
                let (usage, finish_ns) = loggopsim.run(case, &me);
                assert_eq!(finish_ns, time_ns, "{}: LogGOPSim's time equals topocomm's", case.name);
                print_line(case, "LogGOPSim", finish_ns, counts.messages, &usage, "-");
            }
            counted = Some(counts);
            usages.push(usage);
        }
        if let (Group::Scale { .. }, Some(counts)) = (&case.group, counted) {
            at_scale.push((case, counts, usages));
        }
    }
    if total_cpu > 0.0 {
        println!(
            "topocomm over these cases: {total_messages} messages in {total_cpu:.2} s of processor time: {:.0} messages/s on one core",
            total_messages as f64 / total_cpu
        );
    }
    if !at_scale.is_empty() {
        print_at_scale(&at_scale);
    }
    println!("load average at the end {}", load());
}

fn print_line(case: &Case, engine: &str, time_ns: u64, messages: u64, usage: &Usage, verified: &str) {
    let wall = usage.wall.as_secs_f64();
    println!(
        "{:<32} {:>9} {:>9} {:>11.3} {:>11} {:>10} {:>8.3} {:>8.3} {:>11.0} {:>9.1} {:>8}",
        case.name,
        engine,
        case.p,
        time_ns as f64 / 1e3,
        case.closed_form_ns.map_or_else(|| "-".to_owned(), |ns| format!("{:.3}", ns as f64 / 1e3)),
        messages,
        wall,
        usage.cpu.as_secs_f64(),
        messages as f64 / wall.max(1e-9),
        usage.peak_bytes as f64 / (1 << 20) as f64,
        verified
    );
}

/// The median and the range of some figures.
struct Spread {
    median: f64,
    low: f64,
    high: f64,
}

impl Spread {
    fn of(mut figures: Vec<f64>) -> Self {
        figures.sort_by(f64::total_cmp);
        let n = figures.len();
        let median = if n % 2 == 1 { figures[n / 2] } else { (figures[n / 2 - 1] + figures[n / 2]) / 2.0 };
        Spread { median, low: figures[0], high: figures[n - 1] }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{:.3} ({:.3}-{:.3})", self.median, self.low, self.high)
    }
}

/// The group "switched networks at scale": per case the medians of its runs and their
/// range, the rates from the median wall time, and a switched network's µs a frame-hop
/// over its direct network's (on wall and on processor time).
fn print_at_scale(runs: &[(&Case, Counts, Vec<Usage>)]) {
    let medians = |usages: &[Usage]| {
        let wall = Spread::of(usages.iter().map(|usage| usage.wall.as_secs_f64()).collect());
        let cpu = Spread::of(usages.iter().map(|usage| usage.cpu.as_secs_f64()).collect());
        (wall, cpu)
    };
    let per_hop = |name: &str| {
        runs.iter().find(|(case, ..)| case.name == name).map(|(_, counts, usages)| {
            let (wall, cpu) = medians(usages);
            (wall.median / counts.frame_hops as f64, cpu.median / counts.frame_hops as f64)
        })
    };
    println!(
        "switched networks at scale (all-reduce, recursive doubling, {SIZE} B; every rank verified; medians of the runs, range in brackets)"
    );
    println!(
        "{:<34} {:>7} {:>6} {:>21} {:>21} {:>9} {:>9} {:>10} {:>10} {:>11} {:>8} {:>8} {:>13}",
        "case",
        "ranks",
        "runs",
        "wall s",
        "cpu s",
        "peak MiB",
        "messages",
        "forwarded",
        "frame-hops",
        "messages/s",
        "µs/hop",
        "cpu µs",
        "vs direct"
    );
    for (case, counts, usages) in runs {
        let (wall, cpu) = medians(usages);
        let peak = usages.iter().map(|usage| usage.peak_bytes).max().unwrap_or(0) as f64 / (1 << 20) as f64;
        let (hop_wall, hop_cpu) = (wall.median / counts.frame_hops as f64, cpu.median / counts.frame_hops as f64);
        let versus = match &case.group {
            Group::Scale { direct: Some(direct) } => per_hop(direct).map_or_else(
                || format!("({direct} not run)"),
                |(wall, cpu)| format!("{:.2}x/{:.2}x", hop_wall / wall, hop_cpu / cpu),
            ),
            _ => "-".to_owned(),
        };
        println!(
            "{:<34} {:>7} {:>6} {:>21} {:>21} {:>9.1} {:>9} {:>10} {:>10} {:>11.0} {:>8.3} {:>8.3} {:>13}",
            case.name,
            case.p,
            usages.len(),
            wall.to_string(),
            cpu.to_string(),
            peak,
            counts.messages,
            counts.forwarded,
            counts.frame_hops,
            counts.messages as f64 / wall.median,
            hop_wall * 1e6,
            hop_cpu * 1e6,
            versus
        );
    }
    println!(
        "(vs direct: µs a frame-hop over the direct network's of the same p, on wall / processor time; the bound is 2x)"
    );
}
