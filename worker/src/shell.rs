//! The worker's async shell: one task, one session, one assignment at a
//! time. It does the I/O of each step and lets [`WorkerState`] check the
//! order and name the outcome.
//!
//! The assignment node is watched by one persistent watch, left once
//! before registering and kept for the session's life: every creation of
//! the node is announced, so a task costs the worker three requests (read
//! the assignment, read the task, complete) and no re-arming. A one-shot
//! watch would need an `exists` after every completion, and an assignment
//! made before that `exists` would come unannounced.
//!
//! Connection loss: reads are sent again ([`until_known`]); a write is sent
//! again only once a read has shown it was not applied. Session end (an
//! `Expired` or `Closed` event, or a `SessionExpired` reply): the worker
//! stops at once, dropping the handler's future if one runs, and returns
//! [`WorkerError::SessionEnded`]; [`crate::run_worker_role`] then starts over
//! on a new session. Disconnection while a task runs: once the session's
//! grace ([`Coordinator::disconnected_grace_ms`]) passes without a
//! reconnection, the server may expire the session at any moment and the
//! master give the task to another worker, so the worker drops the
//! handler's future then, before that can happen, and gives the session up
//! ([`WorkerError::CutOff`]). Revocation while a task runs: a deletion of
//! the assignment node, or a reconnection (which brings no event of what
//! was missed), makes the worker look at the node; once the look shows the
//! node read for the task gone, or made anew, the handler's future is
//! dropped too (the master gives the task to another worker), and a
//! handler that finished meanwhile has its result left unwritten. The
//! completion checks the node's version only, which a node made anew
//! shares, so it is never sent while a look is out, nor for a handler
//! that finished while disconnected before the look that follows the
//! reconnection (a handler that finished runs nothing, so the grace does
//! not cut it off); a look syncs first, as a server behind the leader
//! would show the old node. (A node made anew after the last look, before
//! the completion is applied, is beyond what the completion can check.)
//! The master revokes only from a worker whose registration is gone, so
//! the worker then returns [`WorkerError::Deregistered`] and joins again
//! under a new id.
//!
//! Registration lost while the session lives (deleted by hand, or with the
//! deployment's root): a second persistent watch, on the registration,
//! announces it. The master holds such a worker for gone and reclaims its
//! assignment, so the worker stops its task unwritten, if it runs one, and
//! joins again under a new id ([`WorkerError::Deregistered`]); idle, it
//! would otherwise wait for ever for work the master never sends. After a
//! reconnection, which persistent watches do not report missed events
//! across, it reads the registration instead, and takes it as lost if its
//! owner is another session: a deleted root restarts the ids, and a new
//! worker may hold this one's. For the same reason a worker told to stop
//! deletes its registration only while it is its own session's node.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Duration;

use futures::future::{FusedFuture, FutureExt, join3};
use tokio::time::Instant;
use zkdist_coord::retry::until_known;
use zkdist_coord::{
    AddWatchMode, AssignmentView, Coordinator, CreateMode, Event, EventStream, Layout, Observer,
    SessionState, Stat, TaskId, TaskResult, Watch, WatchKind, WorkerId, ZkError, ZkResult, path,
    registration_data,
};

use crate::catch_unwind::CatchUnwind;
use crate::completion::{
    CompletionReply, ReleaseReply, completion_ops, judge_completion, judge_release,
    oversized_completion,
};
use crate::decision::WorkerDecision;
use crate::handler::TaskHandler;
use crate::state::{
    AssignmentAfterLoss, CompletionReadBack, HandlerOutcome, ResultWrite, WorkerState,
};
use crate::stop_timeout::{self, Bounded, STOP_TIMEOUT_MS, StopClock};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot lay out the zkdist tree under {root}: {error}")]
    Layout { root: String, error: ZkError },
    #[error("the worker's session ended ({})", SessionState::describe_end(*state))]
    SessionEnded {
        /// `None` when the event stream closed without saying why, or when
        /// the worker, told to stop, gave the session up: the ensemble did
        /// not answer within [`STOP_TIMEOUT_MS`].
        state: Option<SessionState>,
    },
    #[error(
        "the session stayed disconnected for {grace_ms} ms while a task ran, after which its \
         server may expire it and the master give the task to another worker: the task was \
         stopped and the session given up"
    )]
    CutOff { grace_ms: u64 },
    #[error(
        "the worker's registration {registration} was deleted while its session lived (or is \
         now another session's), so the master holds it for gone and reclaims its task: a task \
         in hand was stopped without a result, and the worker joins again as a new one"
    )]
    Deregistered { registration: String },
    #[error("cannot open a session: {error}")]
    Connect { error: ZkError },
    #[error("{what} failed: {error}")]
    Request { what: String, error: ZkError },
}

impl WorkerError {
    fn request(what: impl Into<String>, error: ZkError) -> WorkerError {
        match error.session_end() {
            Some(state) => WorkerError::SessionEnded { state: Some(state) },
            None => WorkerError::Request {
                what: what.into(),
                error,
            },
        }
    }

