//! The worker's async shell: one task, one session, one assignment at a
//! time. It does the I/O of each step and lets [`WorkerState`] check the
//! order and name the outcome.

use std::future::Future;
use std::pin::{Pin, pin};

use tokio::sync::mpsc::UnboundedSender;
use zkdist_coord::{
    Coordinator, CreateMode, ErrorCode, Event, EventStream, Layout, SessionState, Watch, WorkerId,
    ZkError, path,
};

use crate::catch_unwind::CatchUnwind;
use crate::decision::WorkerDecision;
use crate::handler::TaskHandler;
use crate::state::{HandlerOutcome, ResultWrite, WorkerState};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot lay out the zkdist tree under {root}: {error}")]
    Layout { root: String, error: ZkError },
    #[error("the worker's session ended ({state:?})")]
    SessionEnded {
        /// `None` when the event stream closed without saying why.
        state: Option<SessionState>,
    },
    #[error("{what} failed: {error}")]
    Request { what: String, error: ZkError },
}

impl WorkerError {
    fn request(what: impl Into<String>, error: ZkError) -> WorkerError {
        let state = match error.code() {
            ErrorCode::SessionExpired => Some(SessionState::Expired),
            ErrorCode::SessionClosed => Some(SessionState::Closed),
            ErrorCode::AuthFailed => Some(SessionState::AuthFailed),
            _ => None,
        };
        match state {
            Some(state) => WorkerError::SessionEnded { state: Some(state) },
            None => WorkerError::Request {
                what: what.into(),
                error,
            },
        }
    }
}

/// A worker on one session. Build it with [`Worker::new`], optionally attach
/// an observer, then [`Worker::run_until`].
pub struct Worker<C: Coordinator, H: TaskHandler> {
    zk: C,
    events: EventStream,
    layout: Layout,
    handler: H,
    observer: Option<UnboundedSender<WorkerDecision>>,
}

impl<C: Coordinator, H: TaskHandler> Worker<C, H> {
    pub fn new(zk: C, events: EventStream, layout: Layout, handler: H) -> Worker<C, H> {
        Worker {
            zk,
            events,
            layout,
            handler,
            observer: None,
        }
    }

    /// Sends every decision, in order, to `observer` as well as to the log.
    pub fn with_observer(mut self, observer: UnboundedSender<WorkerDecision>) -> Worker<C, H> {
        self.observer = Some(observer);
        self
    }

    /// Runs until the session ends.
    pub async fn run(self) -> Result<WorkerId, WorkerError> {
        self.run_until(std::future::pending()).await
    }

    /// Registers and works until `shutdown` completes: then it finishes the
    /// task in hand, deregisters, also runs an assignment that was made
    /// before the master saw it leave, and returns its id. Creates the
    /// layout if it is missing. Does not close the session (whose id node
    /// goes with it).
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<WorkerId, WorkerError> {
        let mut shutdown = pin!(shutdown);
        self.layout
            .ensure_layout(&self.zk)
            .await
            .map_err(|error| WorkerError::Layout {
                root: self.layout.root().to_owned(),
                error,
            })?;

        // A sequential node gives a unique id; the master does not watch
        // this directory, so it hears of the worker only when it registers.
        let prefix = self.layout.worker_id_prefix();
        let id_path = self
            .zk
            .create(&prefix, b"", CreateMode::EphemeralSequential)
            .await
            .map_err(|error| WorkerError::request(format!("creating {prefix}"), error))?;
        let worker =
            WorkerId::parse(path::name(&id_path)).expect("the server names sequential nodes");
        let mut state = WorkerState::new(worker.clone());
        let assignment = self.layout.assignment(&worker);

        // Arm first, register second (see `WorkerState`).
        let mut assignment_waiting = self.arm(&assignment).await?;
        state.on_watch_armed();
        let registration = self.layout.worker(&worker);
        self.zk
            .create(&registration, b"", CreateMode::Ephemeral)
            .await
            .map_err(|error| WorkerError::request(format!("creating {registration}"), error))?;
        self.note(state.on_registered());

        let mut disconnected = false;
        loop {
            if assignment_waiting {
                self.work(&mut state, &assignment, &mut shutdown).await?;
                // Re-arm. An assignment already there gets no NodeCreated
                // event (the watch is set on an existing node): take it now.
                assignment_waiting = self.arm(&assignment).await?;
                continue;
            }
            if state.stop_requested() {
                break;
            }
            let event = tokio::select! {
                biased;
                () = shutdown.as_mut() => None,
                event = self.events.recv() => Some(event),
            };
            let Some(event) = event else {
                let decision = state.on_stop_requested().expect("shutdown completes once");
                self.note(decision);
                continue;
            };
            match event {
                None => return Err(WorkerError::SessionEnded { state: None }),
                // Any change to the assignment node: look at it again.
                Some(Event::Watch(watch)) => assignment_waiting = watch.path == assignment,
                Some(Event::Session(SessionState::Disconnected)) => disconnected = true,
                // Back after a disconnection: events may have been missed
                // while away, so read rather than wait.
                Some(Event::Session(SessionState::Connected)) => {
                    assignment_waiting = std::mem::take(&mut disconnected);
                }
                Some(Event::Session(
                    ended @ (SessionState::Expired
                    | SessionState::Closed
                    | SessionState::AuthFailed),
                )) => return Err(WorkerError::SessionEnded { state: Some(ended) }),
            }
        }

        match self.zk.delete(&registration, None).await {
            Ok(()) | Err(ZkError::NoNode { .. }) => {}
            Err(error) => {
                return Err(WorkerError::request(
                    format!("deleting {registration}"),
                    error,
                ));
            }
        }
        self.note(state.on_deregistered());
        // The master may have assigned a task before it saw the worker go:
        // run it rather than strand it. A create still in flight after this
        // look is the master's to recover (a dead worker's task).
        if self.arm(&assignment).await? {
            self.work(&mut state, &assignment, &mut shutdown).await?;
        }
        Ok(worker)
    }

