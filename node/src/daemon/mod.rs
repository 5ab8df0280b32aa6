//! The node daemon: registers with the coordinator over its control link (after the
//! mutual handshake of `handshake`: the node proves the token and refuses a coordinator
//! that cannot), wires the neighbour links each `Wire` names (dialling higher ids,
//! admitting lower ones — only the neighbour wired to a slot, proving that link's key),
//! runs each `Start` and sends the report back (a switch of a switched network forwards
//! instead, until the coordinator ends its part with `Abort`, and reports what it
//! forwarded). Wiring runs beside the control loop, so
//! the node keeps answering pings while it waits for its neighbours; a new wiring
//! closes the old links and aborts a run still going on them.

pub mod allocator;
pub mod driver;
pub mod limits;
pub mod logging;

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
use tokio_util::sync::CancellationToken;
use topocomm_proto::NodeId;
use topocomm_proto::auth::{self, Hello, Key, Purpose};
use topocomm_proto::codec;
use topocomm_proto::control::{self, MAX_ORDER_FRAME, NodeReport, ToCoordinator, ToNode, Wiring};
use topocomm_proto::frame::DEFAULT_MAX_FRAME;

use crate::router::Router;
use crate::security::encryption::Channel;
use crate::security::handshake::{self, Gate, GateRefusal, HandshakeError};
use crate::security::{PendingHandshakes, RefusalLog, SecurityArgs};
use crate::transport::pacing::Timeline;
use crate::transport::stream::StreamLink;
use crate::transport::tcp::Congestion;

/// The daemon's settings (the `topocomm-node` command line).
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// The coordinator's control address, HOST:PORT.
    #[arg(long, env = "TOPOCOMM_COORDINATOR")]
    pub coordinator: String,
    #[command(flatten)]
    pub security: SecurityArgs,
    /// Address the data listener binds (neighbours dial it).
    #[arg(long, env = "TOPOCOMM_LISTEN", default_value = "0.0.0.0:0")]
    pub listen: SocketAddr,
    /// Address neighbours should dial, when it is not the listener's own (NAT, containers).
    /// Default: the listener's address, or the IP this host uses to reach the coordinator.
    #[arg(long, env = "TOPOCOMM_ADVERTISE")]
    pub advertise: Option<String>,
    /// A stable name: a node that re-registers under its old name gets its old id back.
    /// Default: the host name. At most 128 letters, digits and . _ -
    #[arg(long, env = "TOPOCOMM_NODE_NAME")]
    pub name: Option<String>,
    /// Largest data frame accepted on a link, in bytes; a larger one closes the link.
    #[arg(long, default_value_t = DEFAULT_MAX_FRAME)]
    pub max_frame: usize,
    /// Exit when the control link to the coordinator closes (local clusters use this);
    /// otherwise reconnect.
    #[arg(long)]
    pub exit_with_coordinator: bool,
    /// TCP congestion control of the data links: a kernel algorithm's name (`cubic`,
    /// `reno`, `bbr`, ...) or `system` for the host's default. Default: cubic where the
    /// host has it, not the host's default: BBR, where that is the default, paces each
    /// link at a rate it measured while the nodes waited for a processor.
    #[arg(long, env = "TOPOCOMM_TCP_CONGESTION")]
    pub tcp_congestion: Option<Congestion>,
    /// How long to keep trying to reach the coordinator.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub connect_timeout: Duration,
}

/// The wiring the data listener currently admits links for.
struct Admission {
    epoch: u64,
    id: NodeId,
    /// Lower-id neighbours expected to dial in and not yet linked, with their link's key.
    expected: BTreeMap<NodeId, Key>,
    linked: mpsc::UnboundedSender<(NodeId, Channel<TcpStream>)>,
    topology: String,
}

/// State shared by the control loop and the data listener.
struct Shared {
    encrypted: bool,
    /// The congestion control data links run under.
    congestion: Congestion,
    admission: Mutex<Option<Admission>>,
    pending: PendingHandshakes,
}

type Control = Framed<Channel<TcpStream>, LengthDelimitedCodec>;

