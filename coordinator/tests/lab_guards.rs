//! The lab's guards as an attacker and a careless user meet them (issue 44, the lab's
//! rows): `topocomm lab` as a child process on loopback, asked with plain HTTP. No file a
//! request names is read or written; jobs queue one at a time within a bound, can be
//! cancelled, and a simulation honours `--memory-limit`; the history keeps every job
//! still waiting or running; half-sent requests from a stranger's address cannot lock
//! the token holder out; a weak token off loopback is refused, and wrong tokens are slowed.

mod common;
mod lab_support;

use std::time::{Duration, Instant};

use lab_support::{Lab, STRONG_TOKEN, Served, http};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Posts a job; gives the answer's status and body.
/// Issue 45, item 9: a second lab on a port in use names the address and says how to get
/// another (it said only "Address already in use").
#[test]
fn a_lab_on_a_port_in_use_names_it_and_the_way_out() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = taken.local_addr().unwrap().to_string();
    let output = common::command(&common::topocomm_bin())
        .args(["lab", "-n", "1", "--http", &address])
        .output()
        .expect("topocomm lab runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("binding the lab's page on {address}")), "{stderr}");
    assert!(stderr.contains("already in use") && stderr.contains("`--http 127.0.0.1:0` picks a free one"), "{stderr}");
}

async fn post(address: &str, kind: &str, words: &[&str]) -> (u16, Value) {
    let body = serde_json::json!({ "kind": kind, "args": words }).to_string();
    let answer = http(address, "POST", "/api/runs", &[("Host", address)], Some(&body)).await;
    (answer.status, answer.json())
}

/// A job's summary in the history now (`null` if it is not there).
async fn job(address: &str, id: u64) -> Value {
    let runs = http(address, "GET", "/api/runs", &[("Host", address)], None).await.json();
    runs["runs"].as_array().unwrap().iter().find(|run| run["id"] == id).cloned().unwrap_or(Value::Null)
}

/// A job's document (or its summary, while it has none).
async fn document(address: &str, id: u64) -> Value {
    http(address, "GET", &format!("/api/runs/{id}"), &[("Host", address)], None).await.json()
}

