//! The node daemon: registers with the coordinator over its control link, wires the
//! neighbour links each `Wire` names (dialling higher ids, admitting lower ones through
//! the handshake), runs each `Start` and sends the report back. A new wiring closes the
//! old links and aborts a run still going on them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use topocomm_proto::codec;
use topocomm_proto::control::{MAX_CONTROL_FRAME, NodeReport, PROTOCOL_VERSION, ToCoordinator, ToNode, Wiring};
use topocomm_proto::frame::DEFAULT_MAX_FRAME;
use topocomm_proto::{NodeId, Topology};

use crate::handshake::{self, LinkHello};
use crate::pacing::Timeline;
use crate::router::Router;
use crate::{memory, run, timebase};

/// How long a wiring may take to bring every link up.
const WIRE_TIMEOUT: Duration = Duration::from_secs(15);

/// The daemon's settings (the `topocomm-node` command line).
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// The coordinator's control address, HOST:PORT.
    #[arg(long, env = "TOPOCOMM_COORDINATOR")]
    pub coordinator: String,
    /// The cluster token: the coordinator and every data link check it.
    #[arg(long, env = "TOPOCOMM_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Address the data listener binds (neighbours dial it).
    #[arg(long, env = "TOPOCOMM_LISTEN", default_value = "0.0.0.0:0")]
    pub listen: SocketAddr,
    /// Address neighbours should dial, when it is not the listener's own (NAT, containers).
    /// Default: the listener's address, or the IP this host uses to reach the coordinator.
    #[arg(long, env = "TOPOCOMM_ADVERTISE")]
    pub advertise: Option<String>,
    /// A stable name: a node that re-registers under its old name gets its old id back.
    /// Default: the host name.
    #[arg(long, env = "TOPOCOMM_NODE_NAME")]
    pub name: Option<String>,
    /// Largest data frame accepted on a link, in bytes; a larger one closes the link.
    #[arg(long, default_value_t = DEFAULT_MAX_FRAME)]
    pub max_frame: usize,
    /// Exit when the control link to the coordinator closes (local clusters use this);
    /// otherwise reconnect.
    #[arg(long)]
    pub exit_with_coordinator: bool,
    /// How long to keep trying to reach the coordinator.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub connect_timeout: Duration,
}

/// The wiring the data listener currently admits links for.
struct Admission {
    epoch: u64,
    id: NodeId,
    /// Lower-id neighbours expected to dial in and not yet linked.
    expected: BTreeSet<NodeId>,
    linked: mpsc::UnboundedSender<(NodeId, TcpStream)>,
    topology: String,
}

/// State shared by the control loop and the data listener.
struct Shared {
    token: String,
    admission: Mutex<Option<Admission>>,
}

type Control = Framed<TcpStream, LengthDelimitedCodec>;

/// Runs the daemon on its own single-threaded runtime: the link tasks, the router and
/// the algorithm then hand frames to one another without crossing threads (the pacer of
/// emulated links is the one other thread).
pub fn main(args: NodeArgs) -> anyhow::Result<()> {
    memory::keep_freed_buffers();
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the node's runtime")?.block_on(
        async {
            tokio::select! {
                result = run(args) => result,
                signal = stop_signal() => {
                    tracing::info!(signal, "stopping");
                    Ok(())
                }
            }
        },
    )
}

/// Resolves on SIGTERM (`docker stop`, Kubernetes) or SIGINT (Ctrl-C), naming it.
pub async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => "SIGINT",
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "SIGINT"
}

