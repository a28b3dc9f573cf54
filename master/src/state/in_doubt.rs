//! Assignment creates: confirmed, refused, or in doubt and read back.

use zkdist_coord::{TaskId, WorkerId};

use super::{AssignmentFound, DepartedStage, MasterState, Step, TaskStatus, WriteOutcome};
use crate::decision::{Command, MasterDecision, Recovery, RequeueReason, Trigger};

impl MasterState {
    /// ZooKeeper's answer to a `CreateAssignment` command.
    ///
    /// A refused create puts the task back in the queue and runs a round
    /// for it; the worker is blocked until a listing shows the node in its
    /// way gone (a round would only meet the same refusal). A create that
    /// found the worker's registration gone puts the task back too, and the
    /// worker leaves there and then: the check is as good as a listing that
    /// no longer shows it. A create in doubt is read back;
    /// one for a worker that left meanwhile is reclaimed once applied.
    pub fn on_assignment_created(
        &mut self,
        worker: WorkerId,
        task: TaskId,
        outcome: WriteOutcome,
    ) -> Step {
        self.assert_not_deposed();
        if outcome == WriteOutcome::Fenced {
            return self.depose();
        }
        if let Some(departed) = self.departed.get(&worker) {
            assert!(
                !self.deleted_before_reply.contains(&worker),
                "a delete of departed {worker}'s assignment is remembered"
            );
            assert!(
                departed.task == task && departed.stage == DepartedStage::Creating,
                "create of {worker}'s assignment {task} answered, but the departed worker holds {departed:?}"
            );
            match outcome {
                WriteOutcome::Applied => {
                    self.decide(MasterDecision::AssignmentCreated {
                        worker: worker.clone(),
                        task: task.clone(),
                    });
                    self.reclaim(worker, task);
                }
                // Whether applied or not, a reclaim leaves no node behind
                // and then reads the task's status, which settles it.
                WriteOutcome::Unknown => {
                    self.decide(MasterDecision::AssignmentInDoubt {
                        worker: worker.clone(),
                        task: task.clone(),
                    });
                    self.reclaim(worker, task);
                }
                WriteOutcome::Failed(error) => {
                    self.departed.remove(&worker);
                    self.decide(MasterDecision::AssignmentFailed {
                        worker: worker.clone(),
                        task: task.clone(),
                        error,
                    });
                    self.requeue(task, RequeueReason::WorkerGone { worker });
                }
                // The listing that showed the worker gone came first.
                WriteOutcome::WorkerGone { why } => {
                    self.departed.remove(&worker);
                    self.decide(MasterDecision::AssignmentRefused {
                        worker: worker.clone(),
                        task: task.clone(),
                        why,
                    });
                    self.requeue(task, RequeueReason::WorkerGone { worker });
                }
                WriteOutcome::Fenced => unreachable!("handled above"),
            }
            return self.finish_step();
        }
        let slot = self.workers.get_mut(&worker);
        let holds_it = matches!(&slot, Some(Some(a)) if a.task == task && !a.confirmed)
            && !self.in_doubt.contains(&worker);
        assert!(
            holds_it,
            "create of {worker}'s assignment {task} answered, but the worker holds {slot:?}"
        );
        let slot = slot.expect("checked above");
        // Watch discovery: the node's `NodeDeleted` event came first.
        let deleted_already = self.deleted_before_reply.remove(&worker);
        match outcome {
            WriteOutcome::Applied => {
                slot.as_mut().expect("checked above").confirmed = true;
                self.decide(MasterDecision::AssignmentCreated {
                    worker: worker.clone(),
                    task,
                });
                if deleted_already {
                    self.finish_assignment(worker);
                }
            }
            WriteOutcome::Failed(error) => {
                *slot = None;
                // A task its client deleted while the create was in flight
                // goes no further: it is forgotten now that no one holds it.
                let deleted = self.was_deleted(&task);
                if !deleted {
                    assert!(self.pending_tasks.insert(task.clone()));
                }
                self.decide(MasterDecision::AssignmentFailed {
                    worker: worker.clone(),
                    task: task.clone(),
                    error,
                });
                // A node deleted since is no longer in the way. Should
                // another be, the next create is refused in turn: creates
                // never overwrite, so not blocking risks nothing.
                if !deleted_already {
                    self.block(worker);
                }
                if deleted {
                    self.decide(MasterDecision::TaskVanished { task });
                    // No task went back, but the worker is free (unless
                    // blocked): a round must look, or a queue can wait
                    // beside it until something else happens.
                    self.trigger(Trigger::WorkerIdle);
                } else {
                    self.trigger(Trigger::TaskRequeued);
                }
            }
            WriteOutcome::WorkerGone { why } => {
                // A deletion heard while the create was in flight (now
                // forgotten, see `deleted_already`) was of another node of
                // this name, which is no concern of a worker that left.
                *slot = None;
                self.decide(MasterDecision::AssignmentRefused {
                    worker: worker.clone(),
                    task: task.clone(),
                    why,
                });
                self.depart(worker.clone(), |worker, held_task| {
                    assert_eq!(held_task, None, "the refused create held nothing");
                    MasterDecision::WorkerLeft { worker, held_task }
                });
                self.requeue(task, RequeueReason::WorkerGone { worker });
            }
            // The read-back is sent after the delete was applied (its event
            // is in), so what it finds settles the create without it.
            WriteOutcome::Unknown => {
                self.in_doubt.insert(worker.clone());
                self.step.commands.push(Command::RecoverAssignment {
                    worker: worker.clone(),
                    task: task.clone(),
                });
                self.decide(MasterDecision::AssignmentInDoubt { worker, task });
            }
            WriteOutcome::Fenced => unreachable!("handled above"),
        }
        self.finish_step()
    }

