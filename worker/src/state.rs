//! The worker's core: the order its steps must happen in, and what each
//! outcome means, with no I/O. The shell performs a step, then tells the
//! core, which asserts the step was allowed and names the decision.
//!
//! The order is the design's: obtain an id, arm the watch on the assignment
//! node, register, and then, for each assignment: read it, run the task,
//! write the result, delete the assignment. Arming before registering is
//! what guarantees no assignment is missed: the master assigns only to
//! registered workers, so the watch exists before any assignment can.

use zkdist_coord::{TaskId, TaskResult, WorkerId};

use crate::decision::WorkerDecision;
use crate::handler::TaskError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// The id is known; nothing else is set up.
    Unarmed,
    /// The assignment watch is armed; not registered yet.
    Armed,
    /// Registered (or deregistered) and holding no task.
    Idle,
    /// Between reading an assignment and deleting it.
    Working(Option<TaskId>),
}

/// What writing a task's result came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultWrite {
    Written {
        success: bool,
    },
    /// The result node existed: somebody else finished the task.
    AlreadyPresent,
    /// The task's node is gone.
    TaskMissing,
}

/// How a handler's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerOutcome {
    Finished(Result<Vec<u8>, TaskError>),
    Panicked(String),
}

#[derive(Debug)]
pub struct WorkerState {
    worker: WorkerId,
    phase: Phase,
    registered: bool,
    stop_requested: bool,
    tasks_finished: u64,
}

impl WorkerState {
    pub fn new(worker: WorkerId) -> WorkerState {
        WorkerState {
            worker,
            phase: Phase::Unarmed,
            registered: false,
            stop_requested: false,
            tasks_finished: 0,
        }
    }

    pub fn worker(&self) -> &WorkerId {
        &self.worker
    }

    /// The task being worked on, if any.
    pub fn current_task(&self) -> Option<&TaskId> {
        match &self.phase {
            Phase::Working(task) => task.as_ref(),
            _ => None,
        }
    }

    pub fn stop_requested(&self) -> bool {
        self.stop_requested
    }

    /// Tasks whose assignment this worker released after handling them.
    pub fn tasks_finished(&self) -> u64 {
        self.tasks_finished
    }

    /// The exists watch on the assignment node is set, for the first time.
    pub fn on_watch_armed(&mut self) {
        assert_eq!(self.phase, Phase::Unarmed, "the first watch is armed once");
        self.phase = Phase::Armed;
    }

    /// The worker's node exists under `workers/`.
    pub fn on_registered(&mut self) -> WorkerDecision {
        assert_eq!(
            self.phase,
            Phase::Armed,
            "{} registered before arming its assignment watch",
            self.worker
        );
        self.phase = Phase::Idle;
        self.registered = true;
        WorkerDecision::Registered {
            worker: self.worker.clone(),
        }
    }

    /// The assignment node's data was read: it names the task to run, or it
    /// is garbage (then `None`: the shell deletes the assignment and runs
    /// nothing).
    pub fn on_assignment_read(&mut self, data: &[u8]) -> (Option<TaskId>, WorkerDecision) {
        assert_eq!(
            self.phase,
            Phase::Idle,
            "{} read an assignment while not idle: a worker holds one assignment at a time",
            self.worker
        );
        let worker = self.worker.clone();
        match std::str::from_utf8(data).map(TaskId::parse) {
            Ok(Ok(task)) => {
                self.phase = Phase::Working(Some(task.clone()));
                (
                    Some(task.clone()),
                    WorkerDecision::TaskStarted { worker, task },
                )
            }
            _ => {
                self.phase = Phase::Working(None);
                let data = String::from_utf8_lossy(data).into_owned();
                (None, WorkerDecision::BadAssignment { worker, data })
            }
        }
    }

    /// The result to write for a handler's outcome.
    pub fn result_for(&self, outcome: HandlerOutcome) -> TaskResult {
        assert!(
            self.current_task().is_some(),
            "a result is made only while working on a task"
        );
        TaskResult::from_outcome(match outcome {
            HandlerOutcome::Finished(Ok(output)) => Ok(output),
            HandlerOutcome::Finished(Err(error)) => Err(error.to_string()),
            HandlerOutcome::Panicked(message) => {
                Err(format!("the task handler panicked: {message}"))
            }
        })
    }

    /// The task's payload could not be read because its node is gone.
    pub fn on_task_missing(&mut self) -> WorkerDecision {
        self.result_written(ResultWrite::TaskMissing)
    }

