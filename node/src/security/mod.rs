//! The settings every party of a cluster shares — the cluster token and whether links
//! are encrypted — as the command line takes them; how strong a token must be where
//! other hosts can reach the coordinator; a cap on connections still in their handshake
//! (for the coordinator's control port and every node's data port), per source address
//! and in all; and the log of refused connections, counted by cause once a second.

pub mod encryption;
pub mod handshake;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;
use topocomm_proto::auth::Key;

/// The token and the mode, from flags, files or the environment.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SecurityArgs {
    /// The cluster token. Prefer --token-file or TOPOCOMM_TOKEN: a command line is
    /// visible to every user of the machine (`ps`).
    #[arg(long, env = "TOPOCOMM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file whose first line is the cluster token (wins over --token and
    /// TOPOCOMM_TOKEN).
    #[arg(long, env = "TOPOCOMM_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Encrypt and authenticate every byte of every control and data link (Noise, keyed
    /// by the token). The coordinator, every node and every client must agree.
    #[arg(long, env = "TOPOCOMM_ENCRYPT", value_parser = clap::builder::BoolishValueParser::new())]
    pub encrypt: bool,
}

impl SecurityArgs {
    /// The token from the file, else the flag or environment; `None` if neither is given.
    pub fn token(&self) -> anyhow::Result<Option<String>> {
        if let Some(path) = &self.token_file {
            let text = read_token_file(path)?;
            let token = text.lines().next().unwrap_or("").trim().to_owned();
            if token.is_empty() {
                bail!("the token file {} is empty", path.display());
            }
            return Ok(Some(token));
        }
        match &self.token {
            Some(token) if token.is_empty() => bail!("the cluster token is empty"),
            other => Ok(other.clone()),
        }
    }

    /// These settings for a coordinator that writes its fresh token to `write_to`: a
    /// token file naming that same file is where the token goes, not a token given (the
    /// compose file sets `TOPOCOMM_TOKEN_FILE` for the clients exec'd beside `serve`).
    pub fn writing_to(&self, write_to: Option<&std::path::Path>) -> SecurityArgs {
        let same = write_to.is_some() && self.token_file.as_deref() == write_to;
        SecurityArgs { token_file: if same { None } else { self.token_file.clone() }, ..self.clone() }
    }

    /// The token, which this party cannot do without.
    pub fn required_token(&self) -> anyhow::Result<String> {
        self.token()?.context("no cluster token: give --token-file FILE or set TOPOCOMM_TOKEN")
    }

    /// The cluster key of the token this party must have.
    pub fn cluster_key(&self) -> anyhow::Result<Key> {
        Ok(Key::from_token(&self.required_token()?))
    }

    /// The cluster key, waiting up to `patience` for a token file that does not exist yet
    /// or is still empty: a node started beside its coordinator, which writes a fresh
    /// token when it starts (`serve --write-token`, as the compose file does).
    pub async fn cluster_key_waiting(&self, patience: Duration) -> anyhow::Result<Key> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut said = false;
        loop {
            match self.cluster_key() {
                Err(_) if self.token_file_pending() && tokio::time::Instant::now() < deadline => {
                    if !std::mem::replace(&mut said, true) {
                        let file = self.token_file.as_deref().unwrap_or_else(|| std::path::Path::new(""));
                        tracing::info!(file = %file.display(), "waiting for the token file to be written");
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                result => return result,
            }
        }
    }

    /// Whether the token file is named but not there yet, or still empty.
    fn token_file_pending(&self) -> bool {
        self.token_file.as_ref().is_some_and(|path| match read_token_file(path) {
            Ok(text) => text.trim().is_empty(),
            Err(error) => error.is_missing(),
        })
    }
}

/// The most bytes a token file may have: its first line is the token.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 << 10;

/// The text of the token file at `path`, through the bounded reader
/// (`topocomm_collectives::files::read_text`: a regular file of at most
/// [`MAX_TOKEN_FILE_BYTES`]; a device or FIFO is refused, never read or waited on).
fn read_token_file(path: &std::path::Path) -> Result<String, topocomm_collectives::files::FileError> {
    topocomm_collectives::files::read_text(path, "token file", MAX_TOKEN_FILE_BYTES)
}

/// The fewest bits a token must carry where other hosts can reach the coordinator: the
/// acceptor's proof lets anyone who opens one connection test guesses offline, as fast
/// as BLAKE3 runs, so only a token too large to search stands.
pub const MIN_TOKEN_BITS: u32 = 128;

/// Tokens that examples and earlier versions shipped with, which anyone can try first.
const WELL_KNOWN_TOKENS: &[&str] =
    &["topocomm-local-only", "change-me-before-use", "changeme", "change-me", "secret", "token", "password"];

/// Why a token would fall to offline guessing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeakToken {
    /// A token examples use.
    #[error("it is a well-known example token")]
    WellKnown,
    /// Too few characters, or too few different ones, to hold [`MIN_TOKEN_BITS`].
    #[error(
        "it holds about {bits} bits ({alphabet}{}), fewer than {MIN_TOKEN_BITS}",
        if *.distinct < 8 { format!(", and only {distinct} different characters", distinct = .distinct) } else { String::new() }
    )]
    TooShort { bits: u32, alphabet: &'static str, distinct: usize },
}

