//! Turns what the user typed into a run request: the algorithm (named, or the one made
//! for the topology), the spec, the emulated link physics, their time dilation and the
//! physics to predict with.

use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Args;
use topocomm_proto::control::RunRequest;
use topocomm_proto::network::Placement;
use topocomm_proto::schedule::Schedule;
use topocomm_proto::spec::{
    Algorithm, ClassPhysics, Collective, Dilation, DilationError, Dtype, LinkModel, Ports, ReduceOp, Routing, RunSpec,
};
use topocomm_proto::topology::Routes;
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::control::calibration;
use crate::control::parse::{
    ParseError, parse_algorithm, parse_class, parse_collective, parse_dims, parse_dtype, parse_op, parse_placement,
    parse_ports, parse_routes, parse_routing, parse_size, parse_time, parse_timeout, parse_topology,
};

/// The shape to wire.
#[derive(Debug, Clone, Args)]
pub struct ShapeArgs {
    /// Topology: ring, mesh, torus, mesh3d, torus3d, hypercube, full (direct networks);
    /// fat-tree, dragonfly, cluster (switched: hosts under switches that only forward).
    #[arg(long, short = 't', default_value = "hypercube", value_parser = parse_topology)]
    pub topology: TopologyKind,
    /// Extents for mesh/torus (RxC) and mesh3d/torus3d (AxBxC), default the squarest;
    /// fat-tree K (K-port switches, K³/4 hosts); dragonfly AxPxH (routers a group, hosts a
    /// router, global links a router); cluster MxC (M machines of C cores).
    // `std::vec::Vec`, not `Vec`: clap would read `Option<Vec<_>>` as many values of usize.
    #[arg(long, value_parser = parse_dims)]
    pub dims: Option<std::vec::Vec<usize>>,
    /// A network read from FILE instead of --topology: topocomm's own JSON
    /// (docs/network.schema.json) or a SimGrid platform (.xml: clusters FAT_TREE,
    /// DRAGONFLY, TORUS or flat; hosts, routers, links and routes in zones). Every
    /// endpoint holds a rank (so --nodes is its endpoint count), routes are shortest
    /// paths (the lowest id first on a tie) and every class of links has the file's
    /// physics unless --class says otherwise. Simulated (simulate, explain, topology);
    /// daemons wire the built-in topologies only.
    #[arg(long, value_name = "FILE", conflicts_with = "dims")]
    pub network: Option<std::path::PathBuf>,
    /// Where the ranks sit on a switched network's hosts, and so which ranks share a
    /// machine, an edge switch or a dragonfly group: linear (rank r on host r),
    /// round-robin (the ranks dealt across the machines, edge switches or routers in
    /// turn) or random[:SEED] (a seeded permutation of the hosts, seed 1 by default). A
    /// direct network takes linear only.
    #[arg(long, default_value = "linear", value_parser = parse_placement)]
    pub placement: Placement,
    /// Route policy: fat-tree d-mod-k (the default: up-ports by the destination) or ecmp
    /// (each up-port by a hash of the flow: source, destination, tag); dragonfly minimal
    /// (the default) or valiant[:SEED] (through an intermediate group drawn from the seed,
    /// default 0, and the flow). The direct networks route dimension-order, a fully
    /// connected network, a cluster and a network file shortest-path.
    #[arg(long, value_name = "NAME", value_parser = parse_routes)]
    pub routes: Option<Routes>,
}

impl ShapeArgs {
    /// The topology these options name, of `nodes` nodes (a network file's own count).
    pub fn topology_of(&self, nodes: usize) -> anyhow::Result<Topology> {
        let topology = match &self.network {
            Some(path) => network_topology(path)?,
            None => Topology::new(self.topology, nodes, self.dims.as_deref())?,
        };
        Ok(topology.routed(self.routes)?.placed(self.placement)?)
    }

