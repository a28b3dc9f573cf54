//! The invariant checker. It sees every transaction the simulated server
//! applies (with the tree right after it), every master and worker
//! decision, every injected fault, and, once a run ends, the tree and the
//! master's final state. The first violation it finds is kept and every
//! later input ignored: the harness then stops the run.
//!
//! The invariants, each with its precise meaning. They are stated for a
//! system that survives failures: processes crash and restart, sessions
//! expire, links go down and come back, a master is deposed by another.
//! "The elected master" is the session that holds the `master` node; a
//! worker's "session" is the one that created its id node; a worker "runs"
//! a task from its `TaskStarted` decision until it releases the assignment
//! or its session ends on the server (a process that has not yet noticed
//! its session ended is a zombie, and runs nothing as far as the rules go).
//! - [`Invariant::TaskAssignedTwice`]: no two assignment nodes that exist at
//!   the same time name the same task; no round of a master assigns a task
//!   that master's own log shows held; no two workers run one task at the
//!   same time; no master takes an assignment back (a reclaim) from a
//!   worker that is still registered, which runs the task on.
//! - [`Invariant::WorkerAssignedTwice`]: no round of a master assigns a
//!   worker whom that master's own log shows busy; no create of an
//!   assignment node that already exists, alone or inside a `multi` (the
//!   server refuses it, but the master meant to give a busy worker a second
//!   task); no assignment node's data is rewritten in place; no worker
//!   starts a task while running another.
//! - [`Invariant::AssignedToUnregistered`]: when an assignment node is
//!   created, the worker's registration exists at that zxid, failures or
//!   not: the master's create checks it in the same transaction, so a
//!   worker whose session ended between the master's decision and the
//!   create is given nothing. A worker that leaves later (its session
//!   ends while it holds the assignment) breaks no rule here.
//! - [`Invariant::DeposedMasterWrite`]: every transaction that creates an
//!   assignment node, or deletes another worker's one (a reclaim), comes
//!   from the elected master: the session that holds the `master` node
//!   right after the transaction. A worker deleting its own assignment is
//!   not a master write.
//! - [`Invariant::SubmittedOnce`]: no two task nodes ever carry the same
//!   submission token (`task-<token>-NNNNNNNNNN`): a submit retried after
//!   a connection loss never creates a second task.
//! - [`Invariant::FifoOrder`]: until the first failure (an injected fault,
//!   or a failed assignment create), assignment nodes are created in
//!   submission order, never twice for one task, and never while an older
//!   task waits unassigned; the masters' rounds assign in that order too.
//!   At all times, failures or not, a round takes the oldest tasks its
//!   master's own log shows queued (queued or re-queued, and not assigned,
//!   found held or finished, or gone since): a task re-queued after a
//!   failure goes back ahead of newer ones; and one master session's
//!   assignment creates reach the server in the order its rounds chose
//!   them (see `create_order`). Submission order is the order the server
//!   applied the tasks' creates, not the order of their names (ZooKeeper's
//!   counter wraps; see `submission_order`).
//! - [`Invariant::FinishedExactlyOnce`]: no task's result is created twice
//!   or rewritten;
//!   no two workers decide they wrote a task's result (written, or found
//!   applied after a connection loss); no worker whose session is alive
//!   starts a task once a worker wrote its result (unless a client deleted
//!   the task meanwhile: the worker then finds it gone); no worker finds the
//!   result of the task it ran already written (it ran twice); a worker
//!   releases its assignment only with or after writing the task's result;
//!   no task node is deleted before its result is written (clients delete
//!   only finished tasks: an unfinished one would be lost).
//! - [`Invariant::ZombieWrite`]: a result is created only by a session
//!   whose worker holds, right before that transaction, the assignment node
//!   naming the task: a worker whose assignment was revoked, or whose
//!   session ended, never writes a result.
//! - [`Invariant::Liveness`]: when the run ends (after the faults stopped,
//!   links healed and the system was given time to recover), every task
//!   has its result, and so has every task the client submitted, its node
//!   gone or not.
//! - [`Invariant::InlinePayload`]: an assignment node that carries its
//!   task's payload inline carries exactly the task node's data (the
//!   worker runs it without reading the task), and goes to a worker whose
//!   registration says it reads inline payloads.
//! - [`Invariant::ResultMatchesTask`]: a result, when created, holds what
//!   the testbed's handler gives for its task's payload (`done <n>` for
//!   task `n`): no worker runs another task's payload, or writes another
//!   task's answer.
//! - [`Invariant::MasterViewMatches`]: at the end of a quiescent run, the
//!   elected master's workers, their assignments and its pending queue
//!   agree with ZooKeeper's tree, it has seen every task that exists, and
//!   it remembers no task that no longer exists (its processed set is
//!   bounded by the tree).
//! - [`Invariant::ActorFailed`]: at the end of a run, no worker process
//!   has ended by itself, with an error or a panic (only the faults crash
//!   one, and the harness stops the others), and no master candidate has
//!   given up.
//! - [`Invariant::RanPastExpiry`]: when the server expires a worker's
//!   session for its timeout, that worker's handler is not running: a
//!   worker cut off stops its task within its session's grace, before the
//!   expiry lets a master give the task to another worker. This is what
//!   makes a zombie run nothing. (An expiry the simulator is told to force,
//!   `SimZk::expire`, is exempt: on a connected session no process could
//!   see it coming.)

