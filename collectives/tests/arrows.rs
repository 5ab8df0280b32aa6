//! The arrows of every crate of the workspace, held as `no_sockets.rs` holds the library's
//! one rule: each crate's modules are declared here in layers, bottom first, and a source
//! file may import (`use crate::…`, `use super::…`, or a `crate::…` path in its code)
//! only modules of its own layer or of the layers beneath it. An import that points up
//! fails here, naming the file, the line and both layers; a module no layer names fails
//! too, so a new module is placed before it is used. The crate roots (`lib.rs`,
//! `main.rs`) sit above every layer, and a file's unit tests (from its
//! `#[cfg(test)] mod`) are not part of the product's arrows: a test may assemble its
//! layer with the layers above it (parse the whole command line, say).
//!
//! The layers are said again in each crate root's layout comment and in
//! docs/ARCHITECTURE.md.

use std::path::{Path, PathBuf};

/// A crate's layers, bottom first; each a list of module paths (`simulator::spec` is
/// more specific than `simulator`: a module is in the layer of its longest listed prefix).
struct Crate {
    folder: &'static str,
    layers: &'static [&'static [&'static str]],
}

const CRATES: &[Crate] = &[
    Crate {
        folder: "proto",
        layers: &[
            // The link model (with the physics of a class of links), the switched
            // families and the networks files describe, beneath the topologies.
            &["spec::link", "network", "netfile"],
            // The names, and the dilation the spec re-exports: leaves.
            &["topology", "codec", "names", "spec::dilation"],
            &["frame", "flow", "auth", "schedule"],
            &["spec"],
            &["elements", "catalogue", "reference", "control"],
        ],
    },
    Crate {
        folder: "collectives",
        layers: &[
            // Known zeros and the files a user names: beneath everything.
            &["zeros", "files"],
            // The simulator's containers: its stores, its event queue and the huge pages
            // they lie in, which know nothing of the network they serve.
            &["simulator::huge_pages", "simulator::store", "simulator::event_queue"],
            // What an algorithm runs on: `Comm`, carried by a router's `Fabric` or by the
            // simulator's network (the engine, its network and the link physics). One
            // layer: `Comm` holds the simulator's port as a concrete type, for speed.
            &["comm", "physics", "simulator"],
            // The algorithms, and what `auto` picks among them.
            &["algorithms", "tuning"],
            // A `RunSpec` run on the simulator: the algorithms on the engine.
            &["simulator::spec"],
        ],
    },
    Crate {
        folder: "node",
        layers: &[
            &["timebase", "steps", "forwarding"],
            &["transport"],
            &["security"],
            &["allowance"],
            &["router"],
            &["daemon"],
            &["in_process"],
        ],
    },
    Crate { folder: "coordinator", layers: &[&["control"], &["render"], &["tools", "lab"], &["cli"]] },
];

/// A source file: its module path (`["simulator", "network"]`; empty for a crate root),
/// where it is, and its text.
struct Source {
    module: Vec<String>,
    shown: String,
    text: String,
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the source folder reads") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The module path of `file` under `src`: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs`
/// and `main.rs` are the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src").with_extension("");
    let mut module: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        module.pop();
    }
    module
}

fn sources(folder: &str) -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(folder).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .iter()
        .map(|file| Source {
            module: module_of(&src, file),
            shown: format!("{folder}/src/{}", file.strip_prefix(&src).unwrap().display()),
            text: std::fs::read_to_string(file).expect("a source file reads"),
        })
        .collect()
}

/// `text` with comments, string and character literals blanked (line breaks kept, so
/// that line numbers hold), cut where its unit tests begin.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            // A character literal of a quote is no string.
            '\'' if chars.clone().take(2).eq(['"', '\'']) || chars.clone().take(3).eq(['\\', '"', '\'']) => {
                while chars.next().is_some_and(|c| c != '\'') {}
                out.push_str("' '");
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    let tests = out.find("#[cfg(test)]\nmod ").or_else(|| out.find("#[cfg(test)]\npub(crate) mod "));
    out.truncate(tests.unwrap_or(out.len()));
    out
}

/// Every path `code` imports or names, as written from `crate`, `super` or `self`, with
/// the line it is on: `use a::{b, c::d}` gives `a::b` and `a::c::d`.
fn imported_paths(code: &str) -> Vec<(usize, String)> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut rest = 0;
    while let Some(at) = code[rest..].find("use ").map(|at| at + rest) {
        rest = at + 4;
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = code[at..].find(';').map(|end| end + at) else { break };
        let tree: String = code[at + 4..end].chars().filter(|c| !c.is_whitespace()).collect();
        if tree.starts_with("crate::") || tree.starts_with("super::") || tree.starts_with("self::") {
            found.extend(expand("", &tree).into_iter().map(|path| (line_of(at), path)));
        }
    }
    // Paths in the code itself: `crate::render::output::print(...)`.
    for start in ["crate::", "super::"] {
        let mut rest = 0;
        while let Some(at) = code[rest..].find(start).map(|at| at + rest) {
            rest = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String =
                code[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            found.push((line_of(at), path.trim_end_matches(':').to_owned()));
        }
    }
    found
}

