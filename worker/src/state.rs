//! The worker's core: the order its steps must happen in, and what each
//! outcome means, with no I/O. The shell performs a step, then tells the
//! core, which asserts the step was allowed and names the decision.
//!
//! The order is the design's: obtain an id, arm the watch on the assignment
//! node, register, and then, for each assignment: read it, run the task,
//! write the result and delete the assignment (one atomic multi). Arming
//! before registering is what guarantees no assignment is missed: the master
//! assigns only to registered workers, so the watch exists before any
//! assignment can.
//!
//! A worker lives as long as its session: once the session is lost it
//! abandons its task and decides nothing more (a new session means a new
//! worker, with a new id).

use zkdist_coord::{AssignmentView, Stat, TaskId, TaskResult, WorkerId, ZkError};

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
    Working {
        task: Option<TaskId>,
        assignment: AssignmentNode,
    },
    /// The session ended, or the registration is gone: nothing more
    /// happens under this id.
    Lost,
}

/// Which assignment node the worker read: the transaction that created it
/// and its data version. Completing deletes the node at this version, so a
/// worker whose assignment was taken back and not made anew writes
/// nothing. A delete checks the version only, and an assignment made anew
/// has version 0 too. What keeps a zombie from completing a new one is
/// the master, which takes an assignment back only from a worker it holds
/// for gone and never assigns to that worker again; and, when the
/// deployment's root is deleted and made anew (ids restart, and another
/// worker may hold this one's), the worker's looks at the node, which
/// compare `czxid` as well, as do read-backs after a lost reply. A node
/// made anew after the last look and before the completion is applied is
/// not caught: the completion cannot name a `czxid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssignmentNode {
    pub czxid: i64,
    pub version: i32,
}

impl AssignmentNode {
    pub fn of(stat: &Stat) -> AssignmentNode {
        AssignmentNode {
            czxid: stat.czxid,
            version: stat.version,
        }
    }
}

/// What a read of the assignment node after a connection loss says about
/// a write whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentAfterLoss {
    /// The very node and version read: the write (which deletes it) was
    /// not applied.
    StillHeld,
    /// Deleted, or deleted and made anew: the write was applied, or the
    /// master revoked the assignment.
    Gone,
}

/// What reading back a completion whose outcome was unknown (connection
/// loss) showed. Only what the tree can prove: a result equal to this
/// worker's may be another worker's identical one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionReadBack {
    /// The assignment is still the very node read: the multi (which
    /// deletes it) was not applied, and is sent again.
    NotApplied,
    /// The assignment is gone and the task holds a result equal to this
    /// worker's: its completion was applied, or the master revoked the
    /// assignment and another worker wrote the same result. The task is
    /// finished either way.
    ResultPresent,
    /// The assignment and the task are both gone: the completion was
    /// applied, or revoked, and the task was deleted since.
    TaskGone,
}

