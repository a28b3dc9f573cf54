//! What a worker did, in order: for logs, traces and the testbed's checker.

use std::fmt;

use zkdist_coord::{TaskId, WorkerId};

use crate::state::CompletionReadBack;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerDecision {
    /// The worker armed the watch on its assignment node, then registered.
    Registered { worker: WorkerId },
    /// The worker read its assignment and started the task.
    TaskStarted { worker: WorkerId, task: TaskId },
    /// The task's result is written.
    ResultWritten {
        worker: WorkerId,
        task: TaskId,
        success: bool,
    },
    /// The task already had a result, which was left as it was.
    ResultAlreadyPresent { worker: WorkerId, task: TaskId },
    /// The task's node is gone (a client deleted it): no result is written.
    TaskMissing { worker: WorkerId, task: TaskId },
    /// The task's node refused the result (its ACL, or a foreign ephemeral
    /// node): no result is written, the task is left as it is, and the
    /// worker releases it and goes on.
    ResultRefused {
        worker: WorkerId,
        task: TaskId,
        reason: String,
    },
    /// The assignment's data is not a task name; the assignment is dropped.
    BadAssignment { worker: WorkerId, data: String },
    /// The worker deleted its assignment, or found it gone after a
    /// completion read back as finished: it is idle again.
    AssignmentReleased {
        worker: WorkerId,
        task: Option<TaskId>,
    },
    /// The assignment was not the one the worker read any more when it
    /// went to complete or release it: the master took it back (it thought
    /// this worker dead). The worker wrote nothing and is idle.
    AssignmentRevoked {
        worker: WorkerId,
        task: Option<TaskId>,
    },
    /// The completion's outcome was unknown (connection loss) and was read
    /// back: see [`CompletionReadBack`] for what each finding proves.
    /// After `NotApplied` the completion is sent again; after the others
    /// the worker is idle (`AssignmentReleased` follows).
    CompletionRecovered {
        worker: WorkerId,
        task: TaskId,
        found: CompletionReadBack,
    },
    /// The session ended while the worker held `task`, or stayed
    /// disconnected past its grace while the task ran: it stopped running
    /// it and sends nothing more (the master re-queues it once the session
    /// has ended). Only a
    /// completion already sent, whose reply the session's end cut off, may
    /// have been applied; the master then finds the result.
    TaskAbandoned { worker: WorkerId, task: TaskId },
    /// The session ended (expired, closed, or its stream stopped): this
    /// worker id acts no more.
    SessionLost { worker: WorkerId },
    /// Shutdown was asked for; the current task, if any, is finished first.
    StopRequested { worker: WorkerId },
    /// The worker deleted its registration.
    Deregistered { worker: WorkerId },
    /// The worker's registration is gone while its session lives (deleted
    /// by hand, or with the deployment's root), or belongs to another
    /// session: the master holds this id for gone and reclaims its
    /// assignment. The worker stops `task` if it ran one, writes nothing,
    /// and acts no more under this id (it joins again under a new one).
    RegistrationLost {
        worker: WorkerId,
        task: Option<TaskId>,
    },
}

/// Stable one-line renderings, used in traces and logs.
impl fmt::Display for WorkerDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerDecision::Registered { worker } => write!(f, "{worker} registered"),
            WorkerDecision::TaskStarted { worker, task } => write!(f, "{worker} started {task}"),
            WorkerDecision::ResultWritten {
                worker,
                task,
                success,
            } => {
                let outcome = if *success { "success" } else { "failure" };
                write!(f, "{worker} wrote {task} result {outcome}")
            }
            WorkerDecision::ResultAlreadyPresent { worker, task } => {
                write!(f, "{worker} found {task} result already present")
            }
            WorkerDecision::TaskMissing { worker, task } => {
                write!(f, "{worker} found {task} missing")
            }
            WorkerDecision::ResultRefused {
                worker,
                task,
                reason,
            } => write!(f, "{worker} left {task} without a result: {reason}"),
            WorkerDecision::BadAssignment { worker, data } => {
                write!(f, "{worker} dropped bad assignment {data:?}")
            }
            WorkerDecision::AssignmentReleased { worker, task } => match task {
                Some(task) => write!(f, "{worker} released {task}"),
                None => write!(f, "{worker} released its assignment"),
            },
            WorkerDecision::AssignmentRevoked { worker, task } => match task {
                Some(task) => write!(f, "{worker} found {task} revoked, wrote nothing"),
                None => write!(f, "{worker} found its assignment revoked"),
            },
            WorkerDecision::CompletionRecovered {
                worker,
                task,
                found,
            } => {
                let found = match found {
                    CompletionReadBack::NotApplied => "not applied, resending",
                    CompletionReadBack::ResultPresent => {
                        "result present, written by this worker or another"
                    }
                    CompletionReadBack::TaskGone => "task gone, completed or revoked",
                };
                write!(f, "{worker} recovered {task} completion: {found}")
            }
            WorkerDecision::TaskAbandoned { worker, task } => {
                write!(f, "{worker} abandoned {task}")
            }
            WorkerDecision::SessionLost { worker } => write!(f, "{worker} lost its session"),
            WorkerDecision::StopRequested { worker } => write!(f, "{worker} stop requested"),
            WorkerDecision::Deregistered { worker } => write!(f, "{worker} deregistered"),
            WorkerDecision::RegistrationLost { worker, task } => match task {
                Some(task) => write!(f, "{worker} lost its registration, stopped {task}"),
                None => write!(f, "{worker} lost its registration"),
            },
        }
    }
}
