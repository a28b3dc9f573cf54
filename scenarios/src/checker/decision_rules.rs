//! The rules judged on the actors' own words: each master and worker
//! decision, and each handler run, against the decisions before it.

use zkdist_coord::{SessionId, TaskId, WorkerId};
use zkdist_master::{MasterDecision, Recovery};
use zkdist_worker::{CompletionReadBack, WorkerDecision};

use super::submission_order::{NewestAssigned, Position};
use super::{Checker, Invariant, MasterLog, Step, never_submitted};

impl Checker {
    /// Checks one decision of master candidate `actor` against its earlier
    /// decisions (on the same session) and the rounds so far.
    pub fn on_master_decision(&mut self, actor: &str, decision: &MasterDecision) -> bool {
        if !self.judging() {
            return false;
        }
        let step = || Step::Decision {
            actor: actor.to_owned(),
            text: decision.to_string(),
        };
        let position_of = |task: &TaskId| self.submissions_in_order.position(task);
        let log = self.master_logs.entry(actor.to_owned()).or_default();
        match decision {
            MasterDecision::Round { assigned, .. } => {
                for (worker, task) in assigned {
                    let log = self.master_logs.entry(actor.to_owned()).or_default();
                    let position = self.submissions_in_order.position(task);
                    if let Some((invariant, detail)) = round_breach(
                        log,
                        self.first_failure.is_some(),
                        &self.last_round_task,
                        position,
                        worker,
                        task,
                    ) {
                        return self.violate(invariant, detail, step());
                    }
                    log.holding.insert(worker.clone(), task.clone());
                    log.unqueue(position);
                    log.creates.chosen((worker.clone(), task.clone()));
                    if let Some(position) = position {
                        self.last_round_task.assigned(position, task);
                    }
                }
            }
            MasterDecision::TaskQueued { task } | MasterDecision::TaskRequeued { task, .. } => {
                log.queue(position_of(task), task);
            }
            MasterDecision::TaskVanished { task }
            | MasterDecision::TaskAlreadyFinished { task }
            | MasterDecision::StaleAssignment {
                task: Some(task), ..
            } => {
                log.unqueue(position_of(task));
            }
            // A create the server refused puts the task back at its place
            // in the queue (a `TaskVanished` follows for a task deleted
            // meanwhile).
            MasterDecision::AssignmentFailed {
                worker,
                task,
                error,
            } => {
                log.holding.remove(worker);
                log.queue(position_of(task), task);
                log.creates.settled(&(worker.clone(), task.clone()));
                self.on_failure(&format!("{actor}: {decision}: {error}"));
            }
            // The create found the worker gone: the task is re-queued
            // (`TaskRequeued` follows) behind creates already sent, as after
            // any refused create.
            MasterDecision::AssignmentRefused { worker, task, .. } => {
                log.holding.remove(worker);
                log.creates.settled(&(worker.clone(), task.clone()));
                self.on_failure(&format!("{actor}: {decision}"));
            }
            // Applied, or lost with the connection: it reaches the server
            // no later than now.
            MasterDecision::AssignmentInDoubt { worker, task } => {
                log.creates.settled(&(worker.clone(), task.clone()));
            }
            MasterDecision::WorkerIdle { worker, .. }
            | MasterDecision::WorkerLeft { worker, .. }
            | MasterDecision::AssignmentReclaimed { worker, .. } => {
                log.holding.remove(worker);
            }
            // Only an applied create whose task is not finished leaves the
            // worker busy.
            MasterDecision::AssignmentRecovered {
                worker, recovery, ..
            } if *recovery != Recovery::Applied => {
                log.holding.remove(worker);
            }
            MasterDecision::TaskInProgress { worker, task } => {
                log.holding.insert(worker.clone(), task.clone());
                log.unqueue(position_of(task));
            }
            MasterDecision::Elected { .. } => {
                // A new leadership builds its state from the tree.
                log.holding.clear();
                log.queued.clear();
                log.creates.clear();
            }
            _ => {}
        }
        false
    }

    /// The handler of worker actor `actor`'s process number `process`
    /// started (`running`) or ended a run: the run is for the task of the
    /// actor's latest `TaskStarted` (a process that crashed notes nothing
    /// more, so the latest is its successor's).
    ///
    /// The assertions hold in every run; a handler calls this, so one that
    /// failed would show as a task whose handler panicked.
    pub fn on_handler_run(&mut self, actor: &str, process: u64, running: bool) {
        let key = (actor.to_owned(), process);
        if running {
            let started = self
                .last_started
                .get(actor)
                .cloned()
                .expect("a handler runs only after its worker started a task");
            let previous = self.handlers_running.insert(key, started);
            assert!(
                previous.is_none(),
                "{actor} process {process} runs one handler at a time"
            );
        } else {
            let ended = self.handlers_running.remove(&key);
            assert!(
                ended.is_some(),
                "{actor} process {process}'s handler ends a run it started"
            );
        }
    }

    /// Names the handler run, if any, of a worker whose session is
    /// `session`.
    pub(super) fn handler_running_in(&self, session: SessionId) -> Option<String> {
        self.handlers_running
            .iter()
            .find(|(_, (worker, _))| self.worker_sessions.get(worker) == Some(&session))
            .map(|((actor, _), (worker, task))| {
                format!(
                    "{actor}'s handler still ran {task} for {worker} when the server expired \
                     its session for its timeout: a master may now give the task to another worker"
                )
            })
    }

