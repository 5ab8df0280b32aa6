//! The lab's HTTP server (axum) and its JSON API. Every request passes the access
//! checks first (`access`); the API answers JSON documents stamped with the CLI's
//! `schema_version`, and `/api/events` streams server-sent events: the cluster whenever
//! it changes (nodes joining, leaving, the wiring) and each run's progress.
//!
//! A run from the page takes the words `topocomm run` takes and goes through the same
//! code as the command line: clap parses them (a bad word gets the CLI's error text),
//! `request::plan` plans them, `tools::execute` runs them on the lab's `Target`.
//! `explain`, `simulate` and `sweep` take their commands' words the same way; a sweep
//! runs through `tools::sweep::measure_points`, as `topocomm sweep` does.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use clap::Parser;
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Mutex;
use strum::IntoEnumIterator;
use tokio::net::TcpListener;

use tokio::sync::{RwLock, broadcast};
use topocomm_collectives::simulator::{self, Options};
use topocomm_proto::auth::Key;
use topocomm_proto::control::RunOutcome;
use topocomm_proto::spec::{Collective, Dtype, ReduceOp, Routing};
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::control::client::Credentials;
use crate::control::local::{Capacity, LocalCluster};
use crate::control::request::{self, CollectiveArgs, IterationArgs};
use crate::control::run::Coordinator;
use crate::control::target::Target;
use crate::lab::LabArgs;
use crate::lab::access::{Access, Refusal};
use crate::lab::assets;
use crate::lab::document::{self, Kind};
use crate::render::schema;
use crate::tools::execute::{self, Stage};
use crate::tools::explain::{self, ExplainArgs};
use crate::tools::simulate::{self, SimulateArgs};
use crate::tools::sweep::{self, SweepArgs};

/// Runs the history keeps (the oldest go first).
const MOST_KEPT: usize = 50;

/// How often the cluster is looked at for changes to stream.
const CLUSTER_POLL: Duration = Duration::from_millis(400);

/// The words of `topocomm run` the page may give: what to run and how often (the cluster
/// is the lab's own).
#[derive(Debug, Parser)]
#[command(name = "run", about = None)]
struct RunWords {
    #[command(flatten)]
    what: CollectiveArgs,
    #[command(flatten)]
    repeat: IterationArgs,
}

/// The words of `topocomm explain`.
#[derive(Debug, Parser)]
#[command(name = "explain")]
struct ExplainWords {
    #[command(flatten)]
    args: ExplainArgs,
}

/// The words of `topocomm simulate`.
#[derive(Debug, Parser)]
#[command(name = "simulate")]
struct SimulateWords {
    #[command(flatten)]
    args: SimulateArgs,
}

/// The words of `topocomm sweep`.
#[derive(Debug, Parser)]
#[command(name = "sweep")]
struct SweepWords {
    #[command(flatten)]
    args: SweepArgs,
}

/// One entry of the session's history.
struct Entry {
    id: u64,
    kind: Kind,
    args: Vec<String>,
    /// "queued", "probing", "running", "verified", "failed".
    status: String,
    /// What the run said on the way (the dilation chosen) or why it failed.
    note: Option<String>,
    document: Option<Arc<Value>>,
}

impl Entry {
    fn summary(&self) -> Value {
        json!({
            "id": self.id, "kind": self.kind.name(), "args": self.args, "status": self.status, "note": self.note,
            "title": self.document.as_ref().and_then(|d| d.get("title").cloned()),
        })
    }
}

#[derive(Default)]
struct History {
    next: u64,
    entries: VecDeque<Entry>,
}

/// The lab: who may use it, the cluster it shows and runs on, and the session's runs.
pub struct Lab {
    access: Access,
    coordinator: Arc<Coordinator>,
    /// Where runs go; taken at shutdown.
    target: RwLock<Option<Target>>,
    history: Mutex<History>,
    /// Bytes per directed link of the last run that came back: `[from, to, bytes]`.
    traffic: Mutex<Vec<[u64; 3]>>,
    events: broadcast::Sender<Value>,
}

