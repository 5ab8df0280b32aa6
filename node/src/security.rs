//! The settings every party of a cluster shares — the cluster token and whether links
//! are encrypted — as the command line takes them, and a cap on connections still in
//! their handshake (for the coordinator's control port and every node's data port).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

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
            let text =
                std::fs::read_to_string(path).with_context(|| format!("reading the token file {}", path.display()))?;
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

    /// The token, which this party cannot do without.
    pub fn required_token(&self) -> anyhow::Result<String> {
        self.token()?.context("no cluster token: give --token-file FILE or set TOPOCOMM_TOKEN")
    }

    /// The cluster key of the token this party must have.
    pub fn cluster_key(&self) -> anyhow::Result<Key> {
        Ok(Key::from_token(&self.required_token()?))
    }
}

/// How many connections may be in their handshake at once. The newest always gets in:
/// when the cap is reached the oldest still waiting is dropped, so a flood of idle or
/// slow strangers cannot keep a real node or client out (it needs a few milliseconds,
/// they would need to open this many connections within them).
pub const MAX_PENDING_HANDSHAKES: usize = 64;

/// The connections in their handshake, oldest first.
#[derive(Default)]
pub struct PendingHandshakes {
    queue: Mutex<(u64, VecDeque<(u64, CancellationToken)>)>,
}

/// One connection's place among the pending; leaving it (drop) frees the place.
pub struct PendingTicket<'a> {
    pending: &'a PendingHandshakes,
    number: u64,
    /// Cancelled when a newer connection needs the place.
    pub evicted: CancellationToken,
}

impl PendingHandshakes {
    /// Takes a place for a new connection, dropping the oldest if the cap is reached.
    pub fn enter(&self) -> PendingTicket<'_> {
        let mut guard = self.queue.lock().expect("pending lock");
        let (next, queue) = &mut *guard;
        *next += 1;
        let number = *next;
        let evicted = CancellationToken::new();
        queue.push_back((number, evicted.clone()));
        while queue.len() > MAX_PENDING_HANDSHAKES {
            if let Some((_, oldest)) = queue.pop_front() {
                oldest.cancel();
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

impl Drop for PendingTicket<'_> {
    fn drop(&mut self) {
        let mut guard = self.pending.queue.lock().expect("pending lock");
        guard.1.retain(|(number, _)| *number != self.number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_pending_handshake_gives_way() {
        let pending = PendingHandshakes::default();
        let first = pending.enter();
        let rest: Vec<_> = (0..MAX_PENDING_HANDSHAKES - 1).map(|_| pending.enter()).collect();
        assert!(!first.evicted.is_cancelled());
        let newest = pending.enter();
        assert!(first.evicted.is_cancelled());
        assert!(!newest.evicted.is_cancelled());
        assert_eq!(pending.len(), MAX_PENDING_HANDSHAKES);
        drop(rest);
        drop(newest);
        assert_eq!(pending.len(), 0, "leaving frees the place (the evicted one left already)");
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
}
