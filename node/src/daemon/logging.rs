//! Log set-up shared by the daemons: `RUST_LOG` filters (default `info`), and
//! `TOPOCOMM_LOG=json` switches to JSON lines with the same fields as the text logs.
//! Colours only on a terminal: a log file (a local cluster's node logs) stays plain text
//! that `grep field=value` finds.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber, writing to stderr, at `info` unless `RUST_LOG` says otherwise.
pub fn init() {
    init_with_default("info");
}

/// Installs the global subscriber at `default` unless `RUST_LOG` says otherwise.
pub fn init_with_default(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let json = std::env::var("TOPOCOMM_LOG").is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}
