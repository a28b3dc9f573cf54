//! The three watch loops' listings: workers that join and leave, tasks that
//! appear and vanish, assignments that finish.

use std::collections::BTreeSet;

use zkdist_coord::{ChildCreates, Directory, InvalidName, TaskId, WorkerId};

use super::{Departed, DepartedStage, MasterState, Step};
use crate::decision::{Command, MasterDecision, Trigger};
use crate::listing::ListingLoop;

impl MasterState {
    /// A watch on one of the three directories fired.
    pub fn on_watch_fired(&mut self, dir: Directory) -> Step {
        assert!(self.started, "a watch fired before the master started");
        self.assert_not_deposed();
        // A deferred reconcile lists when it is due, and covers this change.
        let deferred = dir == Directory::Tasks && self.reconcile_deferred;
        if !deferred && self.listing_loop(dir).on_watch_fired() {
            self.step.commands.push(Command::List(dir));
        }
        self.finish_step()
    }

    /// The listing of `dir` now in flight had to be sent more than once, so
    /// the server read it after requests sent later: its view may be newer
    /// than replies still to come, and the watch it left may have missed
    /// their effects. The loop lists again once that reply is handled.
    pub fn on_listing_resent(&mut self, dir: Directory) {
        assert!(self.started, "a listing resent before the master started");
        assert!(
            !self.listing_loop(dir).on_watch_fired(),
            "a listing of {dir:?} resent with none in flight"
        );
        self.check_invariants();
    }

    /// The children of `workers/`: workers that joined become idle entries;
    /// workers that left are dropped, and the assignment each held is
    /// reclaimed. New workers trigger a round.
    pub fn on_workers_listed(&mut self, children: Vec<String>) -> Step {
        self.on_listed(Directory::Workers);
        let present = self.parse_children(Directory::Workers, children, WorkerId::parse);
        let left: Vec<WorkerId> = self
            .workers
            .keys()
            .filter(|worker| !present.contains(*worker))
            .cloned()
            .collect();
        for worker in left {
            self.depart(worker, |worker, held_task| MasterDecision::WorkerLeft {
                worker,
                held_task,
            });
        }
        let mut joined = false;
        for worker in present {
            // Worker ids are never reused: an id that left is never given
            // work again (see `left_workers`).
            if self.left_workers.contains(&worker) {
                if self
                    .ignored_names
                    .insert((Directory::Workers, worker.as_str().to_owned()))
                {
                    self.decide(MasterDecision::IgnoredNode {
                        dir: Directory::Workers,
                        name: worker.as_str().to_owned(),
                        reason: "this worker id left before, and ids are never reused".into(),
                    });
                }
                continue;
            }
            assert!(!self.departed.contains_key(&worker), "a departed id left");
            if !self.workers.contains_key(&worker) {
                self.workers.insert(worker.clone(), None);
                self.read_registration(&worker);
                self.decide(MasterDecision::WorkerJoined { worker });
                joined = true;
            }
        }
        if joined {
            self.trigger(Trigger::NewWorker);
        }
        self.finish_step()
    }

    /// Drops `worker` from the workers for good: its id is never given work
    /// again (see `left_workers`), and the assignment it held, if any, is
    /// reclaimed once its create is settled. `decision` says why, given the
    /// worker and the task it held.
    pub(super) fn depart(
        &mut self,
        worker: WorkerId,
        decision: impl FnOnce(WorkerId, Option<TaskId>) -> MasterDecision,
    ) {
        let slot = self.workers.remove(&worker).expect("a worker departs once");
        self.inline_readers.remove(&worker);
        let in_doubt = self.in_doubt.remove(&worker);
        // A departed worker's assignment is settled by its reclaim, which
        // reads the tree after deleting: an earlier delete needs no
        // remembering. (A start-up assignment not read yet keeps its delete
        // for the read, which finds the worker gone.)
        if slot.is_some() {
            self.deleted_before_reply.remove(&worker);
        }
        self.blocked.remove(&worker);
        self.left_workers.insert(&worker);
        self.decide(decision(
            worker.clone(),
            slot.as_ref().map(|assignment| assignment.task.clone()),
        ));
        let Some(assignment) = slot else { return };
        let stage = if assignment.confirmed {
            self.step.commands.push(Command::Reclaim {
                worker: worker.clone(),
                task: assignment.task.clone(),
            });
            DepartedStage::Reclaiming
        } else if in_doubt {
            DepartedStage::Recovering
        } else {
            DepartedStage::Creating
        };
        let previous = self.departed.insert(
            worker,
            Departed {
                task: assignment.task,
                stage,
            },
        );
        assert!(previous.is_none(), "a worker departs once");
    }

