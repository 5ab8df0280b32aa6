//! A local cluster on this machine: an in-process coordinator on 127.0.0.1 and `nodes`
//! node daemons as child processes (this same executable in its `node` role), each
//! logging to a file in a folder of this user's own for this run. Children die with the
//! cluster: on shutdown, on drop, and — since they exit when their control link closes —
//! even if this process is killed. They get the cluster's token and mode from it alone:
//! nothing of a served cluster the user's shell names reaches them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytesize::ByteSize;
use rand::Rng;
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use topocomm_collectives::simulator::spec::Inputs;
use topocomm_collectives::simulator::{self, Options};
use topocomm_node::daemon::limits;
use topocomm_proto::auth::Key;
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::frame::{DEFAULT_MAX_FRAME, FrameHeader};
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, RunSpec, SpecError};
use topocomm_proto::topology::TopologyKind;
use topocomm_proto::{NodeId, Topology};

use crate::control::run::Coordinator;
use crate::control::server;
use topocomm_collectives::tuning::{Known, Tuning};
use topocomm_node::transport::stream::STREAM_LINKS;

/// What one node daemon process costs before any run: its resident memory. Measured on
/// Linux x86-64 (release build): the VmRSS of every daemon while `topocomm run allreduce
/// --nodes 8 --topology hypercube` (64 KiB) ran was 6.7-7.0 MiB; rounded up. A run's own
/// memory comes on top ([`Footprint::of_node`](topocomm_collectives::tuning::footprint::Footprint::of_node)).
pub const NODE_BASE_RSS: u64 = 8 << 20;

/// Threads (each a task in the kernel's process and pid accounting) one node daemon
/// may have. Measured in the same run: 2 (the runtime's thread and one blocking thread
/// for inputs and checks); twice that leaves room for the blocking pool to grow.
pub const NODE_THREADS: u64 = 4;

/// File descriptors the coordinator holds per local node: the node's control connection
/// and the child's pidfd (counted in /proc/PID/fd in the same run: 8 sockets and 8
/// pidfds for 8 nodes, 28 in all).
pub const FDS_PER_NODE: u64 = 2;

/// File descriptors the coordinator needs whatever the number of nodes: standard
/// streams, the runtime's, the listener and the libraries'.
pub const FDS_BASE: u64 = 64;

/// The longest message a local cluster's link carries: its nodes take frames of up to
/// [`DEFAULT_MAX_FRAME`] bytes, and a message is one frame, its header included.
pub const LONGEST_MESSAGE: u64 = (DEFAULT_MAX_FRAME - FrameHeader::ENCODED_LEN) as u64;

/// Wall time the schedule's simulation may take to find a run's longest message; past
/// it the run goes ahead unchecked (a node still refuses a frame over its limit).
const MESSAGE_CHECK_PATIENCE: Duration = Duration::from_secs(20);

/// Why this machine cannot hold a local cluster (or a run on it).
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error("--nodes {nodes} is more than this machine allows: at most {allowed} local nodes by {limit}")]
    TooManyNodes { nodes: usize, allowed: u64, limit: String },
    #[error(
        "{collective} by {algorithm} of {} per node on {p} nodes sends a message of {} (node {from} to node {to}), \
         longer than a link carries: at most {LONGEST_MESSAGE} bytes (frames of {} less their {}-byte header); \
         give --size {} or less",
        ByteSize(*.size),
        ByteSize(*.longest),
        ByteSize(DEFAULT_MAX_FRAME as u64),
        FrameHeader::ENCODED_LEN,
        size_argument(*.fits)
    )]
    MessageTooLong {
        collective: Collective,
        algorithm: Algorithm,
        size: u64,
        p: usize,
        longest: u64,
        from: NodeId,
        to: NodeId,
        /// A size whose messages fit (they grow with the size: this one scales the longest down).
        fits: u64,
    },
    #[error(
        "the {schedule} sends a message of {} (node {from} to node {to}), longer than a link carries: at most \
         {LONGEST_MESSAGE} bytes (frames of {} less their {}-byte header)",
        ByteSize(*.longest),
        ByteSize(DEFAULT_MAX_FRAME as u64),
        FrameHeader::ENCODED_LEN
    )]
    ScheduleMessageTooLong { schedule: String, longest: u64, from: usize, to: usize },
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// The limits of this machine (and this process) that bound a local cluster; `None`
/// where a limit cannot be read (it then bounds nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// This process's soft `RLIMIT_NOFILE`, after raising it to the hard limit.
    pub open_files: u64,
    /// The tightest of the kernel's task limits, and which one it is.
    pub tasks: Option<(u64, &'static str)>,
    /// Kernel tasks (threads) that exist already, on the whole machine.
    pub tasks_running: u64,
    /// Memory this process may still use ([`topocomm_node::daemon::allocator::available_bytes`]).
    pub memory: Option<u64>,
}