/// Checks that `token` can hold [`MIN_TOKEN_BITS`] against offline guessing, counting
/// each character as drawn at random from the smallest usual alphabet that holds them
/// all: 4 bits for hex, 6 for base64 (and its URL-safe form), 6.5 for any printable
/// ASCII. It cannot tell a random token from a sentence of the same length: make one
/// with `serve --write-token` (or `openssl rand -hex 16`), don't think one up.
pub fn check_token_strength(token: &str) -> Result<(), WeakToken> {
    if WELL_KNOWN_TOKENS.iter().any(|known| token.eq_ignore_ascii_case(known)) {
        return Err(WeakToken::WellKnown);
    }
    let (tenths_per_char, alphabet) = if token.chars().all(|c| c.is_ascii_hexdigit()) {
        (40, "hex: 4 bits a character")
    } else if token.chars().all(|c| c.is_ascii_alphanumeric() || "+/=-_".contains(c)) {
        (60, "base64: 6 bits a character")
    } else {
        (65, "6.5 bits a character at most")
    };
    let bits = (token.chars().count() as u64 * tenths_per_char / 10).min(u64::from(u32::MAX)) as u32;
    let distinct = token.chars().collect::<std::collections::BTreeSet<_>>().len();
    if bits < MIN_TOKEN_BITS || distinct < 8 {
        return Err(WeakToken::TooShort { bits, alphabet, distinct });
    }
    Ok(())
}

/// A token too weak for a listener that other hosts can reach: `what` (a coordinator,
/// the lab's page) on `address`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cluster token is too weak for {what} that other hosts can reach ({address}): {weak}. Let the \
     coordinator make one (`topocomm serve --write-token FILE` writes 128 random bits to FILE, for nodes and \
     clients to read with --token-file FILE), or make one with `openssl rand -hex 16`"
)]
pub struct TooWeakToReach {
    pub what: &'static str,
    pub address: String,
    pub weak: WeakToken,
}

/// The one rule for every listener off loopback (the control port of `serve --listen`,
/// the page of `lab --http` and `serve --http`): its token must pass
/// [`check_token_strength`].
pub fn check_reachable_token(token: &str, what: &'static str, address: &str) -> Result<(), TooWeakToReach> {
    check_token_strength(token).map_err(|weak| TooWeakToReach { what, address: address.to_owned(), weak })
}

/// Whether only this machine can reach a listener on `listen` (`HOST:PORT`): every
/// address it resolves to is a loopback one. An address that does not resolve is left
/// to the bind to report.
pub async fn loopback_only(listen: &str) -> bool {
    match tokio::net::lookup_host(listen).await {
        Ok(addresses) => addresses.into_iter().all(|address| address.ip().is_loopback()),
        Err(_) => true,
    }
}

