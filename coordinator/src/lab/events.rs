//! The lab's server-sent events: the cluster streamed to the pages whenever it changes,
//! and every job's progress, to at most [`MOST_LISTENING`] pages at once.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::render::schema;

use crate::lab::server::Lab;

/// How often the cluster is looked at for changes to stream.
const CLUSTER_POLL: Duration = Duration::from_millis(400);

/// The most pages listening to the events at once (each holds a connection open).
pub const MOST_LISTENING: usize = 32;

/// Streams the cluster to the pages whenever it changes.
pub(super) async fn watch_cluster(lab: Arc<Lab>) {
    let mut last = Value::Null;
    loop {
        let now = lab.cluster().await;
        if now != last {
            lab.tell(now.clone());
            last = now;
        }
        tokio::time::sleep(CLUSTER_POLL).await;
    }
}

/// One page listening; dropping it (the page went) frees its place.
struct Listening(Arc<Lab>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.listening.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Server-sent events: the cluster now, then every change and every job's progress; at
/// most [`MOST_LISTENING`] pages at once (429 past them).
pub(super) async fn events(State(lab): State<Arc<Lab>>) -> Response {
    if lab.listening.fetch_add(1, Ordering::Relaxed) >= MOST_LISTENING {
        lab.listening.fetch_sub(1, Ordering::Relaxed);
        let error = format!("error: {MOST_LISTENING} pages are listening already: close one");
        return (StatusCode::TOO_MANY_REQUESTS, Json(schema::versioned(json!({ "error": error })))).into_response();
    }
    let place = Listening(lab.clone());
    let receiver = lab.events.subscribe();
    let first = lab.cluster().await;
    let stream = futures::stream::unfold((Some(first), receiver, place), |(first, mut receiver, place)| async move {
        if let Some(first) = first {
            return Some((Ok(Event::default().data(first.to_string())), (None, receiver, place)));
        }
        loop {
            match receiver.recv().await {
                Ok(value) => return Some((Ok(Event::default().data(value.to_string())), (None, receiver, place))),
                // A slow page missed some: it still gets the next ones.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let stream: std::pin::Pin<Box<dyn Stream<Item = Result<Event, std::convert::Infallible>> + Send>> =
        Box::pin(stream);
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}
