//! What must hold after every input.

use std::collections::BTreeMap;

use zkdist_coord::{TaskId, WorkerId};

use super::MasterState;

impl MasterState {
    /// What must hold after every input. Linear in the state's size, so
    /// checked in debug builds (and so in every test) only.
    pub(super) fn check_invariants(&self) {
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