/// Polls job `id`'s summary until `done` says so, at most `patience`.
async fn until(address: &str, id: u64, patience: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + patience;
    loop {
        let now = job(address, id).await;
        if done(&now) {
            return now;
        }
        assert!(Instant::now() < deadline, "job {id} not there within {patience:?}: {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether a job is over.
fn over(job: &Value) -> bool {
    ["verified", "failed", "cancelled"].contains(&status(job))
}

fn status(value: &Value) -> &str {
    value["status"].as_str().unwrap_or("")
}

/// Rows 1 and 2: `--goal /etc/shadow` quoted the file's first line; `--tuning /dev/zero`
/// grew the lab to its address-space cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_file_a_request_names_is_read_or_written() {
    let lab = Lab::start("lab-guards-files", 2);
    let address = lab.address.as_str();
    let secret = lab.scratch.path.join("shadow");
    std::fs::write(&secret, "root:SECRET-HASH-0123:19000:0:99999:7:::\n").unwrap();
    let secret = secret.to_str().unwrap();
    let written = lab.scratch.path.join("written");
    let out = written.to_str().unwrap();
    let cases: &[(&str, Vec<&str>)] = &[
        ("simulate", vec!["allreduce", "--goal", secret]),
        ("simulate", vec!["allreduce", "--schedule", "/dev/zero"]),
        ("simulate", vec!["allreduce", "--tuning", "/dev/zero"]),
        ("simulate", vec!["allreduce", "--trace", out]),
        ("explain", vec!["allreduce", "--nodes", "4", "--goal", out]),
        ("explain", vec!["allreduce", "--nodes", "4", "--tuning=/dev/zero"]),
        ("run", vec!["allreduce", "--schedule", secret]),
        ("sweep", vec!["allreduce", "--sizes", "1KiB", "--json", out]),
        ("sweep", vec!["allreduce", "--sizes", "1KiB", "--plot", out]),
    ];
    for (kind, words) in cases {
        let (code, answer) = post(address, kind, words).await;
        assert_eq!(code, 400, "{kind} {words:?}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains("the lab reads and writes no files a request names"), "{error}");
        assert_eq!(error.lines().count(), 1, "one line: {error}");
        assert!(!error.contains("SECRET") && !error.contains("root"), "the file's content is not quoted: {error}");
    }
    assert!(!written.exists(), "nothing was written");
    let runs = http(address, "GET", "/api/runs", &[("Host", address)], None).await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0, "no job was queued: {runs}");
}

/// Rows 10 and 11: 60 clients at once saw the history evict runs still queued, queued
/// runs read "running", and a run of 50,000,000 iterations held the cluster with no way
/// to cancel it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_queue_within_a_bound_and_a_long_run_is_cancelled_freeing_its_nodes() {
    let lab = Lab::start("lab-guards-queue", 2);
    let address = lab.address.as_str();
    let (code, long) = post(address, "run", &["barrier", "--topology", "ring", "--iterations", "50000000"]).await;
    assert_eq!(code, 202, "{long}");
    let long = long["id"].as_u64().unwrap();
    until(address, long, Duration::from_secs(60), |j| status(j) == "running").await;

    // Behind it: jobs wait, and read "queued"; past the bound they are refused.
    let mut waiting = Vec::new();
    let refused = loop {
        let (code, answer) = post(address, "run", &["allreduce", "--topology", "ring", "--size", "1KiB"]).await;
        match code {
            202 => waiting.push(answer["id"].as_u64().unwrap()),
            _ => break (code, answer),
        }
        assert!(waiting.len() <= 50, "the queue has no bound");
    };
    assert_eq!(refused.0, 429, "{}", refused.1);
    assert!(refused.1["error"].as_str().unwrap().contains("jobs are waiting already"), "{}", refused.1);
    for &id in &waiting {
        assert_eq!(status(&job(address, id).await), "queued", "job {id}");
    }

    // More than the history keeps come and go (each cancelled while it waits): the long
    // run and the jobs waiting stay in the history.
    let spare = waiting.pop().unwrap();
    let cancelled = http(address, "DELETE", &format!("/api/runs/{spare}"), &[("Host", address)], None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(status(&cancelled.json()), "cancelled");
    for _ in 0..60 {
        let (code, answer) = post(address, "explain", &["broadcast", "--nodes", "4"]).await;
        assert_eq!(code, 202, "{answer}");
        let id = answer["id"].as_u64().unwrap();
        let gone = http(address, "DELETE", &format!("/api/runs/{id}"), &[("Host", address)], None).await;
        assert_eq!(gone.status, 200, "{}", gone.body);
    }
    let runs = http(address, "GET", "/api/runs", &[("Host", address)], None).await.json();
    assert!(runs["runs"].as_array().unwrap().len() <= 50);
    assert_eq!(status(&job(address, long).await), "running", "the running job is kept");
    for &id in &waiting {
        assert_eq!(status(&job(address, id).await), "queued", "job {id} is kept while it waits");
    }

    // The long run, cancelled, ends at once; the cluster runs what waited, verified.
    let began = Instant::now();
    let cancelled = http(address, "DELETE", &format!("/api/runs/{long}"), &[("Host", address)], None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    let first = waiting[0];
    let done = until(address, first, Duration::from_secs(60), over).await;
    assert_eq!(status(&done), "verified", "{done}");
    assert_eq!(document(address, first).await["result"]["verified"], true);
    assert!(began.elapsed() < Duration::from_secs(30), "the nodes were free at once: {:?}", began.elapsed());
    assert_eq!(status(&job(address, long).await), "cancelled");
    // The coordinator aborted it on the nodes (not left for the next run's start to end).
    let logs = lab.scratch.path.join("logs");
    let aborted = common::poll(Duration::from_secs(10), || {
        let said = |node: usize| common::read_text(&logs.join(format!("node-{node}.log")));
        (0..2).all(|node| said(node).contains("run aborted by the coordinator")).then_some(())
    });
    assert!(aborted.is_some(), "no node logged the abort: {}", common::read_text(&logs.join("node-0.log")));
    let again = http(address, "DELETE", &format!("/api/runs/{long}"), &[("Host", address)], None).await;
    assert_eq!(again.status, 409, "{}", again.body);
    let none = http(address, "DELETE", "/api/runs/99999", &[("Host", address)], None).await;
    assert_eq!(none.status, 404, "{}", none.body);
}

/// Row 3: simulations with `--memory-limit 100MiB` ran all at once and ignored the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_honours_its_memory_limit_and_a_cancelled_one_stops() {
    let lab = Lab::start("lab-guards-memory", 1);
    let address = lab.address.as_str();
    // About 1 GiB of data: past the limit, the watcher stops it.
    let words = ["allreduce", "--nodes", "1024", "--size", "256KiB", "--memory-limit", "100MiB"];
    let (code, answer) = post(address, "simulate", &words).await;
    assert_eq!(code, 202, "{answer}");
    let id = answer["id"].as_u64().unwrap();
    let ended = until(address, id, Duration::from_secs(300), over).await;
    assert_eq!(status(&ended), "failed", "{ended}");
    let note = ended["note"].as_str().unwrap();
    assert!(note.contains("over the limit of 100.0 MiB (--memory-limit"), "{note}");

    // A long simulation, cancelled while it runs, stops; the next job runs.
    let long = ["alltoall", "--nodes", "512", "--size", "512KiB", "--payload", "lengths"];
    let (code, answer) = post(address, "simulate", &long).await;
    assert_eq!(code, 202, "{answer}");
    let long = answer["id"].as_u64().unwrap();
    let (_, next) = post(address, "explain", &["broadcast", "--nodes", "4"]).await;
    let next = next["id"].as_u64().unwrap();
    until(address, long, Duration::from_secs(60), |j| status(j) == "running").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(status(&job(address, next).await), "queued", "one job at a time");
    let cancelled = http(address, "DELETE", &format!("/api/runs/{long}"), &[("Host", address)], None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    let began = Instant::now();
    let done = until(address, next, Duration::from_secs(30), over).await;
    assert_eq!(status(&done), "verified", "{done}");
    assert!(began.elapsed() < Duration::from_secs(10), "the simulation stopped: {:?}", began.elapsed());
    assert_eq!(status(&job(address, long).await), "cancelled");
}

/// Opens a connection to `to` from the loopback address `from`.
async fn connect_from(from: [u8; 4], to: &str) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from((from, 0)))?;
    socket.connect(to.parse().unwrap()).await
}

/// Row 5: 1,100 half-sent requests at a lab of 1,024 descriptors locked the token holder
/// out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_from_a_stranger_do_not_lock_the_token_holder_out() {
    topocomm_node::daemon::limits::raise_open_file_limit();
    let lab = Lab::start_limited("lab-guards-door", 1, &["--http", "127.0.0.1:0"], None, Some(1024));
    let address = lab.address.clone();
    let mut held = Vec::new();
    for _ in 0..1100 {
        // A stranger at 127.0.0.2 begins a request and never ends it.
        let Ok(Ok(mut stream)) =
            tokio::time::timeout(Duration::from_secs(2), connect_from([127, 0, 0, 2], &address)).await
        else {
            break;
        };
        let _ = stream.write_all(format!("GET /api/cluster HTTP/1.1\r\nHost: {address}\r\n").as_bytes()).await;
        held.push(stream);
    }
    assert!(held.len() >= 1000, "the flood opened {} connections", held.len());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let holder = tokio::time::timeout(Duration::from_secs(5), async {
        let mut stream = connect_from([127, 0, 0, 1], &address).await.expect("connecting");
        let request = format!("GET /api/cluster HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("sending");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("reading");
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await
    .expect("the token holder was answered within 5 s, beside the flood");
    assert!(holder.starts_with("HTTP/1.1 200"), "{holder}");
    drop(held);

    // A request whose head never ends is closed at the header deadline.
    let mut slow = connect_from([127, 0, 0, 1], &address).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let began = Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the half-sent request was never closed");
    assert!(began.elapsed() >= Duration::from_secs(5), "closed after {:?}", began.elapsed());
}

/// Row 6: `lab --http` and `serve --http` off loopback served with the token `a`, and
/// answered 5,400 guesses a second.
#[test]
fn off_loopback_a_weak_token_is_refused_by_lab_and_serve_alike() {
    let scratch = common::Scratch::new("lab-guards-weak");
    let mut lab = common::command(&common::topocomm_bin());
    lab.args(["lab", "--nodes", "1", "--http", "0.0.0.0:0", "--logs"]).arg(scratch.path.join("logs"));
    lab.env("TOPOCOMM_TOKEN", "a");
    let mut serve = common::command(&common::topocomm_bin());
    serve.args(["serve", "--nodes", "1", "--listen", "127.0.0.1:0", "--http", "0.0.0.0:0"]);
    serve.env("TOPOCOMM_TOKEN", "a");
    for (name, command) in [("lab", lab), ("serve", serve)] {
        let finished = common::run_bounded(command, &scratch, name, Duration::from_secs(30));
        assert!(!finished.status.success(), "{name} served with the token a: {}", finished.stderr);
        assert!(
            finished.stderr.contains("the cluster token is too weak for the lab's page that other hosts can reach"),
            "{name}: {}",
            finished.stderr
        );
        assert!(finished.stderr.contains("openssl rand -hex 16"), "{name}: {}", finished.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_are_slowed_per_address() {
    let lab = Lab::start_with("lab-guards-guess", 1, &["--http", "0.0.0.0:0"], Some(STRONG_TOKEN));
    let port = lab.address.rsplit_once(':').unwrap().1.to_owned();
    let ask = |from: [u8; 4], token: String| {
        let port = port.clone();
        async move {
            let address = format!("127.0.0.1:{port}");
            let mut stream = connect_from(from, &address).await.expect("connecting");
            let request = format!(
                "GET /api/cluster HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await.unwrap().unwrap();
            let text = String::from_utf8_lossy(&answer).into_owned();
            text.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok()).unwrap()
        }
    };
    let guesser = [127, 0, 0, 3];
    for guess in 0..10 {
        assert_eq!(ask(guesser, format!("guess-{guess}")).await, 401);
    }
    // Past the allowance even the right token is answered "wait": the answer tells nothing.
    assert_eq!(ask(guesser, format!("guess-{}", 11)).await, 429);
    assert_eq!(ask(guesser, STRONG_TOKEN.to_owned()).await, 429);
    // The token holder at another address is not slowed.
    assert_eq!(ask([127, 0, 0, 1], STRONG_TOKEN.to_owned()).await, 200);
}

/// Row 4, the lab's part: the form's explain of `allgather -n 64 --size 16MiB` killed the
/// lab (`memory allocation of 1073741824 bytes failed`) and its nodes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explanation_too_large_for_the_memory_fails_and_the_lab_lives_on() {
    let lab = Lab::start("lab-guards-explain", 2);
    let address = lab.address.as_str();
    let (code, answer) = post(address, "explain", &["allgather", "--nodes", "64", "--size", "16MiB"]).await;
    assert_eq!(code, 202, "{answer}");
    let id = answer["id"].as_u64().unwrap();
    let ended = until(address, id, Duration::from_secs(120), over).await;
    assert_eq!(status(&ended), "failed", "{ended}");
    let note = ended["note"].as_str().unwrap();
    assert!(note.contains("needs about") || note.contains("--memory-limit"), "{note}");
    // The lab and its cluster are still there, and run.
    let (code, answer) = post(address, "run", &["allreduce", "--topology", "ring", "--size", "1KiB"]).await;
    assert_eq!(code, 202, "{answer}");
    let run = until(address, answer["id"].as_u64().unwrap(), Duration::from_secs(60), over).await;
    assert_eq!(status(&run), "verified", "{run}");
}

/// Row 11 on a served cluster: the page's runs go to the coordinator's control port, and
/// a run cancelled in the page must end there too (the connection closes, the coordinator
/// drops the run and aborts it on its nodes), or the cluster stays busy for the hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_on_a_served_cluster_frees_its_nodes() {
    let mut served = Served::start("lab-guards-served", 2);
    for index in 0..2 {
        served.add_node(index);
    }
    let address = served.page.clone();
    let address = address.as_str();
    let (code, long) = post(address, "run", &["barrier", "--topology", "ring", "--iterations", "50000000"]).await;
    assert_eq!(code, 202, "{long}");
    let long = long["id"].as_u64().unwrap();
    until(address, long, Duration::from_secs(60), |j| status(j) == "running").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (code, next) = post(address, "run", &["allreduce", "--topology", "ring", "--size", "1KiB"]).await;
    assert_eq!(code, 202, "{next}");
    let next = next["id"].as_u64().unwrap();
    let began = Instant::now();
    let cancelled = http(address, "DELETE", &format!("/api/runs/{long}"), &[("Host", address)], None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    let done = until(address, next, Duration::from_secs(60), over).await;
    assert_eq!(status(&done), "verified", "{done}");
    assert!(began.elapsed() < Duration::from_secs(30), "the served cluster was free at once: {:?}", began.elapsed());
}
