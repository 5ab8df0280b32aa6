//! The lab's HTTP server (axum) and its JSON API. Every request passes the access
//! checks first (`access`); the API answers JSON documents stamped with the CLI's
//! `schema_version`, and `/api/events` streams server-sent events: the cluster whenever
//! it changes (nodes joining, leaving, the wiring) and each job's progress. Connections
//! come in through the door (`door`: caps and the header deadline).
//!
//! A run from the page takes the words `topocomm run` takes and goes through the same
//! code as the command line (`words` parses them, `work` carries them out); `explain`,
//! `simulate` and `sweep` take their commands' words the same way. Every job queues
//! (`jobs`): one at a time, a bounded queue (429 past it), each cancellable with
//! `DELETE /api/runs/ID`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use strum::IntoEnumIterator;
use tokio::net::TcpListener;
use tokio::sync::{RwLock, broadcast};
use topocomm_proto::auth::Key;
use topocomm_proto::control::RunOutcome;
use topocomm_proto::spec::{Collective, Dtype, ReduceOp, Routing};
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::control::client::Credentials;
use crate::control::local::LocalCluster;
use crate::control::run::Coordinator;
use crate::control::target::Target;
use crate::lab::LabArgs;
use crate::lab::access::{self, Access, Refusal, WrongTokens};
use crate::lab::assets;
use crate::lab::document::{self, Kind};
use crate::lab::door;
use crate::lab::jobs::{Jobs, NotCancelled, Status};
use crate::lab::work::{self, Job};
use crate::render::schema;
use crate::tools::simulate;

/// How often the cluster is looked at for changes to stream.
const CLUSTER_POLL: Duration = Duration::from_millis(400);

/// The most pages listening to the events at once (each holds a connection open).
pub const MOST_LISTENING: usize = 32;