    /// The children of `tasks/` (the founding design's listing, each one
    /// newer than everything the master knows): tasks not in the processed
    /// set are new and join the queue in task order; new tasks trigger a
    /// round. Tasks no longer listed are forgotten unless a worker still
    /// holds them.
    pub fn on_tasks_listed(&mut self, children: Vec<String>) -> Step {
        self.tasks_listed(children, None)
    }

    /// The children of `tasks/` as of a read whose stat counted
    /// `child_creates` creates (see `Stat::child_creates`), with the watch
    /// discovery, which also learns tasks from events. An event may be
    /// handled before the reply of a listing read earlier than its change,
    /// so a missing task is known to be gone only when it was created
    /// before the read, i.e. `child_creates` includes its sequence number
    /// (which holds across the 32-bit counter's wrap, see
    /// [`ChildCreates::includes`]); a later one stays (its own
    /// `NodeDeleted` event says when it goes).
    pub fn on_tasks_listed_at(
        &mut self,
        children: Vec<String>,
        child_creates: ChildCreates,
    ) -> Step {
        self.tasks_listed(children, Some(child_creates))
    }

    fn tasks_listed(&mut self, children: Vec<String>, child_creates: Option<ChildCreates>) -> Step {
        let first = self.on_listed(Directory::Tasks);
        let mut present = self.parse_children(Directory::Tasks, children, TaskId::parse);
        // Deleted after this listing may have been read: gone all the same.
        for task in std::mem::take(&mut self.deleted_during_listing) {
            present.remove(&task);
        }
        let created_before_read =
            |task: &TaskId| child_creates.is_none_or(|creates| creates.includes(task.sequence()));
        // A set iterates in sequence order, which is submission order.
        let new_tasks: Vec<TaskId> = present
            .iter()
            .filter(|task| !self.processed_tasks.contains(*task))
            .cloned()
            .collect();
        for task in &new_tasks {
            assert!(self.processed_tasks.insert(task.clone()));
            assert!(self.pending_tasks.insert(task.clone()));
            self.decide_queued(task);
        }
        if first {
            // Tasks seen in the first listing may predate this master and be
            // finished already; tasks that appear later cannot, as only this
            // master assigns.
            let init = self
                .initialisation
                .as_mut()
                .expect("the first listing comes while initialising");
            init.unchecked_tasks.extend(new_tasks.iter().cloned());
        }
        let gone = |task: &TaskId| !present.contains(task) && created_before_read(task);
        let vanished: Vec<TaskId> = self
            .pending_tasks
            .iter()
            .filter(|task| gone(task))
            .cloned()
            .collect();
        for task in vanished {
            self.unqueue(&task);
            self.decide(MasterDecision::TaskVanished { task });
        }
        // Bounded memory: a task that is gone and not held can never come
        // back (sequence numbers are not reused short of 2^32 creates, and
        // a protected name carries its client's token too), so it is
        // forgotten.
        let held = self.held_tasks();
        self.processed_tasks
            .retain(|task| !gone(task) || held.contains(task));
        let newly_deleted: Vec<TaskId> = held.iter().filter(|task| gone(task)).cloned().collect();
        self.deleted_while_held.extend(newly_deleted);
        self.deleted_while_held
            .retain(|task| held.contains(task) && !present.contains(task));
        if child_creates.is_none() {
            assert!(
                self.processed_tasks.len() <= present.len() + held.len(),
                "the processed set outgrew the listing and the held tasks"
            );
        }
        if !new_tasks.is_empty() {
            self.trigger(Trigger::NewTask);
        }
        self.finish_step()
    }

