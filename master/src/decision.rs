//! What the master core tells the outside world: the decisions it took (for
//! logs, traces and the testbed's checker) and the requests its shell must
//! send (the core does no I/O itself).

use std::fmt;

use zkdist_coord::{Directory, SessionState, TaskId, WorkerId};

use crate::election::Epoch;

/// How many creates short of the end of ZooKeeper's 32-bit sequence
/// counter a queued task makes the master warn
/// ([`MasterDecision::SequenceCounterNearLimit`]): 2^28, some 268 million,
/// which is 18 hours at 4,000 tasks a second and a month at 100.
pub const SEQUENCE_WARNING_CREATES: u32 = 1 << 28;

/// Why an assignment round ran: the founding design's three triggers, and a
/// fourth for a task that goes back to the queue after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trigger {
    /// A task appeared (there may be idle workers for it).
    NewTask,
    /// A worker registered (there may be pending tasks for it).
    NewWorker,
    /// A worker deleted its assignment (there may be pending tasks for it).
    WorkerIdle,
    /// A task went back to the queue: its worker died, or its assignment
    /// was found not applied after a connection loss (there may be idle
    /// workers for it). Beyond the founding design, which loses such tasks.
    TaskRequeued,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::NewTask => "new-task",
            Trigger::NewWorker => "new-worker",
            Trigger::WorkerIdle => "worker-idle",
            Trigger::TaskRequeued => "task-requeued",
        }
    }
}

/// A request the shell must send to ZooKeeper, and whose outcome it must
/// feed back into the core.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Command {
    /// `get_children(dir, Watch::Yes)`, answered by the matching
    /// `on_*_listed` input. With the watch discovery, `tasks/` and
    /// `assignments/` are listed without a watch (their recursive watch
    /// reports every change), and `tasks/` is answered by
    /// [`crate::MasterState::on_tasks_listed_at`].
    List(Directory),
    /// `add_watch(<dir>/, PersistentRecursive)` on `tasks/` or
    /// `assignments/`, answered by
    /// [`crate::MasterState::on_recursive_watch_added`]. Its events go to
    /// [`crate::MasterState::on_task_created`] and
    /// [`crate::MasterState::on_task_deleted`] for tasks, and to
    /// [`crate::MasterState::on_assignment_node_created`] and
    /// [`crate::MasterState::on_assignment_node_deleted`] for assignments.
    /// Watch discovery only.
    WatchRecursively(Directory),
    /// `get_data(assignments/<worker>)`, answered by
    /// [`crate::MasterState::on_assignment_read`]. Only while initialising.
    ReadAssignment(WorkerId),
    /// Whether each of some queued tasks (in queue order, at least one,
    /// at most [`crate::TASK_CHECKS_PER_BATCH`]) is settled: whether
    /// `tasks/<task>/result` or `refused/<task>` exists. One multi-read
    /// (`get_children_many`) of both nodes of every task, answered by
    /// [`crate::MasterState::on_tasks_checked`]. Only while initialising.
    CheckTasksFinished(Vec<TaskId>),
    /// `multi[check epoch, create(assignments/<worker>, data = task name)]`,
    /// with the task's payload after the name when it was read ahead (see
    /// `zkdist_coord::assignment`), answered by
    /// [`crate::MasterState::on_assignment_created`]. Never sent again
    /// blindly: an unknown outcome is settled by `RecoverAssignment`.
    CreateAssignment {
        worker: WorkerId,
        task: TaskId,
        payload: Option<Vec<u8>>,
    },
    /// The data of `tasks/<task>` for each of some queued tasks (in queue
    /// order, at least one), once, in one request: a `get_data` for one,
    /// a multi-read (`get_data_many`) for more. Answered by
    /// [`crate::MasterState::on_payloads_read`]; one batch is out at a
    /// time. Only with a payload read-ahead
    /// ([`crate::MasterState::with_payload_read_ahead`]).
    ReadPayloads(Vec<TaskId>),
    /// `get_data(workers/<worker>)` of a worker that just joined, once,
    /// answered by [`crate::MasterState::on_registration_read`]: whether
    /// the node is ephemeral (a live worker's registration), and whether
    /// the worker reads inline payloads. Only with a payload read-ahead.
    ReadRegistration(WorkerId),
    /// After a create whose outcome is unknown: `get_data(assignments/
    /// <worker>)`, and if it is absent, the task's status (see
    /// [`crate::TaskStatus`]). Answered by
    /// [`crate::MasterState::on_assignment_recovered`].
    RecoverAssignment { worker: WorkerId, task: TaskId },
    /// The assignment of a worker that is gone: `multi[check epoch,
    /// delete(assignments/<worker>)]` (sent again while its outcome is
    /// unknown: deleting a dead worker's node twice is harmless, as nobody
    /// creates it again), then the task's status. Answered by
    /// [`crate::MasterState::on_assignment_reclaimed`].
    Reclaim { worker: WorkerId, task: TaskId },
    /// A worker's assignment node went, and the master has not heard of its
    /// task's result since, for at least
    /// [`crate::RELEASE_CHECK_DELAY_MS`] (someone other than the worker
    /// deleted the node, most likely by hand, and the worker gave the task
    /// up): the task's status (see [`crate::TaskStatus`]), answered by
    /// [`crate::MasterState::on_released_task_checked`]. Watch discovery
    /// only: with it the master hears of every result.
    CheckReleasedTask { worker: WorkerId, task: TaskId },
}

