//! The coordinator's control listener: each connection is a node's control session
//! (it starts with `Register`) or a CLI client's request (it starts with `Client`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use topocomm_proto::codec;
use topocomm_proto::control::{
    ClientRequest, ClientResponse, MAX_CONTROL_FRAME, PROTOCOL_VERSION, ToCoordinator, ToNode,
};

use crate::run::Coordinator;

/// How often the coordinator asks each node whether it is there.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// A node that says nothing for this long is taken for lost: its session is closed (a
/// run in progress fails naming it) and it must register again.
const SILENCE_LIMIT: Duration = Duration::from_secs(10);

/// How long a new connection has to say what it is.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// A framed control connection.
pub type Control = Framed<TcpStream, LengthDelimitedCodec>;

/// Wraps a TCP stream in the control framing.
pub fn framed(stream: TcpStream) -> Control {
    let _ = stream.set_nodelay(true);
    Framed::new(stream, LengthDelimitedCodec::builder().max_frame_length(MAX_CONTROL_FRAME).new_codec())
}

/// Sends one control message.
pub async fn send<T: serde::Serialize>(control: &mut Control, message: &T) -> anyhow::Result<()> {
    let body = codec::encode(message)?;
    control.send(Bytes::from(body)).await.context("sending a control message")
}

/// Receives one control message; `None` when the peer closed the connection.
pub async fn receive<T: serde::de::DeserializeOwned>(control: &mut Control) -> anyhow::Result<Option<T>> {
    match control.next().await {
        None => Ok(None),
        Some(body) => Ok(Some(codec::decode(&body.context("reading a control message")?)?)),
    }
}

/// Accepts control connections until the task is dropped.
pub async fn serve(listener: TcpListener, coordinator: Arc<Coordinator>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let coordinator = coordinator.clone();
                tokio::spawn(async move {
                    if let Err(error) = connection(framed(stream), &coordinator).await {
                        tracing::warn!(%peer, error = %format!("{error:#}"), "control connection ended with an error");
                    }
                });
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn connection(mut control: Control, coordinator: &Coordinator) -> anyhow::Result<()> {
    let first = tokio::time::timeout(HELLO_TIMEOUT, receive::<ToCoordinator>(&mut control))
        .await
        .context("no hello within the deadline")??;
    match first {
        Some(ToCoordinator::Register { version, token, name, data_addr }) => {
            if version != PROTOCOL_VERSION {
                let reason = format!("protocol version {version}; this coordinator speaks {PROTOCOL_VERSION}");
                return send(&mut control, &ToNode::Refused { reason }).await;
            }
            node_session(control, coordinator, &token, name, data_addr).await
        }
        Some(ToCoordinator::Client { token, request }) => {
            let response = if token != coordinator.cluster.token() {
                tracing::warn!("refused a client with a wrong token");
                ClientResponse::Error("wrong cluster token (set --token or TOPOCOMM_TOKEN)".into())
            } else {
                match request {
                    ClientRequest::Run(request) => match coordinator.execute(request).await {
                        Ok(outcome) => ClientResponse::RunDone(Box::new(outcome)),
                        Err(error) => ClientResponse::Error(error),
                    },
                    ClientRequest::Status => ClientResponse::Status(coordinator.cluster.status()),
                }
            };
            send(&mut control, &response).await
        }
        Some(other) => anyhow::bail!("a connection opened with {other:?} instead of a hello"),
        None => Ok(()),
    }
}

/// Carries one node's control session until either side closes it.
async fn node_session(
    mut control: Control,
    coordinator: &Coordinator,
    token: &str,
    name: String,
    data_addr: String,
) -> anyhow::Result<()> {
    let (sender, mut outgoing) = mpsc::unbounded_channel();
    let session = match coordinator.cluster.register(token, name.clone(), data_addr, sender) {
        Ok(session) => session,
        Err(reason) => {
            tracing::warn!(%name, %reason, "refused a node");
            return send(&mut control, &ToNode::Refused { reason }).await;
        }
    };
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let mut last_heard = Instant::now();
    let result = loop {
        tokio::select! {
            message = outgoing.recv() => match message {
                Some(message) => if let Err(error) = send(&mut control, &message).await { break Err(error) },
                None => break Ok(()),
            },
            incoming = receive::<ToCoordinator>(&mut control) => match incoming {
                Ok(Some(ToCoordinator::Pong)) => last_heard = Instant::now(),
                Ok(Some(message)) => {
                    last_heard = Instant::now();
                    coordinator.cluster.forward(session, message);
                }
                Ok(None) => break Ok(()),
                Err(error) => break Err(error),
            },
            _ = heartbeat.tick() => {
                // A paused or cut-off node keeps its TCP connection (the kernel still
                // acknowledges), so silence is the only sign of it.
                if last_heard.elapsed() > SILENCE_LIMIT {
                    tracing::warn!(%name, silent = ?last_heard.elapsed(), "node silent too long; closing its session");
                    break Err(anyhow::anyhow!("node {name} did not answer for {SILENCE_LIMIT:?}"));
                }
                if let Err(error) = send(&mut control, &ToNode::Ping).await {
                    break Err(error);
                }
            }
        }
    };
    coordinator.cluster.disconnected(session);
    result
}