    /// Refuses, before anything starts, a route policy the topology kind does not take.
    pub fn check_routes(&self) -> anyhow::Result<()> {
        if let Some(routes) = self.routes {
            self.kind().check_routes(routes)?;
        }
        Ok(())
    }

    /// The topology kind these options name.
    pub fn kind(&self) -> TopologyKind {
        if self.network.is_some() { TopologyKind::Graph } else { self.topology }
    }
}

/// The most a network file may hold: 64 MiB of JSON or XML (a SimGrid platform of a
/// large explicit zone is megabytes; its route table is bounded apart, when it is built).
const MAX_NETWORK_FILE_BYTES: u64 = 64 << 20;

/// The network the file at `path` describes, every endpoint a rank. Read as every file
/// a user names is (`files::read_text`: a regular file, bounded, never a FIFO's wait).
pub fn network_topology(path: &std::path::Path) -> anyhow::Result<Topology> {
    let text = topocomm_collectives::files::read_text(path, "network file", MAX_NETWORK_FILE_BYTES)?;
    let description =
        topocomm_proto::netfile::parse_network(&text).with_context(|| format!("reading {}", path.display()))?;
    let graph = description.build().with_context(|| format!("{}", path.display()))?;
    Ok(Topology::from_network(graph, None)?)
}

/// The physics of a run's classes of links: a network file's, then `--class`'s (the
/// later wins).
pub fn class_physics(topology: &Topology, given: &[ClassPhysics]) -> Vec<ClassPhysics> {
    let from_file = match topology.switched().map(|switched| switched.family()) {
        Some(topocomm_proto::network::Family::File(graph)) => graph.class_physics().to_vec(),
        _ => Vec::new(),
    };
    from_file.into_iter().chain(given.iter().cloned()).collect()
}

/// What to run: the collective, its algorithm, the shape and size, the data and the links.
#[derive(Debug, Clone, Args)]
pub struct CollectiveArgs {
    /// The collective: broadcast, reduce, allgather, reduce-scatter, allreduce, scan,
    /// scatter, gather, alltoall, shift, barrier, ping-pong (`topocomm list` shows their
    /// algorithms).
    #[arg(value_parser = parse_collective)]
    pub collective: Collective,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Nodes of the local cluster (ignored with --coordinator, whose cluster has its own size).
    #[arg(long, short = 'n', default_value_t = 8)]
    pub nodes: usize,
    /// Algorithm (`topocomm list` shows each collective's); default the one made for
    /// the topology; `auto` picks by size and p (a run turns to a leaner one where that
    /// does not fit the nodes' memory).
    #[arg(long, short = 'a', value_parser = parse_algorithm)]
    pub algorithm: Option<Algorithm>,
    /// Bytes per node (B, KiB, MiB, GiB, or KB/MB), a whole number of elements.
    #[arg(long, short = 's', default_value = "64KiB", value_parser = parse_size)]
    pub size: u64,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub links: LinkArgs,
    /// Run an MSCCL-IR program (the XML MSCCLang and msccl-tools write) instead of an
    /// algorithm: its `coll` must be the collective given, its `ngpus` --nodes, and
    /// --size (per node, as the collective lays it out) must cut into its chunks.
    #[arg(long, value_name = "FILE.xml", conflicts_with = "algorithm")]
    pub schedule: Option<std::path::PathBuf>,
}