impl Capacity {
    /// Reads the limits: `RLIMIT_NOFILE` (raised to its hard limit first), `RLIMIT_NPROC`,
    /// `/proc/sys/kernel/threads-max`, `/proc/sys/kernel/pid_max`, the tasks counted in
    /// `/proc/loadavg`, and the available memory.
    pub fn of_this_machine() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).ok().and_then(|text| text.trim().parse::<u64>().ok());
        let tasks = [
            (limits::process_limit(), "the process limit (RLIMIT_NPROC)"),
            (read("/proc/sys/kernel/threads-max"), "the kernel's thread limit (/proc/sys/kernel/threads-max)"),
            (read("/proc/sys/kernel/pid_max"), "the kernel's pid limit (/proc/sys/kernel/pid_max)"),
        ]
        .into_iter()
        .filter_map(|(limit, name)| limit.map(|limit| (limit, name)))
        .min_by_key(|&(limit, _)| limit);
        // The fourth field of /proc/loadavg is "running/total" kernel scheduling entities.
        let tasks_running = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|text| text.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok())
            .unwrap_or(0);
        Capacity {
            open_files: limits::raise_open_file_limit(),
            tasks,
            tasks_running,
            memory: topocomm_node::daemon::allocator::available_bytes(),
        }
    }

    /// Refuses `nodes` node processes beyond any limit, naming the tightest one.
    pub fn check_nodes(&self, nodes: usize) -> Result<(), CapacityError> {
        let mut bounds = vec![(
            self.open_files.saturating_sub(FDS_BASE) / FDS_PER_NODE,
            format!(
                "the open-file limit (RLIMIT_NOFILE {}: the coordinator needs {FDS_PER_NODE} per node + {FDS_BASE})",
                self.open_files
            ),
        )];
        if let Some((limit, name)) = self.tasks {
            let free = limit.saturating_sub(self.tasks_running);
            bounds.push((
                free / NODE_THREADS,
                format!("{name}: {free} of {limit} tasks free, {NODE_THREADS} threads per node process"),
            ));
        }
        if let Some(memory) = self.memory {
            bounds.push((
                memory / NODE_BASE_RSS,
                format!("memory: {} available, about {} per node process", ByteSize(memory), ByteSize(NODE_BASE_RSS)),
            ));
        }
        let (allowed, limit) = bounds.into_iter().min_by_key(|(allowed, _)| *allowed).expect("the open-file bound");
        if u64::try_from(nodes).map_or(true, |nodes| nodes > allowed) {
            return Err(CapacityError::TooManyNodes { nodes, allowed, limit });
        }
        Ok(())
    }

    /// Refuses `spec` on `nodes` local node processes of `topology`: too many nodes
    /// ([`Capacity::check_nodes`]), or a run whose memory, summed over the nodes
    /// ([`Footprint::of_nodes`](topocomm_collectives::tuning::footprint::Footprint::of_nodes): the root of a scatter or gather needs more than the
    /// others), exceeds what this machine has available once every process has its base.
    /// `auto` is resolved as the coordinator will, a leaner algorithm where its pick does
    /// not fit ([`Tuning::resolve_checked`]); returns the spec so resolved.
    pub fn check_run(
        &self,
        spec: &RunSpec,
        topology: TopologyKind,
        nodes: usize,
        tuning: &Tuning,
    ) -> Result<RunSpec, CapacityError> {
        self.check_nodes(nodes)?;
        tuning.resolve_checked(spec, Known::Shape(topology, nodes), |spec| self.check_memory(spec, nodes, tuning))
    }

    /// Refuses `spec` if `nodes` local node processes cannot hold it together.
    fn check_memory(&self, spec: &RunSpec, nodes: usize, tuning: &Tuning) -> Result<(), CapacityError> {
        let Some(memory) = self.memory else { return Ok(()) };
        let count = u64::try_from(nodes).unwrap_or(u64::MAX);
        let available = memory.saturating_sub(count.saturating_mul(NODE_BASE_RSS));
        let holder = format!(
            "the {nodes} local nodes ({} on this machine, less {} per node process)",
            ByteSize(memory),
            ByteSize(NODE_BASE_RSS)
        );
        tuning.footprint.check(spec, nodes, 0..nodes, available, &holder)?;
        Ok(())
    }
}

