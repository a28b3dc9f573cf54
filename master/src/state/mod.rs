//! The master's core: the founding design's data structures and every
//! decision taken on them, with no I/O. The shell feeds it what ZooKeeper
//! said and sends the requests it asks for; tests drive it directly.
//!
//! The data structures are the design's: the set of tasks seen
//! (`processed_tasks`), the queue of tasks not yet assigned
//! (`pending_tasks`), and the map from each registered worker to its
//! assignment (`None` = idle). An assignment round runs only when a new task,
//! a new worker, or a newly idle worker was seen, or when a task went back
//! to the queue.
//!
//! Beyond the founding design, for failures:
//! - The queue is ordered by task id, which is submission order: FIFO, and a
//!   task that goes back to the queue goes back to its original place.
//! - A worker that leaves while holding a task has its assignment reclaimed
//!   (deleted) and the task re-queued unless it already has a result. While
//!   that is under way the task is in `departed`: neither pending nor
//!   assigned, so it can run nowhere else yet.
//! - A create whose reply was lost is never sent again blindly: the tree is
//!   read to learn whether it was applied.
//! - The processed set keeps only tasks of the latest `tasks/` listing and
//!   tasks still held (assigned or being reclaimed), so memory follows the
//!   tree and not history.
//! - Every write is fenced by the epoch (see the shell); when one is refused
//!   the core is deposed and asks for nothing more.
//!
//! Two facts about ZooKeeper shape the details:
//! - The master learns that a worker finished only by listing `assignments/`
//!   and not finding the worker's node. A listing sent before the master's
//!   own create of that node does not show it either, so a worker counts as
//!   idle only when its assignment was confirmed before the listing's reply
//!   came in. Replies reach the core in the order their requests were sent,
//!   and one session's requests are applied in that order, so "confirmed
//!   before" means "created before the listing was taken".
//! - At start-up, tasks may already be finished (they have a `result`) and
//!   workers may already be busy (their assignment exists). The core reads
//!   both before it runs a round, so that no task runs twice.

mod init;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::{Directory, InvalidName, TaskId, WorkerId};

use crate::decision::{Command, MasterDecision, Recovery, RequeueReason, Trigger};
use crate::election::Epoch;
use crate::listing::ListingLoop;
use init::Initialisation;

/// A worker's current task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub task: TaskId,
    /// True once ZooKeeper confirmed the assignment node (or it was found
    /// at start-up). Only then can its absence from a listing mean that the
    /// worker finished.
    pub confirmed: bool,
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
    /// The connection dropped with the write in flight: it may or may not
    /// have been applied.
    Unknown,
    /// The epoch check failed: another master was elected since.
    Fenced,
}

/// Whether a task is finished, read from the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Its `result` node exists.
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

/// Where the assignment of a worker that left stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepartedStage {
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
struct Departed {
    task: TaskId,
    stage: DepartedStage,
}

#[derive(Debug)]
pub struct MasterState {
    epoch: Epoch,
    processed_tasks: BTreeSet<TaskId>,
    pending_tasks: BTreeSet<TaskId>,
    workers: BTreeMap<WorkerId, Option<Assignment>>,
    /// Registered workers whose unconfirmed assignment is being read back
    /// after a lost create reply.
    in_doubt: BTreeSet<WorkerId>,
    /// Workers that left while holding (or being given) a task.
    departed: BTreeMap<WorkerId, Departed>,
    /// Registered workers with no task of this master's whose assignment
    /// node exists all the same (a create refused, an unreadable node found
    /// at start-up): they take no work until a listing shows it gone.
    blocked: BTreeSet<WorkerId>,
    /// Every worker id that left during this master's term. The worker's
    /// completion checks its assignment's version, which cannot tell a
    /// re-created node from the one it read (both are version 0), so
    /// safety rests on an id never being given work again once it left:
    /// zkdist's workers take a new id per session, and a registration that
    /// reappears under an old id (a foreign one, or a stale listing) is
    /// ignored. Ids are not ordered across id counters, so no high-water
    /// mark can replace the set; it grows by one short name per departure.
    left_workers: BTreeSet<WorkerId>,
    /// Set when a write was fenced off: the core then asks for nothing.
    deposed: bool,