    /// Checks one worker decision against what the workers did before.
    pub fn on_worker_decision(&mut self, actor: &str, decision: &WorkerDecision) -> bool {
        if let WorkerDecision::TaskStarted { worker, task } = decision {
            // Kept while judging or not: the handler's runs are told apart
            // by it.
            self.last_started
                .insert(actor.to_owned(), (worker.clone(), task.clone()));
        }
        if !self.judging() {
            return false;
        }
        let step = || Step::Decision {
            actor: actor.to_owned(),
            text: decision.to_string(),
        };
        let found = match decision {
            WorkerDecision::TaskStarted { worker, task } => {
                // A worker whose session already ended (it read its
                // assignment just before, or hears of the end late) is a
                // zombie: it runs nothing as far as the rules go, and the
                // zombie-write rule sees to it that it writes nothing.
                let zombie = self
                    .worker_sessions
                    .get(worker)
                    .is_some_and(|session| self.ended_sessions.contains(session));
                if zombie {
                    None
                } else {
                    let found = self.start_breach(worker, task);
                    self.running.insert(worker.clone(), task.clone());
                    found
                }
            }
            WorkerDecision::ResultWritten { worker, task, .. } => self
                .finished_by
                .insert(task.clone(), worker.clone())
                .map(|first| {
                    (
                        Invariant::FinishedExactlyOnce,
                        format!("{task} finished twice: by {first}, then by {worker}"),
                    )
                }),
            WorkerDecision::ResultAlreadyPresent { worker, task } => Some((
                Invariant::FinishedExactlyOnce,
                format!("{worker} ran {task}, whose result was already written: it ran twice"),
            )),
            // The read-back cannot tell this worker's result from an equal
            // one another worker wrote, so it proves nothing against the
            // rules: who wrote the result is judged on the transaction.
            WorkerDecision::CompletionRecovered {
                worker,
                task,
                found: CompletionReadBack::ResultPresent,
            } => {
                self.finished_by
                    .entry(task.clone())
                    .or_insert_with(|| worker.clone());
                None
            }
            // The worker stops running its task: it released it, it was
            // taken back, its session ended or its registration went (it
            // wrote nothing then).
            WorkerDecision::AssignmentReleased { worker, .. }
            | WorkerDecision::AssignmentRevoked { worker, .. }
            | WorkerDecision::TaskAbandoned { worker, .. }
            | WorkerDecision::SessionLost { worker }
            | WorkerDecision::RegistrationLost { worker, .. } => {
                self.running.remove(worker);
                None
            }
            _ => None,
        };
        match found {
            Some((invariant, detail)) => self.violate(invariant, detail, step()),
            None => false,
        }
    }

    fn start_breach(&self, worker: &WorkerId, task: &TaskId) -> Option<(Invariant, String)> {
        // A task a client already deleted cannot run again: the worker
        // finds its node gone.
        if let Some(by) = self
            .finished_by
            .get(task)
            .filter(|_| !self.deleted_tasks.contains(task))
        {
            return Some((
                Invariant::FinishedExactlyOnce,
                format!("{worker} started {task}, which {by} already finished"),
            ));
        }
        if let Some(held) = self.running.get(worker) {
            return Some((
                Invariant::WorkerAssignedTwice,
                format!("{worker} started {task} while running {held}"),
            ));
        }
        if let Some((other, _)) = self.running.iter().find(|(_, held)| *held == task) {
            return Some((
                Invariant::TaskAssignedTwice,
                format!("{worker} started {task} while {other} runs it"),
            ));
        }
        None
    }
}

/// Whether a round of the master whose log is `log` breaks a rule by
/// assigning `task` to `worker`.
fn round_breach(
    log: &MasterLog,
    after_failure: bool,
    last_round_task: &NewestAssigned,
    position: Option<Position>,
    worker: &WorkerId,
    task: &TaskId,
) -> Option<(Invariant, String)> {
    if let Some(held) = log.holding.get(worker) {
        return Some((
            Invariant::WorkerAssignedTwice,
            format!(
                "a round assigns {task} to {worker}, which the master's log shows holding {held}"
            ),
        ));
    }
    if let Some((other, _)) = log.holding.iter().find(|(_, held)| *held == task) {
        return Some((
            Invariant::TaskAssignedTwice,
            format!(
                "a round assigns {task} to {worker} while the master's log shows {other} holding it"
            ),
        ));
    }
    // Faults or not, the master's own queue is served oldest first: a task
    // it re-queued after a failure goes back to its place, ahead of newer
    // ones. (The tree can show assignments out of order after a failure:
    // a refused create re-queues its task behind creates already sent.)
    if let Some(position) = position
        && let Some((_, older)) = log.queued.range(..position).next()
    {
        return Some((
            Invariant::FifoOrder,
            format!(
                "a round assigns {task} to {worker} while the master's log shows the older {older} queued"
            ),
        ));
    }
    if after_failure {
        return None;
    }
    let Some(position) = position else {
        return Some((
            Invariant::FifoOrder,
            format!("a round: {}", never_submitted(task)),
        ));
    };
    if let Some(last) = last_round_task.at_or_after(position) {
        return Some((
            Invariant::FifoOrder,
            format!("a round assigns {task} after {last} was assigned"),
        ));
    }
    None
}
