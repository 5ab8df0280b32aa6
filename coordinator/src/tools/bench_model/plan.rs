//! The benchmark's plan: every case (shape x routing x collective x size) checked and
//! predicted before anything runs, and what each is estimated to take.

use std::time::{Duration, Instant};

use bytesize::ByteSize;
use topocomm_proto::schedule::Schedule;
use topocomm_proto::spec::{Algorithm, Collective, Dilation, LinkModel, MAX_TIMEOUT, MAX_TIMEOUT_MS, Routing, RunSpec};
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::tools::bench_model::args::BenchModelArgs;
use crate::tools::dilation::Messages;
use crate::tools::model::{self, ModelError, Prediction};

/// The shortest deadline of one iteration's waits.
pub(super) const MIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How much longer than the model the estimate takes an iteration to be: software (daemons,
/// loopback TCP, timers) adds to every message; 1.5 is what runs on a shared machine showed.
pub(super) const SLOWDOWN: f64 = 1.5;

/// What the estimate adds per iteration besides (the coordinator's own start signal).
pub(super) const SOFTWARE_PER_ITERATION: Duration = Duration::from_millis(1);

/// What the estimate adds per run (start, reports, verification).
pub(super) const PER_RUN: Duration = Duration::from_millis(20);

/// What the estimate adds per wiring, and per cluster started.
pub(super) const PER_WIRING: Duration = Duration::from_millis(300);

/// One run to make: what, on what, and what the model says of it.
pub(super) struct Case {
    pub(super) topology: Topology,
    pub(super) routing: Routing,
    pub(super) spec: RunSpec,
    pub(super) links: LinkModel,
    /// The model's time of the run (its flow events dropped), or why it has none.
    pub(super) prediction: Result<Prediction, ModelError>,
    /// The model's time of the barrier every iteration starts with, in µs.
    pub(super) barrier_us: f64,
    /// The shortest and longest message of the model's schedule.
    pub(super) messages: Option<Messages>,
}

impl Case {
    pub(super) fn p(&self) -> usize {
        self.topology.p()
    }

    /// The model's time of the run, in µs (0 without one).
    pub(super) fn model_us(&self) -> f64 {
        self.prediction.as_ref().map(Prediction::time_us).unwrap_or(0.0)
    }

    /// What the run should take, warm-up, dilation and overheads included.
    pub(super) fn estimate(&self) -> Duration {
        let dilated = self.spec.dilation.factor() * self.model_us();
        let iteration = Duration::from_secs_f64(SLOWDOWN * (dilated + self.barrier_us) / 1e6) + SOFTWARE_PER_ITERATION;
        iteration * (self.spec.warmup + self.spec.iterations) + PER_RUN
    }

    /// Dilates the run by `dilation`, its deadline with it: ten times the dilated model
    /// (room for a slow machine), never under half a minute.
    pub(super) fn dilate(&mut self, dilation: Dilation) {
        self.spec.dilation = dilation;
        let timeout = Duration::try_from_secs_f64(10.0 * (dilation.factor() * self.model_us() + self.barrier_us) / 1e6)
            .unwrap_or(MAX_TIMEOUT)
            .clamp(MIN_TIMEOUT, MAX_TIMEOUT);
        self.spec.timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(MAX_TIMEOUT_MS);
    }
}

/// Every case to run, predicted; and every shape or size skipped, with why.
pub(super) fn plan(
    args: &BenchModelArgs,
    collectives: &[Collective],
    schedule: Option<&Schedule>,
    links: impl Fn(Routing) -> LinkModel,
) -> anyhow::Result<(Vec<Case>, Vec<String>)> {
    let mut shapes = Vec::new();
    let mut skipped = Vec::new();
    for p in unique(&args.nodes) {
        for kind in unique(&args.topologies) {
            match Topology::new(kind, p, None) {
                Ok(topology) => shapes.push(topology),
                Err(error) => {
                    eprintln!("skipping {kind} with {p} nodes: {error}");
                    skipped.push(format!("{kind} p={p}: {error}"));
                }
            }
        }
    }
    let mut specs = Vec::new();
    for topology in &shapes {
        for &routing in &unique(&args.routings) {
            for &collective in &unique(collectives) {
                for &size_bytes in &unique(&args.sizes) {
                    let spec = RunSpec {
                        run: 0,
                        root: 0,
                        size_bytes,
                        warmup: args.warmup,
                        iterations: args.iterations,
                        shift: 1,
                        emulation: Some(links(routing)),
                        schedule: schedule.map(|schedule| Box::new(schedule.clone())),
                        ..RunSpec::new(collective, catalogue::default_algorithm(collective, topology.kind()))
                    };
                    match spec.validate(topology.p()) {
                        Ok(()) => specs.push((topology.clone(), routing, spec)),
                        Err(error) => {
                            let what =
                                format!("{collective} of {} on {topology}", ByteSize::b(size_bytes).display().iec());
                            eprintln!("skipping {what}: {error}");
                            skipped.push(format!("{what}: {error}"));
                        }
                    }
                }
            }
        }
    }
    let total = specs.len();
    let mut cases = Vec::with_capacity(total);
    let mut barriers: Vec<((usize, TopologyKind, Routing), f64)> = Vec::new();
    let began = Instant::now();
    for (index, (topology, routing, spec)) in specs.into_iter().enumerate() {
        if index % 20 == 0 {
            eprintln!("predicting {}/{total} ({:.1} s)", index + 1, began.elapsed().as_secs_f64());
        }
        let links = links(routing);
        let key = (topology.p(), topology.kind(), routing);
        let barrier_us = match barriers.iter().find(|(k, _)| *k == key) {
            Some(&(_, us)) => us,
            None => {
                let barrier = RunSpec::new(Collective::Barrier, Algorithm::Dissemination);
                let us = model::predict(&barrier, &topology, links).map(|p| p.time_us()).unwrap_or(0.0);
                barriers.push((key, us));
                us
            }
        };
        let prediction = model::predict(&spec, &topology, links);
        let messages = prediction.as_ref().ok().and_then(Messages::of);
        let prediction = prediction.map(|p| Prediction { events: Vec::new(), ..p });
        let mut case = Case { topology, routing, spec, links, prediction, barrier_us, messages };
        // Undilated until a dilation is chosen; this sets the deadline.
        case.dilate(Dilation::NONE);
        cases.push(case);
    }
    eprintln!("predicted {total} runs in {:.1} s", began.elapsed().as_secs_f64());
    Ok((cases, skipped))
}

/// `values` without repeats, in their first order.
pub(super) fn unique<T: PartialEq + Copy>(values: &[T]) -> Vec<T> {
    let mut seen = Vec::with_capacity(values.len());
    for &value in values {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

/// How many different values `values` holds (they come grouped).
pub(super) fn dedup_count<T: PartialEq>(values: impl Iterator<Item = T>) -> usize {
    let mut values: Vec<T> = values.collect();
    values.dedup();
    values.len()
}