/// How many connections may be in their handshake at once, from all sources together.
pub const MAX_PENDING_HANDSHAKES: usize = 1024;

/// How many of them may come from one address. A source past it pushes out its own
/// oldest, never another's; only when all sources together reach
/// [`MAX_PENDING_HANDSHAKES`] does the busiest source (the one with the most) give way.
/// So a flood from one address cannot keep a node or client at another out, and a real
/// party behind a flooding address gets in by being newer than the flood's oldest (it
/// needs a few milliseconds; the flood would need this many connections within them).
pub const MAX_PENDING_PER_SOURCE: usize = 64;

/// One connection in its handshake.
struct Pending {
    number: u64,
    source: IpAddr,
    evicted: CancellationToken,
}

/// The connections in their handshake, oldest first.
#[derive(Default)]
pub struct PendingHandshakes {
    queue: Mutex<(u64, VecDeque<Pending>)>,
}

/// One connection's place among the pending; leaving it (drop) frees the place.
pub struct PendingTicket<'a> {
    pending: &'a PendingHandshakes,
    number: u64,
    /// Cancelled when a newer connection needs the place.
    pub evicted: CancellationToken,
}

impl PendingHandshakes {
    /// Takes a place for a new connection from `source`, pushing out the oldest of the
    /// same source past [`MAX_PENDING_PER_SOURCE`], or the oldest of the busiest source
    /// past [`MAX_PENDING_HANDSHAKES`].
    pub fn enter(&self, source: IpAddr) -> PendingTicket<'_> {
        let mut guard = self.queue.lock().expect("pending lock");
        let (next, queue) = &mut *guard;
        *next += 1;
        let number = *next;
        let evicted = CancellationToken::new();
        queue.push_back(Pending { number, source, evicted: evicted.clone() });
        if queue.iter().filter(|p| p.source == source).count() > MAX_PENDING_PER_SOURCE {
            evict_oldest_of(queue, source);
        }
        if queue.len() > MAX_PENDING_HANDSHAKES {
            let mut counts: HashMap<IpAddr, usize> = HashMap::new();
            for pending in queue.iter() {
                *counts.entry(pending.source).or_default() += 1;
            }
            // Of the busiest sources, the one whose oldest has waited longest.
            let most = counts.values().copied().max().unwrap_or(0);
            if let Some(busiest) = queue.iter().map(|p| p.source).find(|s| counts[s] == most) {
                evict_oldest_of(queue, busiest);
            }
        }
        PendingTicket { pending: self, number, evicted }
    }

    /// How many connections are in their handshake now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.lock().expect("pending lock").1.len()
    }
}

/// Drops the oldest pending connection from `source`, telling it (through its token).
fn evict_oldest_of(queue: &mut VecDeque<Pending>, source: IpAddr) {
    if let Some(oldest) = queue.iter().position(|p| p.source == source).and_then(|at| queue.remove(at)) {
        oldest.evicted.cancel();
    }
}

impl Drop for PendingTicket<'_> {
    fn drop(&mut self) {
        let mut guard = self.pending.queue.lock().expect("pending lock");
        guard.1.retain(|pending| pending.number != self.number);
    }
}

/// Refused connections, counted by cause and logged once a second as one line (the
/// window's total, the count of each cause, and the first refusal in full), so that a
/// flood of refusals costs a line a second, not a line each.
pub struct RefusalLog {
    /// What is refused, in the plural: "control connections", "data links".
    what: &'static str,
    window: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    counts: BTreeMap<&'static str, u64>,
    first: Option<String>,
}

