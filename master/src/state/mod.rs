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
//! - With the watch discovery, the master hears of each finished
//!   assignment from the `NodeDeleted` event of its node, and lists
//!   `assignments/` only to start and to reconcile after a reconnection.
//!   An event is always handled before the reply to any read taken after
//!   its change, but it may overtake replies to requests sent earlier: a
//!   worker's delete can come before the reply of the create of the very
//!   node it deletes. Such a delete is remembered until that reply comes.
//!
//! This file holds the state, its accessors, start-up and the end of every
//! step; each child module holds the inputs and decisions of one concern
//! (`listings`, `init`, `in_doubt`, `departed`, `round`, `invariants`, and
//! for the watch discovery `reconcile`, `task_events`, `assignment_events`
//! and `read_ahead`), and `outcomes` the types the shell feeds in.

mod assignment_events;
#[cfg(test)]
mod assignment_watch_tests;
mod departed;
mod in_doubt;
mod init;
mod invariants;
mod left_workers;
mod listings;
mod outcomes;
mod read_ahead;
#[cfg(test)]
mod read_ahead_tests;
mod reconcile;
mod registrations;
#[cfg(test)]
mod registrations_tests;
mod round;
mod task_events;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod watch_tests;

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::{Directory, TaskId, WorkerId};

use crate::decision::{Command, MasterDecision, SEQUENCE_WARNING_CREATES};
use crate::discovery::TaskDiscovery;
use crate::election::Epoch;
use crate::listing::ListingLoop;
use departed::{Departed, DepartedStage};
use init::Initialisation;
pub use init::TASK_CHECKS_PER_BATCH;
use left_workers::LeftWorkers;
pub use outcomes::{
    Assignment, AssignmentData, AssignmentFound, ReclaimOutcome, Step, TaskStatus, WriteOutcome,
};
use read_ahead::ReadAhead;
pub use registrations::RegistrationRead;

