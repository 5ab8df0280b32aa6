//! What the lab's tests share: `topocomm lab` started as a child process (its URL read
//! from what it prints), plain HTTP requests with any headers, and headless chromium
//! driven over the DevTools protocol (a WebSocket of JSON commands and events: the few
//! commands the tests need, so no browser-driving framework is compiled). Every wait
//! has a deadline; dropping a `Lab` or a `Browser` kills and reaps its processes.

#![allow(dead_code)] // Not every test file uses every helper.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;

use crate::common::{self, Scratch};

/// A token strong enough for an address off loopback (128 bits in hex, as `openssl rand
/// -hex 16` makes them).
pub const STRONG_TOKEN: &str = "3f9a1c07d2e84b6a9c0e5f71b2d43a86";

/// `topocomm lab` running as a child process.
pub struct Lab {
    pub url: String,
    /// HOST:PORT the page is served on.
    pub address: String,
    child: Child,
    pub scratch: Scratch,
}

impl Lab {
    /// Starts a lab of `nodes` local nodes on a free loopback port; waits (at most a
    /// minute) for the URL it prints.
    pub fn start(label: &str, nodes: usize) -> Self {
        Self::start_with(label, nodes, &["--http", "127.0.0.1:0"], None)
    }

    /// Starts a lab with these extra words and, if given, this token in its environment.
    pub fn start_with(label: &str, nodes: usize, words: &[&str], token: Option<&str>) -> Self {
        Self::start_limited(label, nodes, words, token, None)
    }

    /// Starts a lab as [`Lab::start_with`] does, holding at most `open_files` descriptors
    /// (its hard `RLIMIT_NOFILE`, set by the shell that starts it) when given.
    pub fn start_limited(
        label: &str,
        nodes: usize,
        words: &[&str],
        token: Option<&str>,
        open_files: Option<u64>,
    ) -> Self {
        let scratch = Scratch::new(label);
        let mut command = match open_files {
            None => common::command(&common::topocomm_bin()),
            Some(limit) => {
                let mut shell = common::command(Path::new("sh"));
                shell.args(["-c", "ulimit -n \"$0\" && exec \"$@\"", &limit.to_string()]).arg(common::topocomm_bin());
                shell
            }
        };
        command.args(["lab", "--nodes", &nodes.to_string(), "--logs"]).arg(scratch.path.join("logs")).args(words);
        if let Some(token) = token {
            command.env("TOPOCOMM_TOKEN", token);
        }
        let stderr = std::fs::File::create(scratch.path.join("lab.stderr")).expect("creating the lab's stderr file");
        let mut child = command.stdout(Stdio::piped()).stderr(stderr).spawn().expect("starting topocomm lab");
        let stdout = child.stdout.take().expect("the lab's stdout");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("lab: ").and_then(|rest| rest.split_whitespace().next()) {
                    let _ = sender.send(url.to_owned());
                }
            }
        });
        let Ok(url) = receiver.recv_timeout(Duration::from_secs(60)) else {
            common::kill_and_reap(&mut child);
            panic!("the lab printed no URL in a minute: {}", common::read_text(&scratch.path.join("lab.stderr")));
        };
        let address = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
        Lab { url, address, child, scratch }
    }

    /// What the lab wrote to its standard error.
    pub fn stderr(&self) -> String {
        common::read_text(&self.scratch.path.join("lab.stderr"))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        common::kill_and_reap(&mut self.child);
    }
}

/// Child processes killed and reaped on drop, even when the test fails.
pub struct Children(pub Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            common::kill_and_reap(child);
        }
    }
}

/// `topocomm serve --http` on loopback for `nodes` nodes, and the node processes added to it.
pub struct Served {
    /// HOST:PORT of the page.
    pub page: String,
    /// HOST:PORT of the control port.
    pub control: String,
    pub token: String,
    /// The coordinator first, then each node in the order added.
    pub children: Children,
    pub scratch: Scratch,
}

