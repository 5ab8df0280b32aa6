//! The lab's JSON API as programs and attackers meet it: `topocomm lab` as a child
//! process on loopback, asked with plain HTTP requests whose Host and Origin the tests
//! forge. Refusals of other hosts (DNS rebinding), other origins and cross-site
//! requests; the token off loopback; bad words answered with the CLI's own error text;
//! an `explain` through the API.

mod common;
mod lab_support;

use std::time::{Duration, Instant};

use lab_support::{Lab, STRONG_TOKEN, Served, http};
use serde_json::Value;

/// The CLI's standard error for `topocomm <words>`.
fn cli_error(words: &[&str]) -> String {
    let scratch = common::Scratch::new("lab-cli-error");
    let mut command = common::command(&common::topocomm_bin());
    command.args(words).arg("--logs").arg(scratch.path.join("logs"));
    let finished = common::run_bounded(command, &scratch, "cli", Duration::from_secs(60));
    assert!(!finished.status.success(), "{words:?} should fail");
    finished.stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_hosts_origins_and_cross_site_requests_are_refused() {
    let lab = Lab::start("lab-api", 2);
    let address = lab.address.as_str();
    let host = ("Host", address);
    let ok = http(address, "GET", "/api/cluster", &[host], None).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let cluster = ok.json();
    assert_eq!(cluster["schema_version"], 1);
    assert_eq!(cluster["expected"], 2);
    let policy = ok.headers.get("content-security-policy").expect("a content security policy");
    assert!(policy.contains("default-src 'self'") && policy.contains("frame-ancestors 'none'"), "{policy}");

    // A page of another site that has its name resolve to this address (DNS rebinding).
    let port = address.rsplit_once(':').unwrap().1;
    let rebound = format!("attacker.example:{port}");
    let refused = http(address, "GET", "/api/cluster", &[("Host", &rebound)], None).await;
    assert_eq!(refused.status, 403);
    assert!(refused.json()["error"].as_str().unwrap().contains("does not name this server"), "{}", refused.body);
    let page = http(address, "GET", "/", &[("Host", &rebound)], None).await;
    assert_eq!(page.status, 403, "the page itself is refused under another name");

    // A cross-origin request to start a run is refused, and starts nothing.
    let start = r#"{"kind": "run", "args": ["allreduce", "--size", "1KiB", "--iterations", "1"]}"#;
    let forged = http(address, "POST", "/api/runs", &[host, ("Origin", "http://attacker.example")], Some(start)).await;
    assert_eq!(forged.status, 403);
    assert!(forged.json()["error"].as_str().unwrap().contains("another origin"), "{}", forged.body);
    let cross = http(address, "POST", "/api/runs", &[host, ("Sec-Fetch-Site", "cross-site")], Some(start)).await;
    assert_eq!(cross.status, 403);
    let runs = http(address, "GET", "/api/runs", &[host], None).await.json();
    assert_eq!(runs["runs"], Value::Array(Vec::new()), "nothing ran");

    // The page's own origin may.
    let origin = format!("http://{address}");
    let explain =
        r#"{"kind": "explain", "args": ["broadcast", "--topology", "ring", "--nodes", "6", "--size", "1KiB"]}"#;
    let accepted = http(address, "POST", "/api/runs", &[host, ("Origin", &origin)], Some(explain)).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let id = accepted.json()["id"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let document = loop {
        let document = http(address, "GET", &format!("/api/runs/{id}"), &[host], None).await.json();
        if document.get("flow").is_some() {
            break document;
        }
        assert!(Instant::now() < deadline, "the explanation did not finish: {document}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(document["kind"], "explain");
    assert_eq!(document["topology"]["p"], 6);
    assert_eq!(document["topology"]["edges"].as_array().unwrap().len(), 6);
    assert_eq!(document["topology"]["layout"]["links"].as_array().unwrap().len(), 6);
    assert_eq!(document["flow"]["messages"].as_array().unwrap().len(), 5, "a ring broadcast informs 5 others");
    assert_eq!(document["result"]["steps"], 3, "the ring broadcast of 6 takes 3 steps each way");
    let saved = http(address, "GET", &format!("/api/runs/{id}/page"), &[host], None).await;
    assert_eq!(saved.status, 200);
    assert!(saved.body.contains(r#"id="lab-data""#) && !saved.body.contains(r#"src="lab/"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_words_get_the_cli_error_text() {
    let lab = Lab::start("lab-api-words", 2);
    let address = lab.address.as_str();
    let host = ("Host", address);
    for (words, cli) in [
        (r#"["allreduce", "--size", "banana"]"#, vec!["run", "allreduce", "--size", "banana"]),
        (r#"["broadcast", "--root", "7"]"#, vec!["run", "broadcast", "--nodes", "2", "--root", "7"]),
        (
            r#"["allreduce", "--algorithm", "ring-pipelined-nonsense"]"#,
            vec!["run", "allreduce", "--algorithm", "ring-pipelined-nonsense"],
        ),
    ] {
        let body = format!(r#"{{"kind": "run", "args": {words}}}"#);
        let refused = http(address, "POST", "/api/runs", &[host], Some(&body)).await;
        assert_eq!(refused.status, 400, "{words}: {}", refused.body);
        let text = refused.json()["error"].as_str().unwrap().to_owned();
        let expected = cli_error(&cli);
        let first = |text: &str| text.lines().next().unwrap_or("").to_owned();
        assert_eq!(first(&text), first(&expected), "{words}: the page's error is the CLI's");
    }
    let unknown = http(address, "POST", "/api/runs", &[host], Some(r#"{"kind": "dance", "args": []}"#)).await;
    assert_eq!(unknown.status, 400);
}

#[test]
fn off_loopback_the_lab_refuses_to_start_without_a_token() {
    let scratch = common::Scratch::new("lab-no-token");
    let mut command = common::command(&common::topocomm_bin());
    command.args(["lab", "--nodes", "1", "--http", "0.0.0.0:0", "--logs"]).arg(scratch.path.join("logs"));
    let finished = common::run_bounded(command, &scratch, "lab", Duration::from_secs(30));
    assert!(!finished.status.success());
    assert!(finished.stderr.contains("the lab serves 0.0.0.0:"), "{}", finished.stderr);
    assert!(finished.stderr.contains("only with a token"), "{}", finished.stderr);
    assert!(!finished.stderr.contains("local cluster:"), "no node started: {}", finished.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_the_api_needs_the_token_and_the_page_asks_for_it() {
    let lab = Lab::start_with("lab-token", 1, &["--http", "0.0.0.0:0"], Some(STRONG_TOKEN));
    let port = lab.address.rsplit_once(':').unwrap().1;
    // Only loopback is spoken to: the lab listens everywhere, the test connects here.
    let address = format!("127.0.0.1:{port}");
    let host = ("Host", address.as_str());
    let page = http(&address, "GET", "/", &[host], None).await;
    assert_eq!(page.status, 200, "the page loads, to ask for the token");
    assert!(page.body.contains(r#"id="token""#));
    let api = http(&address, "GET", "/api/cluster", &[host], None).await;
    assert_eq!(api.status, 401);
    let wrong = http(&address, "GET", "/api/cluster", &[host, ("Authorization", "Bearer nope")], None).await;
    assert_eq!(wrong.status, 401);
    let right =
        http(&address, "GET", "/api/cluster", &[host, ("Authorization", &format!("Bearer {STRONG_TOKEN}"))], None)
            .await;
    assert_eq!(right.status, 200, "{}", right.body);
    assert_eq!(right.json()["expected"], 1);
    let index =
        http(&address, "GET", "/api", &[host, ("Authorization", &format!("Bearer {STRONG_TOKEN}"))], None).await.json();
    assert_eq!(index["needs_token"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_http_runs_from_the_page_on_the_registered_nodes() {
    let mut served = Served::start("lab-serve", 2);
    let page = served.page.clone();
    let host = ("Host", page.as_str());
    // Before any node registers, the page shows an empty cluster of 2 expected.
    let cluster = http(&page, "GET", "/api/cluster", &[host], None).await.json();
    assert_eq!(cluster["expected"], 2);
    for index in 0..2 {
        served.add_node(index);
    }
    let start =
        r#"{"kind": "run", "args": ["allreduce", "--topology", "ring", "--size", "4KiB", "--iterations", "2"]}"#;
    let (_, document) =
        posted_until(&page, start, Duration::from_secs(120), |document: &Value| document.get("flow").is_some()).await;
    assert_eq!(document["result"]["verified"], true, "{document}");
    assert_eq!(document["result"]["nodes"], 2);
    assert!(!document["flow"]["messages"].as_array().unwrap().is_empty(), "the run was traced");
    // The nodes registered and the cluster is wired as the run asked.
    let cluster = http(&page, "GET", "/api/cluster", &[host], None).await.json();
    let names: Vec<&str> = cluster["nodes"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["node-0", "node-1"]);
    assert_eq!(cluster["topology"]["kind"], "ring");
    assert!(!cluster["traffic"].as_array().unwrap().is_empty(), "the last run's traffic is shown");

    // A node that fails is shown as gone, still listed under its name.
    common::kill_and_reap(&mut served.children.0[2]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cluster = http(&page, "GET", "/api/cluster", &[host], None).await.json();
        let nodes = cluster["nodes"].as_array().unwrap();
        if nodes.len() == 2 && nodes[0]["connected"] == true && nodes[1]["connected"] == false {
            assert_eq!(nodes[1]["name"], "node-1");
            break;
        }
        assert!(Instant::now() < deadline, "node-1's end was not shown within 30 s: {cluster}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_over_a_range_of_node_counts_gives_every_point_to_plot() {
    let lab = Lab::start("lab-api-scaling", 1);
    let address = lab.address.as_str();
    let body = r#"{"kind": "simulate", "args": ["broadcast", "--topology", "hypercube", "--nodes", "4..64", "--size", "1KiB"]}"#;
    let (_, document) = posted_until(address, body, Duration::from_secs(120), has_result).await;
    assert_eq!(document["kind"], "scaling", "{document}");
    let points = document["result"]["points"].as_array().unwrap();
    let nodes: Vec<u64> = points.iter().map(|p| p["nodes"].as_u64().unwrap()).collect();
    assert_eq!(nodes, [4, 8, 16, 32, 64]);
    for point in points {
        assert_eq!(point["verified"], true, "{point}");
        // The binomial broadcast meets the textbook's (t_s + t_w m) log p exactly.
        let (time, closed) = (point["time_us"]["median"].as_f64().unwrap(), point["closed_form_us"].as_f64().unwrap());
        assert!((time - closed).abs() < 1e-6, "{point}");
    }
    let times: Vec<f64> = points.iter().map(|p| p["time_us"]["median"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "a broadcast takes longer on more nodes: {times:?}");
}

/// The top-level keys of a JSON object, and those of its first point.
/// Posts `body` to the page at `address` (which must accept it), then polls its document
/// until `done` says it is (or it failed), at most `patience`; returns the job's id and
/// its document.
async fn posted_until(address: &str, body: &str, patience: Duration, done: impl Fn(&Value) -> bool) -> (u64, Value) {
    let host = ("Host", address);
    let accepted = http(address, "POST", "/api/runs", &[host], Some(body)).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let id = accepted.json()["id"].as_u64().unwrap();
    let deadline = Instant::now() + patience;
    loop {
        let document = http(address, "GET", &format!("/api/runs/{id}"), &[host], None).await.json();
        if done(&document) || document["status"] == "failed" {
            return (id, document);
        }
        assert!(Instant::now() < deadline, "job {id} did not finish within {patience:?}: {document}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A document that holds its result.
fn has_result(document: &Value) -> bool {
    document.get("result").is_some()
}

fn shape_of(sweep: &Value) -> (Vec<String>, Vec<String>) {
    let keys = |value: &Value| value.as_object().expect("an object").keys().cloned().collect::<Vec<_>>();
    (keys(sweep), keys(&sweep["points"][0]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_through_the_api_gives_verified_points_as_the_cli_writes_them() {
    let lab = Lab::start("lab-api-sweep", 4);
    let address = lab.address.as_str();
    let host = ("Host", address);
    let words = [
        "allreduce",
        "--topology",
        "hypercube",
        "--algorithm",
        "reduce-broadcast,recursive-doubling",
        "--sizes",
        "1KiB..4KiB",
        "--iterations",
        "2",
        "--ts",
        "20us",
        "--tw",
        "1ns",
        "--dilation",
        "1",
    ];
    let args = serde_json::to_string(&words).unwrap();

    // The page writes no files on the lab's host.
    let csv = format!(r#"{{"kind": "sweep", "args": {}}}"#, args.replacen('[', r#"["--csv", "/tmp/x.csv", "#, 1));
    let refused = http(address, "POST", "/api/runs", &[host], Some(&csv)).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.json()["error"].as_str().unwrap().contains("writes no files"), "{}", refused.body);

    let sweep = format!(r#"{{"kind": "sweep", "args": {args}}}"#);
    let (id, document) = posted_until(address, &sweep, Duration::from_secs(180), has_result).await;
    assert_eq!(document["kind"], "sweep", "{document}");
    assert_eq!(document["schema_version"], 1);
    let runs = http(address, "GET", "/api/runs", &[host], None).await.json();
    let entry = runs["runs"].as_array().unwrap().iter().find(|r| r["id"] == id).cloned().unwrap();
    assert_eq!(entry["status"], "verified", "{entry}");
    let result = &document["result"];
    assert_eq!(result["schema_version"], 1);
    assert_eq!(result["nodes"], 4, "the lab's cluster, whatever --nodes says");
    let points = result["points"].as_array().unwrap();
    let measured: Vec<(String, u64)> = points
        .iter()
        .map(|p| (p["algorithm"].as_str().unwrap().to_owned(), p["size_bytes"].as_u64().unwrap()))
        .collect();
    let expected: Vec<(String, u64)> = ["reduce-broadcast", "recursive-doubling"]
        .iter()
        .flat_map(|a| [1024, 2048, 4096].map(|s| (a.to_string(), s)))
        .collect();
    assert_eq!(measured, expected);
    for point in points {
        assert_eq!(point["iterations"], 2, "{point}");
        let (avg, model) = (point["avg_us"].as_f64().unwrap(), point["model_us"].as_f64().unwrap());
        // Emulated links: at least the model's start-ups, 20 µs a step.
        assert!(avg >= 20.0 && model >= 20.0, "{point}");
    }

    // The sweep's own endpoint answers what `topocomm sweep --json` writes; nothing else
    // is a sweep.
    let own = http(address, "GET", &format!("/api/sweeps/{id}"), &[host], None).await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(&own.json(), result);
    let scratch = common::Scratch::new("lab-api-sweep-cli");
    let mut command = common::command(&common::topocomm_bin());
    command.args(["sweep", "--nodes", "4"]).args(words).args(["--json", "-", "--logs"]).arg(scratch.path.join("logs"));
    let finished = common::run_bounded(command, &scratch, "sweep", Duration::from_secs(180));
    assert!(finished.status.success(), "{}", finished.stderr);
    let cli: Value = serde_json::from_str(&finished.stdout).expect("the CLI's JSON");
    assert_eq!(shape_of(&cli), shape_of(result), "the page's sweep has the CLI's schema");
    assert_eq!(cli["points"].as_array().unwrap().len(), points.len());
    let explain = r#"{"kind": "explain", "args": ["broadcast", "--nodes", "4", "--size", "1KiB"]}"#;
    let other = http(address, "POST", "/api/runs", &[host], Some(explain)).await.json()["id"].as_u64().unwrap();
    let missing = http(address, "GET", &format!("/api/sweeps/{other}"), &[host], None).await;
    assert_eq!(missing.status, 404, "{}", missing.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_too_large_to_animate_is_aggregated_by_step() {
    let lab = Lab::start("lab-api-steps", 1);
    let address = lab.address.as_str();
    let body = r#"{"kind": "simulate", "args": ["broadcast", "--topology", "hypercube", "--nodes", "2048", "--size", "1KiB"]}"#;
    let (_, document) = posted_until(address, body, Duration::from_secs(120), has_result).await;
    assert_eq!(document["kind"], "steps", "{document}");
    assert_eq!(document["schema_version"], 1);
    let result = &document["result"];
    assert_eq!(result["nodes"], 2048);
    assert_eq!(result["verified"], true);
    let steps = document["steps"].as_array().expect("the flow by step");
    // The binomial broadcast on a hypercube of 2^11: 11 steps (as the flow numbers them,
    // the step of each message's sender) and 2,047 messages, every node informed once.
    assert_eq!(steps.len() as u64, result["steps"].as_u64().unwrap(), "{result}");
    assert_eq!(steps.len(), 11);
    let messages: Vec<u64> = steps.iter().map(|s| s["messages"].as_u64().unwrap()).collect();
    assert_eq!(messages.iter().sum::<u64>(), 2047, "{messages:?}");
    assert_eq!(result["frames_sent"], 2047);
    for step in steps {
        assert_eq!(step["bytes"].as_u64().unwrap(), step["messages"].as_u64().unwrap() * 1024, "{step}");
        let busiest = step["busiest_link"].as_array().unwrap();
        assert_eq!(busiest[2], 1024, "one message a link in each step: {step}");
        assert!(step["end_ns"].as_u64().unwrap() > step["start_ns"].as_u64().unwrap(), "{step}");
    }
    let starts: Vec<u64> = steps.iter().map(|s| s["start_ns"].as_u64().unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "the steps follow one another: {starts:?}");
}
