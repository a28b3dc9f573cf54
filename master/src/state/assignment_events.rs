//! The watch discovery's assignment events: the persistent recursive watch
//! on `assignments/` reports each node the master creates and each node a
//! worker deletes on finishing, so a worker that became free is known
//! without listing the directory (a round trip per task).
//!
//! Events are handled before the reply to any read taken after their
//! change, so a delete the master concluded from a listing or a read never
//! comes as an event afterwards: each event names a node the master has
//! not yet seen go. But an event may overtake the replies to requests sent
//! before it, the create of the very node it reports included.

use zkdist_coord::{Directory, TaskId, WorkerId};

use super::{MasterState, Step, TaskStatus};
use crate::decision::{Command, MasterDecision, RequeueReason, Trigger};

impl MasterState {
    /// `assignments/<name>` was created. Only this master creates
    /// assignments, and only for a worker it gave a task (registered, or
    /// departed with that task's create or reclaim under way): then the
    /// event is that create's and changes nothing. Any other node is
    /// foreign: reported, and a registered worker without a task takes no
    /// work until it is gone (a create would only be refused).
    pub fn on_assignment_node_created(&mut self, name: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        let Some(worker) = self.parse_created_name(Directory::Assignments, name, WorkerId::parse)
        else {
            return self.finish_step();
        };
        let own = matches!(self.workers.get(&worker), Some(Some(_)))
            || self.departed.contains_key(&worker);
        if !own {
            self.decide(MasterDecision::ForeignAssignment {
                worker: worker.clone(),
            });
            // A start-up assignment not read yet is settled by its read.
            let idle = matches!(self.workers.get(&worker), Some(None))
                && !self.blocked.contains(&worker)
                && !self.is_unread_assignment(&worker);
            if idle {
                self.block(worker);
            }
        }
        self.finish_step()
    }

    /// `assignments/<name>` was deleted: by its worker on finishing (a
    /// completion writes the result and deletes the assignment in one
    /// transaction), or by this master reclaiming a departed worker's. It
    /// concludes what an `assignments/` listing without the node concludes:
    /// - a confirmed assignment: the worker finished its task and is idle,
    ///   and a round runs at once;
    /// - an assignment whose create (or its read-back) is unanswered, or a
    ///   start-up assignment not read yet: the event overtook that reply,
    ///   and the delete is applied when it comes;
    /// - a blocked worker's: the node in its way is gone;
    /// - a departed worker's: its reclaim reads the tree after deleting,
    ///   which settles the task; nothing to do here.
    ///
    /// A registered worker without a task holds no node of this master's
    /// (every delete before its last assignment was handled already), nor
    /// does an unknown worker: nothing to do.
    pub fn on_assignment_node_deleted(&mut self, name: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        // A foreign name was reported when it was created; gone, it is
        // forgotten (reported again should it come back).
        let Ok(worker) = WorkerId::parse(name) else {
            self.ignored_names
                .remove(&(Directory::Assignments, name.to_owned()));
            return self.finish_step();
        };
        if self.is_unread_assignment(&worker) {
            self.deleted_before_reply.insert(worker);
            return self.finish_step();
        }
        match self.workers.get(&worker) {
            Some(Some(assignment)) if assignment.confirmed => self.finish_assignment(worker),
            Some(Some(_)) => {
                self.deleted_before_reply.insert(worker);
            }
            Some(None) if self.blocked.remove(&worker) => {
                self.decide(MasterDecision::WorkerUnblocked { worker });
                self.trigger(Trigger::WorkerIdle);
            }
            Some(None) | None => {}
        }
        self.finish_step()
    }

