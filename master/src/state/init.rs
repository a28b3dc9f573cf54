//! What the master still waits for before its state is built.

use std::collections::BTreeSet;

use zkdist_coord::{TaskId, WorkerId};

use super::{Assignment, AssignmentData, Departed, DepartedStage, MasterState, Step};
use crate::decision::{Command, MasterDecision, Trigger};

/// The most tasks one start-up check asks about, in one request: two
/// nodes each (the result and the refusal mark). A master that takes over
/// a backlog checks every queued task before it assigns anything, and the
/// server's cost follows requests more than nodes: 200,000 tasks cost
/// 400,000 `exists` one at a time, and 6,250 multi-reads this way. The
/// request stays small (some 4 KiB of paths under `/zkdist`), and so does
/// its reply, since a result or a mark has no children.
pub const TASK_CHECKS_PER_BATCH: usize = 32;

#[derive(Debug, Default)]
pub(super) struct Initialisation {
    /// Tasks of the first listing to check for a result or a refusal
    /// mark, until the checks are sent: they then move, still queued, into
    /// `check_batches`.
    pub(super) unchecked_tasks: BTreeSet<TaskId>,
    /// The batches of checks sent and not answered yet: each answer names
    /// exactly one of them.
    pub(super) check_batches: BTreeSet<Vec<TaskId>>,
    /// Whether the result checks were sent. They wait for every start-up
    /// assignment read: a session's requests are served in order, so a
    /// check sent after a read that found an assignment gone sees the
    /// result of the completion that deleted it (a completion creates the
    /// result and deletes the assignment in one transaction). Sent earlier,
    /// a check could miss a completion that the read then misses too, and
    /// the finished task would be queued again.
    pub(super) checks_sent: bool,
    /// Assignments of the first listing whose data has not been read yet.
    pub(super) unread_assignments: BTreeSet<WorkerId>,
    /// Why rounds would have run had the state been built: the first round
    /// runs for all of them at once.
    pub(super) triggers: BTreeSet<Trigger>,
}

impl Initialisation {
    pub(super) fn is_complete(&self, all_listed_once: bool) -> bool {
        all_listed_once
            && self.checks_sent
            && self.check_batches.is_empty()
            && self.unread_assignments.is_empty()
    }
}

impl MasterState {
    /// Sends the start-up result checks once the first `tasks/` and
    /// `assignments/` listings are in and every assignment they named has
    /// been read (see [`Initialisation::checks_sent`]). Tasks found running
    /// meanwhile need no check.
    pub(super) fn send_result_checks_when_due(&mut self) {
        let tasks_listed = self.tasks_loop.listed_once();
        let assignments_listed = self.assignments_loop.listed_once();
        let Some(init) = self.initialisation.as_mut() else {
            return;
        };
        if init.checks_sent
            || !tasks_listed
            || !assignments_listed
            || !init.unread_assignments.is_empty()
        {
            return;
        }
        init.checks_sent = true;
        let pending = &self.pending_tasks;
        let unchecked: Vec<TaskId> = std::mem::take(&mut init.unchecked_tasks)
            .into_iter()
            .filter(|task| pending.contains(task))
            .collect();
        for batch in unchecked.chunks(TASK_CHECKS_PER_BATCH) {
            assert!(init.check_batches.insert(batch.to_vec()));
            self.step
                .commands
                .push(Command::CheckTasksFinished(batch.to_vec()));
        }
    }

    /// The data of an assignment found by the first `assignments/` listing.
    /// The assignment of a worker that is not registered is stale (its
    /// worker died, perhaps under an earlier master) and is reclaimed.
    pub fn on_assignment_read(&mut self, worker: WorkerId, data: AssignmentData) -> Step {
        self.assert_not_deposed();
        let init = self
            .initialisation
            .as_mut()
            .expect("assignments are read only while initialising");
        assert!(
            init.unread_assignments.remove(&worker),
            "assignment of {worker} read but never requested"
        );
        // Watch discovery: the node's `NodeDeleted` event came first.
        let deleted_already = self.deleted_before_reply.remove(&worker);
        match data {
            AssignmentData::Gone => {}
            AssignmentData::Task(task) => {
                // The task is running, or held by a dead worker until it is
                // reclaimed: it must not be queued, now or by a later
                // listing.
                self.processed_tasks.insert(task.clone());
                self.unqueue(&task);
                match self.workers.get_mut(&worker) {
                    Some(slot) => {
                        assert!(
                            slot.is_none(),
                            "{worker} busy before its assignment was read"
                        );
                        *slot = Some(Assignment {
                            task: task.clone(),
                            confirmed: true,
                            result_heard: false,
                        });
                        self.decide(MasterDecision::TaskInProgress {
                            worker: worker.clone(),
                            task,
                        });
                        // Deleted after the read: the worker finished it.
                        if deleted_already {
                            self.finish_assignment(worker);
                        }
                    }
                    None => {
                        self.decide(MasterDecision::StaleAssignment {
                            worker: worker.clone(),
                            task: Some(task.clone()),
                        });
                        // Its worker is dead: the id is never given work.
                        // The reclaim reads the task's status after its
                        // delete, which settles a delete already seen.
                        self.left_workers.insert(&worker);
                        self.step.commands.push(Command::Reclaim {
                            worker: worker.clone(),
                            task: task.clone(),
                        });
                        let previous = self.departed.insert(
                            worker,
                            Departed {
                                task,
                                stage: DepartedStage::Reclaiming,
                            },
                        );
                        assert!(previous.is_none(), "an assignment is read once");
                    }
                }
            }
            // Not zkdist's data: reported and left alone. A registered
            // worker cannot be given work while the node is there.
            AssignmentData::Unreadable => {
                if self.workers.contains_key(&worker) && !deleted_already {
                    self.block(worker.clone());
                }
                self.decide(MasterDecision::StaleAssignment { worker, task: None })
            }
        }
        self.finish_step()
    }

    /// Whether each of a batch of tasks found by the first `tasks/` listing
    /// is settled (has a result, or is marked refused): `(task, settled)`
    /// for each task of one `CheckTasksFinished`.
    pub fn on_tasks_checked(&mut self, checked: Vec<(TaskId, bool)>) -> Step {
        self.assert_not_deposed();
        let init = self
            .initialisation
            .as_mut()
            .expect("tasks are checked only while initialising");
        let batch: Vec<TaskId> = checked.iter().map(|(task, _)| task.clone()).collect();
        assert!(
            init.check_batches.remove(&batch),
            "an answer to checks of {batch:?}, which are not a batch still out"
        );
        for (task, settled) in checked {
            if settled {
                self.unqueue(&task);
                self.decide(MasterDecision::TaskAlreadyFinished { task });
            }
        }
        self.finish_step()
    }
}
