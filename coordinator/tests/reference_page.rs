//! The book's command reference (`docs/reference.md`) holds every command's `--help` as
//! the binaries print it: each `## topocomm X` section's first fenced block must equal
//! `topocomm X --help` (and `## topocomm-node`'s, `topocomm-node --help`), and every
//! subcommand `topocomm --help` lists has its section. The algorithm table of
//! `docs/running.md` must equal the one `topocomm list --markdown` prints (the catalogue).
//! After a deliberate change to an option or to the catalogue,
//! `UPDATE_REFERENCE=1 cargo test -p topocomm-coordinator --test reference_page`
//! rewrites the blocks and the table (the prose between them stays).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Scratch, command, run_bounded, topocomm_bin};

fn reference_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/reference.md")
}

fn running_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/running.md")
}

/// The lines of the first Markdown table in `text` at or after byte `from`, as a byte range.
fn first_table(text: &str, from: usize) -> Option<std::ops::Range<usize>> {
    let start = from + text[from..].find("\n| ").map(|i| i + 1)?;
    let end = text[start..].find("\n\n").map_or(text.len(), |i| start + i + 1);
    Some(start..end)
}

/// `program words... --help`, as a user's terminal shows it.
fn help(scratch: &Scratch, program: &std::path::Path, words: &[&str]) -> String {
    let mut asked = command(program);
    asked.args(words).arg("--help").current_dir(&scratch.path);
    let finished = run_bounded(asked, scratch, "help", Duration::from_secs(30));
    assert!(finished.status.success(), "{} {words:?} --help failed:\n{}", program.display(), finished.stderr);
    finished.stdout.trim_end().to_owned()
}

/// The subcommands `topocomm --help` lists (hidden ones are not listed).
fn subcommands(scratch: &Scratch) -> Vec<String> {
    let text = help(scratch, &topocomm_bin(), &[]);
    let commands = text.split("Commands:\n").nth(1).expect("topocomm --help lists its commands");
    commands
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_reference_holds_every_command_s_help_as_printed() {
    let scratch = Scratch::new("reference-page");
    let page = std::fs::read_to_string(reference_path()).expect("docs/reference.md");
    let node_bin = topocomm_bin().with_file_name("topocomm-node");
    let mut sections: Vec<(String, String)> =
        subcommands(&scratch).into_iter().map(|name| (format!("topocomm {name}"), name)).collect();
    if node_bin.exists() {
        sections.push(("topocomm-node".to_owned(), String::new()));
    }
    let update = std::env::var_os("UPDATE_REFERENCE").is_some();
    let mut rewritten = page.clone();
    let mut stale = Vec::new();
    for (title, subcommand) in &sections {
        let printed = if subcommand.is_empty() {
            help(&scratch, &node_bin, &[])
        } else {
            help(&scratch, &topocomm_bin(), &[subcommand.as_str()])
        };
        let heading = format!("\n## {title}\n");
        let Some(at) = rewritten.find(&heading) else {
            stale.push(format!("{title}: no `## {title}` section"));
            continue;
        };
        let open = rewritten[at..].find("```\n").map(|i| at + i + 4).expect("a fenced block after the heading");
        if rewritten[open..].starts_with("```") {
            stale.push(format!("{title}: the page's block is empty"));
            rewritten.insert_str(open, &format!("{printed}\n"));
            continue;
        }
        let close = rewritten[open..].find("\n```").map(|i| open + i).expect("the block closes");
        if rewritten[open..close] != printed {
            stale.push(format!("{title}: the page's block differs from what `{title} --help` prints"));
            rewritten.replace_range(open..close, &printed);
        }
    }
    if update && rewritten != page {
        std::fs::write(reference_path(), &rewritten).expect("rewriting docs/reference.md");
        return;
    }
    assert!(
        stale.is_empty(),
        "docs/reference.md is stale (UPDATE_REFERENCE=1 rewrites its blocks; add a section by hand):\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn the_running_page_holds_the_catalogue_as_listed() {
    let scratch = Scratch::new("running-page");
    let mut asked = command(&topocomm_bin());
    asked.args(["list", "--markdown"]).current_dir(&scratch.path);
    let finished = run_bounded(asked, &scratch, "list", Duration::from_secs(30));
    assert!(finished.status.success(), "topocomm list --markdown failed:\n{}", finished.stderr);
    let listed = format!("\n{}", finished.stdout);
    let listed = &listed[first_table(&listed, 0).expect("list --markdown prints a table")];
    assert!(listed.starts_with("| collective | algorithm |"), "the catalogue's table comes first:\n{listed}");
    let page = std::fs::read_to_string(running_path()).expect("docs/running.md");
    let section = page.find("\n## Collectives and their algorithms\n").expect("the page's catalogue section");
    let table = first_table(&page, section).expect("a table in the section");
    if page[table.clone()] == *listed {
        return;
    }
    if std::env::var_os("UPDATE_REFERENCE").is_some() {
        let mut rewritten = page.clone();
        rewritten.replace_range(table, listed);
        std::fs::write(running_path(), rewritten).expect("rewriting docs/running.md");
        return;
    }
    panic!(
        "docs/running.md's algorithm table differs from `topocomm list --markdown` \
         (UPDATE_REFERENCE=1 cargo test -p topocomm-coordinator --test reference_page rewrites it):\n{listed}"
    );
}
