//! What a worker did, in order: for logs, traces and the testbed's checker.

use std::fmt;

use zkdist_coord::{TaskId, WorkerId};

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
    /// The assignment's data is not a task name; the assignment is dropped.
    BadAssignment { worker: WorkerId, data: String },
    /// The worker deleted its assignment: it is idle again.
    AssignmentReleased {
        worker: WorkerId,
        task: Option<TaskId>,
    },
    /// Shutdown was asked for; the current task, if any, is finished first.
    StopRequested { worker: WorkerId },
    /// The worker deleted its registration.
    Deregistered { worker: WorkerId },
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
            WorkerDecision::BadAssignment { worker, data } => {
                write!(f, "{worker} dropped bad assignment {data:?}")
            }
            WorkerDecision::AssignmentReleased { worker, task } => match task {
                Some(task) => write!(f, "{worker} released {task}"),
                None => write!(f, "{worker} released its assignment"),
            },
            WorkerDecision::StopRequested { worker } => write!(f, "{worker} stop requested"),
            WorkerDecision::Deregistered { worker } => write!(f, "{worker} deregistered"),
        }
    }
}