/// Binds the page's listener on `address` and sets its access policy; refuses an
/// address off loopback without a token before anything starts.
async fn bind(address: &str, token: Option<&str>) -> anyhow::Result<(TcpListener, Access)> {
    let listener = TcpListener::bind(address).await.with_context(|| format!("binding the lab's page on {address}"))?;
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
    let local = LocalCluster::start(args.nodes, &logs, args.security.encrypt, tuning).await?;
    let coordinator = local.coordinator.clone();
    let url = format!("http://{}/", listener.local_addr()?);
    eprintln!(
        "local cluster: {} node processes, coordinator on {}, node logs in {}/node-*.log",
        args.nodes,
        local.address,
        local.logs.display()
    );
    let lab = Arc::new(Lab::new(access, coordinator, Target::Local(local)));
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
            history: Mutex::new(History::default()),
            traffic: Mutex::new(Vec::new()),
            events,
        }
    }

    /// The cluster as the page shows it: every node (id, name, address, memory, whether
    /// connected), the topology in force with its layout, and the last run's traffic.
    async fn cluster(&self) -> Value {
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
        let topology = status
            .topology
            .as_ref()
            .and_then(|t| Topology::new(t.kind, t.p, Some(&t.dims)).ok())
            .map(|t| document::topology(&t));
        let traffic = if topology.is_some() { self.traffic.lock().expect("traffic lock").clone() } else { Vec::new() };
        schema::versioned(json!({
            "type": "cluster", "expected": status.expected, "nodes": nodes, "topology": topology, "traffic": traffic,
        }))
    }

    /// Tells every page listening.
    fn tell(&self, event: Value) {
        let _ = self.events.send(event);
    }

    /// Sets entry `id`'s status (and note, document) and tells the pages.
    fn update(&self, id: u64, status: &str, note: Option<String>, document: Option<Value>) {
        let mut history = self.history.lock().expect("history lock");
        if let Some(entry) = history.entries.iter_mut().find(|e| e.id == id) {
            entry.status = status.to_owned();
            if note.is_some() {
                entry.note = note;
            }
            if let Some(document) = document {
                entry.document = Some(Arc::new(document));
            }
            let summary = entry.summary();
            drop(history);
            self.tell(json!({ "type": "run", "run": summary }));
        }
    }

    /// Records a new entry and returns its id.
    fn record(&self, kind: Kind, args: Vec<String>) -> u64 {
        let mut history = self.history.lock().expect("history lock");
        history.next += 1;
        let id = history.next;
        history.entries.push_back(Entry { id, kind, args, status: "queued".into(), note: None, document: None });
        while history.entries.len() > MOST_KEPT {
            history.entries.pop_front();
        }
        let summary = history.entries.back().map(Entry::summary);
        drop(history);
        self.tell(json!({ "type": "run", "run": summary }));
        id
    }
}

/// Serves the page and the API on `listener` until it fails.
async fn serve(listener: TcpListener, lab: Arc<Lab>) -> anyhow::Result<()> {
    tokio::spawn(watch_cluster(lab.clone()));
    let api = Router::new()
        .route("/api", get(api_index))
        .route("/api/cluster", get(cluster))
        .route("/api/catalogue", get(catalogue_json))
        .route("/api/layout", get(layout))
        .route("/api/runs", get(runs).post(start))
        .route("/api/runs/{id}", get(run_document))
        .route("/api/runs/{id}/page", get(run_page))
        .route("/api/sweeps/{id}", get(sweep_json))
        .route("/api/events", get(events));
    let app = Router::new()
        .route("/", get(|| async { page(assets::INDEX, "text/html; charset=utf-8") }))
        .route("/lab.js", get(|| async { page(assets::SCRIPT, "text/javascript; charset=utf-8") }))
        .route("/lab.css", get(|| async { page(assets::STYLE, "text/css; charset=utf-8") }))
        .merge(api)
        .layer(middleware::from_fn_with_state(lab.clone(), guard))
        .with_state(lab);
    axum::serve(listener, app).await.context("serving the lab's page")
}

/// Streams the cluster to the pages whenever it changes.
async fn watch_cluster(lab: Arc<Lab>) {
    let mut last = Value::Null;
    loop {
        let now = lab.cluster().await;
        if now != last {
            lab.tell(now.clone());
            last = now;
        }
        tokio::time::sleep(CLUSTER_POLL).await;
    }
}

