//! The simulator's benchmark: each case in a child process of its
//! own, so that its peak memory is its own, printing the simulated time, the closed form
//! where the case has one, the messages, the wall time, the rate and the peak resident
//! memory; and the cost model's earlier engine (routers on tokio's paused clock) beside
//! the simulator at p = 1,024 and 4,096, as the baseline.
//!
//! `cargo bench -p topocomm-node --bench simulator` runs every case; give case names
//! (`cargo bench -p topocomm-node --bench simulator -- allreduce-65536`) to run some.

use std::process::Command;
use std::time::Instant;

use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self, Inputs};
use topocomm_node::in_process::time_on_routers;
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

/// Which engine a case runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    Simulator,
    /// The routers on a paused clock (the earlier model).
    Routers,
}

struct Case {
    name: &'static str,
    engine: Engine,
    collective: Collective,
    algorithm: Algorithm,
    kind: TopologyKind,
    p: usize,
    routing: Routing,
    /// The textbook's time in ns, where it applies.
    closed_form_ns: Option<u64>,
}

/// The physics of `topocomm explain allreduce --size 8B --ts 10us --tw 1ns` (the issue's
/// measurement): t_s 10 µs, t_h 0, t_w 1 ns/B; the tori add t_h 1 µs.
fn links(routing: Routing, th_ns: u64) -> LinkModel {
    LinkModel { ts_ns: 10_000, th_ns, tw_ps: 1_000, routing, packet_bytes: 0 }
}

const SIZE: u64 = 8;

fn cases() -> Vec<Case> {
    let log_p = |p: usize| u64::from(p.trailing_zeros());
    // (t_s + t_w m) log p for the hypercube's broadcast and recursive-doubling all-reduce.
    let hypercube = |p: usize| Some((10_000 + 8) * log_p(p));
    let mut cases = Vec::new();
    for p in [1024, 4096] {
        for (engine, name) in [(Engine::Routers, "routers"), (Engine::Simulator, "simulator")] {
            cases.push(Case {
                name: Box::leak(format!("baseline-{name}-{p}").into_boxed_str()),
                engine,
                collective: Collective::Allreduce,
                algorithm: Algorithm::RecursiveDoubling,
                kind: TopologyKind::Hypercube,
                p,
                routing: Routing::Sf,
                closed_form_ns: hypercube(p),
            });
        }
    }
    cases.push(Case {
        name: "allreduce-65536",
        engine: Engine::Simulator,
        collective: Collective::Allreduce,
        algorithm: Algorithm::RecursiveDoubling,
        kind: TopologyKind::Hypercube,
        p: 1 << 16,
        routing: Routing::Sf,
        closed_form_ns: hypercube(1 << 16),
    });
    cases.push(Case {
        name: "broadcast-1048576",
        engine: Engine::Simulator,
        collective: Collective::Broadcast,
        algorithm: Algorithm::Hypercube,
        kind: TopologyKind::Hypercube,
        p: 1 << 20,
        routing: Routing::Sf,
        closed_form_ns: hypercube(1 << 20),
    });
    for (routing, tag) in [(Routing::Sf, "sf"), (Routing::Ct, "ct")] {
        // [GGKK 4.1.2] on 256 x 256: (t_s + t_h + t_w m)(128 + 128).
        cases.push(Case {
            name: Box::leak(format!("torus-broadcast-{tag}").into_boxed_str()),
            engine: Engine::Simulator,
            collective: Collective::Broadcast,
            algorithm: Algorithm::Mesh,
            kind: TopologyKind::Torus,
            p: 1 << 16,
            routing,
            closed_form_ns: Some((10_000 + 1_000 + 8) * 256),
        });
        cases.push(Case {
            name: Box::leak(format!("torus-allreduce-{tag}").into_boxed_str()),
            engine: Engine::Simulator,
            collective: Collective::Allreduce,
            algorithm: Algorithm::Mesh,
            kind: TopologyKind::Torus,
            p: 1 << 16,
            routing,
            closed_form_ns: None,
        });
    }
    cases
}