    workers_loop: ListingLoop,
    tasks_loop: ListingLoop,
    assignments_loop: ListingLoop,
    /// `Some` from `start` until the state is built.
    initialisation: Option<Initialisation>,
    started: bool,
    rounds_run: u64,
    /// Foreign children already reported, so each is reported once.
    ignored_names: BTreeSet<(Directory, String)>,
    /// The current input's output.
    step: Step,
}

impl MasterState {
    /// The core of a master elected in `epoch`.
    pub fn new(epoch: Epoch) -> MasterState {
        MasterState {
            epoch,
            processed_tasks: BTreeSet::new(),
            pending_tasks: BTreeSet::new(),
            workers: BTreeMap::new(),
            in_doubt: BTreeSet::new(),
            departed: BTreeMap::new(),
            blocked: BTreeSet::new(),
            left_workers: BTreeSet::new(),
            deposed: false,
            workers_loop: ListingLoop::default(),
            tasks_loop: ListingLoop::default(),
            assignments_loop: ListingLoop::default(),
            initialisation: None,
            started: false,
            rounds_run: 0,
            ignored_names: BTreeSet::new(),
            step: Step::default(),
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Tasks of the latest `tasks/` listing, plus tasks still held by a
    /// worker (or being reclaimed from one) whose node a client deleted.
    pub fn processed_tasks(&self) -> &BTreeSet<TaskId> {
        &self.processed_tasks
    }

    /// Tasks waiting for a worker, in task order (oldest first).
    pub fn pending_tasks(&self) -> &BTreeSet<TaskId> {
        &self.pending_tasks
    }

    /// Registered workers and their assignments (`None` = idle).
    pub fn workers(&self) -> &BTreeMap<WorkerId, Option<Assignment>> {
        &self.workers
    }

    /// Registered workers without a task that may be given one.
    pub fn idle_workers(&self) -> impl Iterator<Item = &WorkerId> {
        self.workers
            .iter()
            .filter(|(worker, slot)| slot.is_none() && !self.blocked.contains(*worker))
            .map(|(worker, _)| worker)
    }

    /// Registered workers whose assignment node is in the way (not this
    /// master's): they take no work until a listing shows it gone.
    pub fn blocked_workers(&self) -> &BTreeSet<WorkerId> {
        &self.blocked
    }

    /// Tasks of workers that left, whose assignments are being reclaimed.
    pub fn reclaiming(&self) -> impl Iterator<Item = (&WorkerId, &TaskId)> {
        self.departed
            .iter()
            .map(|(worker, departed)| (worker, &departed.task))
    }

    pub fn rounds_run(&self) -> u64 {
        self.rounds_run
    }

    /// True once a write was refused by the epoch check. A deposed core
    /// asks for nothing more; the shell must stop.
    pub fn is_deposed(&self) -> bool {
        self.deposed
    }

    /// True once the first listings and their follow-up reads are in.
    pub fn is_initialised(&self) -> bool {
        self.started && self.initialisation.is_none()
    }

    /// Starts the three watch loops. Called once.
    pub fn start(&mut self) -> Step {
        assert!(!self.started, "the master starts once");
        self.started = true;
        self.initialisation = Some(Initialisation::default());
        for dir in Directory::ALL {
            assert!(self.listing_loop(dir).start());
            self.step.commands.push(Command::List(dir));
        }
        self.finish_step()
    }

    /// A watch on one of the three directories fired.
    pub fn on_watch_fired(&mut self, dir: Directory) -> Step {
        assert!(self.started, "a watch fired before the master started");
        self.assert_not_deposed();
        if self.listing_loop(dir).on_watch_fired() {
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
            let slot = self.workers.remove(&worker).expect("listed from the map");
            let in_doubt = self.in_doubt.remove(&worker);
            self.blocked.remove(&worker);
            self.left_workers.insert(worker.clone());
            self.decide(MasterDecision::WorkerLeft {
                worker: worker.clone(),
                held_task: slot.as_ref().map(|assignment| assignment.task.clone()),
            });
            let Some(assignment) = slot else { continue };
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
                self.decide(MasterDecision::WorkerJoined { worker });
                joined = true;
            }
        }
        if joined {
            self.trigger(Trigger::NewWorker);
        }
        self.finish_step()
    }

    /// The children of `tasks/`: tasks not in the processed set are new and
    /// join the queue in task order; new tasks trigger a round. Tasks no
    /// longer listed are forgotten unless a worker still holds them.
    pub fn on_tasks_listed(&mut self, children: Vec<String>) -> Step {
        let first = self.on_listed(Directory::Tasks);
        let present = self.parse_children(Directory::Tasks, children, TaskId::parse);
        // A set iterates in sequence order, which is submission order.
        let new_tasks: Vec<TaskId> = present
            .iter()
            .filter(|task| !self.processed_tasks.contains(*task))
            .cloned()
            .collect();
        for task in &new_tasks {
            assert!(self.processed_tasks.insert(task.clone()));
            assert!(self.pending_tasks.insert(task.clone()));
            self.decide(MasterDecision::TaskQueued { task: task.clone() });
        }
        if first {
            // Tasks seen in the first listing may predate this master and be
            // finished already; tasks that appear later cannot, as only this
            // master assigns.
            let init = self
                .initialisation
                .as_mut()
                .expect("the first listing comes while initialising");
            for task in &new_tasks {
                init.unchecked_tasks.insert(task.clone());
                self.step
                    .commands
                    .push(Command::CheckTaskFinished(task.clone()));
            }
        }
        let vanished: Vec<TaskId> = self
            .pending_tasks
            .iter()
            .filter(|task| !present.contains(*task))
            .cloned()
            .collect();
        for task in vanished {
            self.pending_tasks.remove(&task);
            self.decide(MasterDecision::TaskVanished { task });
        }
        // Bounded memory: a task that is neither listed nor held can never
        // come back (sequence numbers are not reused), so it is forgotten.
        let held = self.held_tasks();
        self.processed_tasks
            .retain(|task| present.contains(task) || held.contains(task));
        assert!(
            self.processed_tasks.len() <= present.len() + held.len(),
            "the processed set outgrew the listing and the held tasks"
        );
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
        match data {
            AssignmentData::Gone => {}
            AssignmentData::Task(task) => {
                // The task is running, or held by a dead worker until it is
                // reclaimed: it must not be queued, now or by a later
                // listing.
                self.processed_tasks.insert(task.clone());
                self.pending_tasks.remove(&task);
                match self.workers.get_mut(&worker) {
                    Some(slot) => {
                        assert!(
                            slot.is_none(),
                            "{worker} busy before its assignment was read"
                        );
                        *slot = Some(Assignment {
                            task: task.clone(),
                            confirmed: true,
                        });
                        self.decide(MasterDecision::TaskInProgress { worker, task });
                    }
                    None => {
                        self.decide(MasterDecision::StaleAssignment {
                            worker: worker.clone(),
                            task: Some(task.clone()),
                        });
                        // Its worker is dead: the id is never given work.
                        self.left_workers.insert(worker.clone());
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
                if self.workers.contains_key(&worker) {
                    self.block(worker.clone());
                }
                self.decide(MasterDecision::StaleAssignment { worker, task: None })
            }
        }
        self.finish_step()
    }

    /// Whether a task found by the first `tasks/` listing has a result.
    pub fn on_task_checked(&mut self, task: TaskId, finished: bool) -> Step {
        self.assert_not_deposed();
        let init = self
            .initialisation
            .as_mut()
            .expect("tasks are checked only while initialising");
        assert!(
            init.unchecked_tasks.remove(&task),
            "{task} checked but never requested"
        );
        if finished {
            self.pending_tasks.remove(&task);
            self.decide(MasterDecision::TaskAlreadyFinished { task });
        }
        self.finish_step()
    }

    /// ZooKeeper's answer to a `CreateAssignment` command.
    ///
    /// A refused create puts the task back in the queue and runs a round
    /// for it; the worker is blocked until a listing shows the node in its
    /// way gone (a round would only meet the same refusal). A create in
    /// doubt is read back;
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
        match outcome {
            WriteOutcome::Applied => {
                slot.as_mut().expect("checked above").confirmed = true;
                self.decide(MasterDecision::AssignmentCreated { worker, task });
            }
            WriteOutcome::Failed(error) => {
                *slot = None;
                assert!(self.pending_tasks.insert(task.clone()));
                self.decide(MasterDecision::AssignmentFailed {
                    worker: worker.clone(),
                    task,
                    error,
                });
                self.block(worker);
                self.trigger(Trigger::TaskRequeued);
            }
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
        match recovery {
            // Read after the create was applied, so every later listing was
            // taken after it too: absence from one now means finished.
            Recovery::Applied => slot.as_mut().expect("checked above").confirmed = true,
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
                if found == AssignmentFound::Foreign {
                    self.block(worker.clone());
                }
                self.requeue(task, RequeueReason::AssignmentNotApplied { worker });
            }
            Recovery::TaskGone => {
                *slot = None;
                self.trigger(Trigger::WorkerIdle);
            }
        }
        self.finish_step()
    }

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
    fn held_tasks(&self) -> BTreeSet<TaskId> {
        self.workers
            .values()
            .flatten()
            .map(|assignment| assignment.task.clone())
            .chain(self.departed.values().map(|departed| departed.task.clone()))
            .collect()
    }

    /// Gives registered `worker` no work until an `assignments/` listing
    /// shows its node gone. No listing is asked for: the node exists now,
    /// and the `assignments/` watch (always armed or being re-armed by a
    /// listing in flight) fires when it is deleted.
    fn block(&mut self, worker: WorkerId) {
        assert!(
            matches!(self.workers.get(&worker), Some(None)),
            "only a registered worker without a task is blocked"
        );
        self.blocked.insert(worker);
    }

    /// Asks for the assignment of departed `worker` to be deleted.
    fn reclaim(&mut self, worker: WorkerId, task: TaskId) {
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
    fn requeue(&mut self, task: TaskId, reason: RequeueReason) {
        if !self.processed_tasks.contains(&task) {
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

    /// A write was fenced off: record it, and ask for nothing more.
    fn depose(&mut self) -> Step {
        self.deposed = true;
        self.decide(MasterDecision::Deposed { epoch: self.epoch });
        self.finish_step()
    }

    fn assert_not_deposed(&self) {
        assert!(!self.deposed, "an input reached a deposed master");
    }

    fn listing_loop(&mut self, dir: Directory) -> &mut ListingLoop {
        match dir {
            Directory::Workers => &mut self.workers_loop,
            Directory::Tasks => &mut self.tasks_loop,
            Directory::Assignments => &mut self.assignments_loop,
        }
    }

    /// Bookkeeping common to the three listings; returns whether this was
    /// the directory's first listing.
    fn on_listed(&mut self, dir: Directory) -> bool {
        assert!(self.started, "a listing arrived before the master started");
        self.assert_not_deposed();
        let (again, first) = self.listing_loop(dir).on_listed();
        if again {
            self.step.commands.push(Command::List(dir));
        }
        first
    }

    fn parse_children<T: Ord>(
        &mut self,
        dir: Directory,
        children: Vec<String>,
        parse: fn(&str) -> Result<T, InvalidName>,
    ) -> BTreeSet<T> {
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

    fn decide(&mut self, decision: MasterDecision) {
        self.step.decisions.push(decision);
    }

    /// Runs a round now, or remembers why one must run once initialised.
    fn trigger(&mut self, trigger: Trigger) {
        match &mut self.initialisation {
            Some(init) => {
                init.triggers.insert(trigger);
            }
            None => self.run_round(vec![trigger]),
        }
    }

    /// Assigns pending tasks, oldest first, to idle workers until one of
    /// the two runs out.
    fn run_round(&mut self, triggers: Vec<Trigger>) {
        assert!(self.is_initialised(), "a round before initialisation");
        assert!(!triggers.is_empty(), "a round runs only on a trigger");
        self.rounds_run += 1;
        let mut assigned = Vec::new();
        for (worker, slot) in &mut self.workers {
            if slot.is_some() || self.blocked.contains(worker) {
                continue;
            }
            let Some(task) = self.pending_tasks.pop_first() else {
                break;
            };
            *slot = Some(Assignment {
                task: task.clone(),
                confirmed: false,
            });
            self.step.commands.push(Command::CreateAssignment {
                worker: worker.clone(),
                task: task.clone(),
            });
            assigned.push((worker.clone(), task));
        }
        assert!(
            self.pending_tasks.is_empty() || self.idle_workers().next().is_none(),
            "a round stops only when tasks or idle workers run out"
        );
        self.decide(MasterDecision::Round {
            round: self.rounds_run,
            triggers,
            assigned,
        });
    }

    /// Ends an input: finishes initialisation if everything is in, checks
    /// the invariants, and hands the output over.
    fn finish_step(&mut self) -> Step {
        if self.deposed {
            assert!(
                self.step.commands.is_empty(),
                "a deposed master asks for {:?}",
                self.step.commands
            );
        } else if self
            .initialisation
            .as_ref()
            .is_some_and(|init| init.is_complete(self.all_listed_once()))
        {
            let init = self.initialisation.take().expect("checked Some");
            let busy_workers = self.workers.values().filter(|slot| slot.is_some()).count();
            self.decide(MasterDecision::Initialised {
                workers: self.workers.len(),
                pending_tasks: self.pending_tasks.len(),
                busy_workers,
            });
            if !init.triggers.is_empty() {
                self.run_round(init.triggers.into_iter().collect());
            }
        }
        self.check_invariants();
        std::mem::take(&mut self.step)
    }

    fn all_listed_once(&self) -> bool {
        self.workers_loop.listed_once()
            && self.tasks_loop.listed_once()
            && self.assignments_loop.listed_once()
    }

    /// What must hold after every input. Linear in the state's size, so
    /// checked in debug builds (and so in every test) only.
    fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        // Where each task is: at most one of pending, held by a registered
        // worker, or being reclaimed from a departed one.
        let mut held: BTreeMap<&TaskId, &WorkerId> = BTreeMap::new();
        for (worker, assignment) in self
            .workers
            .iter()
            .filter_map(|(worker, slot)| slot.as_ref().map(|a| (worker, a)))
        {
            let task = &assignment.task;
            if let Some(other) = held.insert(task, worker) {
                panic!("{task} is assigned to two workers, {other} and {worker}");
            }
            assert!(
                assignment.confirmed || self.is_initialised(),
                "{worker} was assigned {task} before initialisation"
            );
            assert!(
                !self.in_doubt.contains(worker) || !assignment.confirmed,
                "{worker}'s confirmed assignment {task} is in doubt"
            );
        }
        for worker in &self.in_doubt {
            assert!(
                matches!(self.workers.get(worker), Some(Some(_))),
                "{worker} is in doubt without an assignment"
            );
        }
        for worker in &self.blocked {
            assert!(
                matches!(self.workers.get(worker), Some(None)),
                "{worker} is blocked but not a registered worker without a task"
            );
        }
        for (worker, departed) in &self.departed {
            assert!(
                self.left_workers.contains(worker),
                "{worker} departed without leaving"
            );
            let task = &departed.task;
            assert!(
                !self.workers.contains_key(worker),
                "{worker} departed but is registered"
            );
            if let Some(other) = held.insert(task, worker) {
                panic!("{task} is held by {other} and being reclaimed from {worker}");
            }
        }
        for (task, worker) in &held {
            assert!(
                !self.pending_tasks.contains(*task),
                "{task} is both pending and held by {worker}"
            );
            assert!(
                self.processed_tasks.contains(*task),
                "{task} is held by {worker} but was never seen"
            );
        }
        for task in &self.pending_tasks {
            assert!(
                self.processed_tasks.contains(task),
                "{task} is pending but was never seen"
            );
        }
        for listing in [&self.workers_loop, &self.tasks_loop, &self.assignments_loop] {
            listing.check();
        }
        if !self.is_initialised() {
            assert_eq!(self.rounds_run, 0, "a round ran before initialisation");
        }
    }
}
