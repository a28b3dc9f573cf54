//! Running the handler on the task in hand, while the worker goes on
//! hearing its session: a deletion of the assignment or a reconnection
//! makes it look at the node, and the session's end, a disconnection past
//! its grace, the registration's loss or a stop that outlasts its timeout
//! end the run.

use std::pin::{Pin, pin};
use std::time::Duration;

use futures::future::{FusedFuture, FutureExt};
use tokio::time::Instant;
use zkdist_coord::{Coordinator, Event, SessionState, Stat, Watch, ZkResult};

use super::{Worker, WorkerError, gave_up_after_stop, is_deletion_of, note, take_ready};
use crate::catch_unwind::CatchUnwind;
use crate::handler::TaskHandler;
use crate::state::{HandlerOutcome, WorkerState};
use crate::stop_timeout;

/// How long a worker waits before it looks again at its assignment node
/// after a look failed (see [`Worker::run_handler`]).
const LOOK_RETRY_DELAY_MS: u64 = 200;

/// How a run of the handler ended.
pub(super) enum HandlerEnd {
    Ran(HandlerOutcome),
    /// The master took the assignment back: the handler was stopped.
    Revoked,
    /// The registration was deleted: the handler was stopped.
    RegistrationLost,
}

/// How the task in hand ended, and, if the worker was told to stop by
/// then, the time the requests after it must be done by (see
/// [`stop_timeout::after_task_deadline`]).
pub(super) struct TaskEnd {
    pub(super) end: HandlerEnd,
    pub(super) stop_deadline: Option<Instant>,
}

impl TaskEnd {
    /// `end`, reached when the handler finished (`finished_at`) or, if it
    /// did not, now; a stop heard at `stop_heard_at` gives what follows its
    /// deadline.
    fn new(
        end: HandlerEnd,
        finished_at: Option<Instant>,
        stop_heard_at: Option<Instant>,
    ) -> TaskEnd {
        let ended_at = finished_at.unwrap_or_else(Instant::now);
        TaskEnd {
            end,
            stop_deadline: stop_heard_at
                .map(|heard_at| stop_timeout::after_task_deadline(ended_at, heard_at)),
        }
    }
}

