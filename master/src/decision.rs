//! What the master core tells the outside world: the decisions it took (for
//! logs, traces and the testbed's checker) and the requests its shell must
//! send (the core does no I/O itself).

use std::fmt;

use zkdist_coord::{Directory, TaskId, WorkerId};

/// Why an assignment round ran. The founding design allows exactly three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trigger {
    /// A task appeared (there may be idle workers for it).
    NewTask,
    /// A worker registered (there may be pending tasks for it).
    NewWorker,
    /// A worker deleted its assignment (there may be pending tasks for it).
    WorkerIdle,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::NewTask => "new-task",
            Trigger::NewWorker => "new-worker",
            Trigger::WorkerIdle => "worker-idle",
        }
    }
}

/// A request the shell must send to ZooKeeper, and whose outcome it must
/// feed back into the core.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Command {
    /// `get_children(dir, Watch::Yes)`, answered by the matching
    /// `on_*_listed` input.
    List(Directory),
    /// `get_data(assignments/<worker>)`, answered by
    /// [`crate::MasterState::on_assignment_read`]. Only while initialising.
    ReadAssignment(WorkerId),
    /// `exists(tasks/<task>/result)`, answered by
    /// [`crate::MasterState::on_task_checked`]. Only while initialising.
    CheckTaskFinished(TaskId),
    /// `create(assignments/<worker>, data = task name)`, answered by
    /// [`crate::MasterState::on_assignment_created`].
    CreateAssignment { worker: WorkerId, task: TaskId },
}

/// One decision of the master, in the order it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterDecision {
    /// A worker appeared under `workers/`; it starts idle.
    WorkerJoined { worker: WorkerId },
    /// A worker's registration disappeared. The founding design does not
    /// recover the task it held, which is then lost.
    WorkerLeft {
        worker: WorkerId,
        lost_task: Option<TaskId>,
    },
    /// A new task entered the pending queue.
    TaskQueued { task: TaskId },
    /// A pending task's node was deleted before it was assigned.
    TaskVanished { task: TaskId },
    /// A task found at start-up already has a result: it is not queued.
    TaskAlreadyFinished { task: TaskId },
    /// An assignment found at start-up: the worker is busy with the task.
    TaskInProgress { worker: WorkerId, task: TaskId },
    /// An assignment found at start-up for a worker that is not registered
    /// (`task: None` when its data could not be read as a task name).
    StaleAssignment {
        worker: WorkerId,
        task: Option<TaskId>,
    },
    /// The first listings and their follow-up reads are in: the state is
    /// built and rounds may run.
    Initialised {
        workers: usize,
        pending_tasks: usize,
        busy_workers: usize,
    },
    /// A worker's assignment node is gone: it finished its task.
    WorkerIdle {
        worker: WorkerId,
        finished_task: TaskId,
    },
    /// An assignment round ran. `assigned` is in FIFO order, and empty when
    /// there was no idle worker or no pending task.
    Round {
        round: u64,
        triggers: Vec<Trigger>,
        assigned: Vec<(WorkerId, TaskId)>,
    },
    /// ZooKeeper confirmed an assignment node.
    AssignmentCreated { worker: WorkerId, task: TaskId },
    /// An assignment node could not be created: the task went back to the
    /// head of the queue and the worker is considered idle.
    AssignmentFailed {
        worker: WorkerId,
        task: TaskId,
        error: String,
    },
    /// A child of a watched directory that is not a valid name there.
    /// Reported once per name.
    IgnoredNode {
        dir: Directory,
        name: String,
        reason: String,
    },
}

impl MasterDecision {
    /// The assignments of a round (empty for any other decision).
    pub fn assigned(&self) -> &[(WorkerId, TaskId)] {
        match self {
            MasterDecision::Round { assigned, .. } => assigned,
            _ => &[],
        }
    }
}

/// Stable one-line renderings, used in traces and logs.
impl fmt::Display for MasterDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MasterDecision::WorkerJoined { worker } => write!(f, "worker-joined {worker}"),
            MasterDecision::WorkerLeft { worker, lost_task } => match lost_task {
                Some(task) => write!(f, "worker-left {worker} lost-task {task}"),
                None => write!(f, "worker-left {worker}"),
            },
            MasterDecision::TaskQueued { task } => write!(f, "task-queued {task}"),
            MasterDecision::TaskVanished { task } => write!(f, "task-vanished {task}"),
            MasterDecision::TaskAlreadyFinished { task } => {
                write!(f, "task-already-finished {task}")
            }
            MasterDecision::TaskInProgress { worker, task } => {
                write!(f, "task-in-progress {task} on {worker}")
            }
            MasterDecision::StaleAssignment { worker, task } => match task {
                Some(task) => write!(f, "stale-assignment {worker} {task}"),
                None => write!(f, "stale-assignment {worker} unreadable"),
            },
            MasterDecision::Initialised {
                workers,
                pending_tasks,
                busy_workers,
            } => write!(
                f,
                "initialised workers={workers} pending={pending_tasks} busy={busy_workers}"
            ),
            MasterDecision::WorkerIdle {
                worker,
                finished_task,
            } => write!(f, "worker-idle {worker} finished {finished_task}"),
            MasterDecision::Round {
                round,
                triggers,
                assigned,
            } => {
                write!(f, "round {round} [")?;
                for (i, trigger) in triggers.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(f, "{sep}{}", trigger.name())?;
                }
                write!(f, "]")?;
                if assigned.is_empty() {
                    write!(f, " assigned nothing")
                } else {
                    for (worker, task) in assigned {
                        write!(f, " {task}->{worker}")?;
                    }
                    Ok(())
                }
            }
            MasterDecision::AssignmentCreated { worker, task } => {
                write!(f, "assignment-created {task}->{worker}")
            }
            MasterDecision::AssignmentFailed {
                worker,
                task,
                error,
            } => write!(f, "assignment-failed {task}->{worker}: {error}"),
            MasterDecision::IgnoredNode { dir, name, reason } => {
                write!(f, "ignored-node {dir}/{name}: {reason}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_render_on_one_stable_line() {
        let worker = WorkerId::parse("worker-0000000001").unwrap();
        let round = MasterDecision::Round {
            round: 3,
            triggers: vec![Trigger::NewTask, Trigger::NewWorker],
            assigned: vec![(worker.clone(), TaskId::from_sequence(4))],
        };
        assert_eq!(
            round.to_string(),
            "round 3 [new-task,new-worker] task-0000000004->worker-0000000001"
        );
        assert_eq!(round.assigned().len(), 1);
        let empty = MasterDecision::Round {
            round: 4,
            triggers: vec![Trigger::WorkerIdle],
            assigned: vec![],
        };
        assert_eq!(empty.to_string(), "round 4 [worker-idle] assigned nothing");
        assert!(
            MasterDecision::WorkerJoined { worker }
                .assigned()
                .is_empty()
        );
    }
}