    /// Registered `worker`'s confirmed assignment node is gone: it finished
    /// its task and is idle, which triggers a round.
    ///
    /// With the watch discovery the master hears of the task's result by
    /// then or soon after, unless the node was deleted by someone else (by
    /// hand, say; the worker then gives the task up without a result).
    /// Such a task would wait for the next master, so unless its result is
    /// heard of soon, its status is read, and it is queued again if it is
    /// neither finished nor gone (see [`MasterState::on_release_checks_due`]).
    pub(super) fn finish_assignment(&mut self, worker: WorkerId) {
        let slot = self
            .workers
            .get_mut(&worker)
            .expect("only a registered worker finishes");
        let assignment = slot.take().expect("a finishing worker holds a task");
        assert!(
            assignment.confirmed,
            "{worker} finished {} before its create was confirmed",
            assignment.task
        );
        let task = assignment.task;
        let unexplained = self.discovery.watches_recursively(Directory::Tasks)
            && !assignment.result_heard
            && !self.was_deleted(&task);
        if unexplained {
            let earlier = self.released_unheard.insert(task.clone(), worker.clone());
            assert!(earlier.is_none(), "{task} released twice without a result");
        }
        self.decide(MasterDecision::WorkerIdle {
            worker,
            finished_task: task,
        });
        self.trigger(Trigger::WorkerIdle);
    }

    /// `tasks/<task>/result` was created (watch discovery). Noted on the
    /// assignment of the worker that holds the task, confirmed or not (the
    /// event may come before the reply to the assignment's create), for
    /// its release; a task released before it explained now; of any other
    /// task, the master needs nothing.
    pub fn on_result_created(&mut self, task: &str) -> Step {
        self.assert_watch_discovery();
        self.assert_not_deposed();
        if let Ok(task) = TaskId::parse(task) {
            self.requeued_after_release.remove(&task);
            let holding = self
                .workers
                .values_mut()
                .flatten()
                .find(|assignment| assignment.task == task);
            if let Some(assignment) = holding {
                assignment.result_heard = true;
            } else if self.released_unheard.remove(&task).is_none() {
                self.released_unheard_due.remove(&task);
            }
        }
        self.finish_step()
    }

    /// The pause for the results of released tasks is over (the shell
    /// calls this [`crate::RELEASE_CHECK_DELAY_MS`] after the first release
    /// waiting, and again while any wait): the status of each task released
    /// before the previous call, and still without a result heard of, is
    /// read; those released since wait for the next call.
    pub fn on_release_checks_due(&mut self) -> Step {
        self.assert_not_deposed();
        for (task, worker) in std::mem::take(&mut self.released_unheard_due) {
            if self.was_deleted(&task) {
                continue;
            }
            assert!(
                self.checking_released.insert(task.clone()),
                "{task}'s status is read twice"
            );
            self.step
                .commands
                .push(Command::CheckReleasedTask { worker, task });
        }
        self.released_unheard_due = std::mem::take(&mut self.released_unheard);
        self.finish_step()
    }

    /// What [`Command::CheckReleasedTask`] read of `task`, which `worker`
    /// released without a result heard of: queued again at its place if
    /// it exists unfinished.
    pub fn on_released_task_checked(
        &mut self,
        worker: WorkerId,
        task: TaskId,
        status: TaskStatus,
    ) -> Step {
        self.assert_not_deposed();
        assert!(
            self.checking_released.remove(&task),
            "{task}'s status read, but it was not asked"
        );
        match status {
            TaskStatus::Unfinished if self.requeued_after_release.contains(&task) => {
                self.decide(MasterDecision::ReleasedTaskLeft { worker, task });
            }
            TaskStatus::Unfinished
                if !self.held_tasks().contains(&task) && !self.pending_tasks.contains(&task) =>
            {
                self.requeued_after_release.insert(task.clone());
                self.requeue(task, RequeueReason::ReleasedUnfinished { worker });
            }
            // Finished (its result came after all, or it is marked
            // refused), gone, or given out again meanwhile: nothing to do.
            TaskStatus::Unfinished | TaskStatus::Finished | TaskStatus::Gone => {}
        }
        self.finish_step()
    }

    /// Whether `worker`'s assignment was found by the first `assignments/`
    /// listing and is not read yet.
    pub(super) fn is_unread_assignment(&self, worker: &WorkerId) -> bool {
        self.initialisation
            .as_ref()
            .is_some_and(|init| init.unread_assignments.contains(worker))
    }
}
