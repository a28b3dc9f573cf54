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
//! deletes its registration only while it is its own session's node: on
//! its own after reading it, or with its last result, in a transaction that
//! applies only while its assignment is the one it read
//! ([`crate::completion::deregistering`]).
//!
//! This file holds the worker's main loop: joining, waiting for an
//! assignment and reading it. Its parts live beside it: `run_handler`
//! (the task running while the session is heard), `finish` (the
//! completion and the releases), `registration` (the registration's
//! looks and deletion) and `error` ([`WorkerError`]).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::{Pin, pin};

use futures::future::join3;
use zkdist_coord::retry::until_known;
use zkdist_coord::{
    AddWatchMode, AssignmentView, Coordinator, CreateMode, Event, EventStream, Layout, Observer,
    SessionState, TaskId, Watch, WatchKind, WorkerId, ZkError, path, registration_data,
};

use crate::decision::WorkerDecision;
use crate::handler::TaskHandler;
use crate::state::WorkerState;
use crate::stop_timeout::{Bounded, STOP_TIMEOUT_MS, StopClock};

mod error;
mod finish;
mod registration;
mod run_handler;

pub use error::WorkerError;
use run_handler::{HandlerEnd, TaskEnd};

/// What reading a task's node came to.
enum TaskRead {
    Payload(Vec<u8>),
    /// The node is gone: its client deleted it.
    Missing,
    /// Its ACL lets only its owner read it (`NoAuth`): the refusal is the
    /// task's, not the session's, and every worker would meet the same.
    Refused(ZkError),
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

        // Deleted already with the last task's result (see `complete`).
        if !state.registered() {
            return Ok(());
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

/// Logs a decision and hands it to the observer, if any.
fn note(observer: Option<&Observer<WorkerDecision>>, decision: WorkerDecision) {
    tracing::info!(target: "zkdist::worker", "{decision}");
    if let Some(observer) = observer {
        observer.observe(decision);
    }
}
