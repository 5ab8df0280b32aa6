//! The lab's routes: the page's files and the JSON API's handlers, every one behind the
//! access checks (`guard`) and answering with the house's headers. The event stream
//! is `events`'; the jobs the API queues are carried out by `work`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use strum::IntoEnumIterator;
use topocomm_proto::spec::{Collective, Dtype, Ports, ReduceOp, Routing};
use topocomm_proto::{Topology, TopologyKind, catalogue};

use crate::lab::access::{self, Refusal};
use crate::lab::assets;
use crate::lab::document::{self, Kind};
use crate::lab::jobs::NotCancelled;
use crate::lab::work;
use crate::render::schema;
use crate::tools::simulate;

use crate::lab::events;
use crate::lab::server::Lab;

/// The page and the API, every route behind the access checks.
pub(super) fn app(lab: Arc<Lab>) -> Router {
    let api = Router::new()
        .route("/api", get(api_index))
        .route("/api/cluster", get(cluster))
        .route("/api/catalogue", get(catalogue_json))
        .route("/api/layout", get(layout))
        .route("/api/runs", get(runs).post(start))
        .route("/api/runs/{id}", get(run_document).delete(cancel))
        .route("/api/runs/{id}/page", get(run_page))
        .route("/api/sweeps/{id}", get(sweep_json))
        .route("/api/events", get(events::events));
    let pages = Router::new()
        .route("/", get(|| async { page(assets::INDEX, "text/html; charset=utf-8") }))
        .route("/lab.css", get(|| async { page(assets::STYLE, "text/css; charset=utf-8") }));
    assets::SCRIPT_PARTS
        .iter()
        .fold(pages, |pages, part| {
            pages.route(part.path, get(move || async move { page(part.text, "text/javascript; charset=utf-8") }))
        })
        .merge(api)
        .layer(middleware::from_fn_with_state(lab.clone(), guard))
        .with_state(lab)
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
            "GET /api/layout?topology=T&nodes=N&dims=D": "a topology of N ranks (or of daemons=N, the cluster's) and the layout of its picture",
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
/// topologies, element types, operators, routings and port models.
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
        "ports": names(Ports::iter().map(|p| p.to_string()).collect()),
    })))
}

/// A shape the form previews: a topology and its dims, of `nodes` ranks (an
/// explanation's or a simulation's) or on `daemons` daemons (a run's or a sweep's on the
/// lab's cluster, whose daemons are the ranks and a switched network's switches).
#[derive(Debug, Deserialize)]
struct Shape {
    topology: String,
    nodes: Option<usize>,
    daemons: Option<usize>,
    dims: Option<String>,
}

/// A topology and its layout (the form's preview of a shape).
async fn layout(Query(shape): Query<Shape>) -> Response {
    let parsed = (|| -> anyhow::Result<Topology> {
        let kind = crate::control::parse::parse_topology(&shape.topology)?;
        let dims =
            shape.dims.as_deref().filter(|d| !d.is_empty()).map(crate::control::parse::parse_dims).transpose()?;
        let dims = dims.as_deref();
        let vertices = shape.daemons.or(shape.nodes).unwrap_or(0);
        anyhow::ensure!(vertices <= simulate::MOST_NODES_DRAWN, "the page draws at most 1024 nodes");
        Ok(match (shape.daemons, shape.nodes) {
            (Some(daemons), _) => crate::control::run::topology_on(kind, daemons, dims)?,
            (None, Some(nodes)) => Topology::new(kind, nodes, dims)?,
            (None, None) => anyhow::bail!("give nodes (the ranks) or daemons (the cluster's)"),
        })
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
