//! The client side of zkdist: submit a task, wait for its result, clean it
//! up, and read the system's status. Generic over [`Coordinator`] like the
//! master and the worker.

use std::collections::BTreeMap;

use crate::codec::{CodecError, TaskPayload, TaskResult};
use crate::error::ZkError;
use crate::layout::Layout;
use crate::names::{InvalidName, TaskId, WorkerId};
use crate::{
    Coordinator, CreateMode, Event, EventStream, Op, SessionState, Watch, WatchKind, path,
    validate_data,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("task payload refused: {0}")]
    InvalidPayload(CodecError),
    #[error("task payload refused: {0}")]
    PayloadTooLarge(ZkError),
    #[error("result of {task} is unreadable: {error}")]
    InvalidResult { task: TaskId, error: CodecError },
    #[error("no task {task} (no node {path})")]
    NoSuchTask { task: TaskId, path: String },
    #[error("task {task} has no result yet: only finished tasks can be cleaned up")]
    NotFinished { task: TaskId },
    #[error(
        "no zkdist layout at {root}: it is created when a master or worker starts or a task is submitted"
    )]
    NoLayout { root: String },
    #[error("the session ended ({state:?}) while waiting for {task}")]
    SessionEnded {
        task: TaskId,
        /// `None` when the event stream closed without saying why.
        state: Option<SessionState>,
    },
    #[error("unexpected node name: {0}")]
    UnexpectedName(#[from] InvalidName),
    #[error(transparent)]
    Zk(#[from] ZkError),
}

/// A snapshot of the system, read node by node (not atomically: a task can
/// finish between two reads).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    /// Whether a master holds the `master` node.
    pub master_present: bool,
    /// Registered workers, sorted.
    pub workers: Vec<WorkerId>,
    /// Current assignments (worker -> task).
    pub assignments: BTreeMap<WorkerId, TaskId>,
    /// Tasks with neither a result nor an assignment.
    pub pending_tasks: usize,
    /// Tasks without a result that are assigned to a worker.
    pub assigned_tasks: usize,
    /// Tasks with a result.
    pub finished_tasks: usize,
    /// Nodes that are not zkdist's, skipped rather than failing the whole
    /// status: a name under `tasks/` that is not a task name, an assignment
    /// whose data is not a task name (or, under `workers/` and
    /// `assignments/`, a name that is not a worker id).
    pub ignored_nodes: usize,
}

/// What ended a wait for a task's child watch.
enum TaskChange {
    /// The task's children changed: its result may be there.
    Children,
    /// The task node was deleted.
    Deleted,
    /// The session reconnected after a disconnection.
    Reconnected,
}

/// One client session. `wait` reads the session's event stream, so it takes
/// `&mut self`; everything else only sends requests.
pub struct Client<C: Coordinator> {
    zk: C,
    events: EventStream,
    layout: Layout,
}