    /// True when a new session may succeed where this one failed: the
    /// session ended (unless the server refused its credentials), or a
    /// request failed in a way [`ZkError::is_transient`] calls transient
    /// (e.g. `SessionMoved`). False for what a new session would meet
    /// again (failed authentication, no authorisation, a tree that cannot
    /// be laid out), which [`crate::run_worker_role`] reports instead of
    /// looping on.
    pub fn is_transient(&self) -> bool {
        match self {
            WorkerError::SessionEnded { state } => *state != Some(SessionState::AuthFailed),
            WorkerError::CutOff { .. } | WorkerError::Deregistered { .. } => true,
            WorkerError::Layout { error, .. }
            | WorkerError::Connect { error }
            | WorkerError::Request { error, .. } => error.is_transient(),
        }
    }
}

/// What reading a task's node came to.
enum TaskRead {
    Payload(Vec<u8>),
    /// The node is gone: its client deleted it.
    Missing,
    /// Its ACL lets only its owner read it (`NoAuth`): the refusal is the
    /// task's, not the session's, and every worker would meet the same.
    Refused(ZkError),
}

/// How long a worker waits before it looks again at its assignment node
/// after a look failed (see [`Worker::run_handler`]).
const LOOK_RETRY_DELAY_MS: u64 = 200;

/// How a run of the handler ended.
enum HandlerEnd {
    Ran(HandlerOutcome),
    /// The master took the assignment back: the handler was stopped.
    Revoked,
    /// The registration was deleted: the handler was stopped.
    RegistrationLost,
}

/// How the task in hand ended, and, if the worker was told to stop by
/// then, the time the requests after it must be done by (see
/// [`stop_timeout::after_task_deadline`]).
struct TaskEnd {
    end: HandlerEnd,
    stop_deadline: Option<Instant>,
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

/// A worker on one session. Build it with [`Worker::new`], optionally attach
/// an observer, then [`Worker::run_until`].
pub struct Worker<C: Coordinator, H: TaskHandler> {
    zk: C,
    events: EventStream,
    /// Events read while a task ran, or taken early after an assignment
    /// was read, not yet acted on: they are taken before the stream is read
    /// again, so none is lost.
    unhandled_events: VecDeque<Event>,
    layout: Layout,
    handler: H,
    observer: Option<Observer<WorkerDecision>>,
}

impl<C: Coordinator, H: TaskHandler> Worker<C, H> {
    pub fn new(zk: C, events: EventStream, layout: Layout, handler: H) -> Worker<C, H> {
        Worker {
            zk,
            events,
            unhandled_events: VecDeque::new(),
            layout,
            handler,
            observer: None,
        }
    }

    /// Calls `observer` with every decision, in order, as it is made, on
    /// the worker's task; the log has each one too.
    pub fn with_observer(mut self, observer: impl Into<Observer<WorkerDecision>>) -> Worker<C, H> {
        self.observer = Some(observer.into());
        self
    }

    pub(crate) fn with_optional_observer(
        mut self,
        observer: Option<Observer<WorkerDecision>>,
    ) -> Worker<C, H> {
        self.observer = observer;
        self
    }

    /// Runs until the session ends.
    pub async fn run(self) -> Result<WorkerId, WorkerError> {
        self.run_until(std::future::pending()).await
    }

    /// Registers and works until `shutdown` completes: then it finishes the
    /// task in hand, takes no further assignment, deregisters and returns
    /// its id. A stop does not wait for an ensemble out of reach: the
    /// requests still to make get [`STOP_TIMEOUT_MS`] in all, those before
    /// the task in hand (reading it) from the stop, those after it (waiting
    /// for the link or a look to write its result, writing it,
    /// deregistering) from the later of its end and the stop, after which
    /// the worker returns [`WorkerError::SessionEnded`] instead: it gave
    /// the session up, and the registration goes with the session, as
    /// after a crash (a result it could not write is the next worker's to
    /// write). An assignment made before the master saw it leave is left
    /// alone: the master reclaims the assignment of a worker that left and
    /// gives the task to another, which running it here too would race. Told to stop before
    /// it registered, it leaves without registering. Creates the layout if
    /// it is missing. Does not close the session (whose id node goes with
    /// it).
    ///
    /// When the session ends first it returns [`WorkerError::SessionEnded`]
    /// at once, having abandoned the task in hand (decisions `TaskAbandoned`
    /// and `SessionLost`); so it does, returning [`WorkerError::CutOff`],
    /// when the session stays disconnected past its grace while the
    /// handler runs. `shutdown` is polled until it completes once,
    /// never after.
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<WorkerId, WorkerError> {
        let mut shutdown = pin!(shutdown);
        // One clock for the session's requests: see `StopClock`.
        let mut clock = StopClock::default();
        let laid_out = clock
            .run(
                until_known(|| self.layout.ensure_layout(&self.zk)),
                &mut shutdown,
                // No id yet to note it under: noted once there is one.
                || {},
            )
            .await;
        let Bounded::Ended(laid_out) = laid_out else {
            return Err(gave_up_after_stop(None, "laying out the tree"));
        };
        laid_out.map_err(|error| match error.session_end() {
            Some(state) => WorkerError::SessionEnded { state: Some(state) },
            None => WorkerError::Layout {
                root: self.layout.root().to_owned(),
                error,
            },
        })?;

        // A sequential node gives a unique id; the master does not watch
        // this directory, so it hears of the worker only when it registers.
        // A create lost to a connection loss is simply made again: an id
        // node it may have left is ephemeral and goes with the session.
        let prefix = self.layout.worker_id_prefix();
        // Taken even after a stop heard meanwhile: `run_until` returns the
        // id it joined under. The node goes with the session.
        let id_path = clock
            .run(
                until_known(|| {
                    self.zk
                        .create(&prefix, b"", CreateMode::EphemeralSequential)
                }),
                &mut shutdown,
                || {},
            )
            .await;
        let Bounded::Ended(id_path) = id_path else {
            return Err(gave_up_after_stop(None, "taking an id"));
        };
        let id_path =
            id_path.map_err(|error| WorkerError::request(format!("creating {prefix}"), error))?;
        let worker =
            WorkerId::parse(path::name(&id_path)).expect("the server names sequential nodes");
        let mut state = WorkerState::new(worker.clone());
        if clock.stop_heard() {
            self.note_stop(&mut state);
        }
        let outcome = self.serve(&mut state, &mut clock, &mut shutdown).await;
        if let Err(WorkerError::SessionEnded { .. } | WorkerError::CutOff { .. }) = &outcome {
            for decision in state.on_session_lost() {
                self.note(decision);
            }
        }
        outcome.map(|()| worker)
    }