/// The data of a run: the root, the element type, the reduction operator, the shift,
/// whether a scan is exclusive, and the inputs' seed (the options `run`, `sweep` and
/// every command that plans a run share).
#[derive(Debug, Clone, Args)]
pub struct DataArgs {
    /// The root of broadcast, reduce, scatter and gather.
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Element type: i32, i64, f32, f64.
    #[arg(long, default_value = "f64", value_parser = parse_dtype)]
    pub dtype: Dtype,
    /// Reduction operator: sum, prod, min, max.
    #[arg(long, default_value = "sum", value_parser = parse_op)]
    pub op: ReduceOp,
    /// Shift: how many places the data moves (node i's vector ends on node i + Q mod p).
    #[arg(long, default_value_t = 1)]
    pub shift: usize,
    /// Scan: exclusive prefix (node i reduces nodes 0..i; node 0 ends with nothing).
    #[arg(long)]
    pub exclusive: bool,
    /// Seed of the generated inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// How often a run repeats and how long each wait may take (the options `run`,
/// `sweep` and every command that measures runs share).
#[derive(Debug, Clone, Copy, Args)]
pub struct IterationArgs {
    /// Timed iterations.
    #[arg(long, short = 'i', default_value_t = 20)]
    pub iterations: u32,
    /// Untimed warm-up iterations before them.
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Deadline of every wait of one iteration (and of forming the cluster): 1ms to 24h.
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    pub timeout: Duration,
}

impl IterationArgs {
    /// These iterations, dumping every node's data of the last one if `dump`.
    pub fn repetition(&self, dump: bool) -> Repetition {
        Repetition { warmup: self.warmup, iterations: self.iterations, timeout: self.timeout, dump }
    }
}

/// Emulated link physics (none of them: the links run at full speed).
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// Start-up time t_s, paid once per message when its source sends it (e.g. 200us);
    /// `auto`: no emulation, but predict with the t_s, t_h, t_w `topocomm calibrate` fitted.
    #[arg(long, value_parser = parse_time_or_auto)]
    pub ts: Option<Emulated>,
    /// Per-hop time t_h (e.g. 20us).
    #[arg(long, value_parser = parse_time)]
    pub th: Option<u64>,
    /// Per-byte time t_w (e.g. 10ns, 0.5ns).
    #[arg(long, value_parser = parse_time)]
    pub tw: Option<u64>,
    /// A class of links with times of its own, e.g. `--class intra:ts=1us,tw=0.05ns`
    /// (repeatable; `topocomm topology` lists a network's classes: a fat-tree's edge,
    /// aggregation and core, a dragonfly's terminal, local and global, a cluster's intra
    /// and inter); what a class leaves out, --ts, --th and --tw give.
    #[arg(long = "class", value_name = "NAME:ts=..,th=..,tw=..", value_parser = parse_class)]
    pub classes: Vec<ClassPhysics>,
    /// Routing of emulated links: sf (store-and-forward) or ct (cut-through packets).
    #[arg(long, default_value = "sf", value_parser = parse_routing)]
    pub routing: Routing,
    /// Port model of emulated links: `all` (every link of a node carries its own frames
    /// at once) or `one` (the textbook's: a node sends one frame at a time over all its
    /// links, and receives one at a time).
    #[arg(long, default_value = "all", value_parser = parse_ports)]
    pub ports: Ports,
    /// Cut-through packet size: messages then travel as real packets that every hop passes
    /// on as they arrive. Without it, cut-through is emulated in the limit of small packets
    /// (a hop passes a message on t_h after its tail arrived), free of per-packet overhead.
    #[arg(long, value_parser = parse_size)]
    pub packet: Option<u64>,
    /// Time dilation of emulated links: the emulated world runs K times slower than the
    /// wall clock (every t_s, t_h, t_w lasts K times longer), so the software's own costs
    /// shrink by K against it; every reported time is emulated time. `auto` (the default
    /// with emulated links) measures how late this cluster's software makes a step of
    /// every node sending at once and takes the smallest K that keeps that under 3 % of
    /// the run's messages. Raw links are never dilated.
    #[arg(long, value_name = "K|auto", value_parser = parse_dilation)]
    pub dilation: Option<Dilating>,
}

/// `--dilation`: a factor, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dilating {
    /// Exactly this factor.
    By(Dilation),
    /// The smallest factor this cluster needs for this run (`tools::dilation`).
    Auto,
}

