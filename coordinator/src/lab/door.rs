//! The lab's HTTP port before a request is read: the accept loop, the caps on the
//! connections it keeps open (in all, per source address, and of those still sending
//! their first request's head) and hyper's header-read deadline. A stranger who opens
//! connections and never finishes a request (slowloris) holds at most
//! [`MOST_PENDING_PER_SOURCE`] of them, each for at most [`HEADER_PATIENCE`], and pushes
//! out only his own: so he cannot take the descriptors the token holder (or the
//! coordinator's control port, which keeps its own) needs. Each request carries its
//! peer's address (`ConnectInfo`) for the access checks.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::lab::access::source_of;

/// The most connections the page keeps open at once.
pub const MOST_CONNECTIONS: usize = 256;

/// The most of them from one source address (an IPv6 source: its /64).
pub const MOST_PER_SOURCE: usize = 64;

/// The most connections of one source that have not yet sent a whole request head; past
/// it the source's oldest such connection is closed, never another source's.
pub const MOST_PENDING_PER_SOURCE: usize = 16;

/// How long a connection may take to send a request's head (the first, and each next
/// one on a kept-alive connection, counted from when the server waits for it).
pub const HEADER_PATIENCE: Duration = Duration::from_secs(10);

/// One open connection.
struct Place {
    number: u64,
    source: IpAddr,
    /// Still sending its first request's head.
    pending: Arc<AtomicBool>,
    /// Cancelled to close the connection (a newer one needs its place).
    closed: CancellationToken,
}

/// The open connections, oldest first.
#[derive(Default)]
struct Door {
    open: Mutex<(u64, VecDeque<Place>)>,
}

/// A connection's place at the door; dropping it frees the place.
struct Ticket {
    door: Arc<Door>,
    number: u64,
    pending: Arc<AtomicBool>,
    closed: CancellationToken,
}

impl Door {
    /// A place for a new connection from `source`, or `None` when the caps leave none
    /// (every open connection of the source, or of all, past its first request): to make
    /// room the source's own oldest pending connection is closed, and when all are full,
    /// the oldest pending one of the source with the most pending.
    fn enter(self: &Arc<Self>, source: IpAddr) -> Option<Ticket> {
        let mut guard = self.open.lock().expect("door lock");
        let (next, open) = &mut *guard;
        let pending_of = |open: &VecDeque<Place>, source: IpAddr| {
            open.iter().filter(|p| p.source == source && p.pending.load(Ordering::Relaxed)).count()
        };
        if pending_of(open, source) >= MOST_PENDING_PER_SOURCE
            || open.iter().filter(|p| p.source == source).count() >= MOST_PER_SOURCE
        {
            close_oldest_pending(open, |place| place.source == source)?;
        }
        if open.len() >= MOST_CONNECTIONS {
            // Of the sources with the most pending, the one whose oldest has waited longest.
            let most = open.iter().map(|p| pending_of(open, p.source)).max().unwrap_or(0);
            let busiest =
                open.iter().find(|p| p.pending.load(Ordering::Relaxed) && pending_of(open, p.source) == most)?.source;
            close_oldest_pending(open, |place| place.source == busiest)?;
        }
        *next += 1;
        let (pending, closed) = (Arc::new(AtomicBool::new(true)), CancellationToken::new());
        open.push_back(Place { number: *next, source, pending: pending.clone(), closed: closed.clone() });
        Some(Ticket { door: self.clone(), number: *next, pending, closed })
    }
}

/// Closes the oldest pending connection that `which` picks; `None` if there is none.
fn close_oldest_pending(open: &mut VecDeque<Place>, which: impl Fn(&Place) -> bool) -> Option<()> {
    let at = open.iter().position(|p| which(p) && p.pending.load(Ordering::Relaxed))?;
    let place = open.remove(at)?;
    place.closed.cancel();
    Some(())
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut guard = self.door.open.lock().expect("door lock");
        guard.1.retain(|place| place.number != self.number);
    }
}

/// Serves `app` on `listener` until the task is dropped: each connection admitted by
/// the door, served by hyper's HTTP/1 with the header deadline, and closed when the door
/// needs its place.
pub async fn serve(listener: TcpListener, app: Router) {
    let door = Arc::new(Door::default());
    let mut last_warning: Option<Instant> = None;
    let mut warn = |what: &str, peer: Option<SocketAddr>| {
        // Once a second, not per connection.
        if last_warning.is_none_or(|at| at.elapsed() > Duration::from_secs(1)) {
            tracing::warn!(?peer, "the lab's page {what}");
            last_warning = Some(Instant::now());
        }
    };
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, most likely: wait for some to close.
                warn(&format!("could not accept a connection: {error}"), None);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(ticket) = door.enter(source_of(peer.ip())) else {
            warn("refused connections past its caps", Some(peer));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let pending = ticket.pending.clone();
            let service = app.map_request(move |mut request: axum::http::Request<Incoming>| {
                pending.store(false, Ordering::Relaxed);
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(HEADER_PATIENCE);
            let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            tokio::select! {
                _ = connection => {}
                () = ticket.closed.cancelled() => {}
            }
            drop(ticket);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_source_past_its_pending_cap_pushes_out_its_own_oldest_only() {
        let door = Arc::new(Door::default());
        let other = door.enter(address(2)).unwrap();
        let flood: Vec<Ticket> = (0..MOST_PENDING_PER_SOURCE).map(|_| door.enter(address(1)).unwrap()).collect();
        let newest = door.enter(address(1)).unwrap();
        assert!(flood[0].closed.is_cancelled(), "the flood's oldest made room");
        assert!(flood[1..].iter().all(|t| !t.closed.is_cancelled()));
        assert!(!other.closed.is_cancelled() && !newest.closed.is_cancelled(), "another source is never pushed out");
    }

    #[test]
    fn connections_past_their_first_request_are_never_pushed_out() {
        let door = Arc::new(Door::default());
        let served: Vec<Ticket> = (0..MOST_PER_SOURCE)
            .map(|_| {
                let ticket = door.enter(address(1)).unwrap();
                ticket.pending.store(false, Ordering::Relaxed);
                ticket
            })
            .collect();
        assert!(door.enter(address(1)).is_none(), "a source with all its places serving gets no more");
        assert!(served.iter().all(|t| !t.closed.is_cancelled()));
        drop(served);
        assert!(door.enter(address(1)).is_some(), "closing frees the places");
    }

    #[test]
    fn when_all_are_full_the_busiest_pending_source_gives_way() {
        let door = Arc::new(Door::default());
        let mut tickets = Vec::new();
        let mut last = 0u8;
        while tickets.len() < MOST_CONNECTIONS {
            last += 1;
            for _ in 0..MOST_PENDING_PER_SOURCE.min(MOST_CONNECTIONS - tickets.len()) {
                tickets.push(door.enter(address(last)).unwrap());
            }
        }
        // Source 1 now has one more serving connection: the others tie at pending, and
        // the first of the busiest gives way.
        tickets[0].pending.store(false, Ordering::Relaxed);
        let newcomer = door.enter(IpAddr::from([10, 0, 1, 1])).unwrap();
        assert!(!newcomer.closed.is_cancelled());
        let pushed: Vec<usize> = (0..tickets.len()).filter(|&i| tickets[i].closed.is_cancelled()).collect();
        assert_eq!(pushed, vec![MOST_PENDING_PER_SOURCE], "the oldest pending of source 2, the first busiest");
    }
}