impl RefusalLog {
    /// A log of refused `what`, written once a second while refusals come (by a task on
    /// the current runtime that ends with the log).
    pub fn start(what: &'static str) -> Arc<Self> {
        let log = Arc::new(RefusalLog { what, window: Mutex::new(Window::default()) });
        let weak: Weak<RefusalLog> = Arc::downgrade(&log);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(log) = weak.upgrade() else { break };
                log.flush();
            }
        });
        log
    }

    /// Counts one refusal of a connection from `peer` by its `cause` (a word or two,
    /// `HandshakeError::cause`); the window's first is logged with its `error`.
    pub fn refused(&self, peer: SocketAddr, cause: &'static str, error: &dyn std::fmt::Display) {
        let mut window = self.window.lock().expect("refusal log lock");
        *window.counts.entry(cause).or_default() += 1;
        if window.first.is_none() {
            window.first = Some(format!("{peer}: {error}"));
        }
    }

    /// Logs the window's refusals, if any, and starts a new window.
    fn flush(&self) {
        let window = std::mem::take(&mut *self.window.lock().expect("refusal log lock"));
        let total: u64 = window.counts.values().sum();
        if total == 0 {
            return;
        }
        let causes: Vec<String> = window.counts.iter().map(|(cause, count)| format!("{count} {cause}")).collect();
        let first = window.first.unwrap_or_default();
        tracing::warn!(total, causes = %causes.join(", "), %first, "refused {} in the last second", self.what);
    }
}

#[allow(unsafe_code)] // mkfifo makes the named pipe a test reads.
#[cfg(test)]
mod tests {
    use super::*;