/// Runs the daemon on its own single-threaded runtime: the link tasks, the router and
/// the algorithm then hand frames to one another without crossing threads (the pacer of
/// emulated links is the one other thread).
pub fn main(args: NodeArgs) -> anyhow::Result<()> {
    allocator::keep_freed_buffers();
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
    let cluster_key = args.security.cluster_key_waiting(args.connect_timeout).await?;
    let name = args.name.clone().unwrap_or_else(host_name);
    auth::check_name(&name).with_context(|| format!("--name {}", auth::shown(&name)))?;
    // One descriptor per link: a node of a large full topology needs many.
    crate::daemon::limits::raise_open_file_limit();
    let congestion = Congestion::for_links(args.tcp_congestion.clone())?;
    let listener =
        congestion.listen(args.listen).with_context(|| format!("binding the data listener on {}", args.listen))?;
    let bound = listener.local_addr()?;
    let shared = Arc::new(Shared {
        encrypted: args.security.encrypt,
        congestion,
        admission: Mutex::new(None),
        pending: PendingHandshakes::default(),
    });
    tokio::spawn(accept_links(listener, shared.clone()));
    tracing::info!(
        %bound,
        coordinator = %args.coordinator,
        encrypted = args.security.encrypt,
        congestion = %shared.congestion,
        host_default = crate::transport::tcp::host_default(),
        "node daemon listening"
    );
    loop {
        let stream = connect(&args.coordinator, args.connect_timeout).await?;
        match session(stream, bound, &name, &cluster_key, &args, &shared).await {
            SessionEnd::Closed => tracing::warn!("control link closed by the coordinator"),
            SessionEnd::Refused(reason) => bail!("refused by the coordinator: {reason}"),
            SessionEnd::Failed(error) => tracing::warn!(error = %format!("{error:#}"), "control link failed"),
        }
        if args.exit_with_coordinator {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// How a control session ended.
enum SessionEnd {
    /// The coordinator closed it (reconnect, unless told to exit with it).
    Closed,
    /// The coordinator refused this node for good (or could not prove the token): exit.
    Refused(String),
    /// It broke (reconnect).
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for SessionEnd {
    fn from(error: anyhow::Error) -> Self {
        SessionEnd::Failed(error)
    }
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

/// What the control loop is waiting on besides the coordinator.
enum Underway {
    Wired {
        epoch: u64,
        result: Result<Arc<Router>, WireError>,
    },
    Report(NodeReport),
    /// A link of wiring `epoch` failed.
    LinkFault {
        epoch: u64,
        peer: NodeId,
        cause: String,
        source: Option<NodeId>,
    },
}

/// One control session: authenticate and register, then serve wirings and runs.
async fn session(
    stream: TcpStream,
    bound: SocketAddr,
    name: &str,
    cluster_key: &Key,
    args: &NodeArgs,
    shared: &Arc<Shared>,
) -> SessionEnd {
    let data_addr = match &args.advertise {
        Some(address) => address.clone(),
        None if bound.ip().is_unspecified() => match stream.local_addr() {
            Ok(local) => SocketAddr::new(local.ip(), bound.port()).to_string(),
            Err(error) => return SessionEnd::Failed(error.into()),
        },
        None => bound.to_string(),
    };
    let purpose = Purpose::Node {
        name: name.to_owned(),
        data_addr: data_addr.clone(),
        memory_bytes: allocator::available_bytes().unwrap_or(0),
    };
    let channel = match handshake::initiate(stream, cluster_key, purpose, args.security.encrypt).await {
        Ok(channel) => channel,
        Err(error @ (HandshakeError::Refused(_) | HandshakeError::Impostor)) if !error.is_transient() => {
            return SessionEnd::Refused(error.to_string());
        }
        Err(error) => {
            return SessionEnd::Failed(anyhow::Error::new(error).context("the handshake with the coordinator"));
        }
    };
    let mut control =
        Framed::new(channel, LengthDelimitedCodec::builder().max_frame_length(MAX_ORDER_FRAME).new_codec());
    tracing::info!(%name, %data_addr, "registered with the coordinator");

    let (underway_tx, mut underway) = mpsc::unbounded_channel::<Underway>();
    let mut router: Option<Arc<Router>> = None;
    let mut wiring: Option<JoinHandle<()>> = None;
    // The run in progress: its id, its task, and (at a switch) the end of its part.
    let mut running: Option<(u64, JoinHandle<()>, CancellationToken)> = None;
    let end = loop {
        tokio::select! {
            message = control.next() => {
                let message: ToNode = match message {
                    None => break SessionEnd::Closed,
                    Some(Err(error)) => break SessionEnd::Failed(error.into()),
                    Some(Ok(body)) => match codec::decode(&body) {
                        Ok(message) => message,
                        Err(error) => break SessionEnd::Failed(anyhow::anyhow!("malformed control message: {error}")),
                    },
                };
                match message {
                    ToNode::Wire(order) => {
                        stop(&mut running, &mut wiring, &mut router);
                        let (shared, done, max_frame) = (shared.clone(), underway_tx.clone(), args.max_frame);
                        wiring = Some(tokio::spawn(async move {
                            let epoch = order.epoch;
                            let result = wire(&order, &shared, max_frame).await;
                            let _ = done.send(Underway::Wired { epoch, result });
                        }));
                    }
                    ToNode::Start { spec, limits } => {
                        let Some(wired) = router.clone() else {
                            // Unwired, this node may not know its id: the coordinator
                            // charges the refusal to the session it comes on.
                            let refusal = ToCoordinator::NotStarted { run: spec.run, reason: NOT_WIRED.to_owned() };
                            if let Err(error) = send(&mut control, &refusal).await {
                                break error.into();
                            }
                            continue;
                        };
                        if let Some((_, task, _)) = running.take() {
                            task.abort();
                        }
                        let done = underway_tx.clone();
                        let run_id = spec.run;
                        let end = CancellationToken::new();
                        let ended = end.clone();
                        running = Some((run_id, tokio::spawn(async move {
                            tracing::info!(run = spec.run, collective = %spec.collective, algorithm = %spec.algorithm, footprint_bytes = limits.footprint_bytes, counted = limits.counted, switch = is_switch(&wired), "run started");
                            let report = match is_switch(&wired) {
                                true => driver::forward(wired, &spec, &limits, ended).await,
                                false => driver::execute(wired, &spec, &limits).await,
                            };
                            allocator::release_freed_buffers();
                            tracing::info!(run = spec.run, verified = report.verified, error = ?report.error, "run finished");
                            let _ = done.send(Underway::Report(report));
                        }), end));
                    }
                    // A switch's part of a run ends when the coordinator ends it: it then
                    // reports what it forwarded (and stays owed to until it has).
                    ToNode::Abort { run } if router.as_ref().is_some_and(|wired| is_switch(wired)) => {
                        if let Some((_, _, end)) = running.as_ref().filter(|(id, _, _)| *id == run) {
                            end.cancel();
                        }
                    }
                    ToNode::Abort { run } => {
                        if let Some((_, task, _)) = running.take_if(|(id, _, _)| *id == run) {
                            task.abort();
                            allocator::release_freed_buffers();
                            tracing::warn!(run, "run aborted by the coordinator");
                        }
                    }
                    ToNode::Ping => {
                        if let Err(error) = send(&mut control, &ToCoordinator::Pong).await {
                            break error.into();
                        }
                    }
                    ToNode::ClockProbe { nonce } => {
                        let reply = ToCoordinator::ClockReply { nonce, node_ns: crate::timebase::now_ns() };
                        if let Err(error) = send(&mut control, &reply).await {
                            break error.into();
                        }
                    }
                    ToNode::Refused { reason } => break SessionEnd::Refused(reason),
                }
            }
            Some(done) = underway.recv() => {
                let message = match done {
                    Underway::Wired { epoch, result: Ok(wired) } => {
                        wiring = None;
                        watch_faults(&wired, epoch, underway_tx.clone());
                        router = Some(wired);
                        ToCoordinator::Wired { epoch }
                    }
                    Underway::LinkFault { epoch, peer, cause, source } => {
                        tracing::warn!(epoch, peer, %cause, "telling the coordinator a link failed");
                        ToCoordinator::LinkFault { epoch, peer, cause, source }
                    }
                    Underway::Wired { epoch, result: Err(error) } => {
                        wiring = None;
                        tracing::error!(epoch, error = %error.reason, unreachable = ?error.unreachable, missing = ?error.missing, "wiring failed");
                        ToCoordinator::WireFailed { epoch, reason: error.reason, unreachable: error.unreachable, missing: error.missing }
                    }
                    Underway::Report(report) => {
                        running = None;
                        ToCoordinator::Report(Box::new(report))
                    }
                };
                if let Err(error) = send(&mut control, &message).await {
                    break error.into();
                }
            }
        }
    };
    stop(&mut running, &mut wiring, &mut router);
    *shared.admission.lock().expect("admission lock") = None;
    end
}

/// Tells the control loop of the first link fault of `router`'s wiring (epoch `epoch`),
/// as soon as a link sees it; ends with the wiring.
fn watch_faults(router: &Router, epoch: u64, underway: mpsc::UnboundedSender<Underway>) {
    let mut faults = router.faults();
    tokio::spawn(async move {
        let Ok(fault) = faults.wait_for(Option::is_some).await.map(|fault| fault.clone()) else { return };
        if let Some(fault) = fault
            && let Some(peer) = fault.peer()
        {
            let source = fault.charged_source();
            let _ = underway.send(Underway::LinkFault { epoch, peer, cause: fault.to_string(), source });
        }
    });
}

/// Stops whatever runs on the current wiring, and the wiring itself.
fn stop(
    running: &mut Option<(u64, JoinHandle<()>, CancellationToken)>,
    wiring: &mut Option<JoinHandle<()>>,
    router: &mut Option<Arc<Router>>,
) {
    if let Some((_, task, _)) = running.take() {
        task.abort();
    }
    if let Some(task) = wiring.take() {
        task.abort();
    }
    if let Some(old) = router.take() {
        old.shutdown();
    }
}

/// Whether `router` is a switch's: a vertex of a switched network that only forwards.
fn is_switch(router: &Router) -> bool {
    router.topology().is_switch(router.id())
}

/// Why a node refuses a run it is sent before its links are up.
const NOT_WIRED: &str = "this node is not wired";

async fn send(control: &mut Control, message: &ToCoordinator) -> anyhow::Result<()> {
    let body = codec::encode(message)?;
    control.send(bytes::Bytes::from(body)).await.context("sending to the coordinator")
}

/// Why a wiring failed: the neighbours this node dialled and could not reach, and those
/// that never dialled in.
#[derive(Debug, Default)]
struct WireError {
    reason: String,
    unreachable: Vec<NodeId>,
    missing: Vec<NodeId>,
}

impl WireError {
    fn new(reason: impl Into<String>) -> Self {
        WireError { reason: reason.into(), ..WireError::default() }
    }
}

/// Opens every link of `wiring`: dials neighbours with higher ids, admits lower ones.
async fn wire(wiring: &Wiring, shared: &Arc<Shared>, max_frame: usize) -> Result<Arc<Router>, WireError> {
    let spec = &wiring.topology;
    let topology = spec.build().map_err(|e| WireError::new(e.to_string()))?;
    let me = wiring.id;
    // The coordinator scales the deadline with the cluster (`control::link_deadline`).
    let within = Duration::from_millis(wiring.link_within_ms).min(control::LONGEST_LINK_DEADLINE);
    let deadline = Instant::now() + within;
    let links: BTreeMap<NodeId, (String, Key)> =
        wiring.neighbours.iter().map(|n| (n.id, (n.address.clone(), n.key.clone()))).collect();
    for neighbour in topology.neighbours(me) {
        if !links.contains_key(&neighbour) {
            return Err(WireError::new(format!("the wiring gives no address for neighbour {neighbour}")));
        }
    }
    let expected: BTreeMap<NodeId, Key> =
        links.iter().filter(|&(&n, _)| n < me).map(|(&n, (_, key))| (n, key.clone())).collect();
    let (linked, mut inbound) = mpsc::unbounded_channel();
    *shared.admission.lock().expect("admission lock") = Some(Admission {
        epoch: wiring.epoch,
        id: me,
        expected: expected.clone(),
        linked,
        topology: topology.to_string(),
    });
    let dials: Vec<_> = links
        .iter()
        .filter(|&(&n, _)| n > me)
        .map(|(&peer, (address, key))| {
            let purpose = Purpose::Link { epoch: wiring.epoch, from: me, to: peer };
            let (address, key, shared) = (address.clone(), key.clone(), shared.clone());
            tokio::spawn(async move { (peer, dial(peer, address, key, purpose, &shared, deadline, within).await) })
        })
        .collect();
    let mut channels = Vec::new();
    let mut failures = Vec::new();
    let mut error = WireError::default();
    for dialled in futures::future::join_all(dials).await {
        match dialled {
            Ok((peer, Ok(channel))) => channels.push((peer, channel)),
            Ok((peer, Err(dial_error))) => {
                failures.push(format!("{dial_error:#}"));
                error.unreachable.push(peer);
            }
            Err(panicked) => failures.push(format!("a dial failed: {panicked}")),
        }
    }
    let mut waiting: BTreeSet<NodeId> = expected.into_keys().collect();
    while !waiting.is_empty() {
        match tokio::time::timeout_at(deadline, inbound.recv()).await {
            Ok(Some((peer, channel))) => {
                waiting.remove(&peer);
                channels.push((peer, channel));
            }
            Ok(None) => {
                failures.push("the data listener stopped".to_owned());
                break;
            }
            Err(_) => {
                let ids: Vec<String> = waiting.iter().map(NodeId::to_string).collect();
                failures.push(format!(
                    "neighbours {} did not dial this node within {within:?} (a node dials its higher-id \
                     neighbours once it has its own wiring; theirs say what they were waiting for)",
                    ids.join(", ")
                ));
                break;
            }
        }
    }
    if !failures.is_empty() {
        error.missing.extend(waiting);
        error.reason = failures.join("; ");
        return Err(error);
    }
    tracing::info!(epoch = wiring.epoch, id = me, %topology, links = channels.len(), "wired");
    let links = channels.into_iter().map(|(peer, channel)| (peer, StreamLink::new(channel, max_frame))).collect();
    Ok(Router::start_guarded(me, topology, links, Timeline::Real { offset_ns: 0 }))
}

/// Dials one higher-id neighbour until it admits us or the deadline passes, backing off
/// from 20 ms to 320 ms between tries (it may not have its wiring yet).
async fn dial(
    peer: NodeId,
    address: String,
    key: Key,
    purpose: Purpose,
    shared: &Shared,
    deadline: Instant,
    within: Duration,
) -> anyhow::Result<Channel<TcpStream>> {
    let mut pause = Duration::from_millis(20);
    let mut last_error = String::from("no answer");
    loop {
        let attempt = async {
            let stream = shared.congestion.connect(&address).await?;
            stream.set_nodelay(true)?;
            anyhow::Ok(handshake::initiate(stream, &key, purpose.clone(), shared.encrypted).await?)
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(channel)) => return Ok(channel),
            Ok(Err(error)) => {
                tracing::debug!(peer, %address, %error, "link not admitted yet; retrying");
                last_error = format!("{error:#}");
            }
            Err(_) => break,
        }
        if Instant::now() + pause >= deadline {
            break;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(320));
    }
    bail!("could not link to neighbour {peer} at {address} within {within:?} (last try: {last_error})")
}

/// Admits data links that fit the current wiring; refuses and logs every other.
async fn accept_links(listener: TcpListener, shared: Arc<Shared>) {
    let refusals = RefusalLog::start("data links");
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "data listener accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (shared, refusals) = (shared.clone(), refusals.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let gate = shared.as_ref();
            let accepted =
                handshake::accept_pending(stream, from, &shared.pending, &refusals, gate, shared.encrypted).await;
            // A refusal is counted in the refusal log.
            let Ok((hello, channel)) = accepted else { return };
            let Purpose::Link { epoch, from: peer, .. } = hello.purpose else { return };
            let admission = shared.admission.lock().expect("admission lock");
            if let Some(admission) = admission.as_ref().filter(|a| a.epoch == epoch) {
                let _ = admission.linked.send((peer, channel));
            }
        });
    }
}

impl Gate for Shared {
    /// The key of the link `hello` asks for, if it names a neighbour this node is
    /// waiting for in the current epoch.
    fn key_for(&self, hello: &Hello) -> Result<Key, GateRefusal> {
        let Purpose::Link { epoch, from, to } = hello.purpose else {
            return Err(GateRefusal::NotALink);
        };
        let admission = self.admission.lock().expect("admission lock");
        let Some(admission) = admission.as_ref() else {
            return Err(GateRefusal::NotWired);
        };
        if epoch != admission.epoch {
            return Err(GateRefusal::StaleEpoch { asked: epoch, current: admission.epoch });
        }
        if to != admission.id {
            return Err(GateRefusal::WrongNode { this: admission.id, asked: to });
        }
        admission.expected.get(&from).cloned().ok_or_else(|| GateRefusal::NotANeighbour {
            from,
            this: admission.id,
            topology: admission.topology.clone(),
        })
    }

    /// Takes the slot of the proven neighbour: once only.
    fn admit(&self, hello: &Hello) -> Result<(), GateRefusal> {
        let Purpose::Link { epoch, from, .. } = hello.purpose else {
            return Err(GateRefusal::NotALink);
        };
        let mut admission = self.admission.lock().expect("admission lock");
        let taken = admission.as_mut().filter(|a| a.epoch == epoch).and_then(|a| a.expected.remove(&from));
        match taken {
            Some(_) => Ok(()),
            None => Err(GateRefusal::AlreadyLinked { from }),
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "node".to_owned())
}

#[cfg(test)]
mod tests {
    use topocomm_proto::control::RunLimits;
    use topocomm_proto::spec::{Algorithm, Collective, RunSpec};

    use super::*;

    /// A coordinator's control port that admits any node proving its key.
    struct Admits(Key);

    impl Gate for Admits {
        fn key_for(&self, _: &Hello) -> Result<Key, GateRefusal> {
            Ok(self.0.clone())
        }
        fn admit(&self, _: &Hello) -> Result<(), GateRefusal> {
            Ok(())
        }
    }

    /// Issue 45, item 6: a daemon sent a run before any wiring does not know its id; it
    /// says it did not start and names no node (it once sent a report of node
    /// `usize::MAX`, which the coordinator had to overwrite).
    #[tokio::test]
    async fn a_daemon_started_before_it_is_wired_refuses_naming_no_node() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let args = NodeArgs {
            coordinator: listener.local_addr().unwrap().to_string(),
            security: SecurityArgs { token: Some("t".into()), token_file: None, encrypt: false },
            listen: "127.0.0.1:0".parse().unwrap(),
            advertise: None,
            name: Some("unwired".into()),
            max_frame: DEFAULT_MAX_FRAME,
            exit_with_coordinator: true,
            tcp_congestion: None,
            connect_timeout: Duration::from_secs(10),
        };
        let daemon = tokio::spawn(run(args));
        let (stream, _) = listener.accept().await.unwrap();
        let (_, channel) = handshake::accept(stream, &Admits(Key::from_token("t")), false).await.expect("registered");
        let mut control = Framed::new(channel, LengthDelimitedCodec::new());
        let spec = RunSpec { run: 7, ..RunSpec::new(Collective::Barrier, Algorithm::Hypercube) };
        let limits = RunLimits { footprint_bytes: 0, delivered: vec![], forwarded: vec![], counted: false };
        let start = ToNode::Start { spec: Box::new(spec), limits: Box::new(limits) };
        control.send(bytes::Bytes::from(codec::encode(&start).unwrap())).await.unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(10), control.next()).await.expect("an answer in time");
        let reply: ToCoordinator = codec::decode(&reply.expect("an answer").unwrap()).unwrap();
        assert_eq!(reply, ToCoordinator::NotStarted { run: 7, reason: NOT_WIRED.into() });
        drop(control);
        tokio::time::timeout(Duration::from_secs(10), daemon)
            .await
            .expect("exits with the coordinator")
            .unwrap()
            .unwrap();
    }
}
