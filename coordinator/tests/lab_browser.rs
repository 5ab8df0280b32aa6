//! The lab's page in a real browser: headless chromium, driven over the DevTools
//! protocol, against `topocomm lab` with a local cluster of 8 daemons. Skipped, saying
//! so, where no chromium binary exists (`apt-get install chromium`), except under
//! `CI=true`, where that fails.

mod common;
mod lab_support;

use std::collections::BTreeSet;
use std::time::Duration;

use lab_support::{Browser, Lab, chromium, fill_form};
use serde_json::{Value, json};
use topocomm_proto::network::placement::Placement;
use topocomm_proto::{Topology, TopologyKind};

/// How long a run from the form may take, the cluster's forming included.
const RUN_PATIENCE: Duration = Duration::from_secs(180);

/// The chromium binary; without one, `None` (the test skips, saying so), except under
/// `CI=true`, where a missing browser fails the test rather than pass it unseen.
fn skip_without_chromium() -> Option<std::path::PathBuf> {
    let found = chromium();
    if found.is_none() {
        let on_ci = std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true"));
        assert!(!on_ci, "CI=true and no chromium binary: install chromium (or set CHROMIUM) to run the browser tests");
        eprintln!("SKIPPED: no chromium binary on this machine (apt-get install chromium, or set CHROMIUM)");
    }
    found
}