/// The access checks, before every route; and the headers every answer carries.
async fn guard(State(lab): State<Arc<Lab>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let value = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let api = request.uri().path().starts_with("/api");
    let checked = lab.access.check(
        value(header::HOST),
        value(header::ORIGIN),
        headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()),
        value(header::AUTHORIZATION),
        api,
    );
    let mut response = match checked {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            let status = if refusal == Refusal::Token { StatusCode::UNAUTHORIZED } else { StatusCode::FORBIDDEN };
            (status, Json(schema::versioned(json!({ "error": refusal.to_string() })))).into_response()
        }
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
             frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// A refusal of what the user asked, with the CLI's words for it.
fn bad_request(error: impl std::fmt::Display) -> Response {
    (StatusCode::BAD_REQUEST, Json(schema::versioned(json!({ "error": error.to_string() })))).into_response()
}

fn not_found(what: &str) -> Response {
    (StatusCode::NOT_FOUND, Json(schema::versioned(json!({ "error": format!("no {what}") })))).into_response()
}

async fn api_index(State(lab): State<Arc<Lab>>) -> Json<Value> {
    Json(schema::versioned(json!({
        "needs_token": lab.access.needs_token(),
        "endpoints": {
            "GET /api/cluster": "the nodes, the topology in force with its layout, the last run's traffic",
            "GET /api/catalogue": "collectives and their algorithms, topologies, element types, operators",
            "GET /api/layout?topology=T&nodes=N&dims=D": "a topology and the layout of its picture",
            "GET /api/runs": "the session's runs, newest last",
            "POST /api/runs": "{\"kind\": \"run\"|\"explain\"|\"simulate\"|\"sweep\", \"args\": [words]}: starts one; 202 {id}, or 400 {error}",
            "GET /api/runs/ID": "a run's document: its result (the CLI's JSON), topology and message flow",
            "GET /api/runs/ID/page": "the run as one self-contained HTML page that plays offline",
            "GET /api/sweeps/ID": "a finished sweep as `topocomm sweep --json` writes it",
            "GET /api/events": "server-sent events: {type: cluster} on every change, {type: run} on every step of a run",
        },
    })))
}

async fn cluster(State(lab): State<Arc<Lab>>) -> Json<Value> {
    Json(lab.cluster().await)
}

/// What the form offers: every collective with its algorithms, and the names of the
/// topologies, element types, operators and routings.
async fn catalogue_json() -> Json<Value> {
    let collectives: Vec<Value> = Collective::iter()
        .map(|c| {
            let algorithms: Vec<String> = catalogue::algorithms(c).map(|e| e.algorithm.to_string()).collect();
            json!({ "name": c.to_string(), "algorithms": algorithms, "rooted": c.has_root(), "reduces": c.reduces() })
        })
        .collect();
    let names = |items: Vec<String>| Value::from(items);
    Json(schema::versioned(json!({
        "collectives": collectives,
        "topologies": names(TopologyKind::iter().map(|k| k.to_string()).collect()),
        "dtypes": names(Dtype::iter().map(|d| d.to_string()).collect()),
        "ops": names(ReduceOp::iter().map(|o| o.to_string()).collect()),
        "routings": names(Routing::iter().map(|r| r.to_string()).collect()),
    })))
}

#[derive(Debug, Deserialize)]
struct Shape {
    topology: String,
    nodes: usize,
    dims: Option<String>,
}

/// A topology and its layout (the form's preview of a shape).
async fn layout(Query(shape): Query<Shape>) -> Response {
    let parsed = (|| -> anyhow::Result<Topology> {
        let kind = crate::control::parse::parse_topology(&shape.topology)?;
        let dims =
            shape.dims.as_deref().filter(|d| !d.is_empty()).map(crate::control::parse::parse_dims).transpose()?;
        anyhow::ensure!(shape.nodes <= simulate::MOST_NODES_DRAWN, "the page draws at most 1024 nodes");
        Ok(Topology::new(kind, shape.nodes, dims.as_deref())?)
    })();
    match parsed {
        Ok(topology) => Json(schema::versioned(document::topology(&topology))).into_response(),
        Err(error) => bad_request(format!("error: {error:#}")),
    }
}

async fn runs(State(lab): State<Arc<Lab>>) -> Json<Value> {
    let history = lab.history.lock().expect("history lock");
    let runs: Vec<Value> = history.entries.iter().map(Entry::summary).collect();
    Json(schema::versioned(json!({ "runs": runs })))
}

