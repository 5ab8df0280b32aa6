//! The coordinator's control listener. Every connection first passes the mutual
//! handshake (`topocomm_node::handshake`: at most a few KiB and a few seconds for a
//! stranger, at most `MAX_PENDING_HANDSHAKES` strangers at once, the oldest dropped for
//! the newest); its purpose then makes it a node's control session or a CLI client's
//! request. Only then do the large-message limits apply.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use topocomm_node::handshake::{self, Gate, GateRefusal, HandshakeError, Refusal};
use topocomm_node::secure::Channel;
use topocomm_node::security::PendingHandshakes;
use topocomm_proto::auth::{self, Hello, Key, Purpose};
use topocomm_proto::codec;
use topocomm_proto::control::{
    ClientRequest, ClientResponse, MAX_ORDER_FRAME, MAX_REPORT_FRAME, ToCoordinator, ToNode,
};

use crate::control::cluster::Registration;
use crate::control::run::Coordinator;

/// How often the coordinator asks each node whether it is there.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// A node that says nothing for this long is taken for lost: its session is closed (a
/// run in progress fails naming it) and it must register again.
const SILENCE_LIMIT: Duration = Duration::from_secs(10);

/// How many of one node's messages may wait for the run driver; more are dropped (a
/// node sends at most one per order, so only a broken or rogue node exceeds it).
const QUEUED_PER_NODE: usize = 16;

/// A framed control connection.
pub type Control<S = TcpStream> = Framed<Channel<S>, LengthDelimitedCodec>;

/// Wraps an authenticated channel in the control framing, accepting messages of up to
/// `max_frame` bytes from the other side.
pub fn framed<S: AsyncRead + AsyncWrite>(channel: Channel<S>, max_frame: usize) -> Control<S> {
    Framed::new(channel, LengthDelimitedCodec::builder().max_frame_length(max_frame).new_codec())
}

/// Sends one control message.
pub async fn send<S, T>(control: &mut Control<S>, message: &T) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: serde::Serialize,
{
    let body = codec::encode(message)?;
    control.send(Bytes::from(body)).await.context("sending a control message")
}

/// Receives one control message; `None` when the peer closed the connection.
pub async fn receive<S, T>(control: &mut Control<S>) -> anyhow::Result<Option<T>>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: serde::de::DeserializeOwned,
{
    match control.next().await {
        None => Ok(None),
        Some(body) => Ok(Some(codec::decode(&body.context("reading a control message")?)?)),
    }
}

/// Accepts control connections until the task is dropped.
pub async fn serve(listener: TcpListener, coordinator: Arc<Coordinator>) {
    let pending = Arc::new(PendingHandshakes::default());
    let mut last_accept_warning: Option<Instant> = None;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let (coordinator, pending) = (coordinator.clone(), pending.clone());
                tokio::spawn(async move {
                    if let Err(error) = connection(stream, peer, &coordinator, &pending).await {
                        tracing::warn!(%peer, error = %format!("{error:#}"), "control connection ended with an error");
                    }
                });
            }
            Err(error) => {
                // Out of descriptors, most likely: say so once a second, not per try.
                if last_accept_warning.is_none_or(|at| at.elapsed() > Duration::from_secs(1)) {
                    tracing::warn!(%error, "accept failed");
                    last_accept_warning = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// What the control port lets in: nodes with a valid name and address, and clients, each
/// proving the cluster key.
struct ControlGate<'a> {
    key: &'a Key,
}

impl Gate for ControlGate<'_> {
    fn key_for(&self, hello: &Hello) -> Result<Key, GateRefusal> {
        match &hello.purpose {
            Purpose::Node { name, data_addr, .. } => {
                auth::check_name(name)?;
                auth::check_address(data_addr)?;
            }
            Purpose::Client => {}
            Purpose::Link { .. } => return Err(GateRefusal::NotAControlLink),
        }
        Ok(self.key.clone())
    }

    fn admit(&self, _hello: &Hello) -> Result<(), GateRefusal> {
        Ok(())
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    coordinator: &Coordinator,
    pending: &PendingHandshakes,
) -> anyhow::Result<()> {
    let ticket = pending.enter();
    let gate = ControlGate { key: coordinator.key() };
    let accepted = tokio::select! {
        accepted = handshake::accept(stream, &gate, coordinator.encrypted()) => accepted,
        _ = ticket.evicted.cancelled() => Err(HandshakeError::Refusing(Refusal::Evicted)),
    };
    drop(ticket);
    let (hello, channel) = match accepted {
        Ok(accepted) => accepted,
        Err(error) => {
            tracing::warn!(%peer, %error, "refused a control connection");
            return Ok(());
        }
    };
    match hello.purpose {
        Purpose::Node { name, data_addr, memory_bytes } => {
            let control = framed(channel, MAX_REPORT_FRAME);
            node_session(control, coordinator, Registration { name, data_addr, memory_bytes }).await
        }
        Purpose::Client => {
            let mut control = framed(channel, MAX_ORDER_FRAME);
            let request = tokio::time::timeout(handshake::HANDSHAKE_TIMEOUT, receive::<_, ClientRequest>(&mut control))
                .await
                .context("no request within the deadline")??;
            let Some(request) = request else { return Ok(()) };
            let response = match request {
                ClientRequest::Run(request) => match coordinator.execute(request).await {
                    Ok(outcome) => ClientResponse::RunDone(Box::new(outcome)),
                    Err(error) => ClientResponse::Error(error.to_string()),
                },
                ClientRequest::Status => ClientResponse::Status(coordinator.cluster.status()),
            };
            send(&mut control, &response).await
        }
        Purpose::Link { .. } => Ok(()),
    }
}

/// Carries one node's control session until either side closes it.
async fn node_session(
    mut control: Control,
    coordinator: &Coordinator,
    registration: Registration,
) -> anyhow::Result<()> {
    let (sender, mut outgoing) = mpsc::unbounded_channel();
    let name = registration.name.clone();
    let session = match coordinator.cluster.register(registration, sender) {
        Ok(session) => session,
        Err(refusal) => {
            tracing::warn!(%name, %refusal, "refused a node");
            return send(&mut control, &ToNode::Refused { reason: refusal.to_string() }).await;
        }
    };
    let queue = Arc::new(Semaphore::new(QUEUED_PER_NODE));
    let mut dropped: u64 = 0;
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let mut last_heard = Instant::now();
    let result = loop {
        tokio::select! {
            message = outgoing.recv() => match message {
                Some(message) => if let Err(error) = send(&mut control, &message).await { break Err(error) },
                None => break Ok(()),
            },
            incoming = receive::<_, ToCoordinator>(&mut control) => match incoming {
                Ok(Some(ToCoordinator::Pong)) => last_heard = Instant::now(),
                Ok(Some(message)) => {
                    last_heard = Instant::now();
                    match queue.clone().try_acquire_owned() {
                        Ok(place) => coordinator.cluster.forward(session, message, place),
                        Err(_) => {
                            // Nobody asked for this many: log the first and every 10,000th.
                            if dropped.is_multiple_of(10_000) {
                                tracing::warn!(%name, dropped = dropped + 1, "dropped unsolicited messages from a node");
                            }
                            dropped += 1;
                        }
                    }
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