/// A fast run from the form, as a user starts it, until the page shows its verdict. With
/// `answer_late`, the page's `fetch` hands the POST's answer over only after a while (a
/// slow network): the run's events, verdict included, come first.
async fn a_fast_run_from_the_form(answer_late: bool) {
    let Some(chromium) = skip_without_chromium() else { return };
    let lab = Lab::start("lab-browser-fast", 2);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser
        .wait_for(
            "document.querySelector('#cluster-line').textContent.startsWith('2 of 2 nodes connected')",
            RUN_PATIENCE,
        )
        .await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", Duration::from_secs(10)).await;
    if answer_late {
        browser
            .eval(
                "(() => { const real = window.fetch; window.fetch = async (path, options) => {                  const answer = await real(path, options);                  if (path === '/api/runs' && options && options.method === 'POST')                  await new Promise((resolve) => setTimeout(resolve, 1500));                  return answer; }; return true; })()",
            )
            .await;
    }
    let fields = [("collective", "allreduce"), ("topology", "ring"), ("size", "8B"), ("iterations", "1")];
    browser.eval(&fill_form("run", &fields)).await;
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.includes('verified on all 2 nodes')",
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(browser.eval("document.querySelector('#progress').hidden").await, Value::Bool(true), "no longer queued");
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_run_from_the_form_shows_its_verdict() {
    a_fast_run_from_the_form(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_events_come_before_the_posts_answer_is_not_lost() {
    a_fast_run_from_the_form(true).await;
}

/// The edges the page draws, as (lower id, higher id).
async fn drawn_edges(browser: &Browser) -> BTreeSet<(usize, usize)> {
    let edges = browser
        .eval("[...document.querySelectorAll('[data-testid=edge]')].map(e => [Number(e.dataset.from), Number(e.dataset.to)])")
        .await;
    edges
        .as_array()
        .expect("a list of edges")
        .iter()
        .map(|pair| {
            let (a, b) = (pair[0].as_u64().unwrap() as usize, pair[1].as_u64().unwrap() as usize);
            (a.min(b), a.max(b))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allreduce_from_the_form_is_verified_drawn_and_played_to_the_end() {
    let Some(chromium) = skip_without_chromium() else { return };
    let lab = Lab::start("lab-browser", 8);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser
        .wait_for(
            "document.querySelector('#cluster-line').textContent.startsWith('8 of 8 nodes connected')",
            RUN_PATIENCE,
        )
        .await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", Duration::from_secs(10)).await;

    // A bad size gets the CLI's own error text, in the page.
    let bad = [("collective", "allreduce"), ("topology", "hypercube"), ("size", "banana")];
    browser.eval(&fill_form("run", &bad)).await;
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser.wait_for("!document.querySelector('[data-testid=error]').hidden", Duration::from_secs(20)).await;
    let error = browser.eval("document.querySelector('[data-testid=error]').textContent").await;
    let error = error.as_str().unwrap();
    assert!(error.contains("invalid value 'banana' for '--size <SIZE>'"), "{error}");

    // An all-reduce on a hypercube of the 8 nodes, from the form.
    let fields = [("collective", "allreduce"), ("topology", "hypercube"), ("size", "16KiB"), ("iterations", "3")];
    browser.eval(&fill_form("run", &fields)).await;
    let words = browser.eval("document.querySelector('#words').textContent").await;
    assert_eq!(words, "topocomm run allreduce --topology hypercube --size 16KiB --dtype f64 --op sum --iterations 3");
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.includes('verified on all 8 nodes')",
            RUN_PATIENCE,
        )
        .await;
    assert!(browser.eval("document.querySelector('[data-testid=error]').hidden").await == Value::Bool(true));

    // Every link of the hypercube is drawn, once.
    let hypercube = Topology::new(TopologyKind::Hypercube, 8, None).unwrap();
    let expected: BTreeSet<(usize, usize)> = hypercube.edges().into_iter().map(|(a, b)| (a.min(b), a.max(b))).collect();
    assert_eq!(browser.eval("document.querySelectorAll('[data-testid=edge]').length").await, expected.len());
    assert_eq!(drawn_edges(&browser).await, expected);

    // The run's document, as the API gives it: 8 nodes exchange in each of 3 steps.
    let document = browser.eval("fetch(`/api/runs/${window.topocommLab.state.docId}`).then(r => r.json())").await;
    assert_eq!(document["schema_version"], 1);
    assert_eq!(document["result"]["verified"], true);
    let messages = document["flow"]["messages"].as_array().expect("the flow's messages");
    assert_eq!(messages.len(), 24, "recursive doubling on 8 nodes: 3 steps of 8 messages");
    assert!(messages.iter().all(|m| !m["delivered_ns"].is_null()), "every message was delivered");
    for message in messages {
        let hops = message["hops"].as_array().unwrap();
        assert_eq!(hops.len(), 1, "hypercube neighbours only: {message}");
        let (from, to) = (hops[0][0].as_u64().unwrap() as usize, hops[0][1].as_u64().unwrap() as usize);
        assert!(expected.contains(&(from.min(to), from.max(to))), "{message} crosses no link");
    }
    let span_us = document["flow"]["span_ns"].as_f64().unwrap() / 1e3;

    // At the start nothing is delivered; scrubbed to the end, every delivery was drawn.
    browser.eval("window.topocommLab.seek(0)").await;
    assert_eq!(browser.eval("document.querySelector('[data-testid=delivered]').dataset.count").await, "0");
    browser
        .eval("(() => { const s = document.querySelector('#scrub'); s.value = 1000; s.dispatchEvent(new Event('input')); })()")
        .await;
    let counter = browser.eval("Object.assign({}, document.querySelector('[data-testid=delivered]').dataset)").await;
    assert_eq!(counter["count"], "24", "{counter}");
    assert_eq!(counter["total"], "24", "{counter}");
    let got = browser.eval("document.querySelectorAll('#picture-overlay .ring.got').length").await;
    assert_eq!(got, 8, "every node received its partners' vectors");
    let clock: f64 = browser
        .eval("document.querySelector('[data-testid=clock]').dataset.us")
        .await
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((clock - span_us).abs() < 0.01, "the clock ends at the flow's span: {clock} µs against {span_us} µs");
    // Halfway through, some message is on a link and drawn as a moving mark.
    let busiest_instant = messages
        .iter()
        .map(|m| (m["hops"][0][2].as_f64().unwrap() + m["hops"][0][3].as_f64().unwrap()) / 2.0)
        .next()
        .unwrap();
    browser.eval(&format!("window.topocommLab.seek({busiest_instant})")).await;
    let marks = browser.eval("[...document.querySelectorAll('#picture-overlay .mark')].filter(m => m.getAttribute('visibility') !== 'hidden').length").await;
    assert!(marks.as_u64().unwrap() >= 1, "a message in flight is drawn: {marks}");

    // Played at 4x it runs to the end by itself.
    browser.eval("window.topocommLab.seek(0)").await;
    browser.eval("(() => { const s = document.querySelector('#speed'); s.value = '4'; s.dispatchEvent(new Event('change')); })()").await;
    browser.eval("document.querySelector('#play').click()").await;
    browser
        .wait_for("document.querySelector('[data-testid=delivered]').dataset.count === '24'", Duration::from_secs(30))
        .await;

    // The browser logs the API's refusal of the bad size (a 400) as a failed load: that
    // one is expected, and nothing else may be there.
    let errors: Vec<String> = browser
        .errors()
        .into_iter()
        .filter(|e| !(e.contains("status of 400 (Bad Request)") && e.contains("/api/runs\"")))
        .collect();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
    assert_eq!(browser.errors().len(), 1, "the bad size's refusal was logged once: {:#?}", browser.errors());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_saved_by_run_html_plays_offline() {
    let Some(chromium) = skip_without_chromium() else { return };
    let scratch = common::Scratch::new("lab-html");
    let page = scratch.path.join("broadcast.html");
    let mut command = common::command(&common::topocomm_bin());
    command
        .args(["run", "broadcast", "--nodes", "4", "--topology", "hypercube", "--size", "1KiB", "--iterations", "2"])
        .args(["--logs"])
        .arg(scratch.path.join("logs"))
        .arg("--html")
        .arg(&page);
    let finished = common::run_bounded(command, &scratch, "run-html", RUN_PATIENCE);
    assert!(finished.status.success(), "{}", finished.stderr);
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(!text.contains("src=\"lab/") && !text.contains("href=\"lab.css\""), "the page is self-contained");
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&format!("file://{}", page.display())).await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.includes('verified on all 4 nodes')",
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(browser.eval("document.querySelectorAll('[data-testid=edge]').length").await, 4);
    browser.eval("window.topocommLab.seek(1e18)").await;
    let counter = browser.eval("Object.assign({}, document.querySelector('[data-testid=delivered]').dataset)").await;
    assert_eq!(counter["count"], "3", "a binomial broadcast on 4 nodes sends 3 messages: {counter}");
    assert_eq!(counter["total"], "3", "{counter}");
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

/// A vertex as the page draws it: its id, whether it is a switch (a square), and its
/// centre.
#[derive(Debug, Clone, Copy)]
struct DrawnVertex {
    id: usize,
    switch: bool,
    x: f64,
    y: f64,
}

/// Every vertex the page draws, in the order drawn.
async fn drawn_vertices(browser: &Browser) -> Vec<DrawnVertex> {
    let drawn = browser
        .eval(
            "[...document.querySelectorAll('[data-testid=vertex]')].map(g => { const s = g.firstChild; \
             const square = s.tagName === 'rect'; const n = (a) => Number(s.getAttribute(a)); \
             return [Number(g.dataset.node), g.classList.contains('switch'), square, \
             square ? n('x') + n('width') / 2 : n('cx'), square ? n('y') + n('height') / 2 : n('cy')]; })",
        )
        .await;
    drawn
        .as_array()
        .expect("a list of vertices")
        .iter()
        .map(|v| {
            assert_eq!(v[1], v[2], "a switch is drawn as a square and a rank as a disc: {v}");
            DrawnVertex {
                id: v[0].as_u64().unwrap() as usize,
                switch: v[1].as_bool().unwrap(),
                x: v[3].as_f64().unwrap(),
                y: v[4].as_f64().unwrap(),
            }
        })
        .collect()
}

/// Every vertex of `topology` drawn once, the switches as squares, and every link once.
async fn every_vertex_and_link_is_drawn(browser: &Browser, topology: &Topology) -> Vec<DrawnVertex> {
    let vertices = drawn_vertices(browser).await;
    let ids: Vec<usize> = vertices.iter().map(|v| v.id).collect();
    assert_eq!(ids, (0..topology.vertices()).collect::<Vec<_>>(), "{topology}: every vertex, once");
    for vertex in &vertices {
        assert_eq!(vertex.switch, topology.is_switch(vertex.id), "{topology}: {vertex:?}");
    }
    let squares = browser.eval("document.querySelectorAll('#picture .switch rect').length").await;
    assert_eq!(squares, topology.switches(), "{topology}: a square a switch");
    let expected: BTreeSet<(usize, usize)> = topology.edges().into_iter().map(|(a, b)| (a.min(b), a.max(b))).collect();
    assert_eq!(browser.eval("document.querySelectorAll('[data-testid=edge]').length").await, expected.len());
    assert_eq!(drawn_edges(browser).await, expected, "{topology}: every link, once");
    vertices
}

/// Seeks the page to the middle of the first hop of the run's flow that `pick` accepts
/// (`[from, to, depart_ns, arrive_ns]`), and checks it is drawn there: the link hot, its
/// sender ringed as sending, and a mark of a forwarded message on the move. Returns the
/// hop.
async fn a_hop_is_played_through(browser: &Browser, pick: impl Fn(usize, usize) -> bool) -> (usize, usize) {
    let document = browser.eval("window.topocommLab.state.doc").await;
    let hop = document["flow"]["messages"]
        .as_array()
        .expect("the flow's messages")
        .iter()
        .flat_map(|m| m["hops"].as_array().unwrap().iter().skip(1))
        .map(|h| {
            let n = |i: usize| h[i].as_u64().unwrap();
            (n(0) as usize, n(1) as usize, n(2), n(3))
        })
        .find(|&(from, to, t0, t1)| t1 > t0 && pick(from, to))
        .expect("a forwarded hop the test looks for");
    let (from, to, t0, t1) = hop;
    browser.eval(&format!("window.topocommLab.seek({})", (t0 + t1) / 2)).await;
    let shown = browser
        .eval(&format!(
            "(() => {{ const edge = [...document.querySelectorAll('[data-testid=edge]')] \
             .find(e => [e.dataset.from, e.dataset.to].sort().join() === ['{from}', '{to}'].sort().join()); \
             const hot = [...document.querySelectorAll('#picture-overlay .hot')] \
             .filter(h => h.getAttribute('visibility') !== 'hidden').map(h => h.getAttribute('d')); \
             const ring = document.querySelector('#picture-overlay .ring[data-node=\"{from}\"]'); \
             const forwarded = [...document.querySelectorAll('#picture-overlay .mark.forwarded')] \
             .filter(m => m.getAttribute('visibility') !== 'hidden').length; \
             return [hot.includes(edge.getAttribute('d')), !!ring && ring.classList.contains('sending'), forwarded]; }})()"
        ))
        .await;
    assert_eq!(shown[0], true, "the link {from}-{to} is hot while the hop crosses it: {shown}");
    assert_eq!(shown[1], true, "vertex {from} is sending: {shown}");
    assert!(shown[2].as_u64().unwrap() >= 1, "a forwarded message is drawn on the move: {shown}");
    (from, to)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fat_tree_simulated_from_the_form_is_drawn_in_its_levels_and_played_through_its_switches() {
    let Some(chromium) = skip_without_chromium() else { return };
    let lab = Lab::start("lab-browser-fat-tree", 1);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", RUN_PATIENCE).await;
    let fields = [
        ("collective", "allreduce"),
        ("topology", "fat-tree"),
        ("dims", "4"),
        ("nodes-count", "16"),
        ("size", "4KiB"),
        ("routes", "ecmp"),
        ("placement", "round-robin"),
    ];
    browser.eval(&fill_form("simulate", &fields)).await;
    let words = browser.eval("document.querySelector('#words').textContent").await;
    assert!(
        words.as_str().is_some_and(|words| words.ends_with("--routes ecmp --placement round-robin")),
        "the form's routes and placement are words of the run: {words}"
    );
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.startsWith('simulated, every result verified')",
            RUN_PATIENCE,
        )
        .await;
    // Drawn as placed: rank r on the (r mod 8)-th edge switch's next host.
    let topology = Topology::new(TopologyKind::FatTree, 16, Some(&[4])).unwrap().placed(Placement::RoundRobin).unwrap();
    let vertices = every_vertex_and_link_is_drawn(&browser, &topology).await;
    // Its levels, bottom up: hosts, edge, aggregation and core switches, each a row.
    let level = |v: usize| topology.coords(v)[0];
    for a in &vertices {
        for b in vertices.iter().filter(|b| level(b.id) == level(a.id) + 1) {
            assert!(a.y > b.y, "{a:?} (level {}) under {b:?}", level(a.id));
        }
        for b in vertices.iter().filter(|b| level(b.id) == level(a.id)) {
            assert_eq!(a.y, b.y, "{a:?} and {b:?} on one level");
        }
    }
    // A message climbing from an aggregation switch to a core switch.
    let (from, to) = a_hop_is_played_through(&browser, |from, to| level(from) == 2 && level(to) == 3).await;
    assert!(topology.is_switch(from) && topology.is_switch(to));
    // Played at 4x it runs to the end by itself, every message delivered.
    browser.eval("window.topocommLab.seek(0)").await;
    browser.eval("(() => { const s = document.querySelector('#speed'); s.value = '4'; s.dispatchEvent(new Event('change')); })()").await;
    browser.eval("document.querySelector('#play').click()").await;
    browser
        .wait_for(
            "(() => { const d = document.querySelector('[data-testid=delivered]').dataset; \
             return d.total > 0 && d.count === d.total; })()",
            Duration::from_secs(30),
        )
        .await;
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_dragonfly_of_daemons_is_drawn_as_groups_on_a_circle_and_played_across_a_global_link() {
    let Some(chromium) = skip_without_chromium() else { return };
    let words = ["--http", "127.0.0.1:0", "--topology", "dragonfly", "--dims", "2x2x1"];
    let lab = Lab::start_with("lab-browser-dragonfly", 12, &words, None);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser
        .wait_for(
            "/^(\\d+) of \\1 nodes connected/.test(document.querySelector('#cluster-line').textContent)",
            RUN_PATIENCE,
        )
        .await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", Duration::from_secs(10)).await;
    // The form starts at the lab's network, and its preview of a run is on the lab's 18
    // daemons: 12 ranks and 6 routers, as /api/layout gives it from either count.
    let cluster = browser.eval("fetch('/api/cluster').then(r => r.json())").await;
    assert_eq!(cluster["started_for"], json!({ "topology": "dragonfly", "dims": "2x2x1" }), "{cluster}");
    assert_eq!(
        browser.eval("[document.querySelector('#topology').value, document.querySelector('#dims').value]").await,
        json!(["dragonfly", "2x2x1"])
    );
    browser.wait_for("document.querySelectorAll('[data-testid=vertex]').length === 18", Duration::from_secs(20)).await;
    for query in ["daemons=18", "nodes=12"] {
        let preview = browser
            .eval(&format!("fetch('/api/layout?topology=dragonfly&dims=2x2x1&{query}').then(r => r.json())"))
            .await;
        assert_eq!(
            (preview["p"].clone(), preview["layout"]["nodes"].as_array().map(Vec::len)),
            (json!(12), Some(18)),
            "{query}"
        );
        assert_eq!(preview["layout"]["regions"].as_array().map(Vec::len), Some(3), "{query}: a ring a group");
    }
    let fields = [
        ("collective", "allgather"),
        ("topology", "dragonfly"),
        ("dims", "2x2x1"),
        ("size", "1KiB"),
        ("iterations", "1"),
    ];
    browser.eval(&fill_form("run", &fields)).await;
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.includes('verified on all 12 nodes')",
            RUN_PATIENCE,
        )
        .await;
    let topology = Topology::new(TopologyKind::Dragonfly, 12, Some(&[2, 2, 1])).unwrap();
    let vertices = every_vertex_and_link_is_drawn(&browser, &topology).await;
    // Three groups, each a ring round its two routers, its four hosts outside it, the
    // rings' centres on a circle.
    let rings = browser
        .eval(
            "[...document.querySelectorAll('[data-testid=region] ellipse')].map(e => \
             ['cx', 'cy', 'rx'].map(a => Number(e.getAttribute(a))))",
        )
        .await;
    let rings: Vec<(f64, f64, f64)> = rings
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_f64().unwrap(), r[1].as_f64().unwrap(), r[2].as_f64().unwrap()))
        .collect();
    assert_eq!(rings.len(), 3, "a ring a group: {rings:?}");
    let middle = rings.iter().fold((0.0, 0.0), |(x, y), r| (x + r.0 / 3.0, y + r.1 / 3.0));
    let radius = (rings[0].0 - middle.0).hypot(rings[0].1 - middle.1);
    for ring in &rings {
        assert!(((ring.0 - middle.0).hypot(ring.1 - middle.1) - radius).abs() < 0.01, "on one circle: {rings:?}");
    }
    for vertex in &vertices {
        let (cx, cy, r) = rings[topology.coords(vertex.id)[0]];
        let inside = (vertex.x - cx).hypot(vertex.y - cy) < r;
        assert_eq!(inside, vertex.switch, "routers inside their group's ring, hosts outside: {vertex:?}");
    }
    // A message crossing between two groups, router to router.
    let group = |v: usize| topology.coords(v)[0];
    let global =
        |from: usize, to: usize| topology.is_switch(from) && topology.is_switch(to) && group(from) != group(to);
    a_hop_is_played_through(&browser, global).await;
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_saved_by_run_html_of_a_cluster_draws_its_machines_holding_their_cores() {
    let Some(chromium) = skip_without_chromium() else { return };
    let scratch = common::Scratch::new("lab-html-cluster");
    let page = scratch.path.join("cluster.html");
    let mut command = common::command(&common::topocomm_bin());
    command
        .args(["run", "broadcast", "--nodes", "6", "--topology", "cluster", "--dims", "2x3", "--size", "1KiB"])
        .args(["--iterations", "1", "--logs"])
        .arg(scratch.path.join("logs"))
        .arg("--html")
        .arg(&page);
    let finished = common::run_bounded(command, &scratch, "run-html-cluster", RUN_PATIENCE);
    assert!(finished.status.success(), "{}", finished.stderr);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&format!("file://{}", page.display())).await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.includes('verified on all 6 nodes')",
            Duration::from_secs(20),
        )
        .await;
    let topology = Topology::new(TopologyKind::Cluster, 6, Some(&[2, 3])).unwrap();
    let vertices = every_vertex_and_link_is_drawn(&browser, &topology).await;
    let boxes = browser
        .eval(
            "[...document.querySelectorAll('[data-testid=region] rect')].map(e => \
             ['x', 'y', 'width', 'height'].map(a => Number(e.getAttribute(a))))",
        )
        .await;
    let boxes: Vec<Vec<f64>> = boxes
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect())
        .collect();
    assert_eq!(boxes.len(), 2, "a box a machine: {boxes:?}");
    for vertex in &vertices {
        let holding: Vec<usize> = (0..2)
            .filter(|&m| {
                let b = &boxes[m];
                b[0] < vertex.x && vertex.x < b[0] + b[2] && b[1] < vertex.y && vertex.y < b[1] + b[3]
            })
            .collect();
        let expected: Vec<usize> = topology.coords(vertex.id).first().copied().into_iter().collect();
        assert_eq!(
            holding, expected,
            "a core and its memory switch in their machine's box, the cluster's switch in none: {vertex:?}"
        );
    }
    // The broadcast's message from machine 0 to machine 1 crosses the cluster's switch.
    let cluster_switch = topology.vertices() - 1;
    a_hop_is_played_through(&browser, |from, _| from == cluster_switch).await;
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_from_the_form_is_plotted_a_line_per_algorithm() {
    let Some(chromium) = skip_without_chromium() else { return };
    let lab = Lab::start("lab-browser-sweep", 4);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser
        .wait_for(
            "document.querySelector('#cluster-line').textContent.startsWith('4 of 4 nodes connected')",
            RUN_PATIENCE,
        )
        .await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", Duration::from_secs(10)).await;
    let catalogue = browser.eval("fetch('/api/catalogue').then(r => r.json())").await;
    let scan = catalogue["collectives"].as_array().unwrap().iter().find(|c| c["name"] == "scan").unwrap();
    let algorithms: Vec<String> =
        scan["algorithms"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
    assert!(algorithms.len() >= 2, "{algorithms:?}");

    let fields = [
        ("collective", "scan"),
        ("algorithm", "all"),
        ("topology", "hypercube"),
        ("sizes", "1KiB..4KiB"),
        ("iterations", "2"),
        ("ts", "10us"),
        ("dilation", "1"),
    ];
    browser.eval(&fill_form("sweep", &fields)).await;
    let words = browser.eval("document.querySelector('#words').textContent").await;
    assert_eq!(
        words,
        "topocomm sweep scan --topology hypercube --algorithm all --sizes 1KiB..4KiB --dtype f64 --op sum \
         --ts 10us --iterations 2 --dilation 1"
    );
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.includes('every one verified')",
            RUN_PATIENCE,
        )
        .await;
    let verdict = browser.eval("document.querySelector('[data-testid=verdict]').textContent").await;
    let points = 3 * algorithms.len();
    assert_eq!(verdict, format!("{points} points measured on 4 nodes, every one verified"));
    // One solid line per algorithm, each through its three sizes, the model dashed beside it.
    let lines = browser
        .eval("[...document.querySelectorAll('[data-testid=series]')].map(l => [l.dataset.name, Number(l.dataset.points), l.getAttribute('points').split(' ').length])")
        .await;
    let lines: Vec<(String, u64, u64)> = lines
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l[0].as_str().unwrap().to_owned(), l[1].as_u64().unwrap(), l[2].as_u64().unwrap()))
        .collect();
    let expected: Vec<(String, u64, u64)> = algorithms.iter().map(|a| (a.clone(), 3, 3)).collect();
    assert_eq!(lines, expected);
    assert_eq!(browser.eval("document.querySelectorAll('[data-testid=point]').length").await, points);
    assert_eq!(browser.eval("document.querySelectorAll('[data-testid=model]').length").await, algorithms.len());
    let hover = browser.eval("document.querySelector('[data-testid=point] title').textContent").await;
    assert!(
        hover.as_str().unwrap().contains("per node: mean") && hover.as_str().unwrap().contains("verified"),
        "{hover}"
    );
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_of_2048_nodes_from_the_form_is_shown_by_step() {
    let Some(chromium) = skip_without_chromium() else { return };
    let lab = Lab::start("lab-browser-steps", 1);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", RUN_PATIENCE).await;
    let fields = [("collective", "broadcast"), ("topology", "hypercube"), ("nodes-count", "2048"), ("size", "1KiB")];
    browser.eval(&fill_form("simulate", &fields)).await;
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser
        .wait_for(
            "document.querySelector('[data-testid=verdict]').textContent.includes('simulated on 2048 nodes')",
            RUN_PATIENCE,
        )
        .await;
    let bars = browser
        .eval("[...document.querySelectorAll('[data-testid=step-bar]')].map(b => Number(b.dataset.messages))")
        .await;
    let bars: Vec<u64> = bars.as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
    assert_eq!(bars.len(), 11, "a bar per step of the hypercube broadcast: {bars:?}");
    assert_eq!(bars.iter().sum::<u64>(), 2047, "{bars:?}");
    assert_eq!(browser.eval("document.querySelector('#controls').hidden").await, Value::Bool(true), "nothing to play");
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

/// The parts of the page's script, in the order they load.
const SCRIPT_PARTS: [&str; 5] = ["page", "api", "charts", "animation", "ui"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_that_fails_to_load_and_a_failed_request_are_said_on_the_page() {
    let Some(chromium) = skip_without_chromium() else { return };
    let lab = Lab::start("lab-browser-failures", 1);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", RUN_PATIENCE).await;
    // The form previews its topology only once the page knows the cluster.
    browser
        .wait_for(
            "document.querySelector('#cluster-line').textContent.startsWith('1 of 1 nodes connected')",
            RUN_PATIENCE,
        )
        .await;
    assert_eq!(browser.eval("window.topocommLab.parts").await, json!(SCRIPT_PARTS), "every part loaded, in order");
    assert_eq!(browser.eval("document.querySelector('[data-testid=error]').hidden").await, Value::Bool(true));
    // The cluster is not wired yet: the page draws the form's topology from /api/layout.
    // That request failing is said on the error line; the next preview that works clears it.
    browser.command("Network.enable", json!({})).await;
    browser.command("Network.setBlockedURLs", json!({ "urls": ["*/api/layout*"] })).await;
    browser.eval(&fill_form("explain", &[("topology", "ring")])).await;
    browser.wait_for("!document.querySelector('[data-testid=error]').hidden", Duration::from_secs(20)).await;
    let error = browser.eval("document.querySelector('[data-testid=error]').textContent").await;
    assert!(error.as_str().unwrap().starts_with("drawing the form's topology: "), "{error}");
    browser.command("Network.setBlockedURLs", json!({ "urls": [] })).await;
    browser.eval(&fill_form("explain", &[("topology", "hypercube")])).await;
    // The preview drawn once its request works (an earlier preview still under way may
    // finish first: the page is waited for, not sampled).
    browser
        .wait_for(
            "document.querySelector('[data-testid=error]').hidden \
             && document.querySelector('#stage-title').textContent === 'The cluster (not wired yet)'",
            Duration::from_secs(20),
        )
        .await;
    // Each part that does not load is said on the page, which does not start.
    for (i, missing) in SCRIPT_PARTS.iter().enumerate() {
        browser.command("Network.setBlockedURLs", json!({ "urls": [format!("*/lab/{missing}.js")] })).await;
        browser.navigate(&lab.url).await;
        browser.wait_for("!document.querySelector('[data-testid=error]').hidden", Duration::from_secs(20)).await;
        let error = browser.eval("document.querySelector('[data-testid=error]').textContent").await;
        let error = error.as_str().unwrap();
        assert!(error.contains(*missing) && error.contains("did not load"), "{missing}: {error}");
        assert_eq!(
            browser.eval("document.querySelectorAll('#collective option').length").await,
            0,
            "without {missing} the page does not start"
        );
        let loaded = browser.eval("window.topocommLab ? window.topocommLab.parts : []").await;
        let expected: Vec<&str> = SCRIPT_PARTS.iter().filter(|part| *part != missing).copied().collect();
        // A part after the missing one may register, but the ui does not run without it.
        let loaded: Vec<&str> = loaded.as_array().unwrap().iter().map(|part| part.as_str().unwrap()).collect();
        assert!(loaded.iter().all(|part| expected.contains(part)), "{missing}: {loaded:?}");
        assert!(!loaded.contains(missing) && (i == 0 || loaded.contains(&"page")), "{missing}: {loaded:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_runs_are_cancelled_from_the_history_and_the_progress_line() {
    let Some(chromium) = skip_without_chromium() else { return };
    let lab = Lab::start("lab-browser-cancel", 2);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser
        .wait_for(
            "document.querySelector('#cluster-line').textContent.startsWith('2 of 2 nodes connected')",
            RUN_PATIENCE,
        )
        .await;
    browser.wait_for("document.querySelectorAll('#collective option').length > 10", Duration::from_secs(10)).await;
    let long = [("collective", "allreduce"), ("topology", "ring"), ("size", "8B"), ("iterations", "50000000")];
    for (cancel, id) in [("[data-testid=cancel-run]", 1), ("[data-testid=cancel]", 2)] {
        browser.eval(&fill_form("run", &long)).await;
        browser.eval("document.querySelector('[data-testid=run]').click()").await;
        // The history lists the job, waiting or running, with its cancel button.
        browser
            .wait_for(
                &format!(
                    "(() => {{ const item = document.querySelector('#history li[data-run=\"{id}\"]'); \
                     return item && ['queued', 'running'].includes(item.className) \
                     && item.querySelector('[data-testid=cancel-run]'); }})()"
                ),
                Duration::from_secs(30),
            )
            .await;
        // The progress line shows once the POST's answer names the job (its events may
        // draw the history first).
        browser.wait_for("document.querySelector('#progress').hidden === false", Duration::from_secs(30)).await;
        browser.eval(&format!("document.querySelector('{cancel}').click()")).await;
        browser
            .wait_for(
                &format!("document.querySelector('#history li[data-run=\"{id}\"]').className === 'cancelled'"),
                Duration::from_secs(60),
            )
            .await;
        browser.wait_for("document.querySelector('#progress').hidden", Duration::from_secs(10)).await;
        let error = browser.eval("document.querySelector('[data-testid=error]').textContent").await;
        assert_eq!(error, format!("run {id} cancelled"), "cancelled with {cancel}");
        assert_eq!(
            browser
                .eval(&format!(
                    "document.querySelectorAll('#history li[data-run=\"{id}\"] [data-testid=cancel-run]').length"
                ))
                .await,
            0,
            "a finished job has no cancel button"
        );
    }
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}