    /// Everything after the id: arm, register, work, and on shutdown
    /// deregister.
    async fn serve<S: Future<Output = ()>>(
        &mut self,
        state: &mut WorkerState,
        clock: &mut StopClock,
        shutdown: &mut Pin<&mut S>,
    ) -> Result<(), WorkerError> {
        let worker = state.worker().clone();
        let assignment = self.layout.assignment(&worker);
        let registration = self.layout.worker(&worker);
        if state.stop_requested() {
            // Told to stop while it was joining: nothing to leave yet.
            return Ok(());
        }

        // Arm first, register second (see `WorkerState`).
        let registering = async {
            let assignment_waiting = self.arm(&assignment, &registration).await?;
            state.on_watch_armed();
            // Sent again after a connection loss; `NodeExists` then means
            // the first create was applied (the id is this session's
            // alone). The data says which assignment formats this worker
            // reads.
            let features = registration_data();
            match until_known(|| {
                self.zk
                    .create(&registration, features, CreateMode::Ephemeral)
            })
            .await
            {
                Ok(_) | Err(ZkError::NodeExists { .. }) => Ok(assignment_waiting),
                Err(error) => Err(WorkerError::request(
                    format!("creating {registration}"),
                    error,
                )),
            }
        };
        let registered = clock
            .run(registering, shutdown, self.note_stop_at_once(&worker))
            .await;
        let mut assignment_waiting = self.settle(state, clock, registered, "registering")?;
        self.note(state.on_registered());

        let mut disconnected = false;
        loop {
            // Stop first: an assignment waiting now is the master's to
            // reclaim once it sees this worker leave, so tasks that keep
            // coming cannot hold the shutdown back.
            if state.stop_requested() {
                break;
            }
            // Events heard already come before an assignment is read: one
            // may say the registration is gone, and the assignment then is
            // not this worker's to run.
            let event = match self.unhandled_events.pop_front() {
                Some(event) => Some(Some(event)),
                None if assignment_waiting => {
                    self.work(state, clock, &worker, &assignment, &registration, shutdown)
                        .await?;
                    // Nothing to re-arm: the persistent watch announces the
                    // next assignment, whenever the master makes it.
                    assignment_waiting = false;
                    continue;
                }
                None => tokio::select! {
                    biased;
                    () = shutdown.as_mut() => None,
                    event = self.events.recv() => Some(event),
                },
            };
            let Some(event) = event else {
                let decision = state.on_stop_requested().expect("shutdown completes once");
                self.note(decision);
                continue;
            };
            match event {
                None => return Err(WorkerError::SessionEnded { state: None }),
                // A creation (or, should one ever come, a data change) of
                // the assignment node: look at it. A deletion never brings
                // an assignment (it is mostly this worker's own completion),
                // and the watch stays, so it needs no read.
                Some(Event::Watch(watch)) if watch.path == assignment => {
                    assignment_waiting = watch.kind != WatchKind::NodeDeleted;
                }
                // The registration's creation is this worker's own; a data
                // change means nothing to it.
                Some(Event::Watch(watch)) => {
                    debug_assert_eq!(watch.path, registration, "the session watches two nodes");
                    if watch.kind == WatchKind::NodeDeleted {
                        return Err(self.registration_lost(state, &registration));
                    }
                }
                Some(Event::Session(SessionState::Disconnected)) => disconnected = true,
                // Back after a disconnection: events may have been missed
                // while away, so read rather than wait: the registration
                // first, then the assignment.
                Some(Event::Session(SessionState::Connected)) => {
                    if std::mem::take(&mut disconnected) {
                        let checked = clock
                            .run(
                                self.check_registration(state),
                                shutdown,
                                self.note_stop_at_once(&worker),
                            )
                            .await;
                        self.settle(state, clock, checked, "reading its registration")?;
                        assignment_waiting = true;
                    }
                }
                Some(Event::Session(
                    ended @ (SessionState::Expired
                    | SessionState::Closed
                    | SessionState::AuthFailed),
                )) => return Err(WorkerError::SessionEnded { state: Some(ended) }),
            }
        }

        // Heard in the idle loop, the stop starts the clock now; heard
        // before, the task's end started it.
        clock.heard_elsewhere();
        let deleted = clock
            .run(
                async {
                    self.deregister(&registration).await.map_err(|error| {
                        WorkerError::request(
                            format!("deregistering (reading, then deleting) {registration}"),
                            error,
                        )
                    })
                },
                shutdown,
                || unreachable!("the stop was heard before the deregistration"),
            )
            .await;
        self.settle(state, clock, deleted, "deleting its registration")?;
        self.note(state.on_deregistered());
        // Nothing more: an assignment the master made before it saw the
        // worker go is its to reclaim and re-queue. Running it here would
        // let two live workers run one task at once.
        Ok(())
    }

