//! `topocomm simulate`: the collective algorithms, unchanged, on the simulator's virtual
//! network (`topocomm_collectives::simulator`) instead of daemons — thousands to millions of
//! nodes in seconds. One point prints what `run` prints (time, frames sent and
//! forwarded, busiest link, steps) plus what the simulation cost; several node counts,
//! topologies or algorithms print a scaling table with the textbook's closed form beside
//! each point that has one, and `--plot` draws time against p.
//!
//! Its parts: `args` (the options), `plan` (the points checked and estimated, and a
//! point's summary); the table, notes and plot are [`crate::render::simulation`]'s.

mod args;
mod plan;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::bail;
use bytesize::ByteSize;
use topocomm_collectives::simulator::spec::RunFailure;
use topocomm_collectives::simulator::{self, LiveCounts, Options, SimulationError};

use crate::control::request;
use crate::render::flow::{self, FlowOutputs};
use crate::render::links::describe_links;
use crate::render::output::outln;
use crate::render::progress::Progress;
use crate::render::quantity::size_text;
use crate::render::simulation::{headline, notes, table};
use crate::tools::explain;
use crate::tools::memory::{self, Exceeded, Limits, MemoryWatch};

pub use args::SimulateArgs;
pub(crate) use args::{MOST_NODES_DRAWN, SIMULATED_TIME_UNDILATED};
pub(crate) use plan::{Planned, describe, plan};

/// Runs `topocomm simulate`.
pub fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    crate::render::check_pictures_built("--plot", args.plot.as_deref())?;
    crate::render::check_pictures_built("--diagram", args.diagram.as_deref())?;
    for (option, path) in [("--plot", &args.plot), ("--trace", &args.trace), ("--diagram", &args.diagram)] {
        if let Some(path) = path {
            crate::render::output::check_file_writable(option, path)?;
        }
    }
    anyhow::ensure!(args.links.dilation.is_none(), SIMULATED_TIME_UNDILATED);
    let (_, predict_with) = request::link_models(&args.links)?;
    let (links, source) = explain::physics(predict_with, &args.links)?;
    let planned = plan(args, links)?;
    let drawn = args.trace.is_some() || args.diagram.is_some();
    if drawn {
        anyhow::ensure!(
            planned.len() == 1 && planned[0].topology.p() <= MOST_NODES_DRAWN,
            "--trace and --diagram draw one point of at most {MOST_NODES_DRAWN} nodes: give one topology, one node \
             count and one algorithm"
        );
    }
    let mut points = Vec::new();
    let mut failures = Vec::new();
    let mut last_events = Vec::new();
    // On a terminal: points done, and how far the one running has come.
    let bar = Progress::new(planned.len());
    for point in &planned {
        let what = format!(
            "{} ({}) on a {}, {} per node",
            point.spec.collective,
            point.spec.what_runs(),
            point.topology,
            size_text(point.spec.size_bytes)
        );
        let live = Arc::new(LiveCounts::default());
        let options = Options {
            run: 1,
            record: drawn,
            wall_limit: Some(args.timeout),
            live: Some(live.clone()),
            ..Options::default()
        };
        let began = Instant::now();
        let p = point.topology.p();
        let running = format!("{} of {p} nodes ({})", point.topology.kind(), point.spec.what_runs());
        let so_far = || {
            format!(
                "{running}: {} done, {} messages, {:.1} µs simulated",
                live.nodes_finished.load(Ordering::Relaxed),
                live.messages.load(Ordering::Relaxed),
                live.virtual_ns.load(Ordering::Relaxed) as f64 / 1e3
            )
        };
        bar.set_message(so_far());
        let limit = args.memory_limit.or_else(memory::default_memory_limit);
        let watched = MemoryWatch::default();
        let simulated = watched.during(&live, Limits { memory: limit, messages: None }, || {
            bar.watching(so_far, || simulator::spec::run(&point.spec, &point.topology, links, point.inputs, options))
        });
        bar.inc();
        match simulated {
            Ok(simulated) => {
                let wall = began.elapsed().as_secs_f64();
                let peak = topocomm_node::daemon::allocator::peak_resident_bytes().map_or_else(String::new, |bytes| {
                    format!(", peak memory so far {}", ByteSize(bytes).display().iec())
                });
                bar.suspend(|| {
                    eprintln!(
                        "simulated {what}: {} messages in {wall:.3} s of wall time ({:.0} messages/s){peak}",
                        simulated.totals.messages,
                        simulated.totals.messages as f64 / wall.max(1e-9)
                    )
                });
                points.push(describe(point, &simulated, &links));
                last_events = simulated.events;
            }
            Err(error) => match (&error, watched.exceeded(), limit) {
                (
                    RunFailure::Simulation(SimulationError::Stopped { at_ns }),
                    Some(Exceeded::Memory(resident)),
                    Some(limit),
                ) => failures.push(format!(
                    "{what}: stopped at {:.3} µs of virtual time, the process holding {} of memory, over the limit of \
                     {} (--memory-limit; the estimate before the run was {}): fewer nodes, a smaller size or \
                     --payload lengths need less",
                    *at_ns as f64 / 1e3,
                    ByteSize(resident).display().iec(),
                    ByteSize(limit).display().iec(),
                    ByteSize(point.estimate).display().iec()
                )),
                _ => failures.push(format!("{what}: {error}")),
            },
        }
    }
    bar.finish();
    if args.json {
        let value = match points.as_slice() {
            [only] if failures.is_empty() => serde_json::to_value(only)?,
            _ => serde_json::json!({ "points": points, "failures": failures }),
        };
        outln!("{}", serde_json::to_string_pretty(&crate::render::schema::versioned(value))?)?;
    } else if !points.is_empty() {
        outln!(
            "{}",
            headline(
                args.goal.is_none().then_some(args.collective),
                args.size,
                args.data.dtype,
                args.data.op,
                &links,
                source.name()
            ) + &crate::render::report::class_words(planned.first().map_or(&[][..], |one| &one.spec.classes))
        )?;
        outln!("{}", table(&points))?;
        for note in notes(&points) {
            outln!("{note}")?;
        }
    }
    if drawn && let ([point], [planned]) = (points.as_slice(), planned.as_slice()) {
        let outputs =
            FlowOutputs { trace: args.trace.as_deref(), diagram: args.diagram.as_deref(), by_steps: args.steps };
        let source = if point.verified { "simulated (verified)" } else { "simulated (lengths only)" };
        flow::write_flow(outputs, &last_events, &planned.spec, &planned.topology, &describe_links(&links), source)?;
    }
    #[cfg(feature = "pictures")]
    if let Some(path) = &args.plot {
        crate::render::simulation::plot(args.collective, args.size, &points, path)?;
    }
    if !failures.is_empty() {
        bail!("{} of {} simulations failed:\n  {}", failures.len(), planned.len(), failures.join("\n  "));
    }
    Ok(())
}
