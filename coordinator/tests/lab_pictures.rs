//! Ignored by default, run by hand: the lab's screenshots for the docs, and its frame
//! rate measured in headless chromium (printed, not asserted).
//!
//! ```text
//! cargo test -p topocomm-coordinator --test lab_pictures -- --ignored --nocapture
//! ```

mod common;
mod lab_support;

use std::path::PathBuf;
use std::time::Duration;

use lab_support::{Browser, Lab, chromium, fill_form};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(600);

/// Starts a run (or explain, simulate) from the form and waits for its document.
async fn run_from_form(browser: &Browser, mode: &str, fields: &[(&str, &str)]) -> Value {
    let before = browser.eval("window.topocommLab.state.docId").await;
    browser.eval(&fill_form(mode, fields)).await;
    browser.eval("document.querySelector('[data-testid=run]').click()").await;
    browser
        .wait_for(
            &format!(
                "window.topocommLab.state.docId !== {before} && window.topocommLab.state.docId !== null \
                 && document.querySelector('[data-testid=error]').hidden"
            ),
            PATIENCE,
        )
        .await;
    browser.eval("window.topocommLab.state.doc").await
}

/// Plays the animation from the start for `seconds` and counts frames with
/// requestAnimationFrame; also times the page's own drawing of one frame.
async fn frame_rate(browser: &Browser, seconds: f64) -> (f64, f64) {
    let measured = browser
        .eval(&format!(
            "new Promise(resolve => {{
                const lab = window.topocommLab;
                lab.setPlaying(false); lab.seek(0);
                const s = document.querySelector('#speed'); s.value = '0.25'; s.dispatchEvent(new Event('change'));
                lab.setPlaying(true);
                let frames = 0; const t0 = performance.now();
                const tick = (now) => {{
                    frames += 1;
                    if (now - t0 < {ms}) requestAnimationFrame(tick);
                    else {{
                        const fps = frames / ((now - t0) / 1000);
                        lab.setPlaying(false);
                        const span = lab.state.anim.span; const draws = 50; const d0 = performance.now();
                        for (let i = 0; i < draws; i += 1) lab.seek((span * (i + 0.5)) / draws);
                        resolve([fps, (performance.now() - d0) / draws]);
                    }}
                }};
                requestAnimationFrame(tick);
            }})",
            ms = seconds * 1000.0
        ))
        .await;
    (measured[0].as_f64().unwrap(), measured[1].as_f64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes docs/images/lab-*.png; run by hand"]
async fn screenshots_of_a_hypercube_broadcast() {
    let chromium = chromium().expect("chromium is needed for the screenshots");
    let lab = Lab::start("lab-screenshots", 8);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser.wait_for("document.querySelector('#cluster-line').textContent.startsWith('8 of 8')", PATIENCE).await;
    let fields = [
        ("collective", "broadcast"),
        ("topology", "hypercube"),
        ("size", "64KiB"),
        ("ts", "200us"),
        ("tw", "10ns"),
        ("iterations", "3"),
    ];
    let document = run_from_form(&browser, "run", &fields).await;
    assert_eq!(document["result"]["verified"], true, "{}", document["result"]);
    let messages = document["flow"]["messages"].as_array().unwrap();
    let middle_of_step = |step: u64| {
        let hop = messages.iter().find(|m| m["step"] == step).expect("a message of the step")["hops"][0].clone();
        (hop[2].as_f64().unwrap() + hop[3].as_f64().unwrap()) / 2.0
    };
    let images = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/images");
    std::fs::create_dir_all(&images).unwrap();
    let moments = [
        ("lab-broadcast-step-1.png", middle_of_step(1)),
        ("lab-broadcast-step-3.png", middle_of_step(3)),
        ("lab-broadcast-done.png", document["flow"]["span_ns"].as_f64().unwrap()),
    ];
    for (name, at) in moments {
        browser.eval(&format!("window.topocommLab.seek({at})")).await;
        browser.screenshot(&images.join(name)).await;
        println!("wrote docs/images/{name} at {:.1} µs", at / 1e3);
    }

    // The schedule of an all-gather on a 4x4 torus, halfway, and a scaling plot.
    let explain = [
        ("collective", "allgather"),
        ("topology", "torus"),
        ("nodes-count", "16"),
        ("size", "4KiB"),
        ("ts", ""),
        ("tw", ""),
    ];
    let document = run_from_form(&browser, "explain", &explain).await;
    browser.eval(&format!("window.topocommLab.seek({})", document["flow"]["span_ns"].as_f64().unwrap() * 0.4)).await;
    browser.screenshot(&images.join("lab-torus-allgather-explained.png")).await;
    println!("wrote docs/images/lab-torus-allgather-explained.png");
    let scaling =
        [("collective", "broadcast"), ("topology", "hypercube"), ("nodes-count", "2..1024"), ("size", "64KiB")];
    run_from_form(&browser, "simulate", &scaling).await;
    browser.screenshot(&images.join("lab-broadcast-scaling.png")).await;
    println!("wrote docs/images/lab-broadcast-scaling.png");
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes docs/images/lab-fat-tree-allreduce.png; run by hand"]
async fn screenshot_of_an_allreduce_on_a_fat_tree_of_daemons_playing() {
    let chromium = chromium().expect("chromium is needed for the screenshots");
    let words = ["--http", "127.0.0.1:0", "--topology", "fat-tree", "--dims", "4"];
    let lab = Lab::start_with("lab-screenshot-fat-tree", 16, &words, None);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser.wait_for("document.querySelector('#cluster-line').textContent.startsWith('36 of 36')", PATIENCE).await;
    let fields = [
        ("collective", "allreduce"),
        ("topology", "fat-tree"),
        ("dims", "4"),
        ("size", "64KiB"),
        ("ts", "200us"),
        ("tw", "10ns"),
        ("iterations", "2"),
    ];
    let document = run_from_form(&browser, "run", &fields).await;
    assert_eq!(document["result"]["verified"], true, "{}", document["result"]);
    // The middle of the first hop that climbs to a core switch (vertices 32 to 35).
    let hop = document["flow"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["hops"].as_array().unwrap().iter())
        .find(|h| h[1].as_u64().unwrap() >= 32)
        .expect("a hop to a core switch")
        .clone();
    let at = (hop[2].as_f64().unwrap() + hop[3].as_f64().unwrap()) / 2.0;
    browser.eval(&format!("window.topocommLab.seek({at})")).await;
    let images = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/images");
    browser.screenshot(&images.join("lab-fat-tree-allreduce.png")).await;
    println!("wrote docs/images/lab-fat-tree-allreduce.png at {:.1} µs", at / 1e3);
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: prints the animation's frame rate; run by hand"]
async fn frame_rate_of_a_64_node_run_and_a_1024_node_simulated_broadcast() {
    let chromium = chromium().expect("chromium is needed for the frame rate");
    let lab = Lab::start("lab-frame-rate", 64);
    let browser = Browser::launch(&chromium).await;
    browser.navigate(&lab.url).await;
    browser.wait_for("document.querySelector('#cluster-line').textContent.startsWith('64 of 64')", PATIENCE).await;
    let run = [("collective", "allreduce"), ("topology", "hypercube"), ("size", "64KiB"), ("iterations", "3")];
    let document = run_from_form(&browser, "run", &run).await;
    assert_eq!(document["result"]["verified"], true, "{}", document["result"]);
    let messages = document["flow"]["messages"].as_array().unwrap().len();
    let (fps, draw_ms) = frame_rate(&browser, 4.0).await;
    println!(
        "p = 64 allreduce (hypercube), {messages} messages: {fps:.1} frames/s while playing; {draw_ms:.2} ms to draw a frame"
    );

    let simulate = [
        ("collective", "broadcast"),
        ("topology", "hypercube"),
        ("nodes-count", "1024"),
        ("size", "64KiB"),
        ("ts", ""),
        ("tw", ""),
    ];
    let document = run_from_form(&browser, "simulate", &simulate).await;
    let messages = document["flow"]["messages"].as_array().unwrap().len();
    let edges = browser.eval("document.querySelectorAll('[data-testid=edge]').length").await;
    let (fps, draw_ms) = frame_rate(&browser, 4.0).await;
    println!(
        "p = 1024 simulated broadcast (hypercube, {edges} links drawn), {messages} messages: {fps:.1} frames/s while playing; {draw_ms:.2} ms to draw a frame"
    );
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}
