//! A local cluster on this machine: an in-process coordinator on 127.0.0.1 and `nodes`
//! node daemons as child processes (this same executable in its `node` role), each
//! logging to a file. Children die with the cluster: on shutdown, on drop, and — since
//! they exit when their control link closes — even if this process is killed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use anyhow::Context;
use bytesize::ByteSize;
use rand::Rng;
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use topocomm_node::limits;
use topocomm_proto::auth::Key;
use topocomm_proto::spec::{RunSpec, SpecError};
use topocomm_proto::topology::TopologyKind;

use crate::control::run::Coordinator;
use crate::control::server;
use crate::tuning::Tuning;

/// What one node daemon process costs before any run: its resident memory. Measured on
/// Linux x86-64 (release build): the VmRSS of every daemon while `topocomm run allreduce
/// --nodes 8 --topology hypercube` (64 KiB) ran was 6.7-7.0 MiB; rounded up. A run's own
/// memory comes on top ([`RunSpec::memory_of_node`]).
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

/// Why this machine cannot hold a local cluster (or a run on it).
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error("--nodes {nodes} is more than this machine allows: at most {allowed} local nodes by {limit}")]
    TooManyNodes { nodes: usize, allowed: u64, limit: String },
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
    /// Memory this process may still use ([`topocomm_node::memory::available_bytes`]).
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
            memory: topocomm_node::memory::available_bytes(),
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
    /// ([`RunSpec::memory_of_nodes`]: the root of a scatter or gather needs more than the
    /// others), exceeds what this machine has available once every process has its base.
    /// `auto` is resolved as the coordinator will, a leaner algorithm where its pick does
    /// not fit ([`Tuning::resolve_checked`]).
    pub fn check_run(
        &self,
        spec: &RunSpec,
        topology: TopologyKind,
        nodes: usize,
        tuning: &Tuning,
    ) -> Result<(), CapacityError> {
        self.check_nodes(nodes)?;
        tuning.resolve_checked(spec, topology, nodes, |spec| self.check_memory(spec, nodes))?;
        Ok(())
    }

    /// Refuses `spec` if `nodes` local node processes cannot hold it together.
    fn check_memory(&self, spec: &RunSpec, nodes: usize) -> Result<(), CapacityError> {
        let Some(memory) = self.memory else { return Ok(()) };
        let count = u64::try_from(nodes).unwrap_or(u64::MAX);
        let available = memory.saturating_sub(count.saturating_mul(NODE_BASE_RSS));
        let holder = format!(
            "the {nodes} local nodes ({} on this machine, less {} per node process)",
            ByteSize(memory),
            ByteSize(NODE_BASE_RSS)
        );
        spec.check_memory(nodes, 0..nodes, available, &holder)?;
        Ok(())
    }
}

/// A coordinator and its node processes.
pub struct LocalCluster {
    pub coordinator: Arc<Coordinator>,
    pub address: String,
    pub logs: PathBuf,
    children: Vec<Child>,
    server: JoinHandle<()>,
}

/// A fresh random cluster token.
pub fn random_token() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `token` to a new file that only its owner can read.
pub fn write_token_file(path: &Path, token: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("creating the token file {}", path.display()))?;
    std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes())
        .with_context(|| format!("writing the token file {}", path.display()))
}

/// The name of node `index` in a cluster of `nodes` (zero-padded so names sort as ids).
pub fn node_name(index: usize, nodes: usize) -> String {
    let width = nodes.saturating_sub(1).to_string().len();
    format!("node-{index:0width$}")
}

impl LocalCluster {
    /// Starts the coordinator (resolving `auto` by `tuning`) and `nodes` daemons, logging
    /// to `logs/node-<i>.log`, every link encrypted if asked; refuses, before anything
    /// starts, more nodes than this machine allows ([`Capacity::check_nodes`]). The random
    /// token reaches the children in their environment, never on a command line.
    pub async fn start(nodes: usize, logs: &Path, encrypted: bool, tuning: Arc<Tuning>) -> anyhow::Result<Self> {
        anyhow::ensure!(nodes >= 1, "--nodes must be at least 1");
        Capacity::of_this_machine().check_nodes(nodes)?;
        std::fs::create_dir_all(logs).with_context(|| format!("creating the log folder {}", logs.display()))?;
        let token = random_token();
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding the coordinator on 127.0.0.1")?;
        let address = listener.local_addr()?.to_string();
        let coordinator = Arc::new(Coordinator::new(nodes, Key::from_token(&token), encrypted).tuned(tuning));
        let server = tokio::spawn(server::serve(listener, coordinator.clone()));
        let executable = std::env::current_exe().context("finding this executable to start nodes")?;
        let mut children = Vec::with_capacity(nodes);
        for index in 0..nodes {
            let name = node_name(index, nodes);
            let log_path = logs.join(format!("{name}.log"));
            let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
            let child = Command::new(&executable)
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
