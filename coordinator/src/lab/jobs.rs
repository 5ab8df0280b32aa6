//! The lab's jobs and the session's history of them. Runs, sweeps, explanations and
//! simulations all queue alike: one job at a time (each may take the cluster, or the
//! machine's memory, whole), at most [`MOST_WAITING`] waiting behind it (past that a
//! request is refused, and the page told to try later), each cancellable while it waits
//! or runs. The history keeps the last [`MOST_KEPT`] entries but never drops one that is
//! waiting or running; what it holds of finished jobs is bounded: a document (the JSON the
//! page plays) of more than [`MOST_DOCUMENT_BYTES`] is not kept, and past
//! [`MOST_HISTORY_BYTES`] in all the oldest documents are let go (their summaries stay).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use bytesize::ByteSize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use topocomm_collectives::simulator::LiveCounts;

use crate::lab::document::Kind;

/// Entries the history keeps (the oldest finished go first).
pub const MOST_KEPT: usize = 50;

/// Jobs that may wait behind the one running.
pub const MOST_WAITING: usize = 8;

/// The largest document kept of one job (its JSON text).
pub const MOST_DOCUMENT_BYTES: usize = 64 << 20;

/// What the history's documents may hold together.
pub const MOST_HISTORY_BYTES: usize = 256 << 20;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Queued,
    /// A run's dilation probe.
    Probing,
    Running,
    Verified,
    Failed,
    Cancelled,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Probing => "probing",
            Status::Running => "running",
            Status::Verified => "verified",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// Whether the job is over.
    pub fn finished(self) -> bool {
        matches!(self, Status::Verified | Status::Failed | Status::Cancelled)
    }
}

/// How a running job is told to stop: its future is dropped when `cancelled` fires (a
/// run on the cluster, whose nodes the coordinator then aborts), and a simulation stops
/// at its next poll when `live.stop` is set.
#[derive(Clone, Default)]
pub struct Stop {
    pub cancelled: CancellationToken,
    pub live: Arc<LiveCounts>,
}

impl Stop {
    fn stop(&self) {
        self.live.stop.store(true, Ordering::Relaxed);
        self.cancelled.cancel();
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.is_cancelled()
    }
}

/// One entry of the history.
struct Entry {
    id: u64,
    kind: Kind,
    args: Vec<String>,
    status: Status,
    /// What the job said on the way (the dilation chosen) or why it failed.
    note: Option<String>,
    title: Option<Value>,
    /// The document's JSON text.
    document: Option<Bytes>,
}

impl Entry {
    fn summary(&self) -> Value {
        json!({
            "id": self.id, "kind": self.kind.name(), "args": self.args, "status": self.status.name(),
            "note": self.note, "title": self.title,
        })
    }
}

struct State<J> {
    next: u64,
    entries: VecDeque<Entry>,
    waiting: VecDeque<(u64, J)>,
    running: Option<(u64, Stop)>,
    /// The documents' bytes together.
    held: usize,
}

/// A job refused because the queue is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MOST_WAITING} jobs are waiting already, behind one running: try again when one is done")]
pub struct QueueFull;

/// Why a job could not be cancelled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCancelled {
    #[error("no job {0} in this session")]
    Unknown(u64),
    #[error("job {0} is over ({1})")]
    Finished(u64, &'static str),
}

/// The queue of jobs of type `J` and the history.
pub struct Jobs<J> {
    state: Mutex<State<J>>,
    ready: Notify,
}

impl<J> Default for Jobs<J> {
    fn default() -> Self {
        let state = State { next: 0, entries: VecDeque::new(), waiting: VecDeque::new(), running: None, held: 0 };
        Jobs { state: Mutex::new(state), ready: Notify::new() }
    }
}

