//! The checks every end-to-end run must pass, on the simulator and on a
//! real server alike: they read the client's results and the actors'
//! decision logs, and say what went wrong.

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::{TaskId, TaskResult, WorkerId};
use zkdist_master::{MasterDecision, MasterState};
use zkdist_worker::WorkerDecision;

/// What one run produced, as the checks need it.
pub struct RunLog<'a> {
    /// The tasks in submission order, each with the result it must get.
    pub submitted: &'a [(TaskId, TaskResult)],
    /// What waiting for each task returned, in the same order.
    pub results: &'a [TaskResult],
    pub master_decisions: &'a [MasterDecision],
    /// Every worker's decisions (their relative order does not matter).
    pub worker_decisions: &'a [WorkerDecision],
    /// The master's state once the run was quiescent.
    pub final_state: &'a MasterState,
    /// How many workers ran.
    pub workers: usize,
}

/// Checks that every task got exactly one result, and the right one; that
/// no worker ever held two assignments; that no task was assigned twice;
/// that tasks were assigned in submission order, each to the worker that
/// wrote its result; that nothing unexpected happened on the way; and that
/// the master's final view is the quiescent one. Returns what failed.
pub fn check_run(log: &RunLog) -> Result<(), String> {
    // Submission order is sequence order (one client, one submit at a time).
    let tasks: Vec<&TaskId> = log.submitted.iter().map(|(task, _)| task).collect();
    if !tasks.windows(2).all(|pair| pair[0] < pair[1]) {
        return Err(format!("task ids not increasing: {tasks:?}"));
    }
    if log.results.len() != tasks.len() {
        return Err(format!(
            "{} results for {} tasks",
            log.results.len(),
            tasks.len()
        ));
    }

    // Every task's result is the right one.
    for ((task, expected), result) in log.submitted.iter().zip(log.results) {
        if result != expected {
            return Err(format!("{task}: result {result:?}, expected {expected:?}"));
        }
    }

    // Exactly one result was written per task, and nothing went wrong on
    // the way.
    let mut written: BTreeMap<&TaskId, &WorkerId> = BTreeMap::new();
    for decision in log.worker_decisions {
        match decision {
            WorkerDecision::ResultWritten { worker, task, .. } => {
                if let Some(first) = written.insert(task, worker) {
                    return Err(format!(
                        "{task} got a second result, by {worker} after {first}"
                    ));
                }
            }
            WorkerDecision::ResultAlreadyPresent { .. }
            | WorkerDecision::TaskMissing { .. }
            | WorkerDecision::ResultRefused { .. }
            | WorkerDecision::BadAssignment { .. } => {
                return Err(format!("worker decision {decision}"));
            }
            _ => {}
        }
    }
    if written.len() != tasks.len() {
        return Err(format!(
            "{} results written for {} tasks",
            written.len(),
            tasks.len()
        ));
    }

    // Replay the master's log: a worker is assigned only when idle, a task
    // at most once, and in submission order.
    let mut holding: BTreeMap<&WorkerId, &TaskId> = BTreeMap::new();
    let mut assigned_order: Vec<&TaskId> = Vec::new();
    let mut assigned_to: BTreeMap<&TaskId, &WorkerId> = BTreeMap::new();
    for decision in log.master_decisions {
        match decision {
            MasterDecision::Round {
                triggers, assigned, ..
            } => {
                if triggers.is_empty() {
                    return Err(format!("a round without a trigger: {decision}"));
                }
                for (worker, task) in assigned {
                    if let Some(held) = holding.insert(worker, task) {
                        return Err(format!("{worker} assigned {task} while holding {held}"));
                    }
                    if let Some(earlier) = assigned_to.insert(task, worker) {
                        return Err(format!(
                            "{task} assigned twice: to {earlier}, then {worker}"
                        ));
                    }
                    assigned_order.push(task);
                }
            }
            MasterDecision::WorkerIdle {
                worker,
                finished_task,
            } => match holding.remove(worker) {
                Some(held) if held == finished_task => {}
                other => {
                    return Err(format!("{decision} but the log says it held {other:?}"));
                }
            },
            MasterDecision::AssignmentFailed { .. }
            | MasterDecision::WorkerLeft { .. }
            | MasterDecision::TaskVanished { .. }
            | MasterDecision::StaleAssignment { .. }
            | MasterDecision::TaskAlreadyFinished { .. }
            | MasterDecision::TaskInProgress { .. }
            | MasterDecision::AssignmentInDoubt { .. }
            | MasterDecision::AssignmentRecovered { .. }
            | MasterDecision::AssignmentReclaimed { .. }
            | MasterDecision::ReclaimedTaskFinished { .. }
            | MasterDecision::TaskRequeued { .. }
            | MasterDecision::Deposed { .. }
            | MasterDecision::SessionLost { .. }
            | MasterDecision::Restarting { .. }
            | MasterDecision::IgnoredNode { .. } => {
                return Err(format!("master decision {decision}"));
            }
            _ => {}
        }
    }
    if assigned_order != tasks {
        return Err(format!(
            "assignment order differs from submission order: {assigned_order:?}"
        ));
    }
    for (task, worker) in &written {
        if assigned_to.get(task) != Some(worker) {
            return Err(format!(
                "{task} written by {worker}, assigned to {:?}",
                assigned_to.get(task)
            ));
        }
    }

    // At quiescence the master's view is the true one: every task seen,
    // none pending, every worker registered and idle.
    let state = log.final_state;
    let all: BTreeSet<TaskId> = tasks.iter().map(|task| (*task).clone()).collect();
    if state.processed_tasks() != &all {
        return Err("the master's processed set is not the submitted tasks".into());
    }
    if !state.pending_tasks().is_empty() {
        return Err(format!("tasks still pending: {:?}", state.pending_tasks()));
    }
    if state.workers().len() != log.workers || state.idle_workers().count() != log.workers {
        return Err(format!("workers at the end: {:?}", state.workers()));
    }
    Ok(())
}