async fn run_document(State(lab): State<Arc<Lab>>, Path(id): Path<u64>) -> Response {
    let history = lab.history.lock().expect("history lock");
    match history.entries.iter().find(|e| e.id == id) {
        Some(Entry { document: Some(document), .. }) => Json(document.as_ref().clone()).into_response(),
        Some(entry) => Json(schema::versioned(entry.summary())).into_response(),
        None => not_found(&format!("run {id} in this session")),
    }
}

/// A finished sweep as `topocomm sweep --json` writes it.
async fn sweep_json(State(lab): State<Arc<Lab>>, Path(id): Path<u64>) -> Response {
    let history = lab.history.lock().expect("history lock");
    let found = history.entries.iter().find(|e| e.id == id && e.kind == Kind::Sweep);
    match found.and_then(|e| e.document.as_ref()).and_then(|d| d.get("result")) {
        Some(result) => Json(result.clone()).into_response(),
        None => not_found(&format!("finished sweep {id} in this session")),
    }
}

async fn run_page(State(lab): State<Arc<Lab>>, Path(id): Path<u64>) -> Response {
    let document = {
        let history = lab.history.lock().expect("history lock");
        history.entries.iter().find(|e| e.id == id).and_then(|e| e.document.clone())
    };
    let Some(document) = document else { return not_found(&format!("finished run {id} in this session")) };
    match assets::standalone(&document) {
        Ok(page) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8".to_owned()),
                (header::CONTENT_DISPOSITION, format!("attachment; filename=\"topocomm-run-{id}.html\"")),
            ],
            page,
        )
            .into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}")).into_response(),
    }
}

/// What the page asks to start.
#[derive(Debug, Deserialize)]
struct Start {
    kind: String,
    args: Vec<String>,
}

/// Starts a run, a schedule or a simulation from the command's words; refuses bad words
/// at once with the CLI's error text.
async fn start(State(lab): State<Arc<Lab>>, Json(start): Json<Start>) -> Response {
    let kind = match start.kind.as_str() {
        "run" => Kind::Run,
        "explain" => Kind::Explain,
        "simulate" => Kind::Simulate,
        "sweep" => Kind::Sweep,
        other => return bad_request(format!("error: no such kind {other:?}: run, explain, simulate or sweep")),
    };
    let job = match prepare(&lab, kind, &start.args).await {
        Ok(job) => job,
        Err(error) => return bad_request(error),
    };
    let id = lab.record(kind, start.args.clone());
    let args = start.args;
    tokio::spawn(async move { carry_out(lab, id, args, job).await });
    (StatusCode::ACCEPTED, Json(schema::versioned(json!({ "id": id })))).into_response()
}

/// A job checked and ready to go.
enum Job {
    Run(request::Planned),
    Explain(Box<ExplainArgs>),
    Simulate(Box<SimulateArgs>),
    Sweep(Box<SweepJob>),
}

/// A sweep checked and ready to go, as `topocomm sweep` prepares it.
struct SweepJob {
    args: SweepArgs,
    algorithms: Vec<topocomm_proto::spec::Algorithm>,
    sizes: Vec<u64>,
    /// Sizes left out, with the reason.
    skipped: Vec<String>,
    predict_with: Option<topocomm_proto::spec::LinkModel>,
    repetition: request::Repetition,
}

/// Parses `args` as the command `kind` would, with `name` as the command's name; the
/// error is the text the CLI prints.
fn words<T: Parser>(name: &str, args: &[String]) -> Result<T, String> {
    T::try_parse_from(std::iter::once(name.to_owned()).chain(args.iter().cloned())).map_err(|e| e.render().to_string())
}

