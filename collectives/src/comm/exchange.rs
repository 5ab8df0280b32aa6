//! [`Exchange`]: the future of [`Comm::exchange_combining`], one exchange step of a
//! vector in segments, written out by hand as [`super::Receive`] is.
//!
//! A vector in one segment — every exchange of the simulator's, and of vectors shorter
//! than two segments — goes through the states here: lent to the link, the partner's
//! received, the link done with ours (a routed send only), the two combined. Several
//! segments go through [`Comm::exchange_pipelined`], whose state waits in a box of its
//! own. Written as `async fn`s, the one-segment exchange held its arguments beside its
//! locals at two levels, 470 bytes; the simulator holds one in every node's future (up
//! to millions at a time), and recursive doubling's future is mostly this one.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use topocomm_proto::NodeId;
use topocomm_proto::frame::Tag;

use super::segments::{Loan, Segment, Segments};
use super::{Comm, CommError, Done, Receive, WrittenWait};

/// A step's exchange with one partner, each segment combined with the partner's as it
/// comes (see [`Comm::exchange_combining`]).
pub struct Exchange<'a, F> {
    comm: &'a Comm,
    partner: NodeId,
    tag: Tag,
    /// Taken by the pipeline of several segments.
    combine: Option<F>,
    state: ExchangeState<'a>,
}

enum ExchangeState<'a> {
    /// Not polled yet: nothing sent.
    Start(Segments),
    /// Our segment lent to the link; the partner's on its way.
    Receiving {
        loan: Loan,
        done: Option<Done>,
        receive: Receive<'a>,
    },
    /// The partner's segment here; the link not yet done with ours (a routed send).
    Writing {
        loan: Loan,
        theirs: Bytes,
        written: WrittenWait,
    },
    /// Several segments, in the pipeline's own box.
    Pipelined(Pin<Box<dyn Future<Output = Result<Segments, CommError>> + Send + 'a>>),
    Done,
}

impl<'a, F> Exchange<'a, F> {
    pub(super) fn new(comm: &'a Comm, partner: NodeId, tag: Tag, vector: Segments, combine: F) -> Self {
        Exchange { comm, partner, tag, combine: Some(combine), state: ExchangeState::Start(vector) }
    }
}

// Never pinned through: `combine` is only called by `&mut`, the receive and the waits are
// `Unpin` (or boxed).
impl<F> Unpin for Exchange<'_, F> {}

impl<'a, F> Exchange<'a, F>
where
    F: FnMut(Segment, Bytes) -> Result<Segment, CommError> + Send + 'a,
{
    /// The state, left `Done` until the caller puts the next one.
    fn take_state(&mut self) -> ExchangeState<'a> {
        std::mem::replace(&mut self.state, ExchangeState::Done)
    }

    /// Our segment, back from its link, combined with the partner's.
    fn combined(&mut self, loan: Loan, theirs: Bytes) -> Result<Segments, CommError> {
        let combine = self.combine.as_mut().expect("a one-segment exchange keeps its combine");
        combine(loan.settle(), theirs).map(Segments::from)
    }

    /// The first poll: sends our segment (or starts the pipeline of several).
    fn start(&mut self, vector: Segments) -> Result<ExchangeState<'a>, CommError> {
        let (comm, partner, tag) = (self.comm, self.partner, self.tag);
        let step = comm.next_step();
        Ok(match vector.into_whole() {
            Ok(own) => {
                let (loan, done) = comm.lend(partner, tag, step, own)?;
                ExchangeState::Receiving { loan, done, receive: comm.recv(partner, tag) }
            }
            Err(vector) => {
                let combine = self.combine.take().expect("the pipeline takes the combine once");
                ExchangeState::Pipelined(Box::pin(comm.exchange_pipelined(partner, tag, step, vector, combine)))
            }
        })
    }
}

impl<'a, F> Future for Exchange<'a, F>
where
    F: FnMut(Segment, Bytes) -> Result<Segment, CommError> + Send + 'a,
{
    type Output = Result<Segments, CommError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            // The waits that are still pending are polled in place (no move of the state).
            match &mut this.state {
                ExchangeState::Receiving { receive, .. } => match Pin::new(receive).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(theirs) => {
                        let ExchangeState::Receiving { loan, done, .. } = this.take_state() else {
                            unreachable!("matched above")
                        };
                        let theirs = match theirs {
                            Ok(theirs) => theirs,
                            Err(error) => return Poll::Ready(Err(error)),
                        };
                        match done {
                            None => return Poll::Ready(this.combined(loan, theirs)),
                            Some(done) => {
                                this.state =
                                    ExchangeState::Writing { loan, theirs, written: this.comm.written_wait(done) }
                            }
                        }
                    }
                },
                ExchangeState::Writing { written, .. } => match written.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(written) => {
                        let ExchangeState::Writing { loan, theirs, .. } = this.take_state() else {
                            unreachable!("matched above")
                        };
                        if written.is_err() {
                            return Poll::Ready(Err(this.comm.not_written(this.partner, this.tag)));
                        }
                        return Poll::Ready(this.combined(loan, theirs));
                    }
                },
                ExchangeState::Pipelined(pipeline) => return pipeline.as_mut().poll(cx),
                ExchangeState::Start(_) => {
                    let ExchangeState::Start(vector) = this.take_state() else { unreachable!("matched above") };
                    match this.start(vector) {
                        Ok(next) => this.state = next,
                        Err(error) => return Poll::Ready(Err(error)),
                    }
                }
                ExchangeState::Done => panic!("an exchange polled after it completed"),
            }
        }
    }
}
