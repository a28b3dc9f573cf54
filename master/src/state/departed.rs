//! Workers that left while holding a task: their assignments are
//! reclaimed, and their tasks finished, re-queued or forgotten.

use std::collections::BTreeSet;

use zkdist_coord::{TaskId, WorkerId};

use super::{MasterState, ReclaimOutcome, Step, TaskStatus};
use crate::decision::{Command, MasterDecision, RequeueReason, Trigger};

/// Where the assignment of a worker that left stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DepartedStage {
    /// The create is in flight: wait for its answer.
    Creating,
    /// The create's outcome is being read back.
    Recovering,
    /// The `Reclaim` command is in flight.
    Reclaiming,
}

/// The assignment of a worker that left, until its node is gone and the
/// task's fate is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Departed {
    pub(super) task: TaskId,
    pub(super) stage: DepartedStage,
}

impl MasterState {
    /// What a `Reclaim` command did: the dead worker's assignment node is
    /// gone; the task is finished, re-queued at its place, or gone.
    pub fn on_assignment_reclaimed(
        &mut self,
        worker: WorkerId,
        task: TaskId,
        outcome: ReclaimOutcome,
    ) -> Step {
        self.assert_not_deposed();
        let departed = self
            .departed
            .remove(&worker)
            .unwrap_or_else(|| panic!("{worker}'s assignment {task} reclaimed but never asked"));
        assert!(
            departed.task == task && departed.stage == DepartedStage::Reclaiming,
            "{worker}'s assignment {task} reclaimed, but the departed worker holds {departed:?}"
        );
        let (deleted, status) = match outcome {
            ReclaimOutcome::Fenced => {
                // Put it back: the state stays as it was when the write was
                // refused, for whoever inspects it.
                self.departed.insert(worker, departed);
                return self.depose();
            }
            ReclaimOutcome::Reclaimed { deleted, status } => (deleted, status),
        };
        self.decide(MasterDecision::AssignmentReclaimed {
            worker: worker.clone(),
            task: task.clone(),
            deleted,
        });
        match status {
            TaskStatus::Finished => {
                self.decide(MasterDecision::ReclaimedTaskFinished { worker, task })
            }
            TaskStatus::Unfinished => self.requeue(task, RequeueReason::WorkerGone { worker }),
            TaskStatus::Gone => self.decide(MasterDecision::TaskVanished { task }),
        }
        self.finish_step()
    }

    /// Tasks a worker holds or that are being reclaimed from one.
    /// Forgets the tasks a client deleted while they were held, once no
    /// worker holds them any more (bounded memory: see `processed_tasks`).
    pub(super) fn forget_released_deleted_tasks(&mut self) {
        if self.deleted_while_held.is_empty() {
            return;
        }
        let held = self.held_tasks();
        let released: Vec<TaskId> = self
            .deleted_while_held
            .iter()
            .filter(|task| !held.contains(*task))
            .cloned()
            .collect();
        for task in released {
            assert!(
                !self.pending_tasks.contains(&task),
                "{task} was deleted while held, yet it is queued"
            );
            self.deleted_while_held.remove(&task);
            self.processed_tasks.remove(&task);
        }
    }

    /// Whether `task`'s node is known to be gone: a listing showed it
    /// deleted, or its delete event came while a worker held it. Such a
    /// task is never queued again.
    pub(super) fn was_deleted(&self, task: &TaskId) -> bool {
        !self.processed_tasks.contains(task) || self.deleted_while_held.contains(task)
    }

    pub(super) fn held_tasks(&self) -> BTreeSet<TaskId> {
        self.workers
            .values()
            .flatten()
            .map(|assignment| assignment.task.clone())
            .chain(self.departed.values().map(|departed| departed.task.clone()))
            .collect()
    }

    /// Asks for the assignment of departed `worker` to be deleted.
    pub(super) fn reclaim(&mut self, worker: WorkerId, task: TaskId) {
        let departed = self
            .departed
            .get_mut(&worker)
            .expect("only a departed worker's assignment is reclaimed");
        assert_eq!(departed.task, task);
        assert_ne!(departed.stage, DepartedStage::Reclaiming);
        departed.stage = DepartedStage::Reclaiming;
        self.step.commands.push(Command::Reclaim { worker, task });
    }

    /// Puts a task no one holds back in the queue, at its place in task
    /// order, unless it was forgotten (a listing showed it deleted).
    pub(super) fn requeue(&mut self, task: TaskId, reason: RequeueReason) {
        if self.was_deleted(&task) {
            self.decide(MasterDecision::TaskVanished { task });
            return;
        }
        assert!(
            self.pending_tasks.insert(task.clone()),
            "{task} re-queued while already pending"
        );
        self.decide(MasterDecision::TaskRequeued { task, reason });
        self.trigger(Trigger::TaskRequeued);
    }
}