/// Checks `args` as `kind`'s command does before it starts anything.
async fn prepare(lab: &Lab, kind: Kind, args: &[String]) -> Result<Job, String> {
    let cli = |error: anyhow::Error| format!("error: {error:#}");
    match kind {
        Kind::Run => {
            let parsed: RunWords = words("run", args)?;
            let mut planned = request::plan(&parsed.what, parsed.repeat.repetition(false)).map_err(cli)?;
            // The page animates the run's own message flow, gathered from every node.
            planned.request.spec.trace = true;
            let request = &planned.request;
            let p = lab.coordinator.cluster.status().expected;
            Topology::new(request.topology, p, request.dims.as_deref()).map_err(|e| cli(e.into()))?;
            request.spec.validate(p).map_err(|e| cli(e.into()))?;
            if let Some(Target::Local(_)) = lab.target.read().await.as_ref() {
                Capacity::of_this_machine()
                    .check_run(&request.spec, request.topology, p, lab.coordinator.tuning())
                    .map_err(|e| cli(e.into()))?;
            }
            Ok(Job::Run(planned))
        }
        Kind::Explain => Ok(Job::Explain(Box::new(words::<ExplainWords>("explain", args)?.args))),
        Kind::Simulate | Kind::Scaling | Kind::Steps => {
            let parsed = words::<SimulateWords>("simulate", args)?.args;
            if parsed.links.dilation.is_some() {
                return Err(cli(anyhow::anyhow!(simulate::SIMULATED_TIME_UNDILATED)));
            }
            Ok(Job::Simulate(Box::new(parsed)))
        }
        Kind::Sweep => {
            let mut args = words::<SweepWords>("sweep", args)?.args;
            let writes = [("--csv", &args.csv), ("--json", &args.json), ("--plot", &args.plot)];
            if let Some((option, _)) = writes.iter().find(|(_, path)| path.is_some()) {
                return Err(format!(
                    "error: {option}: the lab writes no files on its host; its page shows the sweep, and \
                     \"Save JSON\" (or GET /api/sweeps/ID) gives what --json writes"
                ));
            }
            // The sweep goes to the lab's cluster, whose size is fixed (as a run's).
            args.nodes = lab.coordinator.cluster.status().expected;
            Topology::new(args.shape.topology, args.nodes, args.shape.dims.as_deref()).map_err(|e| cli(e.into()))?;
            let algorithms = sweep::algorithms(&args).map_err(cli)?;
            let repetition = args.repeat.repetition(false);
            let capacity = match lab.target.read().await.as_ref() {
                Some(Target::Local(_)) => Some(Capacity::of_this_machine()),
                _ => None,
            };
            let (sizes, skipped) =
                sweep::runnable_sizes(&args, algorithms[0], repetition, capacity.as_ref(), lab.coordinator.tuning())
                    .map_err(cli)?;
            if sizes.is_empty() {
                return Err(format!("error: no size of --sizes can run ({})", skipped.join("; ")));
            }
            let predict_with = request::link_models(&args.links).map_err(cli)?.1;
            Ok(Job::Sweep(Box::new(SweepJob { args, algorithms, sizes, skipped, predict_with, repetition })))
        }
    }
}

/// Carries out job `id` and records its document (or why it failed).
async fn carry_out(lab: Arc<Lab>, id: u64, args: Vec<String>, job: Job) {
    let result = match job {
        Job::Run(planned) => {
            let target = lab.target.read().await;
            let Some(target) = target.as_ref() else {
                lab.update(id, "failed", Some("the lab is stopping".into()), None);
                return;
            };
            let on_stage = |stage: Stage| {
                let (status, note) = match stage {
                    Stage::Probing => ("probing", None),
                    Stage::Dilated(chosen) => ("probing", chosen.announcement(true)),
                    Stage::Running => ("running", None),
                };
                lab.update(id, status, note, None);
            };
            match execute::run(target, planned, lab.coordinator.tuning(), &on_stage).await {
                Ok(executed) => {
                    remember_traffic(&lab, &executed.outcome);
                    let verified = executed.summary.is_ok();
                    let failure = executed.summary.as_ref().err().map(|f| format!("error: {f}"));
                    document::of_run(&executed, &args).map(|d| (d, verified, failure))
                }
                Err(error) => Err(error),
            }
        }
        Job::Explain(words) => {
            lab.update(id, "running", None, None);
            let coordinator = lab.coordinator.clone();
            blocking(move || {
                let explained = explain::explain(&words.what, coordinator.tuning())?;
                let flow = document::flow(
                    &explained.prediction.events,
                    &format!("cost model's schedule, {}", crate::render::trace::describe_links(&explained.links)),
                );
                let result = schema::versioned(explain::to_json(&explained));
                let doc = document::document(Kind::Explain, &explained.spec, &explained.topology, &args, result, flow);
                Ok((doc, true, None))
            })
            .await
        }
        Job::Simulate(words) => {
            lab.update(id, "running", None, None);
            blocking(move || simulated(&words, &args)).await
        }
        Job::Sweep(job) => {
            let target = lab.target.read().await;
            let Some(target) = target.as_ref() else {
                lab.update(id, "failed", Some("the lab is stopping".into()), None);
                return;
            };
            swept(&lab, id, target, &job, &args).await
        }
    };
    match result {
        Ok((document, true, _)) => lab.update(id, "verified", None, Some(document)),
        Ok((document, false, failure)) => lab.update(id, "failed", failure, Some(document)),
        Err(error) => lab.update(id, "failed", Some(format!("error: {error:#}")), None),
    }
}