/// Refuses `spec` (its algorithm resolved) on `topology` if one of its messages is longer
/// than a local cluster's link carries ([`LONGEST_MESSAGE`]), before any process starts.
/// A schedule's longest message is read off the schedule.
/// No message of any algorithm is longer than p blocks of the size (the most any node
/// holds: a gathered result, a scatter's or all-to-all's input; held by a test below),
/// so a run under that bound is let through at once. Otherwise the run's own schedule
/// is simulated, lengths only, on links as the run's are (raw links send long vectors
/// in segments), and its longest message is the answer. A simulation that fails or
/// takes too long refuses nothing: the nodes still refuse a frame over their limit.
pub fn check_messages(spec: &RunSpec, topology: &Topology) -> Result<(), CapacityError> {
    let p = topology.p();
    // A schedule's messages are read off it: a GOAL file's sizes are its own, not --size's.
    if let Some(schedule) = &spec.schedule {
        return match schedule.longest_message(p, spec.size_bytes, spec.dtype) {
            Some((longest, from, to)) if longest > LONGEST_MESSAGE => {
                Err(CapacityError::ScheduleMessageTooLong { schedule: schedule.describe(), longest, from, to })
            }
            _ => Ok(()),
        };
    }
    if spec.size_bytes.saturating_mul(p as u64) <= LONGEST_MESSAGE {
        return Ok(());
    }
    let Some(longest) = longest_message(spec, topology) else { return Ok(()) };
    if longest.bytes <= LONGEST_MESSAGE {
        return Ok(());
    }
    // Rounded down to a size as users type it (whole MiB or KiB: whole elements of any type).
    let scaled = u128::from(spec.size_bytes) * u128::from(LONGEST_MESSAGE) / u128::from(longest.bytes);
    let scaled = u64::try_from(scaled).unwrap_or(u64::MAX);
    let unit = [1 << 20, 1 << 10].into_iter().find(|&unit| scaled >= unit).unwrap_or(spec.dtype.size() as u64);
    let fits = scaled / unit * unit;
    Err(CapacityError::MessageTooLong {
        collective: spec.collective,
        algorithm: spec.algorithm,
        size: spec.size_bytes,
        p,
        longest: longest.bytes,
        from: longest.src,
        to: longest.dst,
        fits,
    })
}