impl Served {
    /// Starts the coordinator; waits (at most 30 s) for it to announce both addresses.
    pub fn start(label: &str, nodes: usize) -> Self {
        let scratch = Scratch::new(label);
        let token = format!("{label}-{}", std::process::id());
        let stderr = scratch.path.join("serve.stderr");
        let mut serve = common::command(&common::topocomm_bin());
        serve
            .args(["serve", "--nodes", &nodes.to_string(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .env("TOPOCOMM_TOKEN", &token);
        let children = Children(vec![common::spawn_logged(&mut serve, &scratch.path.join("serve.stdout"), &stderr)]);
        let announced = |marker: &str| {
            common::poll(Duration::from_secs(30), || {
                let text = common::read_text(&stderr);
                let rest = text.split(marker).nth(1)?;
                Some(rest.split_whitespace().next()?.trim_end_matches('/').to_owned())
            })
            .unwrap_or_else(|| panic!("serve did not announce {marker:?}: {}", common::read_text(&stderr)))
        };
        let control = announced("topocomm coordinator on ");
        let page = announced("lab: http://");
        Served { page, control, token, children, scratch }
    }

    /// Starts node `node-INDEX` against the coordinator.
    pub fn add_node(&mut self, index: usize) {
        let mut node = common::command(&common::topocomm_bin());
        node.args([
            "node",
            "--coordinator",
            &self.control,
            "--name",
            &format!("node-{index}"),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("TOPOCOMM_TOKEN", &self.token);
        let out = self.scratch.path.join(format!("node-{index}.stdout"));
        let err = self.scratch.path.join(format!("node-{index}.stderr"));
        self.children.0.push(common::spawn_logged(&mut node, &out, &err));
    }
}

/// An HTTP answer: status, headers (lower-case names) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Sends one HTTP/1.1 request to `address` with exactly these headers (the tests forge
/// Host and Origin, which HTTP client libraries set themselves) and reads the answer.
pub async fn http(address: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Answer {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        request.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(body.unwrap_or(""));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.expect("connecting to the lab");
        stream.write_all(request.as_bytes()).await.expect("sending the request");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("reading the answer");
        raw
    };
    let raw = tokio::time::timeout(Duration::from_secs(30), exchange).await.expect("the lab answered within 30 s");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).expect("a status");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Answer { status, headers, body: body.to_owned() }
}

/// The chromium binary: `$CHROMIUM`, else the first of Debian's and Google's names on
/// the PATH; `None` when there is none (the browser tests then skip, saying so).
pub fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(path);
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// Headless chromium and one page in it, over the DevTools protocol.
pub struct Browser {
    child: Child,
    writer: tokio::sync::Mutex<
        futures::stream::SplitSink<
            tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
            Message,
        >,
    >,
    pending: Pending,
    next_id: std::sync::atomic::AtomicU64,
    session: String,
    /// Console errors, uncaught exceptions and error log entries of the page.
    pub errors: Arc<Mutex<Vec<String>>>,
    _profile: Scratch,
}

/// How long one DevTools command may take.
const COMMAND_PATIENCE: Duration = Duration::from_secs(60);

impl Browser {
    /// Starts headless chromium with a fresh profile and a 1280x720 window, attaches to
    /// a blank page and listens for its errors.
    pub async fn launch(chromium: &Path) -> Self {
        let profile = Scratch::new("chromium-profile");
        let mut child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                "--window-size=1280,720",
            ])
            .arg(format!("--user-data-dir={}", profile.path.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting chromium");
        let stderr = child.stderr.take().expect("chromium's stderr");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = sender.send(line[at..].trim().to_owned());
                }
            }
        });
        let Ok(endpoint) = receiver.recv_timeout(Duration::from_secs(30)) else {
            common::kill_and_reap(&mut child);
            panic!("chromium printed no DevTools endpoint within 30 s");
        };
        let (socket, _) = tokio::time::timeout(Duration::from_secs(10), tokio_tungstenite::connect_async(&endpoint))
            .await
            .expect("connecting to chromium in time")
            .expect("connecting to chromium's DevTools");
        let (writer, mut reader) = socket.split();
        let pending: Pending = Arc::default();
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let (pending_in, errors_in) = (pending.clone(), errors.clone());
        tokio::spawn(async move {
            while let Some(Ok(message)) = reader.next().await {
                let Message::Text(text) = message else { continue };
                let Ok(value) = serde_json::from_str::<Value>(&text) else { continue };
                if let Some(id) = value["id"].as_u64() {
                    if let Some(waiter) = pending_in.lock().unwrap().remove(&id) {
                        let _ = waiter.send(value);
                    }
                    continue;
                }
                let params = &value["params"];
                let error = match value["method"].as_str() {
                    Some("Runtime.consoleAPICalled") if params["type"] == "error" => Some(format!("console: {params}")),
                    Some("Runtime.exceptionThrown") => Some(format!("exception: {}", params["exceptionDetails"])),
                    Some("Log.entryAdded") if params["entry"]["level"] == "error" => {
                        Some(format!("log: {}", params["entry"]))
                    }
                    _ => None,
                };
                if let Some(error) = error {
                    errors_in.lock().unwrap().push(error);
                }
            }
        });
        let mut browser = Browser {
            child,
            writer: tokio::sync::Mutex::new(writer),
            pending,
            next_id: 1.into(),
            session: String::new(),
            errors,
            _profile: profile,
        };
        let target = browser.command("Target.createTarget", json!({ "url": "about:blank" })).await;
        let target_id = target["targetId"].as_str().expect("a target id").to_owned();
        let attached =
            browser.command("Target.attachToTarget", json!({ "targetId": target_id, "flatten": true })).await;
        browser.session = attached["sessionId"].as_str().expect("a session id").to_owned();
        for domain in ["Runtime.enable", "Page.enable", "Log.enable"] {
            browser.command(domain, json!({})).await;
        }
        browser
            .command(
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": 1280, "height": 720, "deviceScaleFactor": 1, "mobile": false }),
            )
            .await;
        browser
    }