impl<J> Jobs<J> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<J>> {
        self.state.lock().expect("jobs lock")
    }

    /// Queues `job`; gives its id and its entry's summary, or refuses it when
    /// [`MOST_WAITING`] wait already.
    pub fn submit(&self, kind: Kind, args: Vec<String>, job: J) -> Result<(u64, Value), QueueFull> {
        let mut state = self.state();
        if state.waiting.len() >= MOST_WAITING {
            return Err(QueueFull);
        }
        state.next += 1;
        let id = state.next;
        let entry = Entry { id, kind, args, status: Status::Queued, note: None, title: None, document: None };
        let summary = entry.summary();
        state.entries.push_back(entry);
        state.waiting.push_back((id, job));
        // The oldest finished entries go; a waiting or running one never does.
        while state.entries.len() > MOST_KEPT {
            let Some(at) = state.entries.iter().position(|e| e.status.finished()) else { break };
            if let Some(gone) = state.entries.remove(at) {
                state.held -= gone.document.map_or(0, |d| d.len());
            }
        }
        drop(state);
        self.ready.notify_one();
        Ok((id, summary))
    }

    /// The next job to carry out, when there is one, with what stops it; it reads
    /// "running" from now, and counts as running until [`Jobs::finish`].
    pub async fn next(&self) -> (u64, Vec<String>, J, Stop) {
        loop {
            {
                let mut state = self.state();
                if let Some((id, job)) = state.waiting.pop_front() {
                    let stop = Stop::default();
                    state.running = Some((id, stop.clone()));
                    let entry = state.entries.iter_mut().find(|e| e.id == id);
                    let args = entry
                        .map(|entry| {
                            entry.status = Status::Running;
                            entry.args.clone()
                        })
                        .unwrap_or_default();
                    return (id, args, job, stop);
                }
            }
            // `notify_one` leaves a permit when nobody waits, so no submit is missed.
            self.ready.notified().await;
        }
    }

    /// Sets job `id`'s status and note (a `None` note keeps the last); gives its
    /// summary, or `None` if it is not in the history.
    pub fn update(&self, id: u64, status: Status, note: Option<String>) -> Option<Value> {
        let mut state = self.state();
        let entry = state.entries.iter_mut().find(|e| e.id == id)?;
        // A job cancelled stays so, whatever it says on its way out.
        if entry.status != Status::Cancelled {
            entry.status = status;
        }
        if note.is_some() {
            entry.note = note;
        }
        Some(entry.summary())
    }

    /// Ends job `id` with `status`, its note and its document (kept within the bounds);
    /// the next job may start. Gives its summary.
    pub fn finish(&self, id: u64, status: Status, note: Option<String>, document: Option<Value>) -> Option<Value> {
        let mut state = self.state();
        if state.running.as_ref().is_some_and(|(running, _)| *running == id) {
            state.running = None;
        }
        let text = document.as_ref().map(|d| Bytes::from(d.to_string()));
        let entry = state.entries.iter_mut().find(|e| e.id == id)?;
        entry.status = if entry.status == Status::Cancelled { Status::Cancelled } else { status };
        if note.is_some() {
            entry.note = note;
        }
        entry.title = document.as_ref().and_then(|d| d.get("title").cloned());
        let mut added = 0;
        match text {
            Some(text) if text.len() > MOST_DOCUMENT_BYTES => {
                entry.note = Some(format!(
                    "{}its document ({}) is more than the lab keeps of one job ({}): fewer nodes or a smaller size, \
                     or the command line, show it",
                    entry.note.as_ref().map(|n| format!("{n}; ")).unwrap_or_default(),
                    ByteSize(text.len() as u64).display().iec(),
                    ByteSize(MOST_DOCUMENT_BYTES as u64).display().iec()
                ));
            }
            Some(text) => {
                added = text.len();
                entry.document = Some(text);
            }
            None => {}
        }
        let summary = entry.summary();
        state.held += added;
        // The oldest documents go past the bound (never the one just kept).
        while state.held > MOST_HISTORY_BYTES {
            let Some(oldest) = state.entries.iter_mut().find(|e| e.id != id && e.document.is_some()) else { break };
            let freed = oldest.document.take().map_or(0, |d| d.len());
            oldest.note = Some("its document was let go to keep the history's memory bounded".into());
            state.held -= freed;
        }
        Some(summary)
    }

    /// Cancels job `id`: a waiting one is taken off the queue at once, a running one
    /// told to stop (it is "cancelled" from now on, and ends as soon as it stops).
    pub fn cancel(&self, id: u64) -> Result<Value, NotCancelled> {
        let mut state = self.state();
        let status = state.entries.iter().find(|e| e.id == id).map(|e| e.status).ok_or(NotCancelled::Unknown(id))?;
        if status.finished() {
            return Err(NotCancelled::Finished(id, status.name()));
        }
        state.waiting.retain(|(waiting, _)| *waiting != id);
        if let Some((_, stop)) = state.running.as_ref().filter(|(running, _)| *running == id) {
            stop.stop();
        }
        let entry = state.entries.iter_mut().find(|e| e.id == id).ok_or(NotCancelled::Unknown(id))?;
        entry.status = Status::Cancelled;
        entry.note = Some("cancelled".into());
        Ok(entry.summary())
    }

    /// Every entry's summary, oldest first.
    pub fn summaries(&self) -> Vec<Value> {
        self.state().entries.iter().map(Entry::summary).collect()
    }

    /// Entry `id`'s summary and document, if it is in the history.
    pub fn get(&self, id: u64) -> Option<(Kind, Value, Option<Bytes>)> {
        let state = self.state();
        let entry = state.entries.iter().find(|e| e.id == id)?;
        Some((entry.kind, entry.summary(), entry.document.clone()))
    }

    /// What the documents hold together.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.state().held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(jobs: &Jobs<()>, id: u64) -> String {
        jobs.get(id).map(|(_, s, _)| s["status"].as_str().unwrap().to_owned()).unwrap_or_else(|| "gone".into())
    }

    #[tokio::test]
    async fn jobs_run_one_at_a_time_in_order_and_the_queue_is_bounded() {
        let jobs = Jobs::<()>::default();
        let ids: Vec<u64> = (0..MOST_WAITING).map(|_| jobs.submit(Kind::Run, vec![], ()).unwrap().0).collect();
        assert_eq!(jobs.submit(Kind::Simulate, vec![], ()), Err(QueueFull));
        let (first, ..) = jobs.next().await;
        assert_eq!(first, ids[0]);
        // One is running: one more may wait.
        let last = jobs.submit(Kind::Explain, vec![], ()).unwrap().0;
        assert_eq!(status_of(&jobs, ids[1]), "queued", "a waiting job reads queued, not running");
        jobs.finish(first, Status::Verified, None, Some(json!({"title": "t"})));
        let (second, ..) = jobs.next().await;
        assert_eq!(second, ids[1]);
        assert!(last > second);
    }

    #[tokio::test]
    async fn the_history_never_drops_a_job_still_waiting_or_running() {
        let jobs = Jobs::<()>::default();
        // A long job runs, and many come and go after it.
        let long = jobs.submit(Kind::Run, vec![], ()).unwrap().0;
        let _ = jobs.next().await;
        let mut waiting = Vec::new();
        for round in 0..(3 * MOST_KEPT) {
            let id = jobs.submit(Kind::Run, vec![], ()).unwrap().0;
            if round % 10 == 0 && waiting.len() < MOST_WAITING - 1 {
                waiting.push(id);
            } else {
                jobs.cancel(id).unwrap();
            }
        }
        assert_eq!(status_of(&jobs, long), "running");
        for id in waiting {
            assert_eq!(status_of(&jobs, id), "queued");
        }
        assert!(jobs.summaries().len() <= MOST_KEPT);
    }

    #[tokio::test]
    async fn a_cancelled_job_is_taken_off_the_queue_or_told_to_stop() {
        let jobs = Jobs::<()>::default();
        let running = jobs.submit(Kind::Simulate, vec![], ()).unwrap().0;
        let waiting = jobs.submit(Kind::Run, vec![], ()).unwrap().0;
        let after = jobs.submit(Kind::Run, vec![], ()).unwrap().0;
        let (_, _, (), stop) = jobs.next().await;
        jobs.cancel(waiting).unwrap();
        assert_eq!(status_of(&jobs, waiting), "cancelled");
        jobs.cancel(running).unwrap();
        assert!(stop.is_cancelled() && stop.live.stop.load(Ordering::Relaxed), "the running job is told to stop");
        // What it says on its way out does not undo the cancel.
        jobs.update(running, Status::Running, None);
        jobs.finish(running, Status::Failed, Some("stopped".into()), None);
        assert_eq!(status_of(&jobs, running), "cancelled");
        assert_eq!(jobs.cancel(running), Err(NotCancelled::Finished(running, "cancelled")));
        assert_eq!(jobs.cancel(999), Err(NotCancelled::Unknown(999)));
        let (next, ..) = jobs.next().await;
        assert_eq!(next, after, "the cancelled waiting job never runs");
    }

    #[tokio::test]
    async fn documents_are_held_within_their_bounds() {
        let jobs = Jobs::<()>::default();
        let big = "x".repeat(MOST_DOCUMENT_BYTES + 1);
        let id = jobs.submit(Kind::Simulate, vec![], ()).unwrap().0;
        let _ = jobs.next().await;
        let summary = jobs.finish(id, Status::Verified, None, Some(json!({ "flow": big }))).unwrap();
        assert!(summary["note"].as_str().unwrap().contains("more than the lab keeps"), "{summary}");
        assert!(jobs.get(id).unwrap().2.is_none());
        assert_eq!(jobs.held(), 0);
        let part = "y".repeat(MOST_DOCUMENT_BYTES - 100);
        let mut kept = Vec::new();
        for _ in 0..(MOST_HISTORY_BYTES / MOST_DOCUMENT_BYTES + 2) {
            let id = jobs.submit(Kind::Simulate, vec![], ()).unwrap().0;
            let _ = jobs.next().await;
            jobs.finish(id, Status::Verified, None, Some(json!({ "flow": part })));
            kept.push(id);
        }
        assert!(jobs.held() <= MOST_HISTORY_BYTES, "{}", jobs.held());
        assert!(jobs.get(kept[0]).unwrap().2.is_none(), "the oldest document went");
        assert!(jobs.get(*kept.last().unwrap()).unwrap().2.is_some(), "the newest stays");
    }
}