/// `bytes` as `--size` takes it: `255MiB`, `12KiB` or `40B`.
fn size_argument(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// The longest message `spec` sends on `topology`, by its schedule on the simulator;
/// `None` if the simulation does not finish.
fn longest_message(spec: &RunSpec, topology: &Topology) -> Option<FlowEvent> {
    // Emulated physics change when messages go, not how long they are; raw links get
    // nominal ones.
    let links = spec.emulation.unwrap_or(LinkModel::NOMINAL);
    let options = Options {
        run: spec.run,
        record: true,
        wall_limit: Some(MESSAGE_CHECK_PATIENCE),
        links: match spec.emulation {
            None => STREAM_LINKS,
            Some(_) => STREAM_LINKS.emulated(),
        },
        ..Options::default()
    };
    let simulated = simulator::spec::run(spec, topology, links, Inputs::Lengths, options).ok()?;
    simulated.events.into_iter().filter(|event| event.kind == FlowKind::Send).max_by_key(|event| event.bytes)
}

/// A coordinator and its node processes.
pub struct LocalCluster {
    pub coordinator: Arc<Coordinator>,
    pub address: String,
    pub logs: PathBuf,
    children: Vec<Child>,
    server: JoinHandle<()>,
}

/// Variables a node daemon reads that say which cluster it joins and how
/// (`topocomm_node::daemon::NodeArgs`, `topocomm_node::security::SecurityArgs`). A user who
/// exported them for a served cluster (the README suggests `TOPOCOMM_TOKEN_FILE`) must
/// not have them steer the local cluster's children: the file would win over the local
/// token and no child could register. Every variable named `TOPOCOMM_TOKEN*` goes too.
/// The logging and congestion-control variables are the user's to pass on.
const CLUSTER_ENV: &[&str] =
    &["TOPOCOMM_COORDINATOR", "TOPOCOMM_ENCRYPT", "TOPOCOMM_LISTEN", "TOPOCOMM_ADVERTISE", "TOPOCOMM_NODE_NAME"];

/// Whether the variable `name` says which cluster a node joins ([`CLUSTER_ENV`]).
fn names_a_cluster(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with("TOPOCOMM_TOKEN") || CLUSTER_ENV.contains(&name.as_ref())
}

/// The folder a local cluster's node logs go to: `given` (`--logs`), or a fresh folder
/// of this run's own, `run-<UTC time>-<pid>`, inside this user's folder for topocomm —
/// `$XDG_RUNTIME_DIR/topocomm` where the system gives each user one (and it exists), else
/// `topocomm-<user>` in the temporary directory. Logs of different runs never mix, and
/// a folder another user made first is never written to: this user's folder must be a
/// directory (not a link) that this user owns and no one else may write to.
pub fn log_folder(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(given) = given {
        return Ok(given.to_owned());
    }
    let user_folder = match std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|dir| Path::new(dir).is_absolute() && Path::new(dir).is_dir())
    {
        Some(runtime) => PathBuf::from(runtime).join("topocomm"),
        None => std::env::temp_dir().join(format!("topocomm-{}", user_name())),
    };
    own_private_folder(&user_folder)?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace([':', '-'], "");
    let run = user_folder.join(format!("run-{stamp}-{}", std::process::id()));
    std::fs::create_dir(&run).with_context(|| format!("creating the log folder {}", run.display()))?;
    Ok(run)
}

/// This user's name as the environment gives it (`USER`, `LOGNAME`) when it is a plain
/// name, else the user id.
fn user_name() -> String {
    let plain = |name: &String| {
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|variable| std::env::var(variable).ok())
        .find(plain)
        .unwrap_or_else(|| user_id().map_or_else(|| "unknown".to_owned(), |uid| uid.to_string()))
}

/// This process's user id (the owner of `/proc/self`), where there is a `/proc`.
fn user_id() -> Option<u32> {
    #[cfg(unix)]
    return std::fs::metadata("/proc/self").ok().map(|meta| std::os::unix::fs::MetadataExt::uid(&meta));
    #[cfg(not(unix))]
    None
}