/// The lab: who may use it, the cluster it shows and runs on, and the session's jobs.
pub struct Lab {
    access: Access,
    pub(crate) coordinator: Arc<Coordinator>,
    /// Where runs go; taken at shutdown.
    pub(crate) target: RwLock<Option<Target>>,
    jobs: Jobs<Job>,
    /// Bytes per directed link of the last run that came back: `[from, to, bytes]`.
    traffic: Mutex<Vec<[u64; 3]>>,
    events: broadcast::Sender<Value>,
    /// Pages listening to the events now.
    listening: AtomicUsize,
    /// Wrong tokens by address, to slow guessing.
    wrong_tokens: WrongTokens,
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
            jobs: Jobs::default(),
            traffic: Mutex::new(Vec::new()),
            events,
            listening: AtomicUsize::new(0),
            wrong_tokens: WrongTokens::default(),
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

/// Carries out the queued jobs, one at a time, until the lab stops; frees what each held
/// when it ends.
async fn work_through(lab: Arc<Lab>) {
    loop {
        let (id, args, job, stop) = lab.jobs.next().await;
        lab.update(id, Status::Running, None);
        let (status, note, document) = work::carry_out(&lab, id, &args, job, &stop).await;
        if let Some(summary) = lab.jobs.finish(id, status, note, document) {
            lab.tell(json!({ "type": "run", "run": summary }));
        }
        topocomm_node::daemon::allocator::release_freed_buffers();
    }
}

/// Serves the page and the API on `listener` until it fails.
async fn serve(listener: TcpListener, lab: Arc<Lab>) -> anyhow::Result<()> {
    tokio::spawn(watch_cluster(lab.clone()));
    tokio::spawn(work_through(lab.clone()));
    let api = Router::new()
        .route("/api", get(api_index))
        .route("/api/cluster", get(cluster))
        .route("/api/catalogue", get(catalogue_json))
        .route("/api/layout", get(layout))
        .route("/api/runs", get(runs).post(start))
        .route("/api/runs/{id}", get(run_document).delete(cancel))
        .route("/api/runs/{id}/page", get(run_page))
        .route("/api/sweeps/{id}", get(sweep_json))
        .route("/api/events", get(events));
    let pages = Router::new()
        .route("/", get(|| async { page(assets::INDEX, "text/html; charset=utf-8") }))
        .route("/lab.css", get(|| async { page(assets::STYLE, "text/css; charset=utf-8") }));
    let app = assets::SCRIPT_PARTS
        .iter()
        .fold(pages, |pages, part| {
            pages.route(part.path, get(move || async move { page(part.text, "text/javascript; charset=utf-8") }))
        })
        .merge(api)
        .layer(middleware::from_fn_with_state(lab.clone(), guard))
        .with_state(lab);
    door::serve(listener, app).await;
    Ok(())
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

/// The access checks, before every route; and the headers every answer carries. An
/// address that gave too many wrong tokens is told to wait (429) before its token is
/// looked at, so that the answer says nothing of its guess.
async fn guard(State(lab): State<Arc<Lab>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let value = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let api = request.uri().path().starts_with("/api");
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0.ip());
    let now = std::time::Instant::now();
    let guessing = api && lab.access.needs_token();
    if guessing && let Some(wait) = peer.and_then(|peer| lab.wrong_tokens.wait_for(peer, now)) {
        let error = format!(
            "too many wrong tokens from this address ({} in {} s): wait {} s",
            access::WRONG_TOKENS_ALLOWED,
            access::WRONG_TOKEN_WINDOW.as_secs(),
            wait.as_secs() + 1
        );
        let mut refused =
            (StatusCode::TOO_MANY_REQUESTS, Json(schema::versioned(json!({ "error": error })))).into_response();
        refused.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait.as_secs() + 1));
        return with_house_headers(refused);
    }
    let checked = lab.access.check(
        value(header::HOST),
        value(header::ORIGIN),
        headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()),
        value(header::AUTHORIZATION),
        api,
    );
    let response = match checked {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            // A request with no token at all is not a guess (the page's first, before it asks).
            if refusal == Refusal::Token
                && guessing
                && headers.contains_key(header::AUTHORIZATION)
                && let Some(peer) = peer
            {
                lab.wrong_tokens.failed(peer, now);
            }
            let status = if refusal == Refusal::Token { StatusCode::UNAUTHORIZED } else { StatusCode::FORBIDDEN };
            (status, Json(schema::versioned(json!({ "error": refusal.to_string() })))).into_response()
        }
    };
    with_house_headers(response)
}

/// The headers every answer carries: what the page may load, and that nothing is cached.
fn with_house_headers(mut response: Response) -> Response {
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
            "GET /api/runs": "the session's jobs, newest last: status queued, probing, running, verified, failed or cancelled",
            "POST /api/runs": "{\"kind\": \"run\"|\"explain\"|\"simulate\"|\"sweep\", \"args\": [words]}: queues one; 202 {id}, 400 {error} (bad words, or an option naming a file), 429 {error} (the queue is full)",
            "DELETE /api/runs/ID": "cancels a job waiting or running: 200 {its summary}, 404, or 409 (it is over)",
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
    Json(schema::versioned(json!({ "runs": lab.jobs.summaries() })))
}