/// Runs one case in this process and prints its line (tab-separated, for the parent).
fn run_case(case: &Case) {
    let topology = Topology::new(case.kind, case.p, None).expect("a valid shape");
    let th_ns = if case.kind == TopologyKind::Torus { 1_000 } else { 0 };
    let model = links(case.routing, th_ns);
    let spec = RunSpec { size_bytes: SIZE, ..RunSpec::new(case.collective, case.algorithm) };
    let began = Instant::now();
    let (time_ns, messages, verified) = match case.engine {
        Engine::Simulator => {
            let run = spec::run(&spec, &topology, model, Inputs::Reference, Options::default()).expect("a simulation");
            (run.time_ns, run.totals.messages, run.verified)
        }
        Engine::Routers => {
            let timing = time_on_routers(&spec, &topology, model).expect("the routers' run");
            (timing.time_ns, timing.messages, false)
        }
    };
    let wall = began.elapsed().as_secs_f64();
    let peak = topocomm_node::daemon::allocator::peak_resident_bytes().unwrap_or(0);
    println!("{time_ns}\t{messages}\t{wall}\t{peak}\t{verified}");
}

fn main() {
    let cases = cases();
    if let Ok(name) = std::env::var("TOPOCOMM_BENCH_CASE") {
        let case = cases.iter().find(|case| case.name == name).expect("a known case");
        run_case(case);
        return;
    }
    let wanted: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    let me = std::env::current_exe().expect("this benchmark's path");
    println!(
        "{:<22} {:>9} {:>9} {:>12} {:>12} {:>10} {:>9} {:>13} {:>10} {:>8}",
        "case", "engine", "p", "time µs", "closed µs", "messages", "wall s", "messages/s", "peak MiB", "verified"
    );
    let (mut total_messages, mut total_wall) = (0u64, 0f64);
    for case in cases.iter().filter(|case| wanted.is_empty() || wanted.iter().any(|w| case.name.contains(w.as_str()))) {
        let output = Command::new(&me)
            .env("TOPOCOMM_BENCH_CASE", case.name)
            .output()
            .expect("running a case in a child process");
        assert!(output.status.success(), "{}: {}", case.name, String::from_utf8_lossy(&output.stderr));
        let line = String::from_utf8_lossy(&output.stdout);
        let fields: Vec<&str> = line.trim().split('\t').collect();
        let [time_ns, messages, wall, peak, verified] = fields[..] else { panic!("{}: {line}", case.name) };
        let (time_ns, messages): (u64, u64) = (time_ns.parse().expect("ns"), messages.parse().expect("messages"));
        let (wall, peak): (f64, u64) = (wall.parse().expect("seconds"), peak.parse().expect("bytes"));
        if let Some(closed) = case.closed_form_ns {
            assert_eq!(time_ns, closed, "{}: the closed form holds exactly", case.name);
        }
        if case.engine == Engine::Simulator {
            total_messages += messages;
            total_wall += wall;
        }
        println!(
            "{:<22} {:>9} {:>9} {:>12.3} {:>12} {:>10} {:>9.3} {:>13.0} {:>10.1} {:>8}",
            case.name,
            if case.engine == Engine::Simulator { "simulator" } else { "routers" },
            case.p,
            time_ns as f64 / 1e3,
            case.closed_form_ns.map_or_else(|| "-".to_owned(), |ns| format!("{:.3}", ns as f64 / 1e3)),
            messages,
            wall,
            messages as f64 / wall.max(1e-9),
            peak as f64 / (1 << 20) as f64,
            verified
        );
    }
    if total_wall > 0.0 {
        println!(
            "simulator over these cases: {total_messages} messages in {total_wall:.2} s: {:.0} messages/s on one core",
            total_messages as f64 / total_wall
        );
    }
}
