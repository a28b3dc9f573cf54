//! What must hold after every input.

use std::collections::BTreeMap;

use zkdist_coord::{TaskId, WorkerId};

use super::MasterState;

/// The longest pending queue checked task by task after every input.
const FULL_CHECK_MAX_PENDING: usize = 1_024;
/// How many tasks at each end of a longer queue are checked.
const ENDS_CHECKED: usize = 32;

impl MasterState {
    /// What must hold after every input. Linear in the state's size, so
    /// checked in debug builds (and so in every test) only.
    pub(super) fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        self.check_read_ahead();
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
        for task in self
            .checking_released
            .iter()
            .chain(self.released_unheard.keys())
            .chain(self.released_unheard_due.keys())
        {
            assert!(
                !self.pending_tasks.contains(task) && !held.contains_key(task),
                "{task} is queued or held while its release is checked"
            );
        }
        for worker in &self.in_doubt {
            assert!(
                matches!(self.workers.get(worker), Some(Some(_))),
                "{worker} is in doubt without an assignment"
            );
        }
        // What every round leaves (see `run_round`), and what each input
        // that frees a worker or queues a task must restore by running one:
        // never a queued task beside a worker free to take it.
        if self.is_initialised() {
            assert!(
                self.pending_tasks.is_empty() || self.idle_workers().next().is_none(),
                "{} tasks wait beside idle {:?} with no round",
                self.pending_tasks.len(),
                self.idle_workers().next()
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
        // Every pending task was seen. Checked in full while the queue is
        // short; a long one would make every input (and so a backlog's
        // test) quadratic, so only its ends are checked then.
        assert!(
            self.pending_tasks.len() <= self.processed_tasks.len(),
            "more tasks pending than seen"
        );
        let (head, tail) = if self.pending_tasks.len() <= FULL_CHECK_MAX_PENDING {
            (self.pending_tasks.len(), 0)
        } else {
            (ENDS_CHECKED, ENDS_CHECKED)
        };
        let ends = self
            .pending_tasks
            .iter()
            .take(head)
            .chain(self.pending_tasks.iter().rev().take(tail));
        for task in ends {
            assert!(
                self.processed_tasks.contains(task),
                "{task} is pending but was never seen"
            );
        }
        assert!(
            self.deleted_during_listing.is_empty() || self.tasks_loop.in_flight(),
            "deletes are remembered for a tasks listing only while one is in flight"
        );
        assert!(
            !self.reconcile_deferred || !self.tasks_loop.in_flight(),
            "a tasks listing is in flight while the reconcile is deferred"
        );
        for worker in &self.deleted_before_reply {
            let awaits_create_reply = matches!(
                self.workers.get(worker),
                Some(Some(assignment)) if !assignment.confirmed
            );
            let awaits_read = self
                .initialisation
                .as_ref()
                .is_some_and(|init| init.unread_assignments.contains(worker));
            assert!(
                awaits_create_reply || awaits_read,
                "a delete of {worker}'s assignment is remembered, but no reply about it is awaited"
            );
        }
        for listing in [&self.workers_loop, &self.tasks_loop, &self.assignments_loop] {
            listing.check();
        }
        if !self.is_initialised() {
            assert_eq!(self.rounds_run, 0, "a round ran before initialisation");
        }
        if let Some(init) = &self.initialisation {
            if init.checks_sent {
                assert!(
                    init.unchecked_tasks.is_empty(),
                    "every task to check went out in a batch"
                );
            } else {
                assert!(
                    init.check_batches.is_empty(),
                    "checks out before they are due"
                );
            }
        }
    }
}
