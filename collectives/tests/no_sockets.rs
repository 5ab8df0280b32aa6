//! The library's one rule about what it may not know: nothing in `collectives/src` opens a
//! socket or names a transport (what an algorithm may know of its links reaches it as
//! `comm::LinkCapabilities`). A file that imports networking fails here, naming the line.

use std::path::Path;

/// What only code that opens connections or knows a transport would write.
const FORBIDDEN: &[&str] = &["tokio::net", "std::net", "TcpStream", "TcpListener", "UdpSocket", "topocomm_node"];

fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the source folder reads") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn no_source_file_names_sockets_or_transports() {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    assert!(files.len() > 20, "the library's sources were not found: {files:?}");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file reads");
        for (number, line) in text.lines().enumerate() {
            if let Some(word) = FORBIDDEN.iter().find(|word| line.contains(*word)) {
                found.push(format!("{}:{}: {word}: {}", file.display(), number + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "the algorithm library names networking:\n{}", found.join("\n"));
}

#[test]
fn the_manifest_depends_on_no_transport() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    for crate_name in ["topocomm-node", "tokio-util", "snow", "socket2"] {
        assert!(!manifest.contains(crate_name), "collectives/Cargo.toml names {crate_name}");
    }
}