/// `simulate`: one point with its message flow, or (a range of node counts, several
/// topologies or algorithms) every point's figures, for the page's scaling plot.
fn simulated(args: &SimulateArgs, words: &[String]) -> anyhow::Result<(Value, bool, Option<String>)> {
    let (_, predict_with) = request::link_models(&args.links)?;
    let (links, _) = explain::physics(predict_with, &args.links)?;
    let planned = simulate::plan(args)?;
    let [point] = planned.as_slice() else { return scaling(args, &planned, links, words) };
    if point.topology.p() > simulate::MOST_NODES_DRAWN {
        return by_steps(args, point, links, words);
    }
    let options = Options { run: 1, record: true, wall_limit: Some(args.timeout), ..Options::default() };
    let ran = simulator::spec::run(&point.spec, &point.topology, links, point.inputs, options)?;
    let described = simulate::describe(point, &ran, &links);
    let verified = described.verified;
    let source = format!(
        "simulated ({}), {}",
        if verified { "verified" } else { "lengths only" },
        crate::render::trace::describe_links(&links)
    );
    let flow = document::flow(&ran.events, &source);
    let result = schema::versioned_json(&described)?;
    Ok((document::document(Kind::Simulate, &point.spec, &point.topology, words, result, flow), true, None))
}

/// A sweep on the lab's cluster through the code of `topocomm sweep`, each point's
/// progress told to the pages; its document holds what `sweep --json` writes. A failed
/// point stops the sweep, and the points measured before it are kept.
async fn swept(
    lab: &Lab,
    id: u64,
    target: &Target,
    job: &SweepJob,
    words: &[String],
) -> anyhow::Result<(Value, bool, Option<String>)> {
    let SweepJob { args, algorithms, sizes, skipped, predict_with, repetition } = job;
    lab.update(id, "running", skipped.first().cloned(), None);
    let mut on_step = |step: sweep::Step<'_>| -> anyhow::Result<()> {
        let note = match step {
            sweep::Step::Starting { index, of, algorithm, size } => {
                format!("point {} of {of}: {algorithm} at {}", index + 1, crate::render::quantity::size_text(size))
            }
            sweep::Step::Measured { index, summary, .. } => {
                format!("point {} verified: {:.1} µs", index + 1, summary.time_us.mean)
            }
        };
        lab.update(id, "running", Some(note), None);
        Ok(())
    };
    let mut measured = sweep::Sweep::default();
    let result =
        sweep::measure_points(args, target, algorithms, sizes, *predict_with, *repetition, &mut measured, &mut on_step)
            .await;
    let Some(topology) = measured.topology.clone() else {
        return Err(result.err().unwrap_or_else(|| anyhow::anyhow!("the sweep measured nothing")));
    };
    let failure = result.err().map(|error| format!("error: {error:#}"));
    let links = match &measured.links {
        Some(l) if l.emulated => "emulated links".to_owned(),
        Some(_) => "full-speed links, the model from the calibration".to_owned(),
        None => "full-speed links".to_owned(),
    };
    let title = format!(
        "{} swept over {} sizes and {} algorithm{} on a {topology}, {links}",
        args.collective,
        sizes.len(),
        algorithms.len(),
        if algorithms.len() == 1 { "" } else { "s" }
    );
    let document = schema::versioned(json!({
        "kind": Kind::Sweep.name(), "title": title, "args": words,
        "result": sweep::json_of(args, &measured, &topology),
        "skipped": skipped,
    }));
    Ok((document, failure.is_none(), failure))
}