    /// Leaves the persistent watches on the assignment node and on the
    /// registration (not made yet) and, in the same round trip, looks
    /// whether the assignment node is there; returns whether it is.
    ///
    /// The requests go out back to back (`join3` polls, and so sends, the
    /// watches first; one session's requests are applied in order), so the
    /// look sees the tree after the watch was set: an assignment is either
    /// seen by it or announced by the watch. None can exist yet (the id is
    /// new and the master assigns only to registered workers); looking
    /// costs no extra wait, and keeps the worker right if one did. The
    /// registration's watch is set before the node is made, so no deletion
    /// of it can come unannounced.
    async fn arm(&self, assignment: &str, registration: &str) -> Result<bool, WorkerError> {
        let watch = until_known(|| self.zk.add_watch(assignment, AddWatchMode::Persistent));
        let registration_watch =
            until_known(|| self.zk.add_watch(registration, AddWatchMode::Persistent));
        let look = until_known(|| self.zk.exists(assignment, Watch::No));
        let (watched, registration_watched, present) = join3(watch, registration_watch, look).await;
        watched.map_err(|error| WorkerError::request(format!("watching {assignment}"), error))?;
        registration_watched
            .map_err(|error| WorkerError::request(format!("watching {registration}"), error))?;
        present
            .map(|stat| stat.is_some())
            .map_err(|error| WorkerError::request(format!("reading {assignment}"), error))
    }

    /// Handles the assignment node if it exists: reads it and the task,
    /// runs the handler, then writes the result and deletes the assignment
    /// in one multi.
    async fn work<S: Future<Output = ()>>(
        &mut self,
        state: &mut WorkerState,
        clock: &mut StopClock,
        worker: &WorkerId,
        assignment: &str,
        registration: &str,
        shutdown: &mut Pin<&mut S>,
    ) -> Result<(), WorkerError> {
        assert!(
            self.unhandled_events.is_empty(),
            "events heard before an assignment is read are acted on first"
        );
        // The reads before the task, and the writes after it, are bounded
        // once a stop was asked for; the handler is not.
        // The stat tells which node and version this assignment is, which
        // the completion deletes and nothing else.
        let read = async {
            match until_known(|| self.zk.get_data(assignment, Watch::No)).await {
                Ok(read) => Ok(Some(read)),
                // The event was for an older change (e.g. our own delete).
                Err(ZkError::NoNode { .. }) => Ok(None),
                Err(error) => Err(WorkerError::request(format!("reading {assignment}"), error)),
            }
        };
        let read = clock
            .run(read, shutdown, self.note_stop_at_once(worker))
            .await;
        let Some((data, stat)) = self.settle(state, clock, read, "reading its assignment")? else {
            return Ok(());
        };
        // Every event of a change the read saw came before its reply. A
        // deletion of the registration among them ends this id before the
        // node read is taken for its own: after the deployment's root was
        // deleted, it may be one the master made for a new worker that
        // took this id. The other events are acted on first thing while the
        // task runs, or by the main loop.
        self.take_ready_events();
        if self
            .unhandled_events
            .iter()
            .any(|event| is_deletion_of(event, registration))
        {
            return Err(self.registration_lost(state, registration));
        }
        // A read that spanned a disconnection may have missed that
        // deletion: events to persistent watches are not replayed. The
        // registration is read back then, before the node is taken for
        // this id's.
        if self
            .unhandled_events
            .iter()
            .any(|event| matches!(event, Event::Session(SessionState::Connected)))
        {
            let checked = clock
                .run(
                    self.check_registration(state),
                    shutdown,
                    self.note_stop_at_once(worker),
                )
                .await;
            self.settle(state, clock, checked, "reading its registration")?;
        }
        let (view, decision) = state.on_assignment_read(&data, &stat);
        self.note(decision);
        let Some(AssignmentView { task, payload }) = view else {
            let released = clock
                .run(
                    self.release(state, assignment),
                    shutdown,
                    self.note_stop_at_once(worker),
                )
                .await;
            return self.settle(state, clock, released, "releasing its assignment");
        };
        // A payload the master put inline saves reading the task node. A
        // task its client deleted (cancelled) after the assignment was
        // made then still runs, as it would if the deletion came after a
        // read; the completion's result create finds it gone and nothing
        // is written. Only the read closed that window a little earlier.
        let payload = match payload {
            Some(inline) => Cow::Borrowed(inline),
            None => {
                let read_or_released = async {
                    match self.read_task(&task).await? {
                        TaskRead::Payload(read) => Ok(Some(read)),
                        TaskRead::Missing => {
                            self.note(state.on_task_missing());
                            self.release(state, assignment).await.map(|()| None)
                        }
                        TaskRead::Refused(error) => {
                            let why = format!("{task}'s payload cannot be read: {error}");
                            self.refuse(state, &task, assignment, why, error)
                                .await
                                .map(|()| None)
                        }
                    }
                };
                let read = clock
                    .run(read_or_released, shutdown, self.note_stop_at_once(worker))
                    .await;
                match self.settle(state, clock, read, "reading its task")? {
                    Some(read) => Cow::Owned(read),
                    None => return Ok(()),
                }
            }
        };
        let TaskEnd { end, stop_deadline } = self
            .run_handler(state, &payload, assignment, registration, shutdown)
            .await?;
        debug_assert_eq!(stop_deadline.is_some(), state.stop_requested());
        clock.after_task(stop_deadline);
        let written = async {
            match end {
                HandlerEnd::Ran(outcome) => {
                    let result = state.result_for(outcome);
                    self.complete(state, &task, assignment, result).await
                }
                HandlerEnd::Revoked => self.revoked(state).await,
                HandlerEnd::RegistrationLost => {
                    tracing::warn!(
                        target: "zkdist::worker",
                        worker = %state.worker(),
                        "the registration was deleted before the task's result was written: the task is stopped, or its result left unwritten"
                    );
                    Err(self.registration_lost(state, registration))
                }
            }
        };
        let written = clock
            .run(written, shutdown, self.note_stop_at_once(worker))
            .await;
        self.settle(state, clock, written, "writing its task's result")
    }