/// Makes `folder` (mode 0700) if it does not exist; refuses one that is a link, is not a
/// directory, belongs to another user or others may write to.
fn own_private_folder(folder: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(folder) {
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        other => other.with_context(|| format!("creating the log folder {}", folder.display()))?,
    }
    let meta = std::fs::symlink_metadata(folder).with_context(|| format!("reading {}", folder.display()))?;
    let refuse = |why: &str| anyhow::anyhow!("{} {why}: give the node logs a folder with --logs DIR", folder.display());
    if !meta.is_dir() {
        return Err(refuse("is not a directory"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if user_id().is_some_and(|uid| uid != meta.uid()) {
            return Err(refuse(&format!("belongs to user id {}, not this user", meta.uid())));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(refuse(&format!("may be written by others (mode {:o})", meta.mode() & 0o7777)));
        }
    }
    Ok(())
}

/// A fresh random cluster token.
pub fn random_token() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `token` to a new file that only its owner can read.
pub fn write_token_file(path: &Path, token: &str) -> anyhow::Result<()> {
    let mut file = topocomm_collectives::files::create_private(path, 0o600)
        .with_context(|| format!("creating the token file {}", path.display()))?;
    std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes())
        .with_context(|| format!("writing the token file {}", path.display()))
}

/// The name of node `index` in a cluster of `nodes` (zero-padded so names sort as ids).
pub fn node_name(index: usize, nodes: usize) -> String {
    let width = nodes.saturating_sub(1).to_string().len();
    format!("node-{index:0width$}")
}

/// The name of switch `index` of `switches` (zero-padded so names sort as ids, after
/// every node's).
pub fn switch_name(index: usize, switches: usize) -> String {
    let width = switches.saturating_sub(1).to_string().len();
    format!("switch-{index:0width$}")
}

/// The processes a local cluster of `topology` runs, as its first line says: "8 node
/// processes", or "16 node processes + 20 switch processes".
pub fn processes(topology: &Topology) -> String {
    let nodes = format!("{} node process{}", topology.p(), if topology.p() == 1 { "" } else { "es" });
    match topology.switches() {
        0 => nodes,
        1 => format!("{nodes} + 1 switch process"),
        switches => format!("{nodes} + {switches} switch processes"),
    }
}

impl LocalCluster {
    /// Starts the coordinator (resolving `auto` by `tuning`) and `nodes` daemons, logging
    /// to `logs/node-<i>.log`, every link encrypted if asked; refuses, before anything
    /// starts, more nodes than this machine allows ([`Capacity::check_nodes`]). The random
    /// token reaches the children in their environment, never on a command line.
    pub async fn start(nodes: usize, logs: &Path, encrypted: bool, tuning: Arc<Tuning>) -> anyhow::Result<Self> {
        Self::start_daemons(nodes, 0, logs, encrypted, tuning).await
    }

    /// [`LocalCluster::start`] for `topology`: a daemon for each of its vertices, its
    /// ranks named `node-<i>` (ids `0..p`), then its switches `switch-<j>` (ids `p + j`,
    /// as the names sort).
    pub async fn start_for(
        topology: &Topology,
        logs: &Path,
        encrypted: bool,
        tuning: Arc<Tuning>,
    ) -> anyhow::Result<Self> {
        Self::start_daemons(topology.p(), topology.switches(), logs, encrypted, tuning).await
    }

    async fn start_daemons(
        nodes: usize,
        switches: usize,
        logs: &Path,
        encrypted: bool,
        tuning: Arc<Tuning>,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(nodes >= 1, "--nodes must be at least 1");
        let daemons = nodes + switches;
        Capacity::of_this_machine().check_nodes(daemons)?;
        std::fs::create_dir_all(logs).with_context(|| format!("creating the log folder {}", logs.display()))?;
        let token = random_token();
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding the coordinator on 127.0.0.1")?;
        let address = listener.local_addr()?.to_string();
        let coordinator = Arc::new(Coordinator::new(daemons, Key::from_token(&token), encrypted).tuned(tuning));
        let server = tokio::spawn(server::serve(listener, coordinator.clone()));
        let executable = std::env::current_exe().context("finding this executable to start nodes")?;
        let mut children = Vec::with_capacity(daemons);
        for index in 0..daemons {
            let name = match index.checked_sub(nodes) {
                None => node_name(index, nodes),
                Some(switch) => switch_name(switch, switches),
            };
            let log_path = logs.join(format!("{name}.log"));
            let log = topocomm_collectives::files::create(&log_path)
                .with_context(|| format!("creating {}", log_path.display()))?;
            let mut command = Command::new(&executable);
            for (variable, _) in std::env::vars_os().filter(|(name, _)| names_a_cluster(name)) {
                command.env_remove(variable);
            }
            let child = command
                .args([
                    "node",
                    "--coordinator",
                    &address,
                    "--name",
                    &name,
                    "--listen",
                    "127.0.0.1:0",
                    "--exit-with-coordinator",
                ])
                .env("TOPOCOMM_TOKEN", &token)
                .env("TOPOCOMM_ENCRYPT", if encrypted { "true" } else { "false" })
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting node process {name}"))?;
            children.push(child);
        }
        Ok(LocalCluster { coordinator, address, logs: logs.to_owned(), children, server })
    }

    /// Stops every node process and waits for each to be gone.
    pub async fn shutdown(mut self) {
        // The nodes leave now because they are told to: not nodes lost.
        self.coordinator.cluster.stop();
        for child in &mut self.children {
            let _ = child.start_kill();
        }
        for child in &mut self.children {
            let _ = child.wait().await;
        }
        self.server.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TopologyKind::Hypercube;
    use topocomm_proto::catalogue;
    use topocomm_proto::spec::{Algorithm, Collective};

    const GIB: u64 = 1 << 30;

    /// This machine as the task describes it: 24 GiB, fd hard limit 20000, pid_max 32768.
    fn machine() -> Capacity {
        Capacity {
            open_files: 20_000,
            tasks: Some((32_768, "the kernel's pid limit (/proc/sys/kernel/pid_max)")),
            tasks_running: 120,
            memory: Some(23 * GIB),
        }
    }

    fn too_many(result: Result<(), CapacityError>) -> (u64, String) {
        match result {
            Err(CapacityError::TooManyNodes { allowed, limit, .. }) => (allowed, limit),
            other => panic!("expected TooManyNodes, got {other:?}"),
        }
    }

    #[test]
    fn a_thousand_nodes_fit_and_the_tightest_limit_refuses_more() {
        let machine = machine();
        machine.check_nodes(1).unwrap();
        machine.check_nodes(1024).unwrap();
        machine.check_nodes(2048).unwrap();
        // 23 GiB / 8 MiB = 2944 node processes; fds allow 9968, pids 8162.
        machine.check_nodes(2944).unwrap();
        let (allowed, limit) = too_many(machine.check_nodes(2945));
        assert_eq!(allowed, 2944);
        assert!(limit.starts_with("memory: 23.0 GiB available"), "{limit}");
        let error = machine.check_nodes(100_000).unwrap_err().to_string();
        assert!(error.starts_with("--nodes 100000 is more than this machine allows: at most 2944"), "{error}");
    }

    #[test]
    fn each_limit_can_be_the_one_that_stops_it() {
        let fds = Capacity { open_files: 1024, ..machine() };
        let (allowed, limit) = too_many(fds.check_nodes(1000));
        assert_eq!(allowed, (1024 - FDS_BASE) / FDS_PER_NODE);
        assert!(limit.contains("RLIMIT_NOFILE 1024"), "{limit}");
        let tasks = Capacity { tasks: Some((4096, "the process limit (RLIMIT_NPROC)")), ..machine() };
        let (allowed, limit) = too_many(tasks.check_nodes(1024));
        assert_eq!(allowed, (4096 - 120) / NODE_THREADS);
        assert!(limit.contains("RLIMIT_NPROC") && limit.contains("3976 of 4096 tasks free"), "{limit}");
        let busy = Capacity { tasks_running: 40_000, ..machine() };
        assert_eq!(too_many(busy.check_nodes(1)).0, 0);
        // Unknown limits bound nothing but the descriptors.
        let unknown = Capacity { tasks: None, memory: None, ..machine() };
        unknown.check_nodes(9968).unwrap();
        assert_eq!(too_many(unknown.check_nodes(9969)).0, 9968);
        assert_eq!(too_many(machine().check_nodes(usize::MAX)).0, 2944);
    }

    /// The spec of `collective` by `algorithm` of `size` per node, raw links or emulated.
    fn spec_of(collective: Collective, algorithm: Algorithm, size: u64, emulated: bool) -> RunSpec {
        let links = LinkModel { tw_ps: 1, ..LinkModel::NOMINAL };
        RunSpec { size_bytes: size, emulation: emulated.then_some(links), ..RunSpec::new(collective, algorithm) }
    }

    /// What [`check_messages`] lets through at once holds: on the topology each algorithm
    /// is made for, at 16 nodes and at 12 where it serves them, raw and emulated, no
    /// message is longer than p blocks of the size.
    #[test]
    fn no_message_is_longer_than_p_blocks_of_the_size() {
        let mut checked = 0;
        for entry in catalogue::ENTRIES {
            let kind =
                if entry.made_for.includes(TopologyKind::Torus) { TopologyKind::Torus } else { entry.made_for.first() };
            for p in [16, 12] {
                let Ok(topology) = Topology::new(kind, p, None) else { continue };
                for emulated in [false, true] {
                    let spec = spec_of(entry.collective, entry.algorithm, 2 << 20, emulated);
                    if spec.validate(p).is_err() {
                        continue;
                    }
                    let Some(longest) = longest_message(&spec, &topology) else {
                        if matches!(entry.collective, Collective::Barrier) {
                            continue;
                        }
                        panic!("{} by {} on {topology}: no message", entry.collective, entry.algorithm);
                    };
                    let bound = spec.size_bytes * p as u64;
                    assert!(
                        longest.bytes <= bound,
                        "{} by {} on {topology} sends {} bytes, over p blocks ({bound})",
                        entry.collective,
                        entry.algorithm,
                        longest.bytes
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 2 * 40, "only {checked} schedules were checked");
    }

    #[test]
    fn a_message_longer_than_a_frame_is_refused_naming_the_limit() {
        let hypercube = |p| Topology::new(Hypercube, p, None).unwrap();
        // A broadcast sends the whole vector: 264 MiB does not fit a 256 MiB frame.
        let broadcast = spec_of(Collective::Broadcast, Algorithm::Hypercube, 264 << 20, false);
        let error = check_messages(&broadcast, &hypercube(2)).unwrap_err();
        let CapacityError::MessageTooLong { longest, fits, from, to, .. } = &error else { panic!("{error}") };
        assert_eq!((*longest, *from, *to), (264 << 20, 0, 1));
        assert_eq!(*fits, 255 << 20, "the longest whole MiB under the limit");
        let text = error.to_string();
        assert!(text.contains("a message of 264.0 MiB (node 0 to node 1)"), "{text}");
        assert!(text.contains("at most 268435415 bytes (frames of 256.0 MiB less their 41-byte header)"), "{text}");
        assert!(text.ends_with("give --size 255MiB or less"), "{text}");
        check_messages(&RunSpec { size_bytes: *fits, ..broadcast.clone() }, &hypercube(2)).unwrap();
        // An all-gather's last step sends half the result: 8 x 64 MiB sends 256 MiB + 0.
        let allgather = |size| spec_of(Collective::Allgather, Algorithm::Hypercube, size, false);
        assert!(check_messages(&allgather(64 << 20), &hypercube(8)).is_err());
        check_messages(&allgather(32 << 20), &hypercube(8)).unwrap();
        // Recursive doubling sends a 1 GiB vector in segments on raw links, whole on
        // emulated ones.
        let doubling = |emulated| spec_of(Collective::Allreduce, Algorithm::RecursiveDoubling, 1 << 30, emulated);
        check_messages(&doubling(false), &hypercube(8)).unwrap();
        let error = check_messages(&doubling(true), &hypercube(8)).unwrap_err().to_string();
        assert!(error.starts_with("allreduce by recursive-doubling of 1.0 GiB per node on 8 nodes"), "{error}");
        // Small runs are not simulated at all, and pass.
        check_messages(&spec_of(Collective::Alltoall, Algorithm::Hypercube, 64 << 10, true), &hypercube(1024)).unwrap();
    }

    /// A GOAL file's sizes are its own: on main a 150-byte file sending 10^15 B passed
    /// every check (the estimate counted --size only) and aborted the node that sent it.
    #[test]
    fn a_goal_files_messages_are_checked_against_memory_and_frames() {
        use topocomm_proto::schedule::{Goal, GoalKind, GoalOp, GoalRank, Schedule};
        let op = |kind| GoalOp { kind, requires: vec![], irequires: vec![] };
        let goal = |bytes| RunSpec {
            size_bytes: 8,
            schedule: Some(Box::new(Schedule::Goal(Goal {
                ranks: vec![
                    GoalRank { ops: vec![op(GoalKind::Send { bytes, peer: 1, tag: 0 })] },
                    GoalRank { ops: vec![op(GoalKind::Recv { bytes, peer: 0, tag: 0 })] },
                ],
            }))),
            ..RunSpec::new(Collective::Allreduce, Algorithm::Auto)
        };
        let tuning = Tuning::built_in();
        machine().check_run(&goal(1 << 20), Hypercube, 2, &tuning).unwrap();
        let error = machine().check_run(&goal(1 << 40), Hypercube, 2, &tuning).unwrap_err().to_string();
        assert!(error.starts_with("the run needs about 2.0 TiB at the 2 local nodes"), "{error}");
        let two = Topology::new(Hypercube, 2, None).unwrap();
        check_messages(&goal(1 << 20), &two).unwrap();
        let error = check_messages(&goal(1 << 30), &two).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "the GOAL schedule sends a message of 1.0 GiB (node 0 to node 1), longer than a link carries"
            ),
            "{error}"
        );
    }

    #[test]
    fn a_run_must_fit_in_the_memory_its_nodes_share() {
        let machine = machine();
        let tuning = Tuning::built_in();
        let spec = |size| RunSpec { size_bytes: size, ..RunSpec::new(Collective::Allreduce, Algorithm::Hypercube) };
        machine.check_run(&spec(64 << 10), Hypercube, 1024, &tuning).unwrap();
        machine.check_run(&spec(GIB / 2), Hypercube, 8, &tuning).unwrap();
        let error = machine.check_run(&spec(100 * GIB), Hypercube, 8, &tuning).unwrap_err().to_string();
        assert!(error.starts_with("the run needs about 3.1 TiB at the 8 local nodes"), "{error}");
        assert!(error.contains("23.0 GiB on this machine"), "{error}");
        // 1 GiB each fits one node, not 8 of them.
        machine.check_run(&spec(GIB), Hypercube, 1, &tuning).unwrap();
        assert!(matches!(
            machine.check_run(&spec(GIB), Hypercube, 8, &tuning),
            Err(CapacityError::Spec(SpecError::TooMuchMemory { .. }))
        ));
        // The root of a scatter holds its 32 blocks, the others pass on up to all of them:
        // 23 GiB less the bases fits 32 nodes of an 8 MiB scatter (about 16.9 GiB) or
        // all-gather (about 20.3 GiB), not of an 8 MiB all-to-all (about 32 GiB).
        let at_32 = |collective| RunSpec { size_bytes: 8 << 20, ..RunSpec::new(collective, Algorithm::Hypercube) };
        machine.check_run(&at_32(Collective::Scatter), Hypercube, 32, &tuning).unwrap();
        machine.check_run(&at_32(Collective::Gather), Hypercube, 32, &tuning).unwrap();
        machine.check_run(&at_32(Collective::Allgather), Hypercube, 32, &tuning).unwrap();
        machine.check_run(&at_32(Collective::ReduceScatter), Hypercube, 32, &tuning).unwrap();
        let error = machine.check_run(&at_32(Collective::Alltoall), Hypercube, 32, &tuning).unwrap_err().to_string();
        assert!(error.starts_with("the run needs about 32.0 GiB at the 32 local nodes"), "{error}");
        // `auto` runs that all-to-all by Algorithm 4.10, which fits (about 20 GiB).
        let auto = |size| RunSpec { size_bytes: size, ..RunSpec::new(Collective::Alltoall, Algorithm::Auto) };
        machine.check_run(&auto(8 << 20), Hypercube, 32, &tuning).unwrap();
        let error = machine.check_run(&auto(8 << 20), TopologyKind::Ring, 32, &tuning).unwrap_err().to_string();
        assert!(error.starts_with("the run needs about 32.0 GiB"), "{error}");
        // Too many nodes is said first.
        assert!(matches!(
            machine.check_run(&spec(8), Hypercube, 100_000, &tuning),
            Err(CapacityError::TooManyNodes { .. })
        ));
    }
}
