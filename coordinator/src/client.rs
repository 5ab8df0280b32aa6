//! Talking to a serving coordinator from the CLI: one connection per request.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::net::TcpStream;
use topocomm_proto::control::{ClientRequest, ClientResponse, ToCoordinator};

use crate::server::{framed, receive, send};

/// Sends `request` to the coordinator at `address` and waits (at most `patience`) for
/// its answer.
pub async fn request(
    address: &str,
    token: &str,
    request: ClientRequest,
    patience: Duration,
) -> anyhow::Result<ClientResponse> {
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(address))
        .await
        .with_context(|| format!("connecting to the coordinator at {address} timed out"))?
        .with_context(|| format!("cannot reach the coordinator at {address}"))?;
    let mut control = framed(stream);
    send(&mut control, &ToCoordinator::Client { token: token.to_owned(), request }).await?;
    match tokio::time::timeout(patience, receive::<ClientResponse>(&mut control)).await {
        Err(_) => bail!("the coordinator at {address} did not answer within {patience:?}"),
        Ok(Err(error)) => Err(error),
        Ok(Ok(None)) => {
            bail!("the coordinator at {address} closed the connection without answering")
        }
        Ok(Ok(Some(response))) => Ok(response),
    }
}
