//! The port model on the simulator: one-port nodes ([GGKK 4]'s assumption: a node sends
//! on one link at a time and receives on one) give the textbook's step counts and times,
//! and all-port nodes (every link at once) what topocomm always gave.

use topocomm_collectives::simulator::Options;
use topocomm_collectives::simulator::spec::{self, Inputs, SimulatedRun};
use topocomm_proto::catalogue::{self, Entry};
use topocomm_proto::spec::{Collective, LinkModel, Ports, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind};

const TS: u64 = 50_000;
const TH: u64 = 3_000;
/// t_w in picoseconds per byte: 2.5 ns.
const TW_PS: u64 = 2_500;

fn links(ports: Ports) -> LinkModel {
    LinkModel { ts_ns: TS, th_ns: TH, tw_ps: TW_PS, routing: Routing::Sf, packet_bytes: 0, ports }
}

fn simulate(entry: &Entry, topology: &Topology, size_bytes: u64, ports: Ports) -> SimulatedRun {
    let spec = RunSpec { size_bytes, shift: 3, ..RunSpec::new(entry.collective, entry.algorithm) };
    spec::run(&spec, topology, links(ports), Inputs::Reference, Options::default())
        .unwrap_or_else(|error| panic!("{} by {} on {topology}, {ports}: {error}", entry.collective, entry.algorithm))
}

#[test]
fn explore() {
    for entry in catalogue::ENTRIES {
        let kind =
            if entry.made_for.includes(TopologyKind::Torus) { TopologyKind::Torus } else { entry.made_for.first() };
        for p in [16, 64, 15, 12, 9] {
            let Ok(topology) = Topology::new(kind, p, None) else { continue };
            let Some(listed) = entry.steps.chain(p as u64, 3) else { continue };
            let spec = RunSpec { size_bytes: 1024, shift: 3, ..RunSpec::new(entry.collective, entry.algorithm) };
            if spec.validate(p).is_err() || !p.is_power_of_two() && kind == TopologyKind::Hypercube {
                continue;
            }
            let one = simulate(entry, &topology, 1024, Ports::One);
            let all = simulate(entry, &topology, 1024, Ports::All);
            println!(
                "{:14} {:22} {kind:9} p={p:3} listed {:?} one {} all {} | time one {} all {}",
                entry.collective.to_string(),
                entry.algorithm.to_string(),
                listed,
                one.steps,
                all.steps,
                one.time_ns,
                all.time_ns
            );
        }
    }
}