/// Parses `--dilation`: `auto`, or a factor from 1 to 1000 (`4`, `2.5`).
pub fn parse_dilation(text: &str) -> Result<Dilating, DilationError> {
    if text.trim().eq_ignore_ascii_case("auto") { Ok(Dilating::Auto) } else { text.parse().map(Dilating::By) }
}

/// Why `--dilation` was refused where links run raw.
pub const RAW_LINKS_UNDILATED: &str = "--dilation applies to emulated links (--ts, --th, --tw): raw links run at the machine's own speed and are never dilated";

/// Why `--ports one` was refused where links run raw.
pub const RAW_LINKS_ALL_PORT: &str = "--ports one applies to emulated links (--ts, --th, --tw): raw links carry what the \
                                      machine carries, on every link at once";

/// The plan of a run that starts nodes: the request `what` describes, refused where it
/// asks for one-port nodes on raw links, which only emulated links can make one-port
/// (`explain` and `simulate` model them with their default physics instead).
pub fn plan_live(what: &CollectiveArgs, repetition: Repetition) -> anyhow::Result<Planned> {
    let planned = plan(what, repetition)?;
    anyhow::ensure!(what.links.ports == Ports::All || planned.request.spec.emulation.is_some(), RAW_LINKS_ALL_PORT);
    Ok(planned)
}

/// `--ts`: a time in picoseconds, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emulated {
    Picos(u64),
    Auto,
}

/// Parses `--ts`: a time, or `auto`.
fn parse_time_or_auto(text: &str) -> Result<Emulated, ParseError> {
    if text.eq_ignore_ascii_case("auto") { Ok(Emulated::Auto) } else { parse_time(text).map(Emulated::Picos) }
}

/// A request and the link physics its prediction uses (if any).
#[derive(Debug, Clone)]
pub struct Planned {
    pub request: RunRequest,
    pub predict_with: Option<LinkModel>,
    /// The run's dilation is still to be chosen (`--dilation auto`, the default with
    /// emulated links); the request's spec holds none until then.
    pub auto_dilation: bool,
}

/// How many times to run and how long each iteration may wait.
#[derive(Debug, Clone, Copy)]
pub struct Repetition {
    pub warmup: u32,
    pub iterations: u32,
    pub timeout: Duration,
    pub dump: bool,
}

/// The request `what` describes, repeated as `repetition` says.
pub fn plan(what: &CollectiveArgs, repetition: Repetition) -> anyhow::Result<Planned> {
    what.shape.check_routes()?;
    let algorithm = what.algorithm.unwrap_or_else(|| catalogue::default_algorithm(what.collective, what.shape.kind()));
    catalogue::check(what.collective, algorithm)?;
    let (emulation, predict_with) = link_models(&what.links)?;
    let (dilation, auto_dilation) = match (what.links.dilation, emulation) {
        (Some(_), None) => anyhow::bail!(RAW_LINKS_UNDILATED),
        (None, None) => (Dilation::NONE, false),
        (Some(Dilating::By(factor)), Some(_)) => (factor, false),
        (Some(Dilating::Auto) | None, Some(_)) => (Dilation::NONE, true),
    };
    let classes = match &what.shape.network {
        Some(_) => class_physics(&what.shape.topology_of(what.nodes)?, &what.links.classes),
        None => what.links.classes.clone(),
    };
    let mut spec = RunSpec {
        emulation,
        classes,
        dilation,
        ..run_spec(what.collective, algorithm, what.size, &what.data, repetition)?
    };
    if let Some(path) = &what.schedule {
        spec.schedule = Some(Box::new(read_schedule(path, what.collective)?));
    }
    let request = RunRequest {
        topology: what.shape.kind(),
        dims: what.shape.dims.clone(),
        routes: what.shape.routes,
        placement: what.shape.placement,
        spec,
    };
    Ok(Planned { request, predict_with, auto_dilation })
}