/// The paths of a use tree: `a::{b, c::{d, e}}` under `prefix`.
fn expand(prefix: &str, tree: &str) -> Vec<String> {
    let join = |head: &str| if prefix.is_empty() { head.to_owned() } else { format!("{prefix}::{head}") };
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim_end_matches("::*");
        return vec![join(path.trim_end_matches("::self"))];
    };
    let head = join(tree[..open].trim_end_matches("::"));
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .flat_map(|part| if part == "self" { vec![head.clone()] } else { expand(&head, part) })
        .collect()
}

/// The module path `path` names from a file of `module` (`super::x` from `a::b` is `a::x`).
fn absolute(module: &[String], path: &str) -> Vec<String> {
    let mut segments = path.split("::").peekable();
    let mut base: Vec<String> = module.to_vec();
    match segments.peek().copied() {
        Some("crate") => {
            segments.next();
            base.clear();
        }
        _ => {
            while let Some(&head) = segments.peek() {
                match head {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segments.next();
            }
        }
    }
    base.extend(segments.map(str::to_owned));
    base
}

/// The layer of `module` (the index of its longest listed prefix), if any lists it.
fn layer_of(layers: &[&[&str]], module: &[String]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (index, layer) in layers.iter().enumerate() {
        for listed in *layer {
            let listed: Vec<&str> = listed.split("::").collect();
            let matches = listed.len() <= module.len() && listed.iter().zip(module).all(|(a, b)| *a == b);
            if matches && best.is_none_or(|(length, _)| listed.len() > length) {
                best = Some((listed.len(), index));
            }
        }
    }
    best.map(|(_, index)| index)
}

/// What breaks `layers` in `sources`: imports that point up, and modules no layer lists.
fn violations(layers: &[&[&str]], sources: &[Source]) -> Vec<String> {
    let modules: Vec<&[String]> = sources.iter().map(|source| source.module.as_slice()).collect();
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for source in sources.iter().filter(|source| !source.module.is_empty()) {
        let Some(mine) = layer_of(layers, &source.module) else {
            found.push(format!("{}: module `{}` is in no layer", source.shown, source.module.join("::")));
            continue;
        };
        for (line, path) in imported_paths(&code_of(&source.text)) {
            let named = absolute(&source.module, &path);
            // The file module the path reaches into (its longest prefix that is a file).
            let Some(target) = (1..=named.len()).rev().map(|n| &named[..n]).find(|prefix| modules.contains(prefix))
            else {
                continue;
            };
            if let Some(theirs) = layer_of(layers, target)
                && theirs > mine
                && seen.insert((source.shown.clone(), line, target.to_vec()))
            {
                found.push(format!(
                    "{}:{line}: `{path}` points up, from layer {mine} ({}) to layer {theirs} ({})",
                    source.shown,
                    layers[mine].join(", "),
                    layers[theirs].join(", ")
                ));
            }
        }
    }
    found
}

#[test]
fn every_import_points_down_the_layers_of_its_crate() {
    let mut found = Vec::new();
    for krate in CRATES {
        let sources = sources(krate.folder);
        assert!(sources.len() > 10, "{}: the sources were not found", krate.folder);
        found.extend(violations(krate.layers, &sources));
    }
    assert!(found.is_empty(), "imports against the layers (see each crate root's layout):\n{}", found.join("\n"));
}

fn source(file: &str, text: &str) -> Source {
    Source { module: module_of(Path::new("src"), &Path::new("src").join(file)), shown: file.into(), text: text.into() }
}

#[test]
fn an_import_up_the_layers_is_named_and_one_down_is_not() {
    let layers: &[&[&str]] = &[&["control"], &["render"], &["tools", "lab"], &["cli"]];
    let files = [
        source("control/mod.rs", "pub mod run;"),
        source("control/run.rs", "use crate::render::{self, trace::Meta};\n\nfn f() { super::super::tools::x(); }"),
        source("render/mod.rs", "// use crate::tools::model;\nconst S: &str = \"crate::cli::Cli\";"),
        source(
            "render/trace.rs",
            "use super::super::control::run;\n#[cfg(test)]\nmod tests { use crate::tools::model; }",
        ),
        source("tools/mod.rs", "use crate::{control::{self, run::Coordinator}, lab::Page};"),
        source("lab/mod.rs", "fn f() { crate::cli::TuningArgs::default(); }"),
        source("cli.rs", "use crate::tools;"),
        source("lost.rs", ""),
    ];
    let found = violations(layers, &files);
    let lines: Vec<&str> = found.iter().map(|line| line.split(": ").next().unwrap()).collect();
    // Line 1 names two modules above: `render` and `render::trace`.
    assert_eq!(
        lines,
        ["control/run.rs:1", "control/run.rs:1", "control/run.rs:3", "lab/mod.rs:1", "lost.rs"],
        "{found:#?}"
    );
}