    /// The children of `assignments/`: a worker whose confirmed assignment
    /// is gone has finished and is idle again; newly idle workers trigger a
    /// round. The master's own creates change nothing here.
    pub fn on_assignments_listed(&mut self, children: Vec<String>) -> Step {
        let first = self.on_listed(Directory::Assignments);
        let present = self.parse_children(Directory::Assignments, children, WorkerId::parse);
        let mut became_idle = Vec::new();
        for (worker, slot) in &mut self.workers {
            let finished = matches!(slot, Some(assignment) if assignment.confirmed && !present.contains(worker));
            if finished {
                let assignment = slot.take().expect("matched Some");
                // A listing comes after a disconnection, whose events may
                // be lost: without them, a release cannot be told from a
                // deletion by someone else, and is taken for the former.
                became_idle.push((worker.clone(), assignment.task));
            }
        }
        let unblocked: Vec<WorkerId> = self
            .blocked
            .iter()
            .filter(|worker| !present.contains(*worker))
            .cloned()
            .collect();
        let any_idle = !became_idle.is_empty() || !unblocked.is_empty();
        for (worker, finished_task) in became_idle {
            self.decide(MasterDecision::WorkerIdle {
                worker,
                finished_task,
            });
        }
        for worker in unblocked {
            self.blocked.remove(&worker);
            self.decide(MasterDecision::WorkerUnblocked { worker });
        }
        if first {
            let init = self
                .initialisation
                .as_mut()
                .expect("the first listing comes while initialising");
            for worker in present {
                init.unread_assignments.insert(worker.clone());
                self.step.commands.push(Command::ReadAssignment(worker));
            }
        }
        if any_idle {
            self.trigger(Trigger::WorkerIdle);
        }
        self.finish_step()
    }

    pub(super) fn listing_loop(&mut self, dir: Directory) -> &mut ListingLoop {
        match dir {
            Directory::Workers => &mut self.workers_loop,
            Directory::Tasks => &mut self.tasks_loop,
            Directory::Assignments => &mut self.assignments_loop,
        }
    }

    /// Bookkeeping common to the three listings; returns whether this was
    /// the directory's first listing.
    pub(super) fn on_listed(&mut self, dir: Directory) -> bool {
        assert!(self.started, "a listing arrived before the master started");
        self.assert_not_deposed();
        let (again, first) = self.listing_loop(dir).on_listed();
        if again {
            self.step.commands.push(Command::List(dir));
        }
        first
    }

    pub(super) fn parse_children<T: Ord>(
        &mut self,
        dir: Directory,
        children: Vec<String>,
        parse: fn(&str) -> Result<T, InvalidName>,
    ) -> BTreeSet<T> {
        // Names reported before and gone now are forgotten: the set holds
        // what the directory holds, not every name it ever held (a foreign
        // producer's nodes would make it grow for good), and a name back
        // again is reported again. Usually nothing of this directory is
        // remembered, and then a listing (a backlog's may be large) is not
        // copied into a set for nothing.
        if self
            .ignored_names
            .iter()
            .any(|(ignored_dir, _)| *ignored_dir == dir)
        {
            let listed: BTreeSet<&str> = children.iter().map(String::as_str).collect();
            self.ignored_names.retain(|(ignored_dir, name)| {
                *ignored_dir != dir || listed.contains(name.as_str())
            });
        }
        let mut parsed = BTreeSet::new();
        for name in children {
            match parse(&name) {
                Ok(value) => {
                    parsed.insert(value);
                }
                Err(error) => {
                    if self.ignored_names.insert((dir, name.clone())) {
                        self.decide(MasterDecision::IgnoredNode {
                            dir,
                            name,
                            reason: error.reason,
                        });
                    }
                }
            }
        }
        parsed
    }
}
