//! A harness for integration tests that run the real thing: a `topocomm serve`
//! coordinator and `topocomm-node` daemons as child processes on 127.0.0.1, and the
//! `topocomm` CLI against them. Every child writes its stdout and stderr to files in a
//! scratch folder; every wait has a deadline; dropping a [`TestCluster`] kills and reaps
//! every process it started. The scratch folder is removed when a test passes and kept
//! (its path printed) when it fails.

#![allow(dead_code)] // Not every test file uses every helper.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How often waits poll.
const POLL: Duration = Duration::from_millis(20);

/// Environment variables the binaries read: cleared so the caller's shell cannot steer
/// a test (a TOPOCOMM_COORDINATOR would turn a local run into a remote one).
const STEERING_ENV: &[&str] = &[
    "TOPOCOMM_COORDINATOR",
    "TOPOCOMM_TOKEN",
    "TOPOCOMM_TOKEN_FILE",
    "TOPOCOMM_ENCRYPT",
    "TOPOCOMM_LISTEN",
    "TOPOCOMM_ADVERTISE",
    "TOPOCOMM_NODE_NAME",
    "TOPOCOMM_TCP_CONGESTION",
    "TOPOCOMM_TUNING",
    "TOPOCOMM_LOG",
    "RUST_LOG",
];

/// The `topocomm` binary (coordinator and CLI).
pub fn topocomm_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_topocomm"))
}

/// The `topocomm-node` binary, which cargo builds next to `topocomm` when the whole
/// workspace is built.
pub fn node_bin() -> PathBuf {
    let path = topocomm_bin().with_file_name(format!("topocomm-node{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing: build the whole workspace first (`cargo build --workspace`, \
         or run the tests with `cargo test --workspace`)",
        path.display()
    );
    path
}

/// A command for one of our binaries, with the steering environment cleared.
pub fn command(program: &Path) -> Command {
    let mut command = Command::new(program);
    for name in STEERING_ENV {
        command.env_remove(name);
    }
    command.env("NO_COLOR", "1").stdin(Stdio::null());
    command
}

/// A scratch folder under the system's temporary directory, removed on drop unless the
/// test is failing.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(label: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "topocomm-it-{}-{}-{label}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating the scratch folder");
        Scratch { path }
    }

    /// A fresh file name in the folder: `<stem>.<n>.<ext>`.
    pub fn file(&self, stem: &str, ext: &str) -> PathBuf {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        self.path.join(format!("{stem}.{}.{ext}", COUNTER.fetch_add(1, Ordering::Relaxed)))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test files kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Spawns `command` with stdout and stderr going to the two files.
pub fn spawn_logged(command: &mut Command, stdout: &Path, stderr: &Path) -> Child {
    let out = File::create(stdout).expect("creating a stdout file");
    let err = File::create(stderr).expect("creating a stderr file");
    command.stdout(out).stderr(err).spawn().unwrap_or_else(|error| panic!("starting {command:?}: {error}"))
}

/// Waits for `child` until `deadline`; `None` if it is still running then.
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("polling a child process") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Kills `child` (if it still runs) and reaps it, within a bounded wait.
pub fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    if wait_until(child, Instant::now() + Duration::from_secs(10)).is_none() {
        eprintln!("process {} did not die within 10 s of SIGKILL", child.id());
    }
}