    /// Sets the exists watch on the assignment node; returns whether the
    /// node is there.
    async fn arm(&self, assignment: &str) -> Result<bool, WorkerError> {
        self.zk
            .exists(assignment, Watch::Yes)
            .await
            .map(|stat| stat.is_some())
            .map_err(|error| WorkerError::request(format!("watching {assignment}"), error))
    }

    /// Handles the assignment node if it exists: reads it and the task,
    /// runs the handler, writes the result, then deletes the assignment.
    async fn work<S: Future<Output = ()>>(
        &self,
        state: &mut WorkerState,
        assignment: &str,
        shutdown: &mut Pin<&mut S>,
    ) -> Result<(), WorkerError> {
        let data = match self.zk.get_data(assignment, Watch::No).await {
            Ok((data, _)) => data,
            // The event was for an older change (e.g. our own delete).
            Err(ZkError::NoNode { .. }) => return Ok(()),
            Err(error) => {
                return Err(WorkerError::request(format!("reading {assignment}"), error));
            }
        };
        let (task, decision) = state.on_assignment_read(&data);
        self.note(decision);
        if let Some(task) = task {
            let task_path = self.layout.task(&task);
            match self.zk.get_data(&task_path, Watch::No).await {
                Ok((payload, _)) => {
                    let outcome = self.run_handler(state, &payload, shutdown).await;
                    let result = state.result_for(outcome);
                    let result_path = self.layout.result(&task);
                    let write = match self
                        .zk
                        .create(&result_path, &result.encode(), CreateMode::Persistent)
                        .await
                    {
                        Ok(_) => ResultWrite::Written {
                            success: result.is_success(),
                        },
                        Err(ZkError::NodeExists { .. }) => ResultWrite::AlreadyPresent,
                        Err(ZkError::NoNode { .. }) => ResultWrite::TaskMissing,
                        Err(error) => {
                            return Err(WorkerError::request(
                                format!("creating {result_path}"),
                                error,
                            ));
                        }
                    };
                    self.note(state.result_written(write));
                }
                Err(ZkError::NoNode { .. }) => self.note(state.on_task_missing()),
                Err(error) => {
                    return Err(WorkerError::request(format!("reading {task_path}"), error));
                }
            }
        }
        // Deleting the assignment is what tells the master this worker is
        // free, so it comes after the result.
        match self.zk.delete(assignment, None).await {
            Ok(()) | Err(ZkError::NoNode { .. }) => {}
            Err(error) => {
                return Err(WorkerError::request(
                    format!("deleting {assignment}"),
                    error,
                ));
            }
        }
        self.note(state.on_assignment_released());
        Ok(())
    }

    /// Runs the handler to the end. A shutdown asked for meanwhile is noted
    /// and honoured after the task.
    async fn run_handler<S: Future<Output = ()>>(
        &self,
        state: &mut WorkerState,
        payload: &[u8],
        shutdown: &mut Pin<&mut S>,
    ) -> HandlerOutcome {
        let mut run = pin!(CatchUnwind::new(self.handler.run(payload)));
        loop {
            let stop_requested = state.stop_requested();
            tokio::select! {
                biased;
                outcome = &mut run => {
                    return match outcome {
                        Ok(finished) => HandlerOutcome::Finished(finished),
                        Err(message) => HandlerOutcome::Panicked(message),
                    };
                }
                () = shutdown.as_mut(), if !stop_requested => {
                    let decision = state.on_stop_requested().expect("first stop request");
                    self.note(decision);
                }
            }
        }
    }

    fn note(&self, decision: WorkerDecision) {
        tracing::info!(target: "zkdist::worker", "{decision}");
        if let Some(observer) = &self.observer {
            // An observer that went away stops observing; the worker goes on.
            let _ = observer.send(decision);
        }
    }
}
