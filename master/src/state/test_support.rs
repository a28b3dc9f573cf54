//! Helpers shared by the core's unit tests (`tests`, `watch_tests`,
//! `assignment_watch_tests`, `read_ahead_tests`).

pub(super) use zkdist_coord::ChildCreates;
use zkdist_coord::{Directory, TaskId, WorkerId};

use super::{MasterState, ReclaimOutcome, RegistrationRead, Step, TaskStatus, WriteOutcome};
use crate::decision::{Command, MasterDecision};

/// The pending queue, in order.
pub(super) fn pending(master: &MasterState) -> Vec<TaskId> {
    master.pending_tasks().iter().cloned().collect()
}

pub(super) fn w(n: u32) -> WorkerId {
    WorkerId::parse(&format!("worker-{n:010}")).unwrap()
}

pub(super) fn t(n: i32) -> TaskId {
    TaskId::from_sequence(n)
}

pub(super) fn worker_names(ns: &[u32]) -> Vec<String> {
    ns.iter().map(|n| w(*n).to_string()).collect()
}

pub(super) fn task_names(ns: &[i32]) -> Vec<String> {
    ns.iter().map(|n| t(*n).to_string()).collect()
}

/// What `pick` takes from each of a step's commands it recognises, in
/// order.
pub(super) fn commands<T>(step: &Step, pick: impl Fn(&Command) -> Option<T>) -> Vec<T> {
    step.commands.iter().filter_map(pick).collect()
}

/// Worker `n`'s assignment of `task` was deleted by the reclaim, and the
/// task has no result: it goes back to the queue.
pub(super) fn reclaimed_unfinished(master: &mut MasterState, n: u32, task: TaskId) -> Step {
    master.on_assignment_reclaimed(
        w(n),
        task,
        ReclaimOutcome::Reclaimed {
            deleted: true,
            status: TaskStatus::Unfinished,
        },
    )
}

/// The workers whose registration a step asks to read.
pub(super) fn registration_reads(step: &Step) -> Vec<WorkerId> {
    commands(step, |command| match command {
        Command::ReadRegistration(worker) => Some(worker.clone()),
        _ => None,
    })
}

pub(super) fn creates(step: &Step) -> Vec<(WorkerId, TaskId)> {
    commands(step, |command| match command {
        Command::CreateAssignment { worker, task, .. } => Some((worker.clone(), task.clone())),
        _ => None,
    })
}

/// Starts `master` (a watch-discovery core, not started yet) and answers
/// its first requests: `workers` registered and idle (and reading inline
/// payloads, if the master asks), `tasks/` empty with `child_creates`
/// creates so far, no assignment.
pub(super) fn start_watch_master(
    mut master: MasterState,
    workers: &[u32],
    child_creates: u64,
) -> MasterState {
    master.start();
    let step = master.on_workers_listed(worker_names(workers));
    for worker in registration_reads(&step) {
        master.on_registration_read(
            worker,
            RegistrationRead::Live {
                data: zkdist_coord::registration_data().to_vec(),
            },
        );
    }
    master.on_recursive_watch_added(Directory::Tasks, false);
    master.on_tasks_listed_at(vec![], ChildCreates::new(child_creates));
    master.on_recursive_watch_added(Directory::Assignments, false);
    master.on_assignments_listed(vec![]);
    assert!(master.is_initialised());
    master
}

/// The registered workers change to `ns`: the step in which the master
/// hears of it and lists them.
pub(super) fn workers_now(master: &mut MasterState, ns: &[u32]) -> Step {
    master.on_watch_fired(Directory::Workers);
    master.on_workers_listed(worker_names(ns))
}

/// Confirms every create of a step.
pub(super) fn confirm(master: &mut MasterState, step: &Step) {
    for (worker, task) in creates(step) {
        confirm_created(master, worker, task);
    }
}

/// Answers the create of `worker`'s assignment of `task` as applied: the
/// master notes it, and asks for nothing more.
pub(super) fn confirm_created(master: &mut MasterState, worker: WorkerId, task: TaskId) {
    let confirmed =
        master.on_assignment_created(worker.clone(), task.clone(), WriteOutcome::Applied);
    assert_eq!(
        confirmed.decisions,
        vec![MasterDecision::AssignmentCreated { worker, task }]
    );
    assert!(confirmed.commands.is_empty());
}