/// Polls `probe` until it yields a value or `patience` runs out.
pub fn poll<T>(patience: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + patience;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// The resident memory of process `pid` in KiB (VmRSS), if it runs.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Sends `signal` (STOP, CONT, ...) to process `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().expect("running kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// A file's text, or empty if it cannot be read (yet).
pub fn read_text(path: &Path) -> String {
    std::fs::read(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
}

/// A finished command.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    /// The stdout as one JSON object; panics with both streams if it is not.
    pub fn json(&self) -> serde_json::Value {
        assert!(
            self.status.success(),
            "the command failed ({}):\nstderr: {}\nstdout: {}",
            self.status,
            self.stderr,
            self.stdout
        );
        serde_json::from_str(&self.stdout).unwrap_or_else(|error| {
            panic!("stdout is not one JSON object ({error}):\n{}\nstderr: {}", self.stdout, self.stderr)
        })
    }
}

/// A command started in the background, its output going to files.
pub struct Background {
    pub child: Child,
    pub started: Instant,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Background {
    pub fn start(mut command: Command, scratch: &Scratch, label: &str) -> Self {
        let stdout = scratch.file(label, "stdout");
        let stderr = scratch.file(label, "stderr");
        let child = spawn_logged(&mut command, &stdout, &stderr);
        Background { child, started: Instant::now(), stdout, stderr }
    }

    /// Waits for it to end (at most `patience` from now); kills it and panics if it
    /// does not.
    pub fn finish(mut self, patience: Duration) -> Finished {
        let status = wait_until(&mut self.child, Instant::now() + patience);
        let Some(status) = status else {
            kill_and_reap(&mut self.child);
            panic!("a command did not finish within {patience:?}; it was killed.\nstderr: {}", read_text(&self.stderr));
        };
        Finished {
            status,
            stdout: read_text(&self.stdout),
            stderr: read_text(&self.stderr),
            elapsed: self.started.elapsed(),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// Runs `command` to the end within `patience`, output captured through files.
pub fn run_bounded(command: Command, scratch: &Scratch, label: &str, patience: Duration) -> Finished {
    Background::start(command, scratch, label).finish(patience)
}

/// One node's entry in `topocomm status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `None` before the cluster formed.
    pub id: Option<usize>,
    pub name: String,
    pub data_addr: String,
}

/// A `topocomm serve` coordinator and its node daemons, all child processes.
pub struct TestCluster {
    pub scratch: Scratch,
    pub token: String,
    /// Whether every link is encrypted (`--encrypt` on every party).
    pub encrypt: bool,
    /// The coordinator's address, 127.0.0.1:PORT.
    pub address: String,
    pub size: usize,
    serve: Child,
    serve_stderr: PathBuf,
    /// Node daemons by index (`node-<index>`, which becomes id `index`); `None` once killed.
    nodes: Vec<Option<Child>>,
    node_stderr: Vec<PathBuf>,
}

impl TestCluster {
    /// Starts a coordinator for `size` nodes and `size` daemons, and waits until every
    /// one is registered. The token travels in the environment, as the README says.
    pub fn start(label: &str, size: usize) -> Self {
        Self::start_with(label, size, false, &[])
    }

    /// [`TestCluster::start`] with every link encrypted.
    pub fn start_encrypted(label: &str, size: usize) -> Self {
        Self::start_with(label, size, true, &[])
    }

    /// [`TestCluster::start`] with a coordinator that resolves `auto` by the tuning file `tuning`.
    pub fn start_tuned(label: &str, size: usize, tuning: &Path) -> Self {
        Self::start_with(label, size, false, &["--tuning".as_ref(), tuning.as_os_str()])
    }

    fn start_with(label: &str, size: usize, encrypt: bool, serve_args: &[&std::ffi::OsStr]) -> Self {
        let node_bin = node_bin();
        let scratch = Scratch::new(label);
        let token = format!("it-token-{label}-{}", std::process::id());
        let serve_stderr = scratch.path.join("serve.stderr");
        let mut serve = command(&topocomm_bin());
        serve.args(["serve", "--nodes", &size.to_string(), "--listen", "127.0.0.1:0"]).args(serve_args);
        serve.env("TOPOCOMM_TOKEN", &token);
        if encrypt {
            serve.arg("--encrypt");
        }
        let mut serve = spawn_logged(&mut serve, &scratch.path.join("serve.stdout"), &serve_stderr);
        let address = poll(Duration::from_secs(20), || {
            let text = read_text(&serve_stderr);
            let rest = text.split("topocomm coordinator on ").nth(1)?;
            let address = rest.split_whitespace().next()?;
            rest.contains(" for ").then(|| address.to_owned())
        });
        let Some(address) = address else {
            kill_and_reap(&mut serve);
            panic!("the coordinator did not announce its address within 20 s; stderr:\n{}", read_text(&serve_stderr));
        };
        assert!(address.starts_with("127.0.0.1:"), "{address}");
        let mut cluster = TestCluster {
            scratch,
            token,
            encrypt,
            address,
            size,
            serve,
            serve_stderr,
            nodes: Vec::new(),
            node_stderr: Vec::new(),
        };
        for index in 0..size {
            let child = cluster.spawn_node(&node_bin, &Self::node_name(index), &cluster.token);
            cluster.nodes.push(Some(child));
            cluster.node_stderr.push(cluster.node_log(index));
        }
        cluster.wait_for_members(size, Duration::from_secs(30));
        cluster
    }

    /// The stable name of node `index`.
    pub fn node_name(index: usize) -> String {
        format!("node-{index}")
    }

    fn node_log(&self, index: usize) -> PathBuf {
        self.scratch.path.join(format!("{}.stderr", Self::node_name(index)))
    }

    /// Starts a `topocomm-node` daemon named `name` presenting `token`; its output goes
    /// to `<name>.stdout` / `<name>.stderr` (appended to, across restarts).
    pub fn spawn_node(&self, node_bin: &Path, name: &str, token: &str) -> Child {
        let stdout = self.scratch.path.join(format!("{name}.stdout"));
        let stderr = self.scratch.path.join(format!("{name}.stderr"));
        let open = |path: &Path| File::options().create(true).append(true).open(path).expect("opening a node log");
        let mut node = command(node_bin);
        node.args(["--coordinator", &self.address, "--name", name]);
        node.args(["--listen", "127.0.0.1:0", "--connect-timeout", "20s"]).env("TOPOCOMM_TOKEN", token);
        if self.encrypt {
            node.arg("--encrypt");
        }
        node.stdout(open(&stdout))
            .stderr(open(&stderr))
            .spawn()
            .unwrap_or_else(|error| panic!("starting node {name}: {error}"))
    }

    /// The coordinator's process id.
    pub fn serve_pid(&self) -> u32 {
        self.serve.id()
    }

    /// Node `index`'s process id.
    pub fn node_pid(&self, index: usize) -> u32 {
        self.nodes[index].as_ref().expect("the node is running").id()
    }

    /// Starts node `index` again under its old name, with `extra` arguments (its data
    /// listener on any free port unless they say `--listen`).
    pub fn restart_node_with(&mut self, index: usize, extra: &[&str]) {
        assert!(self.nodes[index].is_none(), "node {index} is still running");
        let name = Self::node_name(index);
        let stderr = self.scratch.path.join(format!("{name}.stderr"));
        let open = |path: &Path| File::options().create(true).append(true).open(path).expect("opening a node log");
        let mut node = command(&node_bin());
        node.args(["--coordinator", &self.address, "--name", &name]);
        if !extra.contains(&"--listen") {
            node.args(["--listen", "127.0.0.1:0"]);
        }
        node.args(["--connect-timeout", "20s"]).args(extra).env("TOPOCOMM_TOKEN", &self.token);
        if self.encrypt {
            node.arg("--encrypt");
        }
        let child = node.stdout(Stdio::null()).stderr(open(&stderr)).spawn().expect("starting a node");
        self.nodes[index] = Some(child);
    }

    /// Kills node `index` with SIGKILL and reaps it.
    pub fn kill_node(&mut self, index: usize) {
        let mut child = self.nodes[index].take().expect("the node is running");
        kill_and_reap(&mut child);
    }

    /// Starts node `index` again under its old name.
    pub fn restart_node(&mut self, index: usize) {
        assert!(self.nodes[index].is_none(), "node {index} is still running");
        let child = self.spawn_node(&node_bin(), &Self::node_name(index), &self.token);
        self.nodes[index] = Some(child);
    }

    /// Whether every node process this cluster started is still running, and the
    /// coordinator too.
    pub fn all_alive(&mut self) -> bool {
        let serve_alive = self.serve.try_wait().expect("polling serve").is_none();
        serve_alive
            && self
                .nodes
                .iter_mut()
                .all(|node| node.as_mut().is_some_and(|n| n.try_wait().expect("polling a node").is_none()))
    }

    /// Node `index`'s log so far.
    pub fn node_stderr(&self, index: usize) -> String {
        read_text(&self.node_stderr[index])
    }

    /// The coordinator's log so far.
    pub fn serve_stderr(&self) -> String {
        read_text(&self.serve_stderr)
    }

    /// `topocomm <args> --coordinator ADDR`, the token in TOPOCOMM_TOKEN.
    pub fn cli(&self, args: &[&str]) -> Command {
        let mut command = command(&topocomm_bin());
        command.args(args);
        command.args(["--coordinator", &self.address]).env("TOPOCOMM_TOKEN", &self.token);
        if self.encrypt {
            command.arg("--encrypt");
        }
        command
    }

    /// `topocomm run <words> --json --timeout 5s` against this cluster (`words` split
    /// at whitespace), to add more arguments to.
    pub fn run_command(&self, words: &str) -> Command {
        let mut command = self.cli(&["run"]);
        command.args(words.split_whitespace()).args(["--json", "--timeout", "5s"]);
        command
    }

    /// [`TestCluster::run_command`] run to the end (at most 60 s).
    pub fn run(&self, words: &str) -> Finished {
        run_bounded(self.run_command(words), &self.scratch, "run", Duration::from_secs(60))
    }

    /// Like [`TestCluster::run`], for a run that must pass: its JSON, checked verified.
    pub fn run_ok(&self, words: &str) -> serde_json::Value {
        let json = self.run(words).json();
        assert_eq!(json["verified"], true, "run {words} not verified: {json:#}");
        json
    }

    /// `topocomm status`: the connected members, or `None` if the command failed.
    pub fn status(&self) -> Option<Vec<Member>> {
        let finished = run_bounded(self.cli(&["status"]), &self.scratch, "status", Duration::from_secs(20));
        if !finished.status.success() {
            return None;
        }
        let members = finished
            .stdout
            .lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    [id, name, address] => {
                        Some(Member { id: id.parse().ok(), name: (*name).to_owned(), data_addr: (*address).to_owned() })
                    }
                    _ => None,
                }
            })
            .collect();
        Some(members)
    }

    /// Waits until `topocomm status` lists exactly `count` connected nodes; returns them.
    pub fn wait_for_members(&self, count: usize, patience: Duration) -> Vec<Member> {
        let mut last = None;
        let found = poll(patience, || {
            let members = self.status()?;
            let done = members.len() == count;
            last = Some(members.clone());
            if !done {
                std::thread::sleep(Duration::from_millis(100));
            }
            done.then_some(members)
        });
        found.unwrap_or_else(|| {
            panic!(
                "status never showed {count} connected nodes within {patience:?}; last: {last:?}\ncoordinator log:\n{}",
                self.serve_stderr()
            )
        })
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().flatten() {
            let _ = node.kill();
        }
        let _ = self.serve.kill();
        for node in self.nodes.iter_mut().flatten() {
            kill_and_reap(node);
        }
        kill_and_reap(&mut self.serve);
    }
}

/// How many refusals of `what` ("control connections", "data links") a daemon's log
/// counts: the refusal log writes one line a second with the window's `total=`.
pub fn refusals_logged(log: &str, what: &str) -> usize {
    let line = format!("refused {what} in the last second");
    log.lines()
        .filter(|l| l.contains(&line))
        .filter_map(|l| l.split("total=").nth(1)?.split_whitespace().next()?.parse::<usize>().ok())
        .sum()
}