/// Messages a simulation too large to animate may have for the page to aggregate them
/// by step: the flow of each is held in memory while it is aggregated.
const MOST_MESSAGES_AGGREGATED: u64 = 4_000_000;

/// `simulate` of more nodes than the page animates: the point's figures (as
/// `simulate --json`) and its flow aggregated by step (`document::by_step`). It is
/// simulated first without its flow, whose number of messages says whether the flow
/// may be recorded; one of more messages gets its figures only.
fn by_steps(
    args: &SimulateArgs,
    point: &simulate::Planned,
    links: topocomm_proto::spec::LinkModel,
    words: &[String],
) -> anyhow::Result<(Value, bool, Option<String>)> {
    let options = |record| Options { run: 1, record, wall_limit: Some(args.timeout), ..Options::default() };
    let ran = simulator::spec::run(&point.spec, &point.topology, links, point.inputs, options(false))?;
    let described = simulate::describe(point, &ran, &links);
    let steps = if described.frames_sent <= MOST_MESSAGES_AGGREGATED {
        let recorded = simulator::spec::run(&point.spec, &point.topology, links, point.inputs, options(true))?;
        Some(document::by_step(&recorded.events))
    } else {
        None
    };
    let title = format!(
        "{} ({}) on a {}, {} per node, by step",
        point.spec.collective,
        point.spec.algorithm,
        point.topology,
        crate::render::quantity::size_text(point.spec.size_bytes)
    );
    let note = match &steps {
        Some(_) => format!("more than {} nodes: aggregated by step instead of animated", simulate::MOST_NODES_DRAWN),
        None => format!("{} messages: too many to aggregate by step here", described.frames_sent),
    };
    let document = schema::versioned(json!({
        "kind": Kind::Steps.name(), "title": title, "args": words, "note": note,
        "result": schema::versioned_json(&described)?,
        "steps": steps,
        "source": format!("simulated, {}", crate::render::trace::describe_links(&links)),
    }));
    Ok((document, true, None))
}

/// Every point of a `simulate` of several points, as `simulate --json` gives them.
fn scaling(
    args: &SimulateArgs,
    planned: &[simulate::Planned],
    links: topocomm_proto::spec::LinkModel,
    words: &[String],
) -> anyhow::Result<(Value, bool, Option<String>)> {
    let mut points = Vec::new();
    let mut failures = Vec::new();
    for point in planned {
        let options = Options { run: 1, record: false, wall_limit: Some(args.timeout), ..Options::default() };
        match simulator::spec::run(&point.spec, &point.topology, links, point.inputs, options) {
            Ok(ran) => points.push(simulate::describe(point, &ran, &links)),
            Err(error) => failures.push(format!("{} on a {}: {error}", point.spec.collective, point.topology)),
        }
    }
    let title = format!(
        "{} simulated at {} points, {}",
        args.collective,
        planned.len(),
        crate::render::trace::describe_links(&links)
    );
    let failure = (!failures.is_empty()).then(|| format!("error: {}", failures.join("; ")));
    let document = schema::versioned(json!({
        "kind": Kind::Scaling.name(), "title": title, "args": words,
        "result": { "points": points, "failures": failures },
    }));
    Ok((document, failures.is_empty(), failure))
}

/// Runs `work` on the blocking pool (the model and the simulator compute for a while).
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work).await.context("the computation panicked")?
}

fn remember_traffic(lab: &Lab, outcome: &RunOutcome) {
    let traffic: Vec<[u64; 3]> = outcome
        .reports
        .iter()
        .flat_map(|r| r.link_bytes.iter().map(move |&(to, bytes)| [r.node as u64, to as u64, bytes]))
        .collect();
    *lab.traffic.lock().expect("traffic lock") = traffic;
}

/// Server-sent events: the cluster now, then every change and every run's progress.
async fn events(State(lab): State<Arc<Lab>>) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let receiver = lab.events.subscribe();
    let first = lab.cluster().await;
    let stream = futures::stream::unfold((Some(first), receiver), |(first, mut receiver)| async move {
        if let Some(first) = first {
            return Some((Ok(Event::default().data(first.to_string())), (None, receiver)));
        }
        loop {
            match receiver.recv().await {
                Ok(value) => return Some((Ok(Event::default().data(value.to_string())), (None, receiver))),
                // A slow page missed some: it still gets the next ones.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