mod create_order;
mod decision_rules;
mod invariant;
mod submission_order;
mod tree_rules;
mod view;

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::{Layout, SessionId, TaskId, TaskToken, WorkerId};
use zkdist_master::MasterState;

use create_order::CreateOrder;
use submission_order::{NewestAssigned, Position, SubmissionOrder};

pub(crate) use invariant::decision_line;
pub use invariant::{Invariant, Step, Violation};
pub use view::TreeFacts;

/// What one master candidate's own log says, replayed. It starts afresh
/// with each session of the candidate (a new session rebuilds its state).
#[derive(Debug, Default)]
struct MasterLog {
    /// Who holds what, in the master's own words.
    holding: BTreeMap<WorkerId, TaskId>,
    /// The tasks the master's log shows waiting in its queue, in
    /// submission order: queued or re-queued, and not assigned, found
    /// held or finished, or gone since. A round must take them oldest
    /// first, faults or not.
    queued: BTreeMap<Position, TaskId>,
    /// The assignment creates its rounds chose, in the order they must
    /// reach the server.
    creates: CreateOrder,
}

impl MasterLog {
    fn queue(&mut self, position: Option<Position>, task: &TaskId) {
        if let Some(position) = position {
            self.queued.insert(position, task.clone());
        }
    }

    fn unqueue(&mut self, position: Option<Position>) {
        if let Some(position) = position {
            self.queued.remove(&position);
        }
    }
}

/// The checker's state: what the transactions and decisions so far
/// established.
#[derive(Debug)]
pub struct Checker {
    assignments_prefix: String,
    tasks_prefix: String,
    ids_prefix: String,
    workers_dir: String,
    tasks_dir: String,
    master_path: String,

    /// Every task node created, in submission order.
    submissions_in_order: SubmissionOrder,
    /// Every task node deleted (by a client cleaning up).
    deleted_tasks: BTreeSet<TaskId>,
    /// The task each submission token created.
    submissions: BTreeMap<TaskToken, TaskId>,
    /// The assignment nodes that exist now: worker -> data.
    assignment_nodes: BTreeMap<WorkerId, String>,
    /// The session that created each worker's id node (its session).
    worker_sessions: BTreeMap<WorkerId, SessionId>,
    /// Sessions the server ended (expired or closed).
    ended_sessions: BTreeSet<SessionId>,
    /// Every task an assignment node was ever created for.
    ever_assigned: BTreeSet<TaskId>,
    /// The newest task given an assignment node, for FIFO.
    last_assigned: NewestAssigned,
    /// How many times each task's result node was created.
    results_created: BTreeMap<TaskId, u32>,
    /// The first failure (fault or failed assignment): FIFO in the tree is
    /// checked only before it (rounds against their master's queue always).
    first_failure: Option<String>,

    /// Each master candidate's log (by actor name: `m1`, `m2`...).
    master_logs: BTreeMap<String, MasterLog>,
    /// Each actor's newest session (by actor name), the one its log is of.
    newest_sessions: BTreeMap<String, SessionId>,
    /// The newest task a round assigned, for FIFO.
    last_round_task: NewestAssigned,
    /// The workers' logs: who runs what now, and who finished what.
    running: BTreeMap<WorkerId, TaskId>,
    finished_by: BTreeMap<TaskId, WorkerId>,
    /// The worker id of each worker actor's latest `TaskStarted` (by actor
    /// name: `w1`...): the id its handler's next run is for.
    last_started: BTreeMap<String, (WorkerId, TaskId)>,
    /// The handler runs under way, by actor and process (a crashed
    /// process's run may end after its restart's began): the worker id
    /// and task each is for.
    handlers_running: BTreeMap<(String, u64), (WorkerId, TaskId)>,