/// JSON text kept as it was written.
fn json_text(text: bytes::Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

async fn run_document(State(lab): State<Arc<Lab>>, Path(id): Path<u64>) -> Response {
    match lab.jobs.get(id) {
        Some((_, _, Some(document))) => json_text(document),
        Some((_, summary, None)) => Json(schema::versioned(summary)).into_response(),
        None => not_found(&format!("run {id} in this session")),
    }
}

/// Entry `id`'s document, read back, if it has one (and is of `kind`, if given).
fn document_of(lab: &Lab, id: u64, kind: Option<Kind>) -> Option<Value> {
    let (found, _, document) = lab.jobs.get(id)?;
    if kind.is_some_and(|kind| kind != found) {
        return None;
    }
    serde_json::from_slice(&document?).ok()
}

/// A finished sweep as `topocomm sweep --json` writes it.
async fn sweep_json(State(lab): State<Arc<Lab>>, Path(id): Path<u64>) -> Response {
    match document_of(&lab, id, Some(Kind::Sweep)).and_then(|mut d| d.get_mut("result").map(Value::take)) {
        Some(result) => Json(result).into_response(),
        None => not_found(&format!("finished sweep {id} in this session")),
    }
}

async fn run_page(State(lab): State<Arc<Lab>>, Path(id): Path<u64>) -> Response {
    let Some(document) = document_of(&lab, id, None) else {
        return not_found(&format!("finished run {id} in this session"));
    };
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

/// Queues a run, a sweep, an explanation or a simulation from the command's words;
/// refuses bad words at once with the CLI's error text (400), and a job past the queue's
/// bound (429).
async fn start(State(lab): State<Arc<Lab>>, Json(start): Json<Start>) -> Response {
    let kind = match start.kind.as_str() {
        "run" => Kind::Run,
        "explain" => Kind::Explain,
        "simulate" => Kind::Simulate,
        "sweep" => Kind::Sweep,
        other => return bad_request(format!("error: no such kind {other:?}: run, explain, simulate or sweep")),
    };
    let job = match work::prepare(&lab, kind, &start.args).await {
        Ok(job) => job,
        Err(error) => return bad_request(error),
    };
    match lab.jobs.submit(kind, start.args, job) {
        Ok((id, summary)) => {
            lab.tell(json!({ "type": "run", "run": summary }));
            (StatusCode::ACCEPTED, Json(schema::versioned(json!({ "id": id })))).into_response()
        }
        Err(full) => {
            let error = schema::versioned(json!({ "error": format!("error: {full}") }));
            (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "5")], Json(error)).into_response()
        }
    }
}

/// Cancels a job waiting or running (`DELETE /api/runs/ID`): 200 with its summary; 404
/// if there is no such job, 409 if it is over.
async fn cancel(State(lab): State<Arc<Lab>>, Path(id): Path<u64>) -> Response {
    match lab.jobs.cancel(id) {
        Ok(summary) => {
            lab.tell(json!({ "type": "run", "run": summary.clone() }));
            Json(schema::versioned(summary)).into_response()
        }
        Err(refused) => {
            let status = match refused {
                NotCancelled::Unknown(_) => StatusCode::NOT_FOUND,
                NotCancelled::Finished(..) => StatusCode::CONFLICT,
            };
            (status, Json(schema::versioned(json!({ "error": format!("error: {refused}") })))).into_response()
        }
    }
}

/// One page listening; dropping it (the page went) frees its place.
struct Listening(Arc<Lab>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.listening.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Server-sent events: the cluster now, then every change and every job's progress; at
/// most [`MOST_LISTENING`] pages at once (429 past them).
async fn events(State(lab): State<Arc<Lab>>) -> Response {
    if lab.listening.fetch_add(1, Ordering::Relaxed) >= MOST_LISTENING {
        lab.listening.fetch_sub(1, Ordering::Relaxed);
        let error = format!("error: {MOST_LISTENING} pages are listening already: close one");
        return (StatusCode::TOO_MANY_REQUESTS, Json(schema::versioned(json!({ "error": error })))).into_response();
    }
    let place = Listening(lab.clone());
    let receiver = lab.events.subscribe();
    let first = lab.cluster().await;
    let stream = futures::stream::unfold((Some(first), receiver, place), |(first, mut receiver, place)| async move {
        if let Some(first) = first {
            return Some((Ok(Event::default().data(first.to_string())), (None, receiver, place)));
        }
        loop {
            match receiver.recv().await {
                Ok(value) => return Some((Ok(Event::default().data(value.to_string())), (None, receiver, place))),
                // A slow page missed some: it still gets the next ones.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let stream: std::pin::Pin<Box<dyn Stream<Item = Result<Event, std::convert::Infallible>> + Send>> =
        Box::pin(stream);
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}
