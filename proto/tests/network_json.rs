//! topocomm's network JSON against its JSON Schema (`docs/network.schema.json`): every
//! example file under `proto/tests/networks/` and the JSON written from every SimGrid
//! fixture validate, read and build; documents the schema refuses are refused.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use topocomm_proto::netfile::json::{parse_network_json, to_network_json};
use topocomm_proto::netfile::read_network_file;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn schema() -> (boon::Schemas, boon::SchemaIndex) {
    let path = manifest().join("../docs/network.schema.json");
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    let index = compiler
        .compile(path.to_str().expect("a UTF-8 path"), &mut schemas)
        .unwrap_or_else(|error| panic!("docs/network.schema.json does not compile: {error:#}"));
    (schemas, index)
}

fn files(folder: &str, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest().join(folder))
        .expect("the folder lists")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|found| found == extension))
        .collect();
    files.sort();
    files
}

#[test]
fn the_example_files_follow_the_schema_and_build() {
    let (schemas, index) = schema();
    let examples = files("tests/networks", "json");
    assert!(examples.len() >= 2, "{examples:?}");
    for example in examples {
        let text = std::fs::read_to_string(&example).expect("an example reads");
        let document: Value = serde_json::from_str(&text).expect("an example is JSON");
        if let Err(error) = schemas.validate(&document, index) {
            panic!("{} does not follow docs/network.schema.json: {error}", example.display());
        }
        let graph = read_network_file(&example)
            .and_then(|description| description.build())
            .unwrap_or_else(|error| panic!("{}: {error}", example.display()));
        assert_eq!(graph.endpoints(), document["endpoints"].as_array().unwrap().len());
    }
}

#[test]
fn the_two_switch_example_reads_as_written() {
    let graph = read_network_file(&manifest().join("tests/networks/two_switches.json"))
        .and_then(|description| description.build())
        .expect("the example builds");
    assert_eq!(graph.name(), Some("two switches"));
    assert_eq!((graph.endpoints(), graph.switches(), graph.vertices()), (4, 4..6, 6));
    let edge = graph.class_by_name("edge").unwrap();
    let trunk = graph.class_by_name("trunk").unwrap();
    let physics = graph.class_physics();
    assert_eq!(
        (physics[edge.0].ts_ns, physics[edge.0].th_ns, physics[edge.0].tw_ps),
        (Some(1000), Some(50), Some(100))
    );
    assert_eq!((physics[trunk.0].ts_ns, physics[trunk.0].th_ns, physics[trunk.0].tw_ps), (None, Some(200), Some(40)));
    assert_eq!(graph.parallel_links(4, 5), 2);
    assert_eq!(graph.class_of(5, 4), Some(trunk));
    assert_eq!(graph.route(0, 3), vec![0, 4, 5, 3]);
    assert_eq!(graph.route(0, 1), vec![0, 4, 1]);
}

#[test]
fn every_simgrid_fixture_written_as_json_follows_the_schema_and_reads_back() {
    let (schemas, index) = schema();
    for platform in files("tests/platforms", "xml") {
        let description =
            read_network_file(&platform).unwrap_or_else(|error| panic!("{}: {error}", platform.display()));
        let text = to_network_json(&description);
        let document: Value = serde_json::from_str(&text).expect("written JSON parses");
        if let Err(error) = schemas.validate(&document, index) {
            panic!("{} as JSON does not follow the schema: {error}", platform.display());
        }
        assert_eq!(parse_network_json(&text).expect("written JSON reads"), description, "{}", platform.display());
    }
}

#[test]
fn the_schema_refuses_what_the_reader_refuses() {
    let (schemas, index) = schema();
    let good = json!({
        "schema_version": 1,
        "endpoints": ["a", "b"],
        "classes": [{"name": "wire", "th": "1us"}],
        "links": [{"a": "a", "b": "b", "class": "wire"}]
    });
    assert!(schemas.validate(&good, index).is_ok());
    assert!(parse_network_json(&good.to_string()).is_ok());
    let mut bad_documents = Vec::new();
    for (pointer, value) in [
        ("/schema_version", json!(2)),
        ("/endpoints", json!([])),
        ("/classes/0/th", json!("1 furlong")),
        ("/classes/0/th", json!(-3)),
        ("/links/0/count", json!(0)),
        ("/links/0/colour", json!("red")),
    ] {
        let mut bad = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        bad.pointer_mut(if parent.is_empty() { "" } else { parent }).unwrap()[key] = value;
        bad_documents.push((pointer, bad));
    }
    for (pointer, bad) in bad_documents {
        assert!(schemas.validate(&bad, index).is_err(), "the schema takes a bad {pointer}: {bad}");
        let read = parse_network_json(&bad.to_string()).and_then(|description| description.build());
        assert!(read.is_err(), "the reader takes a bad {pointer}: {bad}");
    }
}
