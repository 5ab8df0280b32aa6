//! A local cluster on this machine: an in-process coordinator on 127.0.0.1 and `nodes`
//! node daemons as child processes (this same executable in its `node` role), each
//! logging to a file. Children die with the cluster: on shutdown, on drop, and — since
//! they exit when their control link closes — even if this process is killed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use anyhow::Context;
use rand::Rng;
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::run::Coordinator;
use crate::server;

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

/// The name of node `index` in a cluster of `nodes` (zero-padded so names sort as ids).
pub fn node_name(index: usize, nodes: usize) -> String {
    let width = nodes.saturating_sub(1).to_string().len();
    format!("node-{index:0width$}")
}

impl LocalCluster {
    /// Starts the coordinator and `nodes` daemons, logging to `logs/node-<i>.log`.
    pub async fn start(nodes: usize, logs: &Path) -> anyhow::Result<Self> {
        anyhow::ensure!(nodes >= 1, "--nodes must be at least 1");
        std::fs::create_dir_all(logs).with_context(|| format!("creating the log folder {}", logs.display()))?;
        let token = random_token();
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding the coordinator on 127.0.0.1")?;
        let address = listener.local_addr()?.to_string();
        let coordinator = Arc::new(Coordinator::new(nodes, token.clone()));
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