    /// What writing the result came to.
    pub fn result_written(&mut self, write: ResultWrite) -> WorkerDecision {
        let task = self
            .current_task()
            .cloned()
            .expect("a result is written only while working on a task");
        let worker = self.worker.clone();
        match write {
            ResultWrite::Written { success } => WorkerDecision::ResultWritten {
                worker,
                task,
                success,
            },
            ResultWrite::AlreadyPresent => WorkerDecision::ResultAlreadyPresent { worker, task },
            ResultWrite::TaskMissing => WorkerDecision::TaskMissing { worker, task },
        }
    }

    /// The assignment node is deleted: the worker is idle again.
    pub fn on_assignment_released(&mut self) -> WorkerDecision {
        let Phase::Working(task) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            panic!("{} released an assignment it did not hold", self.worker);
        };
        if task.is_some() {
            self.tasks_finished += 1;
        }
        WorkerDecision::AssignmentReleased {
            worker: self.worker.clone(),
            task,
        }
    }

    /// Shutdown was asked for. Returns the decision the first time only.
    pub fn on_stop_requested(&mut self) -> Option<WorkerDecision> {
        if self.stop_requested {
            return None;
        }
        self.stop_requested = true;
        Some(WorkerDecision::StopRequested {
            worker: self.worker.clone(),
        })
    }

    /// The registration is deleted. Only between tasks, and only once.
    pub fn on_deregistered(&mut self) -> WorkerDecision {
        assert!(self.registered, "{} deregistered twice", self.worker);
        assert_eq!(
            self.phase,
            Phase::Idle,
            "{} deregistered in the middle of a task",
            self.worker
        );
        self.registered = false;
        WorkerDecision::Deregistered {
            worker: self.worker.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered() -> WorkerState {
        let mut state = WorkerState::new(WorkerId::parse("worker-0000000001").unwrap());
        state.on_watch_armed();
        state.on_registered();
        state
    }

    #[test]
    fn a_task_goes_from_assignment_to_release() {
        let mut state = registered();
        let (task, decision) = state.on_assignment_read(b"task-0000000004");
        assert_eq!(task, Some(TaskId::from_sequence(4)));
        assert!(matches!(decision, WorkerDecision::TaskStarted { .. }));
        let result = state.result_for(HandlerOutcome::Finished(Ok(b"out".to_vec())));
        assert_eq!(
            result,
            TaskResult::Success {
                output: b"out".to_vec()
            }
        );
        let written = state.result_written(ResultWrite::Written { success: true });
        assert_eq!(
            written.to_string(),
            "worker-0000000001 wrote task-0000000004 result success"
        );
        let released = state.on_assignment_released();
        assert_eq!(
            released.to_string(),
            "worker-0000000001 released task-0000000004"
        );
        assert_eq!(state.tasks_finished(), 1);
        assert_eq!(state.current_task(), None);
    }

    #[test]
    fn errors_and_panics_become_failure_results() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000001");
        let failed = state.result_for(HandlerOutcome::Finished(Err(TaskError::new("bad kind"))));
        assert_eq!(failed, TaskResult::failure("bad kind"));
        let panicked = state.result_for(HandlerOutcome::Panicked("index out of range".into()));
        assert_eq!(
            panicked,
            TaskResult::failure("the task handler panicked: index out of range")
        );
    }

    #[test]
    fn a_garbage_assignment_is_released_without_a_task() {
        let mut state = registered();
        let (task, decision) = state.on_assignment_read(b"\xffnot a task");
        assert_eq!(task, None);
        assert!(matches!(decision, WorkerDecision::BadAssignment { .. }));
        assert!(matches!(
            state.on_assignment_released(),
            WorkerDecision::AssignmentReleased { task: None, .. }
        ));
        assert_eq!(state.tasks_finished(), 0);
    }

    #[test]
    fn stop_is_reported_once_and_deregistration_waits_for_idle() {
        let mut state = registered();
        assert!(state.on_stop_requested().is_some());
        assert!(state.on_stop_requested().is_none());
        assert!(matches!(
            state.on_deregistered(),
            WorkerDecision::Deregistered { .. }
        ));
    }

    #[test]
    #[should_panic(expected = "registered before arming")]
    fn registering_before_arming_is_a_bug() {
        WorkerState::new(WorkerId::parse("w").unwrap()).on_registered();
    }

    #[test]
    #[should_panic(expected = "one assignment at a time")]
    fn a_second_assignment_while_working_is_a_bug() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000001");
        state.on_assignment_read(b"task-0000000002");
    }

    #[test]
    #[should_panic(expected = "in the middle of a task")]
    fn deregistering_mid_task_is_a_bug() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000001");
        state.on_deregistered();
    }
}