    /// Sends one command (to the page once attached) and waits for its result.
    pub async fn command(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let (sender, receiver) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, sender);
        self.writer.lock().await.send(Message::text(message.to_string())).await.expect("sending to chromium");
        let answer = tokio::time::timeout(COMMAND_PATIENCE, receiver)
            .await
            .unwrap_or_else(|_| panic!("chromium did not answer {method} within {COMMAND_PATIENCE:?}"))
            .expect("chromium's connection");
        assert!(answer.get("error").is_none(), "{method} failed: {answer}");
        answer["result"].clone()
    }

    /// Loads `url` and waits for its load event's document to be ready.
    pub async fn navigate(&self, url: &str) {
        self.command("Page.navigate", json!({ "url": url })).await;
        self.wait_for("document.readyState === 'complete'", Duration::from_secs(30)).await;
    }

    /// The value of `expression` (awaited if it is a promise); panics on an exception.
    pub async fn eval(&self, expression: &str) -> Value {
        let result = self
            .command(
                "Runtime.evaluate",
                json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
            )
            .await;
        assert!(result.get("exceptionDetails").is_none(), "{expression} threw: {}", result["exceptionDetails"]);
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is true, at most `patience`; panics then, with `what_now`'s
    /// value to say what the page shows.
    pub async fn wait_for(&self, expression: &str, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            if self.eval(&format!("!!({expression})")).await == json!(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "waited {patience:?} for {expression}; the page says: {}",
                self.eval("document.body ? document.body.innerText.slice(0, 2000) : ''").await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves what the page shows as a PNG.
    pub async fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let shot = self.command("Page.captureScreenshot", json!({ "format": "png" })).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("base64 screenshot");
        std::fs::write(path, png).expect("writing the screenshot");
    }

    /// The errors the page has had so far.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        common::kill_and_reap(&mut self.child);
    }
}

/// Sets the form's fields (`id` → value) as a user would, then presses a mode's radio.
pub fn fill_form(mode: &str, fields: &[(&str, &str)]) -> String {
    let sets: Vec<String> = fields
        .iter()
        .map(|(id, value)| {
            format!(
                "(() => {{ const e = document.getElementById({id:?}); e.value = {value:?}; \
                 e.dispatchEvent(new Event('input', {{ bubbles: true }})); \
                 e.dispatchEvent(new Event('change', {{ bubbles: true }})); }})();"
            )
        })
        .collect();
    format!(
        "(() => {{ const radio = document.querySelector('input[name=mode][value={mode}]'); radio.checked = true; \
         radio.dispatchEvent(new Event('change', {{ bubbles: true }})); {} return true; }})()",
        sets.join(" ")
    )
}