/// The MSCCL-IR program at `path`, played with no data first (it must finish), for
/// `collective`.
pub fn read_schedule(path: &std::path::Path, collective: Collective) -> anyhow::Result<Schedule> {
    let schedule = topocomm_collectives::algorithms::schedule::read_msccl(path).map_err(anyhow::Error::msg)?;
    if let Schedule::Msccl(program) = &schedule {
        anyhow::ensure!(
            program.collective == collective,
            "{}: the program is for {} (coll=\"{}\"), but the command asks for {collective}",
            path.display(),
            program.collective,
            topocomm_collectives::algorithms::schedule::msccl::coll_name(program.collective)
        );
    }
    Ok(schedule)
}

/// The spec of `collective` by `algorithm` on `size_bytes` per node with `data`,
/// repeated as `repetition` says (full-speed links, no trace: the caller adds those). A
/// barrier moves no data, whatever `--size` says: its spec (and so its report) says 0 bytes.
pub fn run_spec(
    collective: Collective,
    algorithm: Algorithm,
    size_bytes: u64,
    data: &DataArgs,
    repetition: Repetition,
) -> anyhow::Result<RunSpec> {
    let timeout_ms = u64::try_from(repetition.timeout.as_millis())
        .map_err(|_| anyhow!("--timeout {:?} does not fit in 64-bit milliseconds", repetition.timeout))?;
    Ok(RunSpec {
        run: 0,
        collective,
        algorithm,
        root: data.root,
        size_bytes: if collective == Collective::Barrier { 0 } else { size_bytes },
        dtype: data.dtype,
        op: data.op,
        seed: data.seed,
        warmup: repetition.warmup,
        iterations: repetition.iterations,
        timeout_ms,
        dump: repetition.dump,
        shift: data.shift,
        exclusive: data.exclusive,
        emulation: None,
        classes: Vec::new(),
        dilation: Dilation::NONE,
        probe: false,
        trace: false,
        clock_offsets_ns: Vec::new(),
        schedule: None,
    })
}

/// Extra patience for wiring and reporting on top of the run's own deadlines.
const CLIENT_SLACK: Duration = Duration::from_secs(60);

/// How long a client waits for a serving coordinator to answer `spec`: the run's own
/// deadline, one more timeout (the wait for the cluster), and slack for wiring and
/// reporting. Saturating: an invalid spec is refused by the coordinator, not here.
pub fn client_patience(spec: &RunSpec) -> Duration {
    let run = spec.run_deadline().unwrap_or(Duration::MAX);
    run.saturating_add(spec.timeout()).saturating_add(CLIENT_SLACK)
}

/// The emulation to run with and the link physics to predict with, from `--ts/--th/--tw`:
/// explicit values emulate and predict; `--ts auto` only predicts, with the calibration.
pub fn link_models(links: &LinkArgs) -> anyhow::Result<(Option<LinkModel>, Option<LinkModel>)> {
    let packet_bytes = match links.packet {
        None => 0,
        Some(bytes) => u32::try_from(bytes).ok().filter(|&p| p > 0).context("--packet must be 1 B to 4 GiB")?,
    };
    if links.ts == Some(Emulated::Auto) {
        anyhow::ensure!(
            links.th.is_none() && links.tw.is_none(),
            "--ts auto takes t_h and t_w from the calibration too"
        );
        let fitted = calibration::load()?;
        return Ok((None, Some(LinkModel { routing: Routing::Sf, ports: links.ports, ..fitted })));
    }
    let ts = match links.ts {
        Some(Emulated::Picos(ps)) => Some(ps),
        _ => None,
    };
    if ts.is_none() && links.th.is_none() && links.tw.is_none() {
        return Ok((None, None));
    }
    let model = LinkModel {
        ts_ns: ts.unwrap_or(0) / 1000,
        th_ns: links.th.unwrap_or(0) / 1000,
        tw_ps: links.tw.unwrap_or(0),
        routing: links.routing,
        packet_bytes,
        ports: links.ports,
    };
    Ok((Some(model), Some(model)))
}