    /// What a `RecoverAssignment` command read back.
    pub fn on_assignment_recovered(
        &mut self,
        worker: WorkerId,
        task: TaskId,
        found: AssignmentFound,
    ) -> Step {
        self.assert_not_deposed();
        let recovery = match found {
            AssignmentFound::Present => Recovery::Applied,
            AssignmentFound::Absent(TaskStatus::Finished) => Recovery::AppliedAndFinished,
            AssignmentFound::Absent(TaskStatus::Unfinished) | AssignmentFound::Foreign => {
                Recovery::NotApplied
            }
            AssignmentFound::Absent(TaskStatus::Gone) => Recovery::TaskGone,
        };
        self.decide(MasterDecision::AssignmentRecovered {
            worker: worker.clone(),
            task: task.clone(),
            recovery,
        });
        if let Some(departed) = self.departed.get(&worker) {
            assert!(
                !self.deleted_before_reply.contains(&worker),
                "a delete of departed {worker}'s assignment is remembered"
            );
            assert!(
                departed.task == task && departed.stage == DepartedStage::Recovering,
                "{worker}'s assignment {task} recovered, but the departed worker holds {departed:?}"
            );
            match recovery {
                Recovery::Applied => self.reclaim(worker, task),
                Recovery::AppliedAndFinished | Recovery::TaskGone => {
                    self.departed.remove(&worker);
                }
                Recovery::NotApplied => {
                    self.departed.remove(&worker);
                    self.requeue(task, RequeueReason::WorkerGone { worker });
                }
            }
            return self.finish_step();
        }
        assert!(
            self.in_doubt.remove(&worker),
            "{worker}'s assignment {task} recovered but never in doubt"
        );
        let slot = self
            .workers
            .get_mut(&worker)
            .expect("a worker in doubt is registered");
        assert!(
            matches!(slot, Some(a) if a.task == task && !a.confirmed),
            "{worker}'s assignment {task} recovered, but the worker holds {slot:?}"
        );
        // Watch discovery: a `NodeDeleted` event came while the read-back
        // was in flight, perhaps of the node it found.
        let deleted_already = self.deleted_before_reply.remove(&worker);
        match recovery {
            // Read after the create was applied, so every later listing was
            // taken after it too: absence from one now means finished.
            Recovery::Applied => {
                slot.as_mut().expect("checked above").confirmed = true;
                if deleted_already {
                    self.finish_assignment(worker);
                }
            }
            Recovery::AppliedAndFinished => {
                *slot = None;
                self.decide(MasterDecision::WorkerIdle {
                    worker,
                    finished_task: task,
                });
                self.trigger(Trigger::WorkerIdle);
            }
            Recovery::NotApplied => {
                *slot = None;
                // As for a refused create: a node deleted since is no
                // longer in the way.
                if found == AssignmentFound::Foreign && !deleted_already {
                    self.block(worker.clone());
                }
                // A task deleted meanwhile is not re-queued, which would
                // run the round; the worker is free all the same.
                let vanished = self.was_deleted(&task);
                self.requeue(task, RequeueReason::AssignmentNotApplied { worker });
                if vanished {
                    self.trigger(Trigger::WorkerIdle);
                }
            }
            Recovery::TaskGone => {
                *slot = None;
                self.trigger(Trigger::WorkerIdle);
            }
        }
        self.finish_step()
    }

    /// Gives registered `worker` no work until an `assignments/` listing
    /// (or, with the watch discovery, a `NodeDeleted` event) shows its node
    /// gone. No listing is asked for: the node exists now, and the
    /// `assignments/` watch (always armed, or being re-armed by a listing in
    /// flight) reports when it is deleted.
    pub(super) fn block(&mut self, worker: WorkerId) {
        assert!(
            matches!(self.workers.get(&worker), Some(None)),
            "only a registered worker without a task is blocked"
        );
        self.blocked.insert(worker);
    }
}