    fn source(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_source_past_its_cap_pushes_out_only_its_own_oldest() {
        let pending = PendingHandshakes::default();
        let other = pending.enter(source(1));
        let first = pending.enter(source(2));
        let rest: Vec<_> = (0..MAX_PENDING_PER_SOURCE - 1).map(|_| pending.enter(source(2))).collect();
        assert!(!first.evicted.is_cancelled());
        let newest = pending.enter(source(2));
        assert!(first.evicted.is_cancelled(), "the flood's own oldest gave way");
        assert!(!other.evicted.is_cancelled(), "another source's connection stays");
        assert!(!newest.evicted.is_cancelled());
        assert_eq!(pending.len(), MAX_PENDING_PER_SOURCE + 1);
        drop(rest);
        drop(newest);
        drop(other);
        assert_eq!(pending.len(), 0, "leaving frees the place (the evicted one left already)");
    }

    #[test]
    fn past_the_total_cap_the_busiest_source_gives_way() {
        let pending = PendingHandshakes::default();
        let quiet = pending.enter(source(200));
        // Fill the rest from sources at their cap, the busiest (one more) last.
        let sources = (MAX_PENDING_HANDSHAKES - 1) / MAX_PENDING_PER_SOURCE;
        let mut held: Vec<PendingTicket<'_>> = Vec::new();
        for s in 0..sources {
            held.extend((0..MAX_PENDING_PER_SOURCE).map(|_| pending.enter(source(s as u8 + 1))));
        }
        let spare = MAX_PENDING_HANDSHAKES - 1 - sources * MAX_PENDING_PER_SOURCE;
        held.extend((0..spare).map(|_| pending.enter(source(201))));
        assert_eq!(pending.len(), MAX_PENDING_HANDSHAKES);
        assert!(held.iter().all(|t| !t.evicted.is_cancelled()));
        let newcomer = pending.enter(source(202));
        assert!(!quiet.evicted.is_cancelled() && !newcomer.evicted.is_cancelled(), "the quiet sources keep theirs");
        let evicted: Vec<usize> = (0..held.len()).filter(|&i| held[i].evicted.is_cancelled()).collect();
        assert_eq!(evicted, vec![0], "the oldest of the first of the busiest sources gave way");
        assert_eq!(pending.len(), MAX_PENDING_HANDSHAKES);
    }

    #[test]
    fn a_token_file_that_serve_writes_is_no_token_given() {
        let file = PathBuf::from("/run/topocomm/token");
        let args = SecurityArgs { token: None, token_file: Some(file.clone()), encrypt: true };
        let serving = args.writing_to(Some(&file));
        assert_eq!((serving.token_file, serving.encrypt), (None, true));
        assert_eq!(args.writing_to(Some(std::path::Path::new("other"))).token_file, Some(file.clone()));
        assert_eq!(args.writing_to(None).token_file, Some(file));
    }

    #[test]
    fn weak_tokens_are_told_apart_from_strong_ones() {
        for weak in ["a", "topocomm-local-only", "CHANGE-ME-BEFORE-USE", "0123456789abcdef", "correct-horse"] {
            assert!(check_token_strength(weak).is_err(), "{weak} passed");
        }
        // 32 hex characters (`openssl rand -hex 16`, `serve --write-token`), 22 base64.
        assert_eq!(check_token_strength("3f9a1c07d2e84b6a9c0e5f71b2d43a86"), Ok(()));
        assert_eq!(check_token_strength("q3JzX0b9Tf1wPq8LmZ2kVa"), Ok(()));
        // One character short of each.
        assert!(check_token_strength("3f9a1c07d2e84b6a9c0e5f71b2d43a8").is_err());
        assert!(check_token_strength("q3JzX0b9Tf1wPq8LmZ2kV").is_err());
        let repeated = check_token_strength(&"ab".repeat(40)).unwrap_err();
        assert!(repeated.to_string().contains("only 2 different characters"), "{repeated}");
        let short = check_token_strength("a").unwrap_err().to_string();
        assert_eq!(
            short,
            "it holds about 4 bits (hex: 4 bits a character, and only 1 different characters), fewer than 128"
        );
    }

    #[tokio::test]
    async fn only_loopback_addresses_are_loopback_only() {
        assert!(loopback_only("127.0.0.1:7700").await);
        assert!(loopback_only("[::1]:7700").await);
        assert!(!loopback_only("0.0.0.0:7700").await);
        assert!(!loopback_only("[::]:7700").await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_waits_for_a_token_file_being_written() {
        let dir = std::env::temp_dir().join(format!("topocomm-token-wait-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        let args = SecurityArgs { token: None, token_file: Some(file.clone()), encrypt: false };
        let writer = {
            let file = file.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                std::fs::write(&file, "").unwrap();
                tokio::time::sleep(Duration::from_secs(1)).await;
                std::fs::write(&file, "3f9a1c07d2e84b6a9c0e5f71b2d43a86\n").unwrap();
            })
        };
        let key = args.cluster_key_waiting(Duration::from_secs(10)).await.unwrap();
        assert_eq!(key, Key::from_token("3f9a1c07d2e84b6a9c0e5f71b2d43a86"));
        writer.await.unwrap();
        std::fs::remove_file(&file).unwrap();
        let error = args.cluster_key_waiting(Duration::from_secs(1)).await.unwrap_err();
        assert!(error.to_string().contains("the token file") && error.to_string().contains("No such file"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_token_file_wins_and_an_empty_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("topocomm-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "from-the-file\n").unwrap();
        let args = SecurityArgs { token: Some("flag".into()), token_file: Some(file.clone()), encrypt: false };
        assert_eq!(args.token().unwrap().as_deref(), Some("from-the-file"));
        std::fs::write(&file, "\n").unwrap();
        assert!(args.token().unwrap_err().to_string().contains("empty"));
        assert!(SecurityArgs::default().required_token().unwrap_err().to_string().contains("--token-file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A token file that is a device or a FIFO: one line, at once (on main `/dev/zero`
    /// was read without end and a FIFO's open waited for a writer forever).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_token_file_that_is_not_a_regular_file_is_refused_at_once() {
        let token_file = |path: &str| SecurityArgs { token: None, token_file: Some(path.into()), encrypt: false };
        let error = token_file("/dev/zero").token().unwrap_err().to_string();
        assert_eq!(
            error,
            "the token file /dev/zero is a character device, not a regular file: give the path of a file"
        );
        let dir = std::env::temp_dir().join(format!("topocomm-token-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("token");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only makes the node.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        let error = token_file(fifo.to_str().unwrap()).token().unwrap_err().to_string();
        assert!(error.contains("is a FIFO (named pipe), not a regular file"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
