//! The lab itself: its state (who may use it, the cluster it shows and runs on, the
//! session's jobs, the pages listening) and how it starts, beside a local cluster
//! (`topocomm lab`) or a serving coordinator (`serve --http`). Every request passes the
//! access checks first (`access`) and is answered by `routes`; the API answers JSON
//! documents stamped with the CLI's `schema_version`, and `/api/events` streams
//! server-sent events (`events`): the cluster whenever it changes (nodes joining,
//! leaving, the wiring) and each job's progress. Connections come in through the door
//! (`door`: caps and the header deadline).
//!
//! A run from the page takes the words `topocomm run` takes and goes through the same
//! code as the command line (`words` parses them, `work` carries them out); `explain`,
//! `simulate` and `sweep` take their commands' words the same way. Every job queues
//! (`jobs`): one at a time, a bounded queue (429 past it), each cancellable with
//! `DELETE /api/runs/ID`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{RwLock, broadcast};
use topocomm_proto::Topology;
use topocomm_proto::auth::Key;
use topocomm_proto::control::RunOutcome;

use crate::control::client::Credentials;
use crate::control::local::{self, LocalCluster};
use crate::control::run::Coordinator;
use crate::control::target::Target;
use crate::lab::LabArgs;
use crate::lab::access::{Access, WrongTokens};
use crate::lab::document;
use crate::lab::door;
use crate::lab::jobs::{Jobs, Status};
use crate::lab::work::{self, Job};
use crate::lab::{events, routes};
use crate::render::schema;

/// The lab: who may use it, the cluster it shows and runs on, and the session's jobs.
pub struct Lab {
    pub(super) access: Access,
    pub(crate) coordinator: Arc<Coordinator>,
    /// Where runs go; taken at shutdown.
    pub(crate) target: RwLock<Option<Target>>,
    pub(super) jobs: Jobs<Job>,
    /// Bytes per directed link of the last run that came back: `[from, to, bytes]`.
    traffic: Mutex<Vec<[u64; 3]>>,
    pub(super) events: broadcast::Sender<Value>,
    /// Pages listening to the events now.
    pub(super) listening: AtomicUsize,
    /// Wrong tokens by address, to slow guessing.
    pub(super) wrong_tokens: WrongTokens,
    /// The switched network `lab --topology` started the switches of, which the page's
    /// form starts at.
    started_for: Option<Topology>,
}

/// Binds the page's listener on `address` and sets its access policy; refuses an
/// address off loopback without a token before anything starts.
async fn bind(address: &str, token: Option<&str>) -> anyhow::Result<(TcpListener, Access)> {
    let listener = match TcpListener::bind(address).await {
        Ok(listener) => listener,
        // A second lab on the first one's port: say what to do about it.
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "binding the lab's page on {address}: {error}: another lab (or another program) holds that port; \
             `--http 127.0.0.1:0` picks a free one, or give --http another port"
        ),
        Err(error) => return Err(error).with_context(|| format!("binding the lab's page on {address}")),
    };
    let bound = listener.local_addr()?;
    let access = Access::new(bound, token)?;
    Ok((listener, access))
}

/// `topocomm lab`: a local cluster of `args.nodes` daemons and the page, until
/// interrupted.
pub async fn lab(args: LabArgs) -> anyhow::Result<()> {
    let token = args.security.token()?;
    let (listener, access) = bind(&args.http, token.as_deref()).await?;
    let tuning = args.tuning.load()?;
    let logs = crate::control::local::log_folder(args.logs.as_deref())?;
    let switched = match args.topology.filter(|kind| kind.is_switched()) {
        Some(kind) => Some(Topology::new(kind, args.nodes, args.dims.as_deref())?),
        None => None,
    };
    let local = match &switched {
        Some(topology) => LocalCluster::start_for(topology, &logs, args.security.encrypt, tuning).await?,
        None => LocalCluster::start(args.nodes, &logs, args.security.encrypt, tuning).await?,
    };
    let coordinator = local.coordinator.clone();
    let url = format!("http://{}/", listener.local_addr()?);
    let processes = switched.as_ref().map_or_else(|| format!("{} node processes", args.nodes), local::processes);
    eprintln!(
        "local cluster: {processes}, coordinator on {}, node logs in {}/*.log",
        local.address,
        local.logs.display()
    );
    let lab = Arc::new(Lab { started_for: switched, ..Lab::new(access, coordinator, Target::Local(local)) });
    println!("lab: {url} (Ctrl-C stops the lab and its {} nodes)", args.nodes);
    let served = tokio::select! {
        result = serve(listener, lab.clone()) => result,
        signal = topocomm_node::daemon::stop_signal() => {
            eprintln!("stopping on {signal}");
            Ok(())
        }
    };
    // A run in progress keeps the cluster until it ends; the node processes die with
    // this one in any case (they exit with their coordinator).
    if let Ok(mut target) = tokio::time::timeout(Duration::from_secs(2), lab.target.write()).await
        && let Some(target) = target.take()
    {
        target.shutdown().await;
    }
    served
}