    violation: Option<Violation>,
    /// Set once the run is over: later inputs (teardown) are not judged.
    closed: bool,
}

impl Checker {
    pub fn new(layout: &Layout) -> Checker {
        Checker {
            assignments_prefix: format!("{}/", layout.assignments_dir()),
            tasks_prefix: format!("{}/", layout.tasks_dir()),
            ids_prefix: format!("{}/", layout.ids_dir()),
            workers_dir: layout.workers_dir(),
            tasks_dir: layout.tasks_dir(),
            master_path: layout.master(),
            submissions_in_order: SubmissionOrder::default(),
            deleted_tasks: BTreeSet::new(),
            submissions: BTreeMap::new(),
            assignment_nodes: BTreeMap::new(),
            worker_sessions: BTreeMap::new(),
            ended_sessions: BTreeSet::new(),
            ever_assigned: BTreeSet::new(),
            last_assigned: NewestAssigned::default(),
            results_created: BTreeMap::new(),
            first_failure: None,
            master_logs: BTreeMap::new(),
            newest_sessions: BTreeMap::new(),
            last_round_task: NewestAssigned::default(),
            running: BTreeMap::new(),
            finished_by: BTreeMap::new(),
            last_started: BTreeMap::new(),
            handlers_running: BTreeMap::new(),
            violation: None,
            closed: false,
        }
    }

    /// The first violation found, if any.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// Stops checking: the run is over, what follows is teardown.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Whether inputs are still judged.
    fn judging(&self) -> bool {
        !self.closed && self.violation.is_none()
    }

    /// The first failure seen (after which the tree need no longer show
    /// assignments in submission order).
    pub fn first_failure(&self) -> Option<&str> {
        self.first_failure.as_deref()
    }

    /// Records a violation unless one was found already. Returns true when
    /// this one is the first.
    fn violate(&mut self, invariant: Invariant, detail: String, step: Step) -> bool {
        if !self.judging() {
            return false;
        }
        self.violation = Some(Violation {
            invariant,
            detail,
            step,
            trace_line: None,
            excerpt: Vec::new(),
        });
        true
    }

    /// A fault was injected (or another failure happened): from now on
    /// the tree need no longer show assignments in submission order (each
    /// round is still judged against its master's own queue).
    pub fn on_failure(&mut self, what: &str) {
        if self.first_failure.is_none() {
            self.first_failure = Some(what.to_owned());
        }
    }

    /// A worker process that was not crashed on purpose, or a master
    /// candidate, ended before the end of the run, with an error or a
    /// panic (`how`): a fleet that shrinks by itself, which the tasks'
    /// liveness may not show when the other actors finish them.
    pub fn on_actor_failed(&mut self, actor: &str, how: &str) -> bool {
        let detail = format!("{actor} ended before the run did: {how}");
        self.violate(Invariant::ActorFailed, detail, Step::EndOfRun)
    }

    /// The end of a run: every task in the tree has its result, so has
    /// every task the client was told it `submitted` (its node may be gone,
    /// cleaned up, or never have been made), and the elected master's view
    /// (when one led) is ZooKeeper's.
    pub fn on_end(
        &mut self,
        facts: &TreeFacts,
        submitted: &[TaskId],
        master: Option<&MasterState>,
    ) -> bool {
        if !self.judging() {
            return false;
        }
        if let Some((task, _)) = facts.tasks.iter().find(|(_, finished)| !**finished) {
            let detail = format!("{task} never finished: {}", facts.whereabouts(task, master));
            return self.violate(Invariant::Liveness, detail, Step::EndOfRun);
        }
        if let Some(task) = submitted
            .iter()
            .find(|task| !self.results_created.contains_key(*task))
        {
            let detail = format!(
                "{task} was submitted and never finished: no result was ever written, and its node is not there"
            );
            return self.violate(Invariant::Liveness, detail, Step::EndOfRun);
        }
        if let Some(state) = master {
            let differences = view::differences(state, facts);
            if !differences.is_empty() {
                let detail = format!(
                    "the master's view differs from ZooKeeper's: {}",
                    differences.join("; ")
                );
                return self.violate(Invariant::MasterViewMatches, detail, Step::EndOfRun);
            }
        }
        false
    }
}

/// The detail of an assignment of a task no client created: it has no
/// place in submission order.
fn never_submitted(task: &TaskId) -> String {
    format!("{task} assigned, but no task of that name was ever created")
}