impl<C: Coordinator> Client<C> {
    /// Wraps a connected session and its event stream.
    pub fn new(zk: C, events: EventStream, layout: Layout) -> Client<C> {
        Client { zk, events, layout }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn session(&self) -> &C {
        &self.zk
    }

    /// Gives the session and its event stream back.
    pub fn into_parts(self) -> (C, EventStream) {
        (self.zk, self.events)
    }

    /// Queues a task: creates `tasks/task-NNNNNNNNNN` with `payload` as its
    /// data. The payload must be a JSON object with a string `kind` and fit
    /// in a node ([`crate::MAX_DATA_BYTES`]); both are checked before anything
    /// is sent. Creates the layout if it is missing.
    pub async fn submit(&self, payload: &[u8]) -> Result<TaskId, ClientError> {
        let prefix = self.layout.task_prefix();
        validate_data(&prefix, payload).map_err(ClientError::PayloadTooLarge)?;
        TaskPayload::decode(payload).map_err(ClientError::InvalidPayload)?;
        let created = match self
            .zk
            .create(&prefix, payload, CreateMode::PersistentSequential)
            .await
        {
            Err(ZkError::NoNode { .. }) => {
                self.layout.ensure_layout(&self.zk).await?;
                self.zk
                    .create(&prefix, payload, CreateMode::PersistentSequential)
                    .await?
            }
            other => other?,
        };
        Ok(TaskId::parse(path::name(&created))?)
    }

    /// Waits for a task's result. The result node is the task node's only
    /// child, so one child watch on the task node covers both ways the wait
    /// can end: the result's creation (`NodeChildrenChanged`) and the task's
    /// deletion (`NodeDeleted`, then [`ClientError::NoSuchTask`]). No
    /// polling: between the watch and the result nothing is sent. A task
    /// that does not exist fails at once and leaves no watch behind (a
    /// listing of a missing node sets none); the watch left on a finished
    /// task fires once, when the task is cleaned up, and later waits skip
    /// that event.
    pub async fn wait(&mut self, task: &TaskId) -> Result<TaskResult, ClientError> {
        let task_path = self.layout.task(task);
        let result_path = self.layout.result(task);
        let no_such_task = || ClientError::NoSuchTask {
            task: task.clone(),
            path: task_path.clone(),
        };
        loop {
            // Arms the watch and looks for the result in the same reply.
            let has_result = match self.zk.get_children(&task_path, Watch::Yes).await {
                Ok((children, _)) => children
                    .iter()
                    .any(|name| *name == path::name(&result_path)),
                Err(ZkError::NoNode { .. }) => return Err(no_such_task()),
                Err(error) => return Err(error.into()),
            };
            if !has_result {
                match self.wait_for_task_change(task, &task_path).await? {
                    TaskChange::Children => {}
                    TaskChange::Deleted => return Err(no_such_task()),
                    TaskChange::Reconnected => continue,
                }
            }
            match self.zk.get_data(&result_path, Watch::No).await {
                Ok((bytes, _)) => {
                    return TaskResult::decode(&bytes).map_err(|error| {
                        ClientError::InvalidResult {
                            task: task.clone(),
                            error,
                        }
                    });
                }
                // Not there (yet, or any more): list again, which re-arms
                // the watch and tells a deleted task apart.
                Err(ZkError::NoNode { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Reads events until the child watch on `task_path` fires, or the
    /// session reconnects after a disconnection (the caller then looks
    /// again rather than trust that no event was lost). Events of watches
    /// left by earlier calls are skipped.
    async fn wait_for_task_change(
        &mut self,
        task: &TaskId,
        task_path: &str,
    ) -> Result<TaskChange, ClientError> {
        let mut disconnected = false;
        loop {
            let ended = |state| ClientError::SessionEnded {
                task: task.clone(),
                state,
            };
            match self.events.recv().await {
                None => return Err(ended(None)),
                Some(Event::Watch(event)) if event.path == task_path => {
                    return Ok(match event.kind {
                        WatchKind::NodeDeleted => TaskChange::Deleted,
                        // A child watch fires only on children changes and
                        // on deletion.
                        _ => TaskChange::Children,
                    });
                }
                Some(Event::Watch(_)) => {}
                Some(Event::Session(SessionState::Connected)) => {
                    if std::mem::take(&mut disconnected) {
                        return Ok(TaskChange::Reconnected);
                    }
                }
                Some(Event::Session(SessionState::Disconnected)) => disconnected = true,
                Some(Event::Session(
                    state @ (SessionState::Expired
                    | SessionState::Closed
                    | SessionState::AuthFailed),
                )) => return Err(ended(Some(state))),
            }
        }
    }

    /// Deletes a finished task: its result, then the task node, in one
    /// atomic multi so that no half-deleted task is ever visible.
    pub async fn cleanup(&self, task: &TaskId) -> Result<(), ClientError> {
        let task_path = self.layout.task(task);
        let ops = vec![
            Op::Delete {
                path: self.layout.result(task),
                version: None,
            },
            Op::Delete {
                path: task_path.clone(),
                version: None,
            },
        ];
        match self.zk.multi(ops).await {
            Ok(_) => Ok(()),
            Err(ZkError::Multi { index: 0, error }) if matches!(*error, ZkError::NoNode { .. }) => {
                if self.zk.exists(&task_path, Watch::No).await?.is_none() {
                    Err(ClientError::NoSuchTask {
                        task: task.clone(),
                        path: task_path,
                    })
                } else {
                    Err(ClientError::NotFinished { task: task.clone() })
                }
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Reads workers, assignments and tasks. Sends only reads, so it works
    /// for an identity that may not write.
    pub async fn status(&self) -> Result<Status, ClientError> {
        let no_layout = |error: ZkError| match error {
            ZkError::NoNode { .. } => ClientError::NoLayout {
                root: self.layout.root().to_owned(),
            },
            other => other.into(),
        };
        let mut status = Status {
            master_present: self
                .zk
                .exists(&self.layout.master(), Watch::No)
                .await?
                .is_some(),
            ..Status::default()
        };

        let (mut workers, _) = self
            .zk
            .get_children(&self.layout.workers_dir(), Watch::No)
            .await
            .map_err(no_layout)?;
        workers.sort();
        for name in &workers {
            match WorkerId::parse(name) {
                Ok(worker) => status.workers.push(worker),
                Err(_) => status.ignored_nodes += 1,
            }
        }

        let (assignment_names, _) = self
            .zk
            .get_children(&self.layout.assignments_dir(), Watch::No)
            .await
            .map_err(no_layout)?;
        for name in assignment_names {
            let Ok(worker) = WorkerId::parse(&name) else {
                status.ignored_nodes += 1;
                continue;
            };
            // The worker may finish between the listing and the read.
            match self
                .zk
                .get_data(&self.layout.assignment(&worker), Watch::No)
                .await
            {
                Ok((data, _)) => match TaskId::parse(&String::from_utf8_lossy(&data)) {
                    Ok(task) => {
                        status.assignments.insert(worker, task);
                    }
                    Err(_) => status.ignored_nodes += 1,
                },
                Err(ZkError::NoNode { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let assigned: std::collections::BTreeSet<&TaskId> = status.assignments.values().collect();

        let (task_names, _) = self
            .zk
            .get_children(&self.layout.tasks_dir(), Watch::No)
            .await
            .map_err(no_layout)?;
        let mut finished = 0;
        let mut in_progress = 0;
        let mut pending = 0;
        for name in task_names {
            // Foreign nodes under tasks/ are not tasks.
            let Ok(task) = TaskId::parse(&name) else {
                status.ignored_nodes += 1;
                continue;
            };
            if self
                .zk
                .exists(&self.layout.result(&task), Watch::No)
                .await?
                .is_some()
            {
                finished += 1;
            } else if assigned.contains(&task) {
                in_progress += 1;
            } else {
                pending += 1;
            }
        }
        status.finished_tasks = finished;
        status.assigned_tasks = in_progress;
        status.pending_tasks = pending;
        Ok(status)
    }
}