/// Runs the daemon until the coordinator refuses it (or, with `exit_with_coordinator`,
/// until the control link closes).
pub async fn run(args: NodeArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the data listener on {}", args.listen))?;
    let bound = listener.local_addr()?;
    let shared = Arc::new(Shared { token: args.token.clone(), admission: Mutex::new(None) });
    tokio::spawn(accept_links(listener, shared.clone()));
    tracing::info!(%bound, coordinator = %args.coordinator, "node daemon listening");
    loop {
        let stream = connect(&args.coordinator, args.connect_timeout).await?;
        match session(stream, bound, &args, &shared).await {
            Ok(()) => tracing::warn!("control link closed by the coordinator"),
            Err(error) if is_refusal(&error) => return Err(error),
            Err(error) => tracing::warn!(%error, "control link failed"),
        }
        if args.exit_with_coordinator {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn is_refusal(error: &anyhow::Error) -> bool {
    error.to_string().starts_with("refused by the coordinator")
}

async fn connect(address: &str, patience: Duration) -> anyhow::Result<TcpStream> {
    let deadline = Instant::now() + patience;
    loop {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(error) if Instant::now() < deadline => {
                tracing::debug!(%error, address, "coordinator not reachable yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => {
                bail!("cannot reach the coordinator at {address} within {patience:?}: {error}")
            }
        }
    }
}

/// One control session: register, then serve wirings and runs.
async fn session(stream: TcpStream, bound: SocketAddr, args: &NodeArgs, shared: &Arc<Shared>) -> anyhow::Result<()> {
    let data_addr = match &args.advertise {
        Some(address) => address.clone(),
        None if bound.ip().is_unspecified() => SocketAddr::new(stream.local_addr()?.ip(), bound.port()).to_string(),
        None => bound.to_string(),
    };
    let name = args.name.clone().unwrap_or_else(host_name);
    let mut control =
        Framed::new(stream, LengthDelimitedCodec::builder().max_frame_length(MAX_CONTROL_FRAME).new_codec());
    send(
        &mut control,
        &ToCoordinator::Register {
            version: PROTOCOL_VERSION,
            token: args.token.clone(),
            name: name.clone(),
            data_addr: data_addr.clone(),
        },
    )
    .await?;
    tracing::info!(%name, %data_addr, "registering with the coordinator");

    let (reports_tx, mut reports) = mpsc::unbounded_channel::<NodeReport>();
    let mut router: Option<Arc<Router>> = None;
    let mut running: Option<JoinHandle<()>> = None;
    let result = loop {
        tokio::select! {
            message = control.next() => {
                let message: ToNode = match message {
                    None => break Ok(()),
                    Some(Err(error)) => break Err(error.into()),
                    Some(Ok(body)) => match codec::decode(&body) {
                        Ok(message) => message,
                        Err(error) => break Err(anyhow::anyhow!("malformed control message: {error}")),
                    },
                };
                match message {
                    ToNode::Wire(wiring) => {
                        if let Some(task) = running.take() {
                            task.abort();
                        }
                        if let Some(old) = router.take() {
                            old.shutdown();
                        }
                        let epoch = wiring.epoch;
                        let reply = match wire(&wiring, shared, args.max_frame).await {
                            Ok(wired) => {
                                router = Some(wired);
                                ToCoordinator::Wired { epoch }
                            }
                            Err(error) => {
                                tracing::error!(epoch, error = %format!("{error:#}"), "wiring failed");
                                ToCoordinator::WireFailed { epoch, reason: format!("{error:#}") }
                            }
                        };
                        send(&mut control, &reply).await?;
                    }
                    ToNode::Start(spec) => {
                        let Some(wired) = router.clone() else {
                            let report = failed_report(&spec, "this node is not wired");
                            send(&mut control, &ToCoordinator::Report(Box::new(report))).await?;
                            continue;
                        };
                        if let Some(task) = running.take() {
                            task.abort();
                        }
                        let reports_tx = reports_tx.clone();
                        running = Some(tokio::spawn(async move {
                            tracing::info!(run = spec.run, collective = %spec.collective, algorithm = %spec.algorithm, "run started");
                            let report = run::execute(wired, &spec).await;
                            memory::release_freed_buffers();
                            tracing::info!(run = spec.run, verified = report.verified, error = ?report.error, "run finished");
                            let _ = reports_tx.send(report);
                        }));
                    }
                    ToNode::Ping => send(&mut control, &ToCoordinator::Pong).await?,
                    ToNode::ClockProbe { nonce } => {
                        let reply = ToCoordinator::ClockReply { nonce, node_ns: timebase::now_ns() };
                        send(&mut control, &reply).await?;
                    }
                    ToNode::Refused { reason } => break Err(anyhow::anyhow!("refused by the coordinator: {reason}")),
                }
            }
            Some(report) = reports.recv() => {
                send(&mut control, &ToCoordinator::Report(Box::new(report))).await?;
            }
        }
    };
    if let Some(task) = running.take() {
        task.abort();
    }
    if let Some(old) = router.take() {
        old.shutdown();
    }
    *shared.admission.lock().expect("admission lock") = None;
    result
}

fn failed_report(spec: &topocomm_proto::spec::RunSpec, reason: &str) -> NodeReport {
    NodeReport { error: Some(reason.to_owned()), ..NodeReport::empty(spec.run, usize::MAX) }
}

async fn send(control: &mut Control, message: &ToCoordinator) -> anyhow::Result<()> {
    let body = codec::encode(message)?;
    control.send(bytes::Bytes::from(body)).await.context("sending to the coordinator")
}

/// Opens every link of `wiring`: dials neighbours with higher ids, admits lower ones.
async fn wire(wiring: &Wiring, shared: &Arc<Shared>, max_frame: usize) -> anyhow::Result<Arc<Router>> {
    let spec = &wiring.topology;
    let topology = Topology::new(spec.kind, spec.p, Some(&spec.dims))?;
    let me = wiring.id;
    let deadline = Instant::now() + WIRE_TIMEOUT;
    let addresses: BTreeMap<NodeId, String> = wiring.neighbours.iter().cloned().collect();
    for neighbour in topology.neighbours(me) {
        if !addresses.contains_key(&neighbour) {
            bail!("the wiring gives no address for neighbour {neighbour}");
        }
    }
    let expected: BTreeSet<NodeId> = topology.neighbours(me).into_iter().filter(|&n| n < me).collect();
    let (linked, mut inbound) = mpsc::unbounded_channel();
    *shared.admission.lock().expect("admission lock") = Some(Admission {
        epoch: wiring.epoch,
        id: me,
        expected: expected.clone(),
        linked,
        topology: topology.to_string(),
    });
    let dials: Vec<_> = topology
        .neighbours(me)
        .into_iter()
        .filter(|&n| n > me)
        .map(|peer| {
            let hello = LinkHello::new(&shared.token, wiring.epoch, me, peer);
            let address = addresses[&peer].clone();
            tokio::spawn(async move { dial(peer, address, hello, deadline).await.map(|stream| (peer, stream)) })
        })
        .collect();
    let mut streams = Vec::new();
    for dialled in futures::future::join_all(dials).await {
        streams.push(dialled??);
    }
    let mut waiting = expected;
    while !waiting.is_empty() {
        match tokio::time::timeout_at(deadline, inbound.recv()).await {
            Ok(Some((peer, stream))) => {
                waiting.remove(&peer);
                streams.push((peer, stream));
            }
            Ok(None) => bail!("the data listener stopped"),
            Err(_) => bail!("neighbours {waiting:?} did not link within {WIRE_TIMEOUT:?}"),
        }
    }
    tracing::info!(epoch = wiring.epoch, id = me, %topology, links = streams.len(), "wired");
    Ok(Router::start(me, topology, streams, max_frame, Timeline::Real { offset_ns: 0 }))
}

/// Dials one higher-id neighbour until it admits us or the deadline passes.
async fn dial(peer: NodeId, address: String, hello: LinkHello, deadline: Instant) -> anyhow::Result<TcpStream> {
    loop {
        let attempt = async {
            let mut stream = TcpStream::connect(&address).await?;
            stream.set_nodelay(true)?;
            handshake::introduce(&mut stream, &hello).await?;
            anyhow::Ok(stream)
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(error)) => {
                tracing::debug!(peer, %address, %error, "link not admitted yet; retrying")
            }
            Err(_) => {
                bail!("could not link to neighbour {peer} at {address} within {WIRE_TIMEOUT:?}")
            }
        }
        if Instant::now() >= deadline {
            bail!("could not link to neighbour {peer} at {address} within {WIRE_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Admits data links that fit the current wiring; refuses and logs every other.
async fn accept_links(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (mut stream, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "data listener accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let admitted = handshake::admit(&mut stream, |hello| admissible(&shared, hello)).await;
            match admitted {
                Ok(hello) => {
                    let admission = shared.admission.lock().expect("admission lock");
                    if let Some(admission) = admission.as_ref().filter(|a| a.epoch == hello.epoch) {
                        let _ = admission.linked.send((hello.from, stream));
                    }
                }
                Err(error) => tracing::warn!(%from, %error, "refused a data link"),
            }
        });
    }
}

/// Whether `hello` names a neighbour this node is waiting for in the current epoch.
fn admissible(shared: &Shared, hello: &LinkHello) -> Result<(), String> {
    if hello.token != shared.token {
        return Err("wrong cluster token".into());
    }
    let mut admission = shared.admission.lock().expect("admission lock");
    let Some(admission) = admission.as_mut() else {
        return Err("this node is not wired yet".into());
    };
    if hello.epoch != admission.epoch {
        return Err(format!("wiring epoch {} is not the current one ({})", hello.epoch, admission.epoch));
    }
    if hello.to != admission.id {
        return Err(format!("this is node {}, not node {}", admission.id, hello.to));
    }
    if !admission.expected.remove(&hello.from) {
        return Err(format!(
            "node {} is not a neighbour waiting to link with node {} in the {}",
            hello.from, admission.id, admission.topology
        ));
    }
    Ok(())
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "node".to_owned())
}