#[derive(Debug)]
pub struct MasterState {
    epoch: Epoch,
    discovery: TaskDiscovery,
    processed_tasks: BTreeSet<TaskId>,
    /// Held tasks that the latest `tasks/` listing no longer showed: a
    /// client deleted them while a worker held them. Each is forgotten as
    /// soon as no worker holds it, and never queued again.
    deleted_while_held: BTreeSet<TaskId>,
    /// Tasks released without their result heard of (see
    /// [`Assignment::result_heard`]), by the worker that held
    /// them: their status is read ([`Command::CheckReleasedTask`]) once
    /// they have waited a whole [`crate::RELEASE_CHECK_DELAY_MS`] without
    /// their result being heard of. The client may report a result's event
    /// after the release's (they reach it through two watches), so most
    /// such releases are explained within the same burst of events, and
    /// cost nothing. `released_unheard` holds those released since the
    /// last time the checks were due, `released_unheard_due` those
    /// released before, whose read goes out next time.
    released_unheard: BTreeMap<TaskId, WorkerId>,
    released_unheard_due: BTreeMap<TaskId, WorkerId>,
    /// Released tasks whose status is being read (`CheckReleasedTask`).
    checking_released: BTreeSet<TaskId>,
    /// Tasks queued again once already for a release without a result.
    /// A worker may also give a task up without a result on its own (a
    /// refused result it could not mark refused, an assignment it cannot
    /// read): such a task would go round the workers for ever, each
    /// running it, so it is queued again once, and left after. Each leaves
    /// when its result is heard of, or its node is deleted.
    requeued_after_release: BTreeSet<TaskId>,
    /// Watch discovery: tasks whose `NodeDeleted` event was handled while a
    /// `tasks/` listing was in flight. That listing may have been read
    /// before the delete (its reply can come after the event), so it must
    /// not bring them back; cleared when it is handled. Bounded by the
    /// deletes during one listing's flight.
    deleted_during_listing: BTreeSet<TaskId>,
    /// Watch discovery: a reconcile listing of `tasks/` failed and waits for
    /// the shell's retry ([`MasterState::on_reconcile_due`]); a
    /// reconnection meanwhile does not list it at once (each failed attempt
    /// costs the connection).
    reconcile_deferred: bool,
    /// Watch discovery: workers whose assignment node's `NodeDeleted` event
    /// was handled before the reply that tells the master what the node
    /// held: the create's (or its read-back's) for a task of this master,
    /// the start-up read for an assignment found by the first listing.
    /// Events can overtake replies to earlier requests; each delete is
    /// applied when its reply comes. Bounded by the workers.
    deleted_before_reply: BTreeSet<WorkerId>,
    pending_tasks: BTreeSet<TaskId>,
    /// Payloads of the queue's first tasks, read ahead for inline
    /// assignments (`read_ahead`); at most `read_ahead_tasks` of them, all
    /// of queued tasks.
    read_ahead: BTreeMap<TaskId, ReadAhead>,
    read_ahead_tasks: usize,
    /// The tasks of the batch of payload reads that is out, in the order
    /// asked (ascending: the queue's order), if one is. One at a time, so
    /// that the tasks queued meanwhile go out together in the next.
    payload_batch: Option<Vec<TaskId>>,
    /// Registered workers whose registration says they read inline
    /// payloads (see `zkdist_coord::registration`): only they are given
    /// one. Read once per worker, with a payload read-ahead only.
    inline_readers: BTreeSet<WorkerId>,
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
    /// mark can replace the set; zkdist's numbered ids are kept as ranges,
    /// so that it grows with the gaps among them, not with the departures.
    left_workers: LeftWorkers,
    /// Set when a write was fenced off: the core then asks for nothing.
    deposed: bool,
    /// Whether a queued task's number was reported near the end of
    /// ZooKeeper's sequence counter, and at or past it: once each per
    /// leadership (each session that wins the election builds a new state).
    sequence_near_limit_reported: bool,
    sequence_limit_reached_reported: bool,

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
    /// The core of a master elected in `epoch`, discovering tasks with
    /// `discovery`.
    pub fn new(epoch: Epoch, discovery: TaskDiscovery) -> MasterState {
        MasterState {
            epoch,
            discovery,
            processed_tasks: BTreeSet::new(),
            deleted_while_held: BTreeSet::new(),
            released_unheard: BTreeMap::new(),
            released_unheard_due: BTreeMap::new(),
            checking_released: BTreeSet::new(),
            requeued_after_release: BTreeSet::new(),
            deleted_during_listing: BTreeSet::new(),
            reconcile_deferred: false,
            deleted_before_reply: BTreeSet::new(),
            pending_tasks: BTreeSet::new(),
            read_ahead: BTreeMap::new(),
            read_ahead_tasks: 0,
            payload_batch: None,
            inline_readers: BTreeSet::new(),
            workers: BTreeMap::new(),
            in_doubt: BTreeSet::new(),
            departed: BTreeMap::new(),
            blocked: BTreeSet::new(),
            left_workers: LeftWorkers::default(),
            deposed: false,
            sequence_near_limit_reported: false,
            sequence_limit_reached_reported: false,
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

    pub fn discovery(&self) -> TaskDiscovery {
        self.discovery
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

    /// True while a failed reconcile listing of `tasks/` waits for
    /// [`MasterState::on_reconcile_due`] (watch discovery).
    pub fn is_reconcile_deferred(&self) -> bool {
        self.reconcile_deferred
    }

    /// Whether released tasks wait for their result to be heard of (see
    /// [`MasterState::on_release_checks_due`]).
    pub fn has_release_checks_waiting(&self) -> bool {
        !self.released_unheard.is_empty() || !self.released_unheard_due.is_empty()
    }

    /// True once the first listings and their follow-up reads are in.
    pub fn is_initialised(&self) -> bool {
        self.started && self.initialisation.is_none()
    }

    /// Starts the three watch loops. With the watch discovery, the
    /// recursive watches on `tasks/` and `assignments/` go out before their
    /// first listings, so that every task and every finished assignment is
    /// either listed or reported. Called once.
    pub fn start(&mut self) -> Step {
        assert!(!self.started, "the master starts once");
        self.started = true;
        self.initialisation = Some(Initialisation::default());
        for dir in Directory::ALL {
            assert!(self.listing_loop(dir).start());
            if self.is_watched_recursively(dir) {
                self.step.commands.push(Command::WatchRecursively(dir));
            }
            self.step.commands.push(Command::List(dir));
        }
        self.finish_step()
    }

    /// Whether the master learns the changes under `dir` from a recursive
    /// watch (and lists it only to start and to reconcile).
    pub fn is_watched_recursively(&self, dir: Directory) -> bool {
        self.discovery.watches_recursively(dir)
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

    fn decide(&mut self, decision: MasterDecision) {
        self.step.decisions.push(decision);
    }

    /// Decides that `task`, just added to the pending queue, is queued,
    /// and warns when its number nears the end of ZooKeeper's 32-bit
    /// sequence counter, and again when it is at or past it (read unsigned,
    /// as the queue orders it: numbers past the wrap are past the end).
    fn decide_queued(&mut self, task: &TaskId) {
        self.decide(MasterDecision::TaskQueued { task: task.clone() });
        let number = task.sequence() as u32;
        let last = i32::MAX as u32;
        let report = if number >= last {
            !std::mem::replace(&mut self.sequence_limit_reached_reported, true)
        } else if number >= last - SEQUENCE_WARNING_CREATES {
            !std::mem::replace(&mut self.sequence_near_limit_reported, true)
        } else {
            false
        };
        if report {
            self.decide(MasterDecision::SequenceCounterNearLimit { task: task.clone() });
        }
    }

    /// Ends an input: finishes initialisation if everything is in, checks
    /// the invariants, and hands the output over.
    fn finish_step(&mut self) -> Step {
        if !self.deposed {
            self.send_result_checks_when_due();
        }
        self.forget_released_deleted_tasks();
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
        self.read_payloads_ahead();
        self.check_invariants();
        std::mem::take(&mut self.step)
    }

    fn all_listed_once(&self) -> bool {
        self.workers_loop.listed_once()
            && self.tasks_loop.listed_once()
            && self.assignments_loop.listed_once()
    }
}