/// Why a task went back to the pending queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequeueReason {
    /// The worker holding it left (its registration is gone), or an
    /// assignment of an unregistered worker was found at start-up; its
    /// assignment was reclaimed and the task has no result. Or the create
    /// of its assignment found the worker gone, and nothing was created.
    WorkerGone { worker: WorkerId },
    /// A create whose outcome was unknown turned out not applied.
    AssignmentNotApplied { worker: WorkerId },
    /// Its assignment node went, but the task has no result and no
    /// refusal mark: the node was deleted by someone other than its worker.
    ReleasedUnfinished { worker: WorkerId },
}

/// How an assignment create with an unknown outcome was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// The assignment node holds the task: the worker is busy with it.
    Applied,
    /// No assignment node but the task has a result: the create was applied
    /// and the worker already finished.
    AppliedAndFinished,
    /// Neither: the create was not applied.
    NotApplied,
    /// Neither, and the task node is gone (a client deleted it).
    TaskGone,
}

impl Recovery {
    pub fn name(self) -> &'static str {
        match self {
            Recovery::Applied => "applied",
            Recovery::AppliedAndFinished => "applied-and-finished",
            Recovery::NotApplied => "not-applied",
            Recovery::TaskGone => "task-gone",
        }
    }
}

/// One decision of the master, in the order it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterDecision {
    /// A worker appeared under `workers/`; it starts idle.
    WorkerJoined { worker: WorkerId },
    /// A worker's registration disappeared. The task it held (if any) is
    /// reclaimed: see `AssignmentReclaimed` and `TaskRequeued`.
    WorkerLeft {
        worker: WorkerId,
        held_task: Option<TaskId>,
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
    /// A worker that could not be given work, because an assignment node
    /// that is not this master's stood in the way (a create refused, an
    /// unreadable node found at start-up, a foreign create), is idle again:
    /// a listing or a `NodeDeleted` event showed the node gone.
    WorkerUnblocked { worker: WorkerId },
    /// With the watch discovery, an assignment node appeared that this
    /// master did not create (it assigns only to workers it holds a task
    /// for). A registered worker without a task takes no work until the
    /// node is gone (`WorkerUnblocked`).
    ForeignAssignment { worker: WorkerId },
    /// An assignment round ran. `assigned` is in FIFO order, and empty when
    /// there was no idle worker or no pending task.
    Round {
        round: u64,
        triggers: Vec<Trigger>,
        assigned: Vec<(WorkerId, TaskId)>,
    },
    /// ZooKeeper confirmed an assignment node.
    AssignmentCreated { worker: WorkerId, task: TaskId },
    /// An assignment node could not be created: the task went back to its
    /// place in the queue, and the worker takes no work until a listing
    /// shows its assignment node gone (`WorkerUnblocked`).
    AssignmentFailed {
        worker: WorkerId,
        task: TaskId,
        error: String,
    },
    /// An assignment create found the worker's registration gone, or
    /// unreadable (it checks it in the same transaction): nothing was
    /// created, the task went back to its place in the queue, and the
    /// worker left (`WorkerLeft` follows, unless a listing showed it gone
    /// already). `why` says which.
    AssignmentRefused {
        worker: WorkerId,
        task: TaskId,
        why: String,
    },
    /// A create's reply was lost (connection loss): whether it was applied
    /// is read back before anything else is decided for this worker.
    AssignmentInDoubt { worker: WorkerId, task: TaskId },
    /// The outcome of a create in doubt, read back from the tree.
    AssignmentRecovered {
        worker: WorkerId,
        task: TaskId,
        recovery: Recovery,
    },
    /// The assignment node of a worker that is gone is deleted (`deleted:
    /// false`: it was already gone, e.g. the worker finished just before it
    /// died).
    AssignmentReclaimed {
        worker: WorkerId,
        task: TaskId,
        deleted: bool,
    },
    /// A reclaimed task already has a result: it is finished, not requeued.
    ReclaimedTaskFinished { worker: WorkerId, task: TaskId },
    /// A task went back to the pending queue, at its place in task order.
    TaskRequeued { task: TaskId, reason: RequeueReason },
    /// A task queued again once for a release without a result was
    /// released without one again: left where it is (no result, no
    /// refusal mark) for a new master, rather than run by every worker in
    /// turn. A worker gives a task up so when it can neither write its
    /// result nor mark it refused, or cannot read its assignment.
    ReleasedTaskLeft { worker: WorkerId, task: TaskId },
    /// This session won the election (role loop).
    Elected { epoch: Epoch },
    /// Another session leads; this one waits for its `master` node to go
    /// (role loop).
    StandingBy,
    /// A write was refused by the epoch check: a newer master was elected.
    /// The master stops at once and changes nothing more.
    Deposed { epoch: Epoch },
    /// The session ended (expired, closed, or its stream ended: `None`);
    /// the role starts over with a new one (role loop).
    SessionLost { state: Option<SessionState> },
    /// The role gives up its session after an error it cannot work around
    /// in that session, and starts over with a new one (role loop).
    Restarting { reason: String },
    /// With the watch discovery, a reconcile listing of `tasks/` (after a
    /// reconnection) could not be read, e.g. because it is over the client's
    /// reply limit. The master goes on with the tasks it knows and lists
    /// again after `retry_in_ms`; tasks created while it was disconnected
    /// wait for that listing.
    ReconcileDeferred { error: String, retry_in_ms: u64 },
    /// `task`'s number is within [`SEQUENCE_WARNING_CREATES`] creates of
    /// the end of ZooKeeper's 32-bit sequence counter (2147483647), or at
    /// or past it; reported once for each of the two per leadership. From 3.6 on, a server that
    /// reaches it names later creates `...-2147483647` again (docs/operations.md, task
    /// ids), and the queue then follows the tasks' tokens, not submission:
    /// the queue should move to a new root before that.
    SequenceCounterNearLimit { task: TaskId },
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
            MasterDecision::WorkerLeft { worker, held_task } => match held_task {
                Some(task) => write!(f, "worker-left {worker} holding {task}"),
                None => write!(f, "worker-left {worker}"),
            },
            MasterDecision::TaskQueued { task } => write!(f, "task-queued {task}"),
            MasterDecision::TaskVanished { task } => write!(f, "task-vanished {task}"),
            MasterDecision::ReleasedTaskLeft { worker, task } => write!(
                f,
                "released-task-left {task} by {worker}, again without a result: left for a new master"
            ),
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
            MasterDecision::WorkerUnblocked { worker } => write!(f, "worker-unblocked {worker}"),
            MasterDecision::ForeignAssignment { worker } => {
                write!(f, "foreign-assignment {worker}: not created by this master")
            }
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
            MasterDecision::AssignmentRefused { worker, task, why } => {
                write!(f, "assignment-refused {task}->{worker}: {why}")
            }
            MasterDecision::AssignmentInDoubt { worker, task } => {
                write!(f, "assignment-in-doubt {task}->{worker}")
            }
            MasterDecision::AssignmentRecovered {
                worker,
                task,
                recovery,
            } => write!(
                f,
                "assignment-recovered {task}->{worker} {}",
                recovery.name()
            ),
            MasterDecision::AssignmentReclaimed {
                worker,
                task,
                deleted,
            } => {
                let how = if *deleted { "deleted" } else { "already-gone" };
                write!(f, "assignment-reclaimed {task} from {worker} {how}")
            }
            MasterDecision::ReclaimedTaskFinished { worker, task } => {
                write!(f, "reclaimed-task-finished {task} from {worker}")
            }
            MasterDecision::TaskRequeued { task, reason } => match reason {
                RequeueReason::WorkerGone { worker } => {
                    write!(f, "task-requeued {task} worker-gone {worker}")
                }
                RequeueReason::AssignmentNotApplied { worker } => {
                    write!(f, "task-requeued {task} not-applied {worker}")
                }
                RequeueReason::ReleasedUnfinished { worker } => {
                    write!(f, "task-requeued {task} released-unfinished {worker}")
                }
            },
            MasterDecision::Elected { epoch } => write!(f, "elected epoch={epoch}"),
            MasterDecision::StandingBy => write!(f, "standing-by"),
            MasterDecision::Deposed { epoch } => write!(f, "deposed epoch={epoch}"),
            MasterDecision::SessionLost { state } => {
                let state = match state {
                    Some(SessionState::Expired) => "expired",
                    Some(SessionState::Closed) => "closed",
                    Some(SessionState::AuthFailed) => "auth-failed",
                    Some(SessionState::Connected) => "connected",
                    Some(SessionState::Disconnected) => "disconnected",
                    None => "stream-ended",
                };
                write!(f, "session-lost {state}")
            }
            MasterDecision::Restarting { reason } => write!(f, "restarting: {reason}"),
            MasterDecision::ReconcileDeferred { error, retry_in_ms } => {
                write!(f, "reconcile-deferred for {retry_in_ms} ms: {error}")
            }
            MasterDecision::SequenceCounterNearLimit { task } => {
                write!(f, "sequence-counter-near-limit {task}: ")?;
                match (i32::MAX as u32).checked_sub(task.sequence() as u32) {
                    Some(0) => write!(
                        f,
                        "ZooKeeper's 32-bit counter under tasks/ has reached its last number, 2147483647"
                    )?,
                    Some(left) => write!(
                        f,
                        "{left} more creates under tasks/ bring ZooKeeper's 32-bit counter to its last number, 2147483647"
                    )?,
                    None => write!(
                        f,
                        "ZooKeeper's 32-bit counter under tasks/ is past its last number, 2147483647"
                    )?,
                }
                write!(
                    f,
                    "; servers from 3.6 on then repeat it and the queue loses submission order: drain it and move to a new --root"
                )
            }
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
            MasterDecision::WorkerJoined {
                worker: worker.clone()
            }
            .assigned()
            .is_empty()
        );
    }

    #[test]
    fn failure_decisions_render_on_one_stable_line() {
        let worker = WorkerId::parse("worker-0000000002").unwrap();
        let task = TaskId::from_sequence(5);
        let lines = [
            (
                MasterDecision::WorkerLeft {
                    worker: worker.clone(),
                    held_task: Some(task.clone()),
                },
                "worker-left worker-0000000002 holding task-0000000005",
            ),
            (
                MasterDecision::AssignmentInDoubt {
                    worker: worker.clone(),
                    task: task.clone(),
                },
                "assignment-in-doubt task-0000000005->worker-0000000002",
            ),
            (
                MasterDecision::AssignmentRecovered {
                    worker: worker.clone(),
                    task: task.clone(),
                    recovery: Recovery::AppliedAndFinished,
                },
                "assignment-recovered task-0000000005->worker-0000000002 applied-and-finished",
            ),
            (
                MasterDecision::AssignmentReclaimed {
                    worker: worker.clone(),
                    task: task.clone(),
                    deleted: false,
                },
                "assignment-reclaimed task-0000000005 from worker-0000000002 already-gone",
            ),
            (
                MasterDecision::ReclaimedTaskFinished {
                    worker: worker.clone(),
                    task: task.clone(),
                },
                "reclaimed-task-finished task-0000000005 from worker-0000000002",
            ),
            (
                MasterDecision::TaskRequeued {
                    task: task.clone(),
                    reason: RequeueReason::WorkerGone {
                        worker: worker.clone(),
                    },
                },
                "task-requeued task-0000000005 worker-gone worker-0000000002",
            ),
            (
                MasterDecision::TaskRequeued {
                    task: task.clone(),
                    reason: RequeueReason::AssignmentNotApplied { worker },
                },
                "task-requeued task-0000000005 not-applied worker-0000000002",
            ),
            (
                MasterDecision::Elected { epoch: Epoch(3) },
                "elected epoch=3",
            ),
            (MasterDecision::StandingBy, "standing-by"),
            (
                MasterDecision::Deposed { epoch: Epoch(3) },
                "deposed epoch=3",
            ),
            (
                MasterDecision::SessionLost {
                    state: Some(SessionState::Expired),
                },
                "session-lost expired",
            ),
            (
                MasterDecision::SessionLost { state: None },
                "session-lost stream-ended",
            ),
            (
                MasterDecision::Restarting {
                    reason: "listing failed".into(),
                },
                "restarting: listing failed",
            ),
        ];
        for (decision, line) in lines {
            assert_eq!(decision.to_string(), line);
            assert!(!decision.to_string().contains('\n'));
        }
    }
}
