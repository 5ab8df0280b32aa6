//! The pictures and files the CLI writes, as a user gets them: `topology --svg`, `run
//! --diagram --trace` and `sweep --csv --json --plot`, each on a local cluster of
//! `topocomm` node processes. The SVGs must parse as XML and hold the lanes, arrows,
//! nodes, links and lines expected; PNGs must decode at the picture's size; the Chrome
//! trace must have a track per node and every flow start matched by an end.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use common::{Scratch, command, read_text, run_bounded, topocomm_bin};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(180);

fn topocomm(scratch: &Scratch, label: &str, words: &str) -> common::Finished {
    let mut cli = command(&topocomm_bin());
    cli.args(words.split_whitespace());
    let finished = run_bounded(cli, scratch, label, PATIENCE);
    assert!(finished.status.success(), "topocomm {words} failed:\n{}\n{}", finished.stderr, finished.stdout);
    finished
}

/// How many elements carry `class` among their classes.
fn count_class(svg: &str, class: &str) -> usize {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML ({e}):\n{svg}"));
    doc.descendants().filter(|n| n.attribute("class").is_some_and(|c| c.split(' ').any(|c| c == class))).count()
}

/// The PNG's width and height.
fn png_size(path: &Path) -> (u32, u32) {
    let file = std::io::BufReader::new(std::fs::File::open(path).expect("the PNG was written"));
    let reader = png::Decoder::new(file).read_info().expect("a PNG");
    (reader.info().width, reader.info().height)
}

/// The SVG's declared width and height.
fn svg_size(svg: &str) -> (u32, u32) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let size = |name: &str| doc.root_element().attribute(name).unwrap().parse::<f64>().unwrap().ceil() as u32;
    (size("width"), size("height"))
}

#[test]
fn topology_pictures_draw_every_node_and_link() {
    let scratch = Scratch::new("topology-svg");
    let svg = scratch.file("torus", "svg");
    topocomm(&scratch, "torus", &format!("topology --topology torus --nodes 16 --svg {}", svg.display()));
    let text = read_text(&svg);
    assert_eq!(count_class(&text, "node"), 16);
    assert_eq!(count_class(&text, "edge"), 32);
    assert_eq!(count_class(&text, "wrap"), 8);
    let png = scratch.file("cube", "png");
    topocomm(&scratch, "cube", &format!("topology --topology hypercube --nodes 8 --svg {}", png.display()));
    let (width, height) = png_size(&png);
    assert!(width >= 400 && height >= 300, "{width}x{height}");
}

#[test]
fn a_run_draws_its_diagram_and_writes_its_trace() {
    let scratch = Scratch::new("run-diagram");
    let (svg, trace, png) =
        (scratch.file("diagram", "svg"), scratch.file("trace", "json"), scratch.file("steps", "png"));
    let logs = scratch.path.join("logs");
    topocomm(
        &scratch,
        "run",
        &format!(
            "run broadcast --nodes 8 --topology ring --algorithm ring --size 8KiB --ts 50us --tw 1ns \
             --iterations 2 --warmup 1 --logs {} --diagram {} --trace {}",
            logs.display(),
            svg.display(),
            trace.display()
        ),
    );
    let text = read_text(&svg);
    assert_eq!(count_class(&text, "lane"), 8);
    assert_eq!(count_class(&text, "hop"), 7, "the ring broadcast crosses 7 links");
    assert_eq!(count_class(&text, "deliver"), 7);

    let json: Value = serde_json::from_str(&read_text(&trace)).expect("the trace is JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let tracks = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name").count();
    assert_eq!(tracks, 8);
    let mut flows: HashMap<u64, (usize, usize)> = HashMap::new();
    for event in events {
        let id = event["id"].as_u64();
        match (event["ph"].as_str(), id) {
            (Some("s"), Some(id)) => flows.entry(id).or_default().0 += 1,
            (Some("f"), Some(id)) => flows.entry(id).or_default().1 += 1,
            _ => {}
        }
    }
    assert_eq!(flows.len(), 7);
    assert!(flows.values().all(|&(starts, ends)| starts == 1 && ends == 1), "{flows:?}");

    topocomm(
        &scratch,
        "steps",
        &format!(
            "run broadcast --nodes 8 --topology ring --size 8KiB --iterations 1 --warmup 0 --logs {} \
             --diagram {} --steps",
            logs.display(),
            png.display()
        ),
    );
    assert_eq!(png_size(&png).0, 1200);
}

