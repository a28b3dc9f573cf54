//! The master's core: the founding design's data structures and every
//! decision taken on them, with no I/O. The shell feeds it what ZooKeeper
//! said and sends the requests it asks for; tests drive it directly.
//!
//! The data structures are exactly the design's: the set of every task ever
//! seen (`processed_tasks`), the FIFO queue of tasks not yet assigned
//! (`pending_tasks`), and the map from each registered worker to its
//! assignment (`None` = idle). An assignment round runs only when a new task,
//! a new worker, or a newly idle worker was seen.
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

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use zkdist_coord::{Directory, InvalidName, TaskId, WorkerId};

use crate::decision::{Command, MasterDecision, Trigger};
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

/// What one input produced: the decisions taken, in order, and the requests
/// the shell must now send, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub decisions: Vec<MasterDecision>,
    pub commands: Vec<Command>,
}

#[derive(Debug, Default)]
pub struct MasterState {
    processed_tasks: BTreeSet<TaskId>,
    pending_tasks: VecDeque<TaskId>,
    workers: BTreeMap<WorkerId, Option<Assignment>>,

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
    pub fn new() -> MasterState {
        MasterState::default()
    }

    /// Every task ever seen.
    pub fn processed_tasks(&self) -> &BTreeSet<TaskId> {
        &self.processed_tasks
    }

    /// Tasks waiting for a worker, oldest first.
    pub fn pending_tasks(&self) -> &VecDeque<TaskId> {
        &self.pending_tasks
    }

    /// Registered workers and their assignments (`None` = idle).
    pub fn workers(&self) -> &BTreeMap<WorkerId, Option<Assignment>> {
        &self.workers
    }

    pub fn idle_workers(&self) -> impl Iterator<Item = &WorkerId> {
        self.workers
            .iter()
            .filter(|(_, slot)| slot.is_none())
            .map(|(worker, _)| worker)
    }

    pub fn rounds_run(&self) -> u64 {
        self.rounds_run
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
        if self.listing_loop(dir).on_watch_fired() {
            self.step.commands.push(Command::List(dir));
        }
        self.finish_step()
    }

    /// The children of `workers/`: workers that joined become idle entries,
    /// workers that left are dropped. New workers trigger a round.
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
            self.decide(MasterDecision::WorkerLeft {
                worker,
                lost_task: slot.map(|assignment| assignment.task),
            });
        }
        let mut joined = false;
        for worker in present {
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
    /// join the queue in sequence order; new tasks trigger a round.
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
            self.pending_tasks.push_back(task.clone());
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
        let mut vanished = Vec::new();
        self.pending_tasks.retain(|task| {
            let keep = present.contains(task);
            if !keep {
                vanished.push(task.clone());
            }
            keep
        });
        for task in vanished {
            self.decide(MasterDecision::TaskVanished { task });
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
                became_idle.push((worker.clone(), assignment.task));
            }
        }
        let any_idle = !became_idle.is_empty();
        for (worker, finished_task) in became_idle {
            self.decide(MasterDecision::WorkerIdle {
                worker,
                finished_task,
            });
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
    pub fn on_assignment_read(&mut self, worker: WorkerId, data: AssignmentData) -> Step {
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
                // The task is running (or lost with a dead worker): it must
                // never be queued, now or by a later listing.
                self.processed_tasks.insert(task.clone());
                self.pending_tasks.retain(|pending| *pending != task);
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
                    None => self.decide(MasterDecision::StaleAssignment {
                        worker,
                        task: Some(task),
                    }),
                }
            }
            AssignmentData::Unreadable => {
                self.decide(MasterDecision::StaleAssignment { worker, task: None })
            }
        }
        self.finish_step()
    }

    /// Whether a task found by the first `tasks/` listing has a result.
    pub fn on_task_checked(&mut self, task: TaskId, finished: bool) -> Step {
        let init = self
            .initialisation
            .as_mut()
            .expect("tasks are checked only while initialising");
        assert!(
            init.unchecked_tasks.remove(&task),
            "{task} checked but never requested"
        );
        if finished {
            self.pending_tasks.retain(|pending| *pending != task);
            self.decide(MasterDecision::TaskAlreadyFinished { task });
        }
        self.finish_step()
    }

    /// ZooKeeper's answer to a `CreateAssignment` command. On failure the
    /// task goes back to the head of the queue; no round runs (a failure is
    /// not one of the three triggers).
    pub fn on_assignment_created(
        &mut self,
        worker: WorkerId,
        task: TaskId,
        outcome: Result<(), String>,
    ) -> Step {
        let slot = self.workers.get_mut(&worker);
        if let Some(slot) = &slot {
            let holds_it = matches!(slot, Some(a) if a.task == task && !a.confirmed);
            assert!(
                holds_it,
                "create of {worker}'s assignment {task} answered, but the worker holds {slot:?}"
            );
        }
        match outcome {
            Ok(()) => {
                if let Some(Some(assignment)) = slot {
                    assignment.confirmed = true;
                }
                self.decide(MasterDecision::AssignmentCreated { worker, task });
            }
            Err(error) => {
                if let Some(slot) = slot {
                    *slot = None;
                }
                assert!(!self.pending_tasks.contains(&task));
                self.pending_tasks.push_front(task.clone());
                self.decide(MasterDecision::AssignmentFailed {
                    worker,
                    task,
                    error,
                });
            }
        }
        self.finish_step()
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
            if slot.is_some() {
                continue;
            }
            let Some(task) = self.pending_tasks.pop_front() else {
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
        if self
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
        let pending: BTreeSet<&TaskId> = self.pending_tasks.iter().collect();
        assert_eq!(
            pending.len(),
            self.pending_tasks.len(),
            "a task is queued twice: {:?}",
            self.pending_tasks
        );
        for task in &pending {
            assert!(
                self.processed_tasks.contains(*task),
                "{task} is pending but was never seen"
            );
        }
        let mut assigned: BTreeSet<&TaskId> = BTreeSet::new();
        for (worker, assignment) in self
            .workers
            .iter()
            .filter_map(|(worker, slot)| slot.as_ref().map(|a| (worker, a)))
        {
            let task = &assignment.task;
            assert!(
                assigned.insert(task),
                "{task} is assigned to two workers, one is {worker}"
            );
            assert!(
                !pending.contains(task),
                "{task} is both pending and assigned to {worker}"
            );
            assert!(
                self.processed_tasks.contains(task),
                "{task} is assigned to {worker} but was never seen"
            );
            assert!(
                assignment.confirmed || self.is_initialised(),
                "{worker} was assigned {task} before initialisation"
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