impl<C: Coordinator, H: TaskHandler> Worker<C, H> {
    /// Runs the handler to the end, unless the session ends first: then
    /// the handler's future is dropped (the task is abandoned) and the
    /// session's end is returned. So it is, with [`WorkerError::CutOff`],
    /// when the session stays disconnected past its grace while the
    /// handler runs. Once the handler finished and a stop was asked for,
    /// what its result still waits for (the link, a look) gets the stop's
    /// timeout from the later of the two, as the writes after a task do
    /// (in all: the returned [`TaskEnd`] carries the deadline on to them);
    /// past it the session is given up. When the master takes the
    /// assignment back meanwhile, the handler's future is dropped too
    /// ([`HandlerEnd::Revoked`]): the master gives the task to another
    /// worker, and running it on here
    /// would run it twice at once; so it is when the registration is
    /// deleted ([`HandlerEnd::RegistrationLost`]), after which the master
    /// takes the assignment back. A reconnection within the grace is
    /// followed by a look at the assignment node, as a deletion is; a
    /// handler that finishes while a look is out, or while disconnected,
    /// waits for a look's verdict after the reconnection before its result
    /// is returned, and events already delivered are acted on first. A
    /// shutdown asked for meanwhile is noted and honoured after the task.
    /// Events taken early, after the assignment was read, and those that
    /// came during the reads are acted on before the handler is first
    /// polled; other events are kept for the main loop.
    pub(super) async fn run_handler<S: Future<Output = ()>>(
        &mut self,
        state: &mut WorkerState,
        payload: &[u8],
        assignment: &str,
        registration: &str,
        shutdown: &mut Pin<&mut S>,
    ) -> Result<TaskEnd, WorkerError> {
        // When the stop was heard (at the latest: a stop heard during the
        // reads counts from here, before the task's end), and when the
        // handler finished: what is left after both gets the stop's timeout.
        let mut stop_heard_at: Option<Instant> = state.stop_requested().then(Instant::now);
        let mut finished_at: Option<Instant> = None;
        // Events that came during the reads are acted on before the
        // handler's first poll: one may end the task before it starts.
        self.take_ready_events();
        // The handler is called inside the guarded future, at its first
        // poll: a handler may do work (decode the payload, say) before it
        // returns its future, and a panic there must fail the task as one
        // inside the future does, not unwind through the worker.
        let handler = &self.handler;
        let mut run = pin!(CatchUnwind::new(async move { handler.run(payload).await }));
        // The reads that brought the task in were answered, so the session
        // was connected then; a `Disconnected` since starts the grace, and
        // only a `Connected` ends it. (One among the early events may be
        // older than the reads' answers: the grace then starts late, and
        // its `Connected` brings a look the node did not need.)
        let grace_ms = self.zk.disconnected_grace_ms();
        let mut give_up_at: Option<Instant> = None;
        // A deletion of the assignment node heard meanwhile, or a
        // reconnection (after which no event of what was missed comes), is
        // looked into (an `exists` of the node) without holding the handler
        // or the deadline; a look that failed is made again after a pause.
        let mut look = pin!(futures::future::Fuse::terminated());
        let mut look_again_at: Option<Instant> = None;
        // A handler that finishes while a look is out, or while
        // disconnected, waits for a look's verdict: the completion checks
        // the node's version only, and a node deleted and made anew (the
        // deployment's root re-made, and this id taken by a new worker)
        // has the same version.
        let mut finished: Option<HandlerOutcome> = None;
        let mut early_events = std::mem::take(&mut self.unhandled_events);
        loop {
            let stop_requested = state.stop_requested();
            debug_assert_eq!(
                stop_requested,
                stop_heard_at.is_some(),
                "the stop's time is kept"
            );
            let write_deadline = finished_at
                .zip(stop_heard_at)
                .map(|(finished_at, heard_at)| {
                    stop_timeout::after_task_deadline(finished_at, heard_at)
                });
            let looking = !look.is_terminated() || look_again_at.is_some();
            // A finished handler's result goes to the completion only when
            // nothing says the node read may have changed unseen: no look
            // out, connected since the last one was started (a completion
            // queued while disconnected would go out unlooked-at on the
            // reconnection), and no event left to act on, including one
            // delivered already but not read (a `Disconnected` ready at the
            // same poll as the look's verdict, which the select took first).
            if finished.is_some() && !looking && give_up_at.is_none() {
                take_ready(&mut self.events, &mut early_events);
                if early_events.is_empty() {
                    let outcome = finished.take().expect("checked just above");
                    return Ok(TaskEnd::new(
                        HandlerEnd::Ran(outcome),
                        finished_at,
                        stop_heard_at,
                    ));
                }
            }
            let event = match early_events.pop_front() {
                Some(event) => Some(event),
                None => tokio::select! {
                    biased;
                    outcome = &mut run, if finished.is_none() => {
                        finished_at = Some(Instant::now());
                        finished = Some(match outcome {
                            Ok(output) => HandlerOutcome::Finished(output),
                            Err(message) => HandlerOutcome::Panicked(message),
                        });
                        // Events that came with the result are acted on
                        // before it is written (and before a look's verdict
                        // ready at the same time): the handler is polled
                        // first, and one of them may say the node changed.
                        take_ready(&mut self.events, &mut early_events);
                        continue;
                    }
                    () = shutdown.as_mut(), if !stop_requested => {
                        stop_heard_at = Some(Instant::now());
                        let decision = state.on_stop_requested().expect("first stop request");
                        note(self.observer.as_ref(), decision);
                        continue;
                    }
                    found = &mut look, if !look.is_terminated() => {
                        match look_shows_held(state, found) {
                            // Still the node read: a finished handler's
                            // result goes out at the top of the loop, if
                            // nothing came meanwhile.
                            Ok(true) => {}
                            Ok(false) => {
                                let outcome = if finished.is_some() {
                                    "as its task finished: the result is left unwritten"
                                } else {
                                    "while its task ran: stopping it"
                                };
                                tracing::warn!(
                                    target: "zkdist::worker",
                                    worker = %state.worker(),
                                    "the assignment node is gone or was made anew (taken back, or the root re-made) {outcome}"
                                );
                                return Ok(TaskEnd::new(HandlerEnd::Revoked, finished_at, stop_heard_at));
                            }
                            Err(error) => match error.session_end() {
                                Some(ended) => {
                                    return Err(WorkerError::SessionEnded { state: Some(ended) });
                                }
                                // A finished handler waits on the look
                                // alone, so one that cannot be answered
                                // ends the session's work (the role starts
                                // a new one) rather than stall it for ever.
                                None if finished.is_some() && !error.is_outcome_unknown() => {
                                    return Err(WorkerError::request(
                                        format!("reading {assignment}"),
                                        error,
                                    ));
                                }
                                // Lost with the connection, throttled,
                                // moved: the question stands.
                                None => {
                                    look_again_at = Some(
                                        Instant::now() + Duration::from_millis(LOOK_RETRY_DELAY_MS),
                                    );
                                }
                            },
                        }
                        continue;
                    }
                    () = sleep_until_set(look_again_at), if look_again_at.is_some() => {
                        look_again_at = None;
                        look.set(look_at(&self.zk, assignment).fuse());
                        continue;
                    }
                    // A running handler is cut off. A finished one runs
                    // nothing, and its result waits for the reconnection
                    // and a look, however long the outage (the session's
                    // end is reported only when the link is back), unless
                    // the worker was told to stop (the arm below).
                    () = sleep_until_set(give_up_at), if give_up_at.is_some() && finished.is_none() => {
                        tracing::warn!(
                            target: "zkdist::worker",
                            worker = %state.worker(),
                            grace_ms,
                            "disconnected for the session's grace while a task runs: stopping it"
                        );
                        return Err(WorkerError::CutOff { grace_ms });
                    }
                    // A stop does not wait for an ensemble out of reach:
                    // a finished handler's result, waiting for the link or
                    // a look's verdict, gets the stop's timeout from the
                    // later of the task's end and the stop, as its writes
                    // would (`Worker::work` carries the same deadline on
                    // to them).
                    () = sleep_until_set(write_deadline), if write_deadline.is_some() => {
                        return Err(gave_up_after_stop(
                            Some(state.worker()),
                            "waiting for the link or a look at its assignment to write its task's result",
                        ));
                    }
                    event = self.events.recv() => event,
                },
            };
            match event {
                None => return Err(WorkerError::SessionEnded { state: None }),
                Some(Event::Session(
                    ended @ (SessionState::Expired
                    | SessionState::Closed
                    | SessionState::AuthFailed),
                )) => return Err(WorkerError::SessionEnded { state: Some(ended) }),
                // The worker deletes its assignment only once the task is
                // done, so a deletion now is someone else's (the master's),
                // or an older node's whose event comes late: after a
                // reconnection, a watch re-sent fires what it missed, while
                // the worker may have read the new node already. A look at
                // the node tells.
                Some(event) if is_deletion_of(&event, assignment) => {
                    look_again_at = None;
                    look.set(look_at(&self.zk, assignment).fuse());
                }
                Some(event) if is_deletion_of(&event, registration) => {
                    return Ok(TaskEnd::new(
                        HandlerEnd::RegistrationLost,
                        finished_at,
                        stop_heard_at,
                    ));
                }
                Some(other) => {
                    match other {
                        Event::Session(SessionState::Disconnected) => {
                            give_up_at.get_or_insert_with(|| {
                                Instant::now() + Duration::from_millis(grace_ms)
                            });
                        }
                        // Back within the grace: what changed meanwhile
                        // came without events, so the node is looked at.
                        Event::Session(SessionState::Connected) if give_up_at.take().is_some() => {
                            look_again_at = None;
                            look.set(look_at(&self.zk, assignment).fuse());
                        }
                        _ => {}
                    }
                    // The main loop acts on them too once the task is done
                    // (a reconnection makes it look for an assignment it
                    // may have missed).
                    self.unhandled_events.push_back(other);
                }
            }
        }
    }
}

/// Whether a look at the assignment node (`found`, an `exists`) shows the
/// node read for the task in hand still there (see
/// [`WorkerState::still_holds`]).
fn look_shows_held(state: &WorkerState, found: ZkResult<Option<Stat>>) -> ZkResult<bool> {
    found.map(|now| state.still_holds(now.as_ref()))
}

/// Looks at the node at `path` (an `exists`), after a `sync`: after a
/// reconnection the session may talk to a server that has not applied
/// what changed while it was away, and would show a node deleted and made
/// anew as the old one (same version; only the leader's `czxid` tells).
/// A look after a deletion's event would not need it, but one that failed
/// and is made again may be on another server by then: every look syncs.
async fn look_at<C: Coordinator>(zk: &C, path: &str) -> ZkResult<Option<Stat>> {
    zk.sync(path).await?;
    zk.exists(path, Watch::No).await
}

/// Sleeps until `at`; `None` never comes (the caller disables the branch).
async fn sleep_until_set(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
