//! What the shell reads and hears from ZooKeeper, as the core takes it in,
//! and what one input produces.

use zkdist_coord::TaskId;

use crate::decision::{Command, MasterDecision};

/// A worker's current task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub task: TaskId,
    /// True once ZooKeeper confirmed the assignment node (or it was found
    /// at start-up). Only then can its absence from a listing mean that the
    /// worker finished.
    pub confirmed: bool,
    /// Watch discovery: the task's result's `NodeCreated` was heard while
    /// the worker held it. A worker writes its result and deletes its
    /// assignment in one transaction, so a release without it was not the
    /// worker's completion (see `Command::CheckReleasedTask`).
    pub result_heard: bool,
}

/// What the shell read from an assignment node at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssignmentData {
    /// The node was deleted between the listing and the read: the worker
    /// finished meanwhile.
    Gone,
    Task(TaskId),
    /// The node's data is not a task name.
    Unreadable,
}

/// What became of a fenced write (a `multi` whose first op checks the
/// epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    Applied,
    /// The write's own op failed (after the epoch check passed): nothing
    /// was applied. Carries the error, for the log.
    Failed(String),
    /// An assignment create's check of the worker's registration failed
    /// (the create checks it in the same transaction): the node is gone,
    /// or cannot be read, which no live zkdist worker's is. Nothing was
    /// applied, and the worker is out of the pool. Carries which, for the
    /// log.
    WorkerGone {
        why: String,
    },
    /// The connection dropped with the write in flight: it may or may not
    /// have been applied.
    Unknown,
    /// The epoch check failed: another master was elected since.
    Fenced,
}

/// Whether a task is finished, read from the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Its `result` node exists, or it is marked refused (its node refused
    /// the result, see `Layout::refused`): either way it is settled.
    Finished,
    /// It exists without a result.
    Unfinished,
    /// Its node is gone (a client deleted it).
    Gone,
}

/// What the shell found when it read back an assignment in doubt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentFound {
    /// The assignment node exists and names the task.
    Present,
    /// There is no assignment node; the task's status says why.
    Absent(TaskStatus),
    /// The node exists but names something else: it is not this master's,
    /// so the create was refused (not applied).
    Foreign,
}

/// What became of a `Reclaim` command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReclaimOutcome {
    /// The assignment node is gone (`deleted`: by this reclaim; otherwise
    /// it was already gone), and the task's status was read after.
    Reclaimed { deleted: bool, status: TaskStatus },
    /// The epoch check failed: another master was elected since.
    Fenced,
}

/// What one input produced: the decisions taken, in order, and the requests
/// the shell must now send, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub decisions: Vec<MasterDecision>,
    pub commands: Vec<Command>,
}
