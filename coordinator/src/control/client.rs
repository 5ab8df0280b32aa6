//! Talking to a serving coordinator from the CLI: one connection per request, opened
//! with the mutual handshake (the client proves the token and checks that the
//! coordinator can too; the token itself never travels).

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio::net::TcpStream;
use topocomm_node::handshake;
use topocomm_node::security::SecurityArgs;
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

/// Sends `request` to the coordinator at `address` and waits (at most `patience`) for
/// its answer.
pub async fn request(
    address: &str,
    credentials: &Credentials,
    request: ClientRequest,
    patience: Duration,
) -> anyhow::Result<ClientResponse> {
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(address))
        .await
        .with_context(|| format!("connecting to the coordinator at {address} timed out"))?
        .with_context(|| format!("cannot reach the coordinator at {address}"))?;
    let _ = stream.set_nodelay(true);
    let channel = handshake::initiate(stream, &credentials.key, Purpose::Client, credentials.encrypted)
        .await
        .with_context(|| format!("the coordinator at {address} did not let this client in"))?;
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