#[test]
fn a_sweep_prints_osu_columns_and_writes_csv_json_and_a_plot() {
    let scratch = Scratch::new("sweep");
    let (csv, plot) = (scratch.file("sweep", "csv"), scratch.file("sweep", "svg"));
    let logs = scratch.path.join("logs");
    let words = format!(
        "sweep allreduce --nodes 4 --topology ring --sizes 1KiB..4KiB --algorithm ring,recursive-doubling \
         --ts 20us --tw 1ns --iterations 2 --warmup 1 --logs {} --csv {} --plot {}",
        logs.display(),
        csv.display(),
        plot.display()
    );
    let table = topocomm(&scratch, "table", &words).stdout;
    assert!(table.contains("# Size"), "{table}");
    assert!(table.contains("Avg(us)") && table.contains("busbw(GB/s)") && table.contains("Model(us)"), "{table}");
    let rows: Vec<&str> = table.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 6, "{table}");
    // Size, Avg, Min, Max, P50, P90, P99, Iterations, Model, algbw, busbw, Dilation.
    assert!(table.contains("P50(us)") && table.contains("P99(us)") && table.contains("Dilation"), "{table}");
    assert!(rows.iter().all(|r| r.split_whitespace().count() == 12), "{table}");
    assert!(rows.iter().all(|r| r.split_whitespace().last().is_some_and(|k| k.starts_with('x'))), "{table}");

    let csv_text = read_text(&csv);
    assert_eq!(csv_text.lines().count(), 7, "{csv_text}");
    assert!(csv_text.starts_with("collective,algorithm,"));

    let svg = read_text(&plot);
    let doc = roxmltree::Document::parse(&svg).expect("the plot is XML");
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("points").is_some_and(|p| p.split(' ').count() >= 4))
        .count();
    assert!(lines >= 2, "a line per algorithm");
    assert_eq!(svg_size(&svg), (1000, 640));

    let json = topocomm(&scratch, "json", &format!("{words} --json -")).stdout;
    let json: Value = serde_json::from_str(&json).expect("--json - prints only JSON");
    let points = json["points"].as_array().expect("points");
    assert_eq!(points.len(), 6);
    // The run's own link model: ts per message, th per hop after the first, tw per byte per hop.
    let links = &json["links"];
    let (ts, th, tw) = (
        links["ts_us"].as_f64().unwrap(),
        links["th_us"].as_f64().unwrap(),
        links["tw_ns_per_byte"].as_f64().unwrap() / 1000.0,
    );
    assert_eq!((ts, tw * 1000.0), (20.0, 1.0), "the links asked for: {links}");
    for point in points {
        let (avg, model) = (point["avg_us"].as_f64().unwrap(), point["model_us"].as_f64().unwrap());
        let n = point["size_bytes"].as_f64().unwrap();
        // The closed forms on a ring of 4: the ring all-reduce sends 2(p-1) messages of
        // n/p bytes to a neighbour; recursive doubling's 2 steps send n bytes to a
        // partner 1 hop away, then 2 hops away.
        let closed = match point["algorithm"].as_str().unwrap() {
            "ring" => 6.0 * (ts + n / 4.0 * tw),
            "recursive-doubling" => 2.0 * ts + th + 3.0 * n * tw,
            other => panic!("an algorithm not asked for: {other}"),
        };
        assert!((model - closed).abs() <= 1e-6 * closed, "the model is not the closed form {closed} us: {point}");
        // Emulated time: the links hold every message to the model, and a loaded machine
        // adds to it, not a multiple of it.
        assert!(avg >= 0.5 * model && avg <= 4.0 * model, "the average is not near the model: {point}");
        let (algbw, busbw) = (point["algbw_gbps"].as_f64().unwrap(), point["busbw_gbps"].as_f64().unwrap());
        assert!((busbw / algbw - 1.5).abs() < 1e-9, "allreduce on 4 nodes: busbw = algbw x 2(p-1)/p");
        assert!(point["dilation"].as_f64().is_some_and(|k| k >= 1.0), "emulated points are dilated: {point}");
    }
    assert!(json["dilation"].as_str().is_some_and(|how| how.starts_with("auto")), "{json:#}");
    assert_eq!(json["bandwidth"]["busbw_factor"], 1.5);
}
