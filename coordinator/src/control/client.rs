//! Talking to a serving coordinator from the CLI: one connection per request, opened
//! with the mutual handshake (the client proves the token and checks that the
//! coordinator can too; the token itself never travels). A handshake the coordinator
//! was too busy for, or that broke off, is tried again with back-off for a while.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio::net::TcpStream;
use tokio::time::Instant;
use topocomm_node::security::SecurityArgs;
use topocomm_node::security::handshake::{self, HandshakeError};
use topocomm_proto::auth::{Key, Purpose};
use topocomm_proto::control::{ClientRequest, ClientResponse, MAX_REPORT_FRAME};

use crate::control::server::{framed, receive, send};

/// Where a serving coordinator is and the token it wants.
#[derive(Debug, Clone, Args)]
pub struct RemoteArgs {
    /// A serving coordinator, HOST:PORT. Without it, `run` starts a local cluster.
    #[arg(long, env = "TOPOCOMM_COORDINATOR")]
    pub coordinator: Option<String>,
    /// The token (local clusters make a random one) and the mode.
    #[command(flatten)]
    pub security: SecurityArgs,
}

impl RemoteArgs {
    /// What this client proves to a serving coordinator.
    pub fn credentials(&self) -> anyhow::Result<Credentials> {
        let token = self.security.token()?.context(
            "a serving coordinator needs the cluster token: --token-file FILE or TOPOCOMM_TOKEN (or --token)",
        )?;
        Ok(Credentials { key: Key::from_token(&token), encrypted: self.security.encrypt })
    }
}

/// What a client proves and how it talks.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub key: Key,
    pub encrypted: bool,
}

/// How long a client keeps trying to get in, the connection and every retry together.
const CONNECT_PATIENCE: Duration = Duration::from_secs(10);

/// The first pause before trying a busy coordinator again; it doubles up to a second.
const FIRST_RETRY: Duration = Duration::from_millis(50);

/// Sends `request` to the coordinator at `address` and waits (at most `patience`) for
/// its answer.
pub async fn request(
    address: &str,
    credentials: &Credentials,
    request: ClientRequest,
    patience: Duration,
) -> anyhow::Result<ClientResponse> {
    let deadline = Instant::now() + CONNECT_PATIENCE;
    let mut pause = FIRST_RETRY;
    let channel = loop {
        let stream = tokio::time::timeout_at(deadline, TcpStream::connect(address))
            .await
            .with_context(|| format!("connecting to the coordinator at {address} timed out"))?
            .with_context(|| format!("cannot reach the coordinator at {address}"))?;
        let _ = stream.set_nodelay(true);
        match handshake::initiate(stream, &credentials.key, Purpose::Client, credentials.encrypted).await {
            Ok(channel) => break channel,
            Err(error) if error.is_transient() && Instant::now() + pause < deadline => {
                tracing::debug!(%error, ?pause, "the coordinator was busy; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(error) => {
                let error: anyhow::Error = match error {
                    error @ HandshakeError::Refused(_) if error.is_transient() => {
                        anyhow::Error::new(error).context(format!("still busy after {CONNECT_PATIENCE:?}"))
                    }
                    error => error.into(),
                };
                return Err(error.context(format!("the coordinator at {address} did not let this client in")));
            }
        }
    };
    let mut control = framed(channel, MAX_REPORT_FRAME);
    send(&mut control, &request).await?;
    match tokio::time::timeout(patience, receive::<_, ClientResponse>(&mut control)).await {
        Err(_) => bail!("the coordinator at {address} did not answer within {patience:?}"),
        Ok(Err(error)) => Err(error),
        Ok(Ok(None)) => {
            bail!("the coordinator at {address} closed the connection without answering")
        }
        Ok(Ok(Some(response))) => Ok(response),
    }
}