/// What writing a task's result came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultWrite {
    Written {
        success: bool,
    },
    /// The result node existed: somebody else finished the task.
    AlreadyPresent,
    /// The task's node is gone.
    TaskMissing,
    /// The task's node refused the result (`NoAuth`, or
    /// `NoChildrenForEphemerals`).
    Refused {
        error: ZkError,
    },
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
            Phase::Working { task, .. } => task.as_ref(),
            _ => None,
        }
    }

    /// The assignment node being worked on, if any.
    pub fn held_assignment(&self) -> Option<AssignmentNode> {
        match &self.phase {
            Phase::Working { assignment, .. } => Some(*assignment),
            _ => None,
        }
    }

    /// Whether the session or the registration was lost: the worker is
    /// finished.
    pub fn lost(&self) -> bool {
        self.phase == Phase::Lost
    }

    /// Judges a read of the assignment node (`exists`) made after a write
    /// whose outcome is unknown.
    pub fn assignment_after_loss(&self, now: Option<&Stat>) -> AssignmentAfterLoss {
        if self.still_holds(now) {
            AssignmentAfterLoss::StillHeld
        } else {
            AssignmentAfterLoss::Gone
        }
    }

    /// Whether a read of the assignment node (`exists`) shows the very node
    /// and version read for the task in hand: not deleted, nor deleted and
    /// made anew.
    pub fn still_holds(&self, now: Option<&Stat>) -> bool {
        let held = self
            .held_assignment()
            .expect("the assignment is looked at only while working");
        now.is_some_and(|stat| AssignmentNode::of(stat) == held)
    }

    /// Whether the worker's registration is still there, as far as it
    /// knows: it registered, and has neither deleted it nor heard it lost.
    pub fn registered(&self) -> bool {
        self.registered
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

    /// The assignment node's data and stat were read: it names the task to
    /// run (with its payload, if the master put it inline), or it is garbage
    /// (then `None`: the shell deletes the assignment and runs nothing).
    pub fn on_assignment_read<'data>(
        &mut self,
        data: &'data [u8],
        stat: &Stat,
    ) -> (Option<AssignmentView<'data>>, WorkerDecision) {
        assert_eq!(
            self.phase,
            Phase::Idle,
            "{} read an assignment while not idle: a worker holds one assignment at a time",
            self.worker
        );
        let worker = self.worker.clone();
        let assignment = AssignmentNode::of(stat);
        match AssignmentView::decode(data) {
            Ok(view) => {
                let task = view.task.clone();
                self.phase = Phase::Working {
                    task: Some(task.clone()),
                    assignment,
                };
                (Some(view), WorkerDecision::TaskStarted { worker, task })
            }
            Err(_) => {
                self.phase = Phase::Working {
                    task: None,
                    assignment,
                };
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
            ResultWrite::Refused { error } => WorkerDecision::ResultRefused {
                worker,
                task,
                reason: error.to_string(),
            },
        }
    }

    /// After a completion whose outcome was unknown, what the read-back
    /// showed. After `NotApplied` the worker still holds the assignment
    /// (the completion goes out again); after the others the shell
    /// releases it ([`WorkerState::on_assignment_released`]): nothing is
    /// left to write.
    pub fn on_completion_read_back(&mut self, found: CompletionReadBack) -> WorkerDecision {
        let task = self
            .current_task()
            .cloned()
            .expect("a completion is read back only while working on a task");
        WorkerDecision::CompletionRecovered {
            worker: self.worker.clone(),
            task,
            found,
        }
    }

    /// The assignment node is deleted (by this worker, or found gone after
    /// a completion read back as finished): the worker is idle again.
    pub fn on_assignment_released(&mut self) -> WorkerDecision {
        let task = self.leave_assignment("released");
        if task.is_some() {
            self.tasks_finished += 1;
        }
        WorkerDecision::AssignmentReleased {
            worker: self.worker.clone(),
            task,
        }
    }

    /// The assignment was taken back before the worker completed it: the
    /// worker wrote nothing, and is idle again.
    pub fn on_assignment_revoked(&mut self) -> WorkerDecision {
        let task = self.leave_assignment("had revoked");
        WorkerDecision::AssignmentRevoked {
            worker: self.worker.clone(),
            task,
        }
    }

    fn leave_assignment(&mut self, what: &str) -> Option<TaskId> {
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Working { task, .. } => task,
            other => panic!(
                "{} {what} an assignment it did not hold ({other:?})",
                self.worker
            ),
        }
    }

    /// The session ended. The task in hand, if any, is abandoned: the
    /// worker writes nothing more, ever. Returns the decisions once.
    pub fn on_session_lost(&mut self) -> Vec<WorkerDecision> {
        if self.phase == Phase::Lost {
            return Vec::new();
        }
        let worker = self.worker.clone();
        let mut decisions = Vec::new();
        if let Some(task) = self.current_task().cloned() {
            decisions.push(WorkerDecision::TaskAbandoned {
                worker: worker.clone(),
                task,
            });
        }
        self.phase = Phase::Lost;
        self.registered = false;
        decisions.push(WorkerDecision::SessionLost { worker });
        decisions
    }

    /// The registration is gone, or is another session's (see
    /// [`WorkerDecision::RegistrationLost`]): the task in hand, if any, is
    /// stopped without a result, and the worker acts no more under this
    /// id. The master reclaims its assignment.
    pub fn on_registration_lost(&mut self) -> WorkerDecision {
        assert!(
            self.registered,
            "{} lost a registration it did not hold",
            self.worker
        );
        assert!(
            matches!(self.phase, Phase::Idle | Phase::Working { .. }),
            "{} lost its registration while {:?}",
            self.worker,
            self.phase
        );
        let task = self.current_task().cloned();
        self.phase = Phase::Lost;
        self.registered = false;
        WorkerDecision::RegistrationLost {
            worker: self.worker.clone(),
            task,
        }
    }

    /// Shutdown was asked for. Returns the decision the first time only.
    pub fn on_stop_requested(&mut self) -> Option<WorkerDecision> {
        if self.stop_requested {
            return None;
        }
        self.on_stop_noted();
        Some(WorkerState::stop_decision(&self.worker))
    }

    /// Shutdown was asked for, and its decision
    /// ([`WorkerState::stop_decision`]) was noted as it came, while
    /// requests under way held the state: records it, with no second
    /// decision.
    pub(crate) fn on_stop_noted(&mut self) {
        self.stop_requested = true;
    }

    /// The decision that notes a stop asked of `worker`.
    pub(crate) fn stop_decision(worker: &WorkerId) -> WorkerDecision {
        WorkerDecision::StopRequested {
            worker: worker.clone(),
        }
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

    /// The stat of an assignment node as the master creates it.
    fn assignment_stat() -> Stat {
        Stat {
            czxid: 0x20,
            mzxid: 0x20,
            version: 0,
            ..Stat::default()
        }
    }

    fn registered() -> WorkerState {
        let mut state = WorkerState::new(WorkerId::parse("worker-0000000001").unwrap());
        state.on_watch_armed();
        state.on_registered();
        state
    }

    #[test]
    fn an_inline_payload_comes_with_the_task() {
        let mut state = registered();
        let data = zkdist_coord::encode_assignment(&TaskId::from_sequence(9), Some(b"{}"));
        let (view, decision) = state.on_assignment_read(&data, &assignment_stat());
        let view = view.expect("an inline assignment names its task");
        assert_eq!(view.task, TaskId::from_sequence(9));
        assert_eq!(view.payload, Some(&b"{}"[..]));
        assert!(
            matches!(decision, WorkerDecision::TaskStarted { task, .. } if task == TaskId::from_sequence(9))
        );
        assert_eq!(state.current_task(), Some(&TaskId::from_sequence(9)));
    }

    #[test]
    fn a_task_goes_from_assignment_to_release() {
        let mut state = registered();
        let (view, decision) = state.on_assignment_read(b"task-0000000004", &assignment_stat());
        assert_eq!(
            view,
            Some(AssignmentView {
                task: TaskId::from_sequence(4),
                payload: None
            })
        );
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
        state.on_assignment_read(b"task-0000000001", &assignment_stat());
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
        let (task, decision) = state.on_assignment_read(b"\xffnot a task", &assignment_stat());
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
    fn a_revoked_assignment_leaves_the_worker_idle_having_written_nothing() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000003", &assignment_stat());
        let revoked = state.on_assignment_revoked();
        assert_eq!(
            revoked,
            WorkerDecision::AssignmentRevoked {
                worker: state.worker().clone(),
                task: Some(TaskId::from_sequence(3))
            }
        );
        assert_eq!(
            revoked.to_string(),
            "worker-0000000001 found task-0000000003 revoked, wrote nothing"
        );
        assert_eq!(state.tasks_finished(), 0, "a revoked task is not finished");
        assert_eq!(state.current_task(), None);
        // Idle again: the next assignment is taken.
        let (view, _) = state.on_assignment_read(b"task-0000000004", &assignment_stat());
        assert_eq!(view.map(|view| view.task), Some(TaskId::from_sequence(4)));

        // A garbage assignment can be revoked too.
        let mut state = registered();
        state.on_assignment_read(b"junk", &assignment_stat());
        assert_eq!(
            state.on_assignment_revoked().to_string(),
            "worker-0000000001 found its assignment revoked"
        );
    }

    #[test]
    fn after_a_connection_loss_only_the_very_node_read_counts_as_still_held() {
        let mut state = registered();
        let read = assignment_stat();
        state.on_assignment_read(b"task-0000000003", &read);
        assert_eq!(
            state.held_assignment(),
            Some(AssignmentNode {
                czxid: 0x20,
                version: 0
            })
        );
        assert_eq!(
            state.assignment_after_loss(Some(&read)),
            AssignmentAfterLoss::StillHeld
        );
        assert_eq!(state.assignment_after_loss(None), AssignmentAfterLoss::Gone);
        // Deleted and created anew (same version 0, a later transaction).
        let remade = Stat {
            czxid: 0x31,
            ..read
        };
        assert_eq!(
            state.assignment_after_loss(Some(&remade)),
            AssignmentAfterLoss::Gone
        );
        let rewritten = Stat { version: 1, ..read };
        assert_eq!(
            state.assignment_after_loss(Some(&rewritten)),
            AssignmentAfterLoss::Gone
        );
    }

    #[test]
    fn a_recovered_completion_says_only_what_the_read_back_proves() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000005", &assignment_stat());
        let resend = state.on_completion_read_back(CompletionReadBack::NotApplied);
        assert_eq!(
            resend.to_string(),
            "worker-0000000001 recovered task-0000000005 completion: not applied, resending"
        );
        assert_eq!(
            state.current_task(),
            Some(&TaskId::from_sequence(5)),
            "still working: the completion goes out again"
        );
        let present = state.on_completion_read_back(CompletionReadBack::ResultPresent);
        assert_eq!(
            present,
            WorkerDecision::CompletionRecovered {
                worker: state.worker().clone(),
                task: TaskId::from_sequence(5),
                found: CompletionReadBack::ResultPresent
            }
        );
        assert_eq!(
            present.to_string(),
            "worker-0000000001 recovered task-0000000005 completion: result present, written by this worker or another"
        );
        state.on_assignment_released();
        assert_eq!(state.tasks_finished(), 1);

        state.on_assignment_read(b"task-0000000006", &assignment_stat());
        assert_eq!(
            state
                .on_completion_read_back(CompletionReadBack::TaskGone)
                .to_string(),
            "worker-0000000001 recovered task-0000000006 completion: task gone, completed or revoked"
        );
    }

    #[test]
    fn losing_the_session_abandons_the_task_in_hand_once() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000006", &assignment_stat());
        let decisions = state.on_session_lost();
        let lines: Vec<String> = decisions.iter().map(|d| d.to_string()).collect();
        assert_eq!(
            lines,
            [
                "worker-0000000001 abandoned task-0000000006",
                "worker-0000000001 lost its session"
            ]
        );
        assert!(state.lost());
        assert_eq!(state.current_task(), None);
        assert_eq!(state.tasks_finished(), 0);
        assert!(state.on_session_lost().is_empty(), "reported once");

        // Idle: nothing to abandon.
        let mut idle = registered();
        assert_eq!(
            idle.on_session_lost(),
            vec![WorkerDecision::SessionLost {
                worker: idle.worker().clone()
            }]
        );
    }

    #[test]
    fn losing_the_registration_stops_the_task_in_hand_and_ends_the_id() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000006", &assignment_stat());
        let lost = state.on_registration_lost();
        assert_eq!(
            lost.to_string(),
            "worker-0000000001 lost its registration, stopped task-0000000006"
        );
        assert!(state.lost());
        assert_eq!(state.current_task(), None);
        assert_eq!(state.tasks_finished(), 0);
        assert!(
            state.on_session_lost().is_empty(),
            "the id acts no more: its session's end adds nothing"
        );

        let mut idle = registered();
        assert_eq!(
            idle.on_registration_lost().to_string(),
            "worker-0000000001 lost its registration"
        );
        assert!(idle.lost());
    }

    #[test]
    #[should_panic(expected = "lost a registration it did not hold")]
    fn losing_the_registration_twice_is_a_bug() {
        let mut state = registered();
        state.on_registration_lost();
        state.on_registration_lost();
    }

    #[test]
    #[should_panic(expected = "only while working on a task")]
    fn a_lost_worker_writes_no_result() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000006", &assignment_stat());
        state.on_session_lost();
        state.result_written(ResultWrite::Written { success: true });
    }

    #[test]
    #[should_panic(expected = "one assignment at a time")]
    fn a_lost_worker_takes_no_assignment() {
        let mut state = registered();
        state.on_session_lost();
        state.on_assignment_read(b"task-0000000007", &assignment_stat());
    }

    #[test]
    #[should_panic(expected = "had revoked an assignment it did not hold")]
    fn revoking_while_idle_is_a_bug() {
        registered().on_assignment_revoked();
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
        state.on_assignment_read(b"task-0000000001", &assignment_stat());
        state.on_assignment_read(b"task-0000000002", &assignment_stat());
    }

    #[test]
    #[should_panic(expected = "in the middle of a task")]
    fn deregistering_mid_task_is_a_bug() {
        let mut state = registered();
        state.on_assignment_read(b"task-0000000001", &assignment_stat());
        state.on_deregistered();
    }
}