    /// Moves the events that have arrived, without waiting for more, to
    /// the unhandled ones, behind those already there.
    fn take_ready_events(&mut self) {
        take_ready(&mut self.events, &mut self.unhandled_events);
    }

    /// The master took the assignment back, however the worker learned it
    /// (while the task ran, or when completing or releasing): the worker
    /// wrote nothing and is idle, and looks whether it is still a worker.
    async fn revoked(&self, state: &mut WorkerState) -> Result<(), WorkerError> {
        self.note(state.on_assignment_revoked());
        self.check_registration(state).await
    }

    /// Reads the registration, when its watch may have missed a deletion:
    /// after the master took an assignment back (it does so only from a
    /// worker it holds for gone, whose registration was deleted with its
    /// session or while the session lived), and after a reconnection.
    /// Gone, or made anew by another session (a new worker that took this
    /// id after the root was deleted), it is lost: the worker is out of
    /// the pool for good (the master never gives work to an id it saw
    /// leave), and must join again under a new id rather than wait idle
    /// for ever. A zombie, whose session ended, hears so from this read.
    async fn check_registration(&self, state: &mut WorkerState) -> Result<(), WorkerError> {
        let registration = self.layout.worker(state.worker());
        match self.own_registration(&registration).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(self.registration_lost(state, &registration)),
            Err(error) => Err(WorkerError::request(
                format!("reading {registration}"),
                error,
            )),
        }
    }

    /// The stat of `registration` if it is this session's node; `None` if
    /// it is gone or another session's (after the deployment's root was
    /// deleted, a new worker may have taken this id). The read follows a
    /// `sync`: it is made after a reconnection, or before a delete, and a
    /// server behind the leader would show a node deleted and made anew
    /// by another session as this one's (same name, same version).
    async fn own_registration(&self, registration: &str) -> ZkResult<Option<Stat>> {
        until_known(|| self.zk.sync(registration)).await?;
        let stat = until_known(|| self.zk.exists(registration, Watch::No)).await?;
        Ok(stat.filter(|stat| stat.ephemeral_owner == self.zk.session_id().0))
    }