/// `serve --http`: the page beside the serving coordinator, whose runs it asks of the
/// coordinator's control address as `run --coordinator` would.
pub async fn beside_coordinator(
    http: &str,
    token: Option<&str>,
    coordinator: Arc<Coordinator>,
    control: SocketAddr,
    cluster_token: &str,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let (listener, access) = bind(http, token).await?;
    let control = if control.ip().is_unspecified() {
        let loopback: std::net::IpAddr =
            if control.is_ipv4() { std::net::Ipv4Addr::LOCALHOST.into() } else { std::net::Ipv6Addr::LOCALHOST.into() };
        SocketAddr::new(loopback, control.port())
    } else {
        control
    };
    let credentials = Credentials { key: Key::from_token(cluster_token), encrypted: coordinator.encrypted() };
    let target = Target::Remote { address: control.to_string(), credentials };
    eprintln!("lab: http://{}/", listener.local_addr()?);
    let lab = Arc::new(Lab::new(access, coordinator, target));
    Ok(tokio::spawn(async move {
        if let Err(error) = serve(listener, lab).await {
            tracing::error!(%error, "the lab's page stopped");
        }
    }))
}

impl Lab {
    fn new(access: Access, coordinator: Arc<Coordinator>, target: Target) -> Self {
        let (events, _) = broadcast::channel(256);
        Lab {
            access,
            coordinator,
            target: RwLock::new(Some(target)),
            jobs: Jobs::default(),
            traffic: Mutex::new(Vec::new()),
            events,
            listening: AtomicUsize::new(0),
            wrong_tokens: WrongTokens::default(),
            started_for: None,
        }
    }

    /// The cluster as the page shows it: every node (id, name, address, memory, whether
    /// connected), the topology in force with its layout, the last run's traffic, and
    /// the switched network the lab started for (`started_for`: `topology` and `dims`
    /// as the form takes them), if any.
    pub(super) async fn cluster(&self) -> Value {
        let status = self.coordinator.cluster.status();
        let mut members = self.coordinator.cluster.members();
        members.sort_by(|a, b| (a.id.is_none(), a.id, &a.name).cmp(&(b.id.is_none(), b.id, &b.name)));
        let nodes: Vec<Value> = members
            .iter()
            .map(|m| {
                json!({
                    "id": m.id, "name": m.name, "address": m.data_addr, "memory_bytes": m.memory_bytes,
                    "connected": m.session.is_some(),
                })
            })
            .collect();
        let topology = status.topology.as_ref().and_then(|t| t.build().ok()).map(|t| document::topology(&t));
        let traffic = if topology.is_some() { self.traffic.lock().expect("traffic lock").clone() } else { Vec::new() };
        let started_for =
            self.started_for.as_ref().map(|t| json!({ "topology": t.kind().to_string(), "dims": t.describe_dims() }));
        schema::versioned(json!({
            "type": "cluster", "expected": status.expected, "nodes": nodes, "topology": topology, "traffic": traffic,
            "started_for": started_for,
        }))
    }

    /// Tells every page listening.
    pub(super) fn tell(&self, event: Value) {
        let _ = self.events.send(event);
    }

    /// Sets job `id`'s status (and note, if one is given) and tells the pages.
    pub(crate) fn update(&self, id: u64, status: Status, note: Option<String>) {
        if let Some(summary) = self.jobs.update(id, status, note) {
            self.tell(json!({ "type": "run", "run": summary }));
        }
    }

    /// Keeps the traffic of the run that came back, for the cluster's picture.
    pub(crate) fn remember_traffic(&self, outcome: &RunOutcome) {
        let traffic: Vec<[u64; 3]> = outcome
            .reports
            .iter()
            .flat_map(|r| r.link_bytes.iter().map(move |&(to, bytes)| [r.node as u64, to as u64, bytes]))
            .collect();
        *self.traffic.lock().expect("traffic lock") = traffic;
    }
}

/// Serves the page and the API on `listener` until it fails.
async fn serve(listener: TcpListener, lab: Arc<Lab>) -> anyhow::Result<()> {
    tokio::spawn(events::watch_cluster(lab.clone()));
    tokio::spawn(work::work_through(lab.clone()));
    door::serve(listener, routes::app(lab)).await;
    Ok(())
}