    /// Deletes the registration if it is still this session's node, and
    /// only then: a node of the same name made by another session (a new
    /// worker that took this id after the root was deleted) is that
    /// worker's, and deleting it would take a live worker out of the pool.
    /// The delete names the version read, and after a reply that leaves
    /// its outcome unknown the node is looked at again rather than the
    /// delete sent again: the node may have gone with it and been made
    /// anew since.
    async fn deregister(&self, registration: &str) -> ZkResult<()> {
        loop {
            let Some(stat) = self.own_registration(registration).await? else {
                tracing::debug!(
                    target: "zkdist::worker",
                    registration,
                    "the registration is gone or another session's already: nothing to delete"
                );
                return Ok(());
            };
            match self.zk.delete(registration, Some(stat.version)).await {
                Ok(()) | Err(ZkError::NoNode { .. }) => return Ok(()),
                // Its data changed since the look (no role of zkdist's
                // writes it; an operator may), or the delete's outcome is
                // unknown: look again. The look's own retries pause while
                // the connection is down.
                Err(ZkError::BadVersion { .. }) => {}
                Err(error) if error.is_outcome_unknown() => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// The registration is gone or another session's: notes it, and names
    /// the error that makes the role join again under a new id.
    fn registration_lost(&self, state: &mut WorkerState, registration: &str) -> WorkerError {
        self.note(state.on_registration_lost());
        WorkerError::Deregistered {
            registration: registration.to_owned(),
        }
    }

    /// The payload of `task`, what keeps it from being read, or an error
    /// of the session's.
    async fn read_task(&self, task: &TaskId) -> Result<TaskRead, WorkerError> {
        let task_path = self.layout.task(task);
        match until_known(|| self.zk.get_data(&task_path, Watch::No)).await {
            Ok((payload, _)) => Ok(TaskRead::Payload(payload)),
            Err(ZkError::NoNode { .. }) => Ok(TaskRead::Missing),
            Err(error @ ZkError::NoAuth { .. }) => Ok(TaskRead::Refused(error)),
            Err(error) => Err(WorkerError::request(format!("reading {task_path}"), error)),
        }
    }

    /// Leaves `task` without a result, for its client or an operator to
    /// deal with, and releases its assignment with a mark that keeps every
    /// master from trying it again and tells its waiters `why`.
    async fn refuse(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        assignment: &str,
        why: String,
        error: ZkError,
    ) -> Result<(), WorkerError> {
        tracing::error!(
            target: "zkdist::worker",
            "{why}; the task is left without a result and marked refused (run every role and \
             client with the same credentials, then delete {}: the next master tries it again)",
            self.layout.refused(task)
        );
        self.note(state.result_written(ResultWrite::Refused { error }));
        self.release_marked_refused(state, task, assignment, &TaskResult::failure(why))
            .await
    }

    /// Writes `result` and deletes the assignment, atomically, and only if
    /// the assignment is still the one read.
    async fn complete(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        assignment: &str,
        mut result: TaskResult,
    ) -> Result<(), WorkerError> {
        let held = state
            .held_assignment()
            .expect("a task is completed while its assignment is held");
        let result_path = self.layout.result(task);
        let mut result_bytes = result.encode();
        let mut ops = completion_ops(&result_path, &result_bytes, assignment, held.version);
        if let Some(failure) = oversized_completion(&ops) {
            result = failure;
            result_bytes = result.encode();
            ops = completion_ops(&result_path, &result_bytes, assignment, held.version);
            assert!(
                oversized_completion(&ops).is_none(),
                "a failure naming the sizes fits where the result did not"
            );
        }
        loop {
            let reply = self.zk.multi(ops.clone()).await;
            match judge_completion(&reply) {
                CompletionReply::Applied => {
                    self.note(state.result_written(ResultWrite::Written {
                        success: result.is_success(),
                    }));
                    self.note(state.on_assignment_released());
                    return Ok(());
                }
                CompletionReply::ResultAlreadyPresent => {
                    self.note(state.result_written(ResultWrite::AlreadyPresent));
                    return self.release(state, assignment).await;
                }
                CompletionReply::TaskMissing => {
                    self.note(state.result_written(ResultWrite::TaskMissing));
                    return self.release(state, assignment).await;
                }
                CompletionReply::ResultRefused(error) => {
                    let why = format!("{task}'s result cannot be written: {error}");
                    return self.refuse(state, task, assignment, why, error).await;
                }
                CompletionReply::AssignmentRevoked => return self.revoked(state).await,
                CompletionReply::OutcomeUnknown => {
                    let now = self.read_after_loss(assignment).await?;
                    match state.assignment_after_loss(now.as_ref()) {
                        AssignmentAfterLoss::StillHeld => {
                            // Not applied (applying deletes this node): the
                            // same multi again is safe.
                            self.note(
                                state.on_completion_read_back(CompletionReadBack::NotApplied),
                            );
                        }
                        AssignmentAfterLoss::Gone => {
                            return self
                                .recover_gone_assignment(state, task, &result_path, &result_bytes)
                                .await;
                        }
                    }
                }
                CompletionReply::Failed(error) => {
                    return Err(WorkerError::request(format!("completing {task}"), error));
                }
            }
        }
    }

    /// After a completion whose outcome was unknown, the assignment is
    /// gone: either the multi was applied, or the master revoked the
    /// assignment (and may have given the task to another worker). What is
    /// left tells as much as can be known, and no more:
    /// - a result other than this worker's: ours was never written (a
    ///   result is created once and goes only with its task): revoked;
    /// - no result but the task still there: ours was never written
    ///   either: revoked;
    /// - a result equal to this worker's: applied, or another worker wrote
    ///   the same bytes after a revocation; the task is finished either
    ///   way ([`CompletionReadBack::ResultPresent`]);
    /// - no task at all: cleaned up by its client after either
    ///   ([`CompletionReadBack::TaskGone`]).
    ///
    /// In every case nothing is left to write. The reads come after the
    /// `sync` of [`Worker::read_after_loss`], so they see the leader's
    /// state as of that sync.
    async fn recover_gone_assignment(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        result_path: &str,
        result_bytes: &[u8],
    ) -> Result<(), WorkerError> {
        let found = match until_known(|| self.zk.get_data(result_path, Watch::No)).await {
            Ok((data, _)) if data == result_bytes => Some(CompletionReadBack::ResultPresent),
            Ok(_) => None,
            Err(ZkError::NoNode { .. }) => {
                let task_path = self.layout.task(task);
                match until_known(|| self.zk.exists(&task_path, Watch::No)).await {
                    Ok(Some(_)) => None,
                    Ok(None) => Some(CompletionReadBack::TaskGone),
                    Err(error) => {
                        return Err(WorkerError::request(format!("reading {task_path}"), error));
                    }
                }
            }
            Err(error) => {
                return Err(WorkerError::request(
                    format!("reading {result_path}"),
                    error,
                ));
            }
        };
        match found {
            Some(found) => {
                self.note(state.on_completion_read_back(found));
                self.note(state.on_assignment_released());
            }
            None => return self.revoked(state).await,
        }
        Ok(())
    }

    /// Deletes the assignment alone (no result to write: a garbage
    /// assignment, a missing task, a result already present), at the
    /// version read.
    async fn release(&self, state: &mut WorkerState, assignment: &str) -> Result<(), WorkerError> {
        let held = state
            .held_assignment()
            .expect("an assignment is released while held");
        loop {
            let reply = self.zk.delete(assignment, Some(held.version)).await;
            match judge_release(&reply) {
                ReleaseReply::Released => {
                    self.note(state.on_assignment_released());
                    return Ok(());
                }
                ReleaseReply::Revoked => return self.revoked(state).await,
                ReleaseReply::OutcomeUnknown => {
                    if self.released_after_loss(state, assignment).await? {
                        return Ok(());
                    }
                }
                ReleaseReply::Failed(error) => {
                    return Err(WorkerError::request(
                        format!("deleting {assignment}"),
                        error,
                    ));
                }
            }
        }
    }

    /// Releases the assignment of a task whose node refused its result and,
    /// in the same `multi`, marks the task refused (`refused/<task>`, data
    /// `why` as an encoded failure). The multi is the completion's, with
    /// the mark in the result's place, and its replies read the same way.
    /// Only the release must happen: a mark that cannot be made (another
    /// worker made it first, or `refused/` is closed to this worker) leaves
    /// the release alone to do.
    async fn release_marked_refused(
        &self,
        state: &mut WorkerState,
        task: &TaskId,
        assignment: &str,
        why: &TaskResult,
    ) -> Result<(), WorkerError> {
        let held = state
            .held_assignment()
            .expect("an assignment is released while held");
        let mark = self.layout.refused(task);
        let ops = completion_ops(&mark, &why.encode(), assignment, held.version);
        assert!(
            oversized_completion(&ops).is_none(),
            "a failure fits where a result does, and the mark's path is shorter"
        );
        // The mark is a courtesy; the release is what must happen. Whatever
        // keeps the mark from being made (short of the session's end, which
        // is the shell's to report) leaves the release alone to do, as a
        // failure here would end this worker and then, the task given to
        // the next one, every worker in turn.
        let unmarked = |why: &dyn std::fmt::Display| {
            tracing::warn!(
                target: "zkdist::worker",
                "{task} cannot be marked refused at {mark} ({why}); released without the mark, \
                 so a new master will try it again"
            );
        };
        let mut refused_dir_made = false;
        loop {
            let reply = self.zk.multi(ops.clone()).await;
            match judge_completion(&reply) {
                CompletionReply::Applied => {
                    self.note(state.on_assignment_released());
                    return Ok(());
                }
                // `refused/` is missing: made when first needed.
                CompletionReply::TaskMissing if !refused_dir_made => {
                    let dir = self.layout.refused_dir();
                    match until_known(|| self.zk.create(&dir, b"", CreateMode::Persistent)).await {
                        Ok(_) | Err(ZkError::NodeExists { .. }) => refused_dir_made = true,
                        Err(error) if error.is_session_fatal() => {
                            return Err(WorkerError::request(format!("creating {dir}"), error));
                        }
                        Err(error) => {
                            unmarked(&format_args!("creating {dir}: {error}"));
                            return self.release(state, assignment).await;
                        }
                    }
                }
                // Another worker marked it first.
                CompletionReply::ResultAlreadyPresent => {
                    return self.release(state, assignment).await;
                }
                CompletionReply::TaskMissing => {
                    unmarked(&format_args!("{} is missing", self.layout.refused_dir()));
                    return self.release(state, assignment).await;
                }
                // Any refusal of the mark's create that is not the
                // session's.
                CompletionReply::ResultRefused(error) => {
                    unmarked(&error);
                    return self.release(state, assignment).await;
                }
                CompletionReply::AssignmentRevoked => return self.revoked(state).await,
                CompletionReply::OutcomeUnknown => {
                    if self.released_after_loss(state, assignment).await? {
                        return Ok(());
                    }
                }
                CompletionReply::Failed(error) => {
                    return Err(WorkerError::request(
                        format!("releasing {assignment} and marking {mark}"),
                        error,
                    ));
                }
            }
        }
    }

    /// After a release (alone, or with a refusal's mark) whose outcome was
    /// unknown: whether the assignment is gone. Deleted by this request or
    /// by the master, the worker is free either way, and nothing of its is
    /// left to write; otherwise the request was not applied, and the caller
    /// sends it again.
    async fn released_after_loss(
        &self,
        state: &mut WorkerState,
        assignment: &str,
    ) -> Result<bool, WorkerError> {
        let now = self.read_after_loss(assignment).await?;
        let gone = state.assignment_after_loss(now.as_ref()) == AssignmentAfterLoss::Gone;
        if gone {
            self.note(state.on_assignment_released());
        }
        Ok(gone)
    }

    /// Reads the assignment node's stat after a write to it had an unknown
    /// outcome. The `sync` first makes the server this session now talks to
    /// catch up with the leader, so a write that was applied shows.
    async fn read_after_loss(&self, assignment: &str) -> Result<Option<Stat>, WorkerError> {
        let read = async {
            until_known(|| self.zk.sync(assignment)).await?;
            until_known(|| self.zk.exists(assignment, Watch::No)).await
        };
        read.await
            .map_err(|error| WorkerError::request(format!("reading {assignment}"), error))
    }

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
    async fn run_handler<S: Future<Output = ()>>(
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

    fn note(&self, decision: WorkerDecision) {
        note(self.observer.as_ref(), decision);
    }

    /// Notes the stop, the first time it is heard.
    fn note_stop(&self, state: &mut WorkerState) {
        if let Some(decision) = state.on_stop_requested() {
            self.note(decision);
        }
    }

    /// What a stretch of requests calls when the stop comes while it runs:
    /// notes the stop at once. The stretch holds the state; [`Self::settle`]
    /// records the stop in it afterwards.
    fn note_stop_at_once<'a>(&'a self, worker: &'a WorkerId) -> impl FnOnce() + 'a {
        move || self.note(WorkerState::stop_decision(worker))
    }

    /// What a stretch of requests run under `clock` came to: records a stop
    /// the clock heard (noted as it came, by [`Self::note_stop_at_once`]), and
    /// gives the session up if the stretch outlasted the stop's timeout
    /// (`doing` names the stretch in the log).
    fn settle<T>(
        &self,
        state: &mut WorkerState,
        clock: &StopClock,
        bounded: Bounded<Result<T, WorkerError>>,
        doing: &str,
    ) -> Result<T, WorkerError> {
        if clock.stop_heard() {
            state.on_stop_noted();
        }
        match bounded {
            Bounded::Ended(ended) => ended,
            Bounded::TimedOut => Err(gave_up_after_stop(Some(state.worker()), doing)),
        }
    }
}

/// Logs that a worker told to stop gave its session up while `doing`
/// something the ensemble did not answer within [`STOP_TIMEOUT_MS`], and
/// returns the error that says so (the session counts as ended: the role
/// closes it, and does not start another).
fn gave_up_after_stop(worker: Option<&WorkerId>, doing: &str) -> WorkerError {
    let worker = worker.map_or_else(|| "(no id yet)".to_owned(), WorkerId::to_string);
    tracing::warn!(
        target: "zkdist::worker",
        %worker,
        timeout_ms = STOP_TIMEOUT_MS,
        "told to stop, the worker could not finish {doing} in time (the ensemble out of reach, most likely): giving the session up, which takes the registration with it"
    );
    WorkerError::SessionEnded { state: None }
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

/// Moves the events that have arrived on `events`, without waiting for
/// more, behind those in `into`. A free function, so that `run_handler`
/// can call it while its handler's future borrows the worker.
fn take_ready(events: &mut EventStream, into: &mut VecDeque<Event>) {
    while let Ok(event) = events.try_recv() {
        into.push_back(event);
    }
}

/// Whether `event` tells of the deletion of the node at `path`.
fn is_deletion_of(event: &Event, path: &str) -> bool {
    matches!(event, Event::Watch(watch) if watch.path == path && watch.kind == WatchKind::NodeDeleted)
}

/// Sleeps until `at`; `None` never comes (the caller disables the branch).
async fn sleep_until_set(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Logs a decision and hands it to the observer, if any.
fn note(observer: Option<&Observer<WorkerDecision>>, decision: WorkerDecision) {
    tracing::info!(target: "zkdist::worker", "{decision}");
    if let Some(observer) = observer {
        observer.observe(decision);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_a_new_session_may_fix_are_transient_and_no_others() {
        let request = |error| WorkerError::Request {
            what: "creating /zkdist/workers/worker-0000000001".into(),
            error,
        };
        let lost = ZkError::ConnectionLoss {
            reason: "cut".into(),
        };
        for transient in [
            WorkerError::SessionEnded {
                state: Some(SessionState::Expired),
            },
            WorkerError::SessionEnded {
                state: Some(SessionState::Closed),
            },
            WorkerError::SessionEnded { state: None },
            request(ZkError::SessionMoved),
            WorkerError::CutOff { grace_ms: 2_500 },
            WorkerError::Connect { error: lost },
        ] {
            assert!(transient.is_transient(), "{transient:?}");
        }
        for permanent in [
            WorkerError::SessionEnded {
                state: Some(SessionState::AuthFailed),
            },
            request(ZkError::NoAuth {
                path: "/zkdist/workers".into(),
            }),
            WorkerError::Layout {
                root: "/ephemeral/zkdist".into(),
                error: ZkError::NoChildrenForEphemerals {
                    path: "/ephemeral/zkdist".into(),
                },
            },
            WorkerError::Connect {
                error: ZkError::AuthFailed {
                    reason: "bad digest".into(),
                },
            },
        ] {
            assert!(!permanent.is_transient(), "{permanent:?}");
        }
    }

    #[test]
    fn a_request_ended_by_the_session_says_so() {
        assert_eq!(
            WorkerError::request("reading /a", ZkError::SessionExpired),
            WorkerError::SessionEnded {
                state: Some(SessionState::Expired)
            }
        );
        assert_eq!(
            WorkerError::request("reading /a", ZkError::SessionMoved),
            WorkerError::Request {
                what: "reading /a".into(),
                error: ZkError::SessionMoved
            }
        );
    }
}
