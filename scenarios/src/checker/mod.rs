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
mod submission_order;
mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use zkdist_coord::{
    AssignmentView, ErrorCode, Layout, SessionId, TaskId, TaskResult, TaskToken, WorkerId, ZkError,
    assignment_label, path,
};
use zkdist_master::{MasterDecision, MasterState, Recovery};
use zkdist_sim::{AppliedOp, Change, Tree, TxnKind};
use zkdist_worker::{CompletionReadBack, WorkerDecision};

use create_order::CreateOrder;
use submission_order::{NewestAssigned, Position, SubmissionOrder};

use crate::handler::expected_result;

pub use view::TreeFacts;

/// The rules a run must keep. See the module documentation for the exact
/// meaning of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    TaskAssignedTwice,
    WorkerAssignedTwice,
    AssignedToUnregistered,
    FifoOrder,
    DeposedMasterWrite,
    SubmittedOnce,
    FinishedExactlyOnce,
    ZombieWrite,
    Liveness,
    InlinePayload,
    ResultMatchesTask,
    MasterViewMatches,
    ActorFailed,
    RanPastExpiry,
}

impl Invariant {
    pub const ALL: [Invariant; 14] = [
        Invariant::TaskAssignedTwice,
        Invariant::WorkerAssignedTwice,
        Invariant::AssignedToUnregistered,
        Invariant::FifoOrder,
        Invariant::DeposedMasterWrite,
        Invariant::SubmittedOnce,
        Invariant::FinishedExactlyOnce,
        Invariant::ZombieWrite,
        Invariant::Liveness,
        Invariant::InlinePayload,
        Invariant::ResultMatchesTask,
        Invariant::MasterViewMatches,
        Invariant::ActorFailed,
        Invariant::RanPastExpiry,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::TaskAssignedTwice => "task-assigned-twice",
            Invariant::WorkerAssignedTwice => "worker-assigned-twice",
            Invariant::AssignedToUnregistered => "assigned-to-unregistered",
            Invariant::FifoOrder => "fifo-order",
            Invariant::DeposedMasterWrite => "deposed-master-write",
            Invariant::SubmittedOnce => "submitted-once",
            Invariant::FinishedExactlyOnce => "finished-exactly-once",
            Invariant::ZombieWrite => "zombie-write",
            Invariant::Liveness => "liveness",
            Invariant::InlinePayload => "inline-payload",
            Invariant::ResultMatchesTask => "result-matches-task",
            Invariant::MasterViewMatches => "master-view-matches",
            Invariant::ActorFailed => "actor-failed",
            Invariant::RanPastExpiry => "ran-past-expiry",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where in a run a violation was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Right after the transaction with this zxid; `line` is its trace line.
    Transaction { zxid: i64, line: String },
    /// On a decision of `actor` (the session's name), noted in the trace as
    /// `decide <actor>: <text>`.
    Decision { actor: String, text: String },
    /// When the run ended.
    EndOfRun,
}

impl Step {
    /// The trace line this step left, without its timestamp (`None` at the
    /// end of the run, which leaves none).
    fn trace_message(&self) -> Option<String> {
        match self {
            Step::Transaction { line, .. } => Some(crate::trace::message(line).to_owned()),
            Step::Decision { actor, text } => Some(decision_line(actor, text)),
            Step::EndOfRun => None,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Transaction { zxid, .. } => write!(f, "zxid 0x{zxid:x}"),
            Step::Decision { actor, .. } => write!(f, "a decision of {actor}"),
            Step::EndOfRun => f.write_str("the end of the run"),
        }
    }
}

/// Bytes reserved for a decision line: the longest common ones take about
/// 90 ("decide m1: round 12 [new-task] task-e9fd6049d65af21e-0000000001->
/// worker-0000000002"); a round assigning several tasks grows it.
const DECISION_LINE_BYTES: usize = 128;

/// How the harness notes an actor's decision in the trace.
pub(crate) fn decision_line(actor: &str, text: impl fmt::Display) -> String {
    // Sized for the longest common line (a round assigning a task), so that
    // the line is written without growing its buffer piece by piece.
    let mut line = String::with_capacity(DECISION_LINE_BYTES);
    // The fixed words are pushed as they are: the formatting machinery
    // pads even a plain `str` argument, and every decision is noted.
    line.push_str("decide ");
    line.push_str(actor);
    line.push_str(": ");
    write!(line, "{text}").expect("writing to a String cannot fail");
    line
}

/// A broken invariant: what, where, and the trace leading to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub detail: String,
    pub step: Step,
    /// The step's line in the run's trace, 1-based (the last line at the
    /// end of a run). Filled in by [`Violation::locate`].
    pub trace_line: Option<usize>,
    /// The last trace lines up to the step.
    pub excerpt: Vec<String>,
}

impl Violation {
    /// Finds the step's line in the run's trace and takes the excerpt. A
    /// decision's line is looked for from the end: the run stops right
    /// after the decision that broke a rule.
    pub fn locate(&mut self, trace: &[String]) {
        let index = match self.step.trace_message() {
            None => trace.len().checked_sub(1),
            Some(wanted) => trace
                .iter()
                .rposition(|line| crate::trace::message(line) == wanted),
        };
        if let Some(index) = index {
            self.trace_line = Some(index + 1);
            self.excerpt = crate::trace::excerpt(trace, index);
        }
    }

    /// `finished-exactly-once at zxid 0x1f (trace line 231): ...`
    pub fn summary(&self) -> String {
        let line = self
            .trace_line
            .map_or_else(String::new, |line| format!(" (trace line {line})"));
        format!("{} at {}{line}: {}", self.invariant, self.step, self.detail)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "violation: {}", self.summary())?;
        for line in &self.excerpt {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

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

/// The actor a session belongs to: `m1.3` is a session of `m1`.
fn actor_of_session(session_name: &str) -> &str {
    session_name
        .split_once('.')
        .map_or(session_name, |(actor, _)| actor)
}

/// The request summaries of a transaction's trace line: one for a plain
/// request, one per op for a `multi`.
fn request_ops(trace_line: &str) -> Vec<&str> {
    let text = crate::trace::message(trace_line);
    // `zxid=0x1f m1 <request> -> <outcome>`
    let request = text
        .splitn(3, ' ')
        .nth(2)
        .and_then(|rest| rest.rsplit_once(" -> "))
        .map_or("", |(request, _)| request);
    match request
        .strip_prefix("multi [")
        .and_then(|ops| ops.strip_suffix(']'))
    {
        Some(ops) => ops.split(", ").collect(),
        None => vec![request],
    }
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

    /// Checks one applied transaction against the tree right after it.
    /// Returns true when it broke an invariant (the first violation).
    pub fn on_applied(&mut self, op: &AppliedOp, tree: &Tree) -> bool {
        if !self.judging() {
            return false;
        }
        let step = || Step::Transaction {
            zxid: op.zxid,
            line: op.trace_line.clone(),
        };
        if op.kind == TxnKind::ExpireSession
            && op.trace_line.contains("(session timeout)")
            && let Some(detail) = self.handler_running_in(op.session)
        {
            return self.violate(Invariant::RanPastExpiry, detail, step());
        }
        match op.kind {
            TxnKind::ExpireSession | TxnKind::CloseSession => {
                self.ended_sessions.insert(op.session);
                // A worker whose session ended runs nothing any more.
                let ended: Vec<WorkerId> = self
                    .worker_sessions
                    .iter()
                    .filter(|(_, session)| **session == op.session)
                    .map(|(worker, _)| worker.clone())
                    .collect();
                for worker in ended {
                    self.running.remove(&worker);
                }
            }
            TxnKind::CreateSession => {
                // A candidate's new session builds its state afresh.
                let actor = actor_of_session(&op.session_name);
                self.master_logs.remove(actor);
                self.newest_sessions.insert(actor.to_owned(), op.session);
            }
            _ => {}
        }
        if let Some(detail) = self.refused_double_assignment(op) {
            return self.violate(Invariant::WorkerAssignedTwice, detail, step());
        }
        // The assignments as they were before this transaction: a result
        // and the release of its assignment may come in one `multi`. A
        // single change sees them as they were without a copy.
        let assignments_before = (op.changes.len() > 1).then(|| self.assignment_nodes.clone());
        for (index, change) in op.changes.iter().enumerate() {
            let found = match change {
                Change::Created(path) => {
                    self.on_created(op, index, path, tree, assignments_before.as_ref())
                }
                Change::Deleted(path) => self.on_deleted(op, path, tree),
                Change::DataChanged(path) => self.on_data_changed(op, path, tree),
            };
            if let Some((invariant, detail)) = found {
                return self.violate(invariant, detail, step());
            }
        }
        false
    }

    /// zkdist writes an assignment or a result once, by a create, and
    /// never rewrites one: an assignment rewritten in place gives its
    /// worker a second task while it runs the first, and a result
    /// rewritten is a second finish.
    fn on_data_changed(
        &mut self,
        op: &AppliedOp,
        path: &str,
        tree: &Tree,
    ) -> Option<(Invariant, String)> {
        if let Some(name) = path.strip_prefix(&self.assignments_prefix) {
            let worker = WorkerId::parse(name).ok()?;
            let now = assignment_label(tree.data(path).unwrap_or_default());
            let before = self.assignment_nodes.insert(worker.clone(), now.clone())?;
            return Some((
                Invariant::WorkerAssignedTwice,
                format!(
                    "{} rewrote {worker}'s assignment from {before} to {now}",
                    op.session_name
                ),
            ));
        }
        let task = path
            .strip_prefix(&self.tasks_prefix)?
            .strip_suffix("/result")?;
        Some((
            Invariant::FinishedExactlyOnce,
            format!("{} rewrote the result of {task}", op.session_name),
        ))
    }

    /// A create of an assignment node that already existed, alone or in a
    /// `multi`: the master tried to give a second task to a busy worker.
    /// The server refuses it, so only the transaction's trace line names
    /// the path.
    fn refused_double_assignment(&self, op: &AppliedOp) -> Option<String> {
        let (index, error) = match (&op.kind, op.error.as_ref()?) {
            (TxnKind::Create, error) => (0, error),
            (TxnKind::Multi, ZkError::Multi { index, error }) => (*index, &**error),
            _ => return None,
        };
        if error.code() != ErrorCode::NodeExists {
            return None;
        }
        let ops = request_ops(&op.trace_line);
        let path = ops.get(index)?.strip_prefix("create ")?.split(' ').next()?;
        let worker = path.strip_prefix(&self.assignments_prefix)?;
        let held = self
            .assignment_nodes
            .get(&WorkerId::parse(worker).ok()?)
            .cloned()
            .unwrap_or_default();
        Some(format!(
            "{} tried to create {path} while it exists (holding {held})",
            op.session_name
        ))
    }

    /// Whether `session` is the elected master right after a transaction.
    fn is_elected(&self, session: SessionId, tree: &Tree) -> bool {
        tree.stat(&self.master_path)
            .is_some_and(|stat| stat.ephemeral_owner == session.0)
    }

    /// `index`: the change's place among the transaction's changes.
    fn on_created(
        &mut self,
        op: &AppliedOp,
        index: usize,
        path: &str,
        tree: &Tree,
        assignments_before: Option<&BTreeMap<WorkerId, String>>,
    ) -> Option<(Invariant, String)> {
        if let Some(name) = path.strip_prefix(&self.assignments_prefix) {
            let worker = WorkerId::parse(name).ok()?;
            let raw = tree.data(path).unwrap_or_default();
            let data = assignment_label(raw);
            let found = self
                .on_assignment_created(op, &worker, &data, tree)
                .or_else(|| self.inline_payload_breach(&worker, raw, tree));
            self.assignment_nodes.insert(worker, data);
            return found;
        }
        // A registration: what it means is checked when an assignment
        // names it.
        if path
            .strip_prefix(&self.workers_dir)
            .is_some_and(|rest| rest.starts_with('/'))
        {
            return None;
        }
        if let Some(name) = path.strip_prefix(&self.ids_prefix) {
            if let Ok(worker) = WorkerId::parse(name) {
                self.worker_sessions.insert(worker, op.session);
            }
            return None;
        }
        let rest = path.strip_prefix(&self.tasks_prefix)?;
        if let Some(task) = rest.strip_suffix("/result") {
            let task = TaskId::parse(task).ok()?;
            let count = self.results_created.entry(task.clone()).or_default();
            *count += 1;
            if *count > 1 {
                return Some((
                    Invariant::FinishedExactlyOnce,
                    format!("the result of {task} was created {count} times"),
                ));
            }
            // Without a copy, the transaction's only change is this one:
            // the assignments have not moved yet.
            let before = assignments_before.unwrap_or(&self.assignment_nodes);
            return self
                .zombie_write(op, &task, before)
                .or_else(|| self.wrong_result(&task, path, tree));
        }
        if let Ok(task) = TaskId::parse(rest) {
            let twin = task
                .token()
                .and_then(|token| self.submissions.insert(token, task.clone()));
            self.submissions_in_order.created(&task, (op.zxid, index));
            if let Some(twin) = twin {
                return Some((
                    Invariant::SubmittedOnce,
                    format!(
                        "{task} carries the submission token of {twin}: one submit created two tasks"
                    ),
                ));
            }
        }
        None
    }

    /// Whether the result of `task`, created by `op`, was written by a
    /// session that held no assignment naming the task.
    fn zombie_write(
        &self,
        op: &AppliedOp,
        task: &TaskId,
        assignments_before: &BTreeMap<WorkerId, String>,
    ) -> Option<(Invariant, String)> {
        let holds_it = assignments_before.iter().any(|(worker, data)| {
            data.as_str() == task.as_str() && self.worker_sessions.get(worker) == Some(&op.session)
        });
        if holds_it {
            return None;
        }
        let holder = assignments_before
            .iter()
            .find(|(_, data)| data.as_str() == task.as_str())
            .map_or_else(
                || "no assignment names it".to_owned(),
                |(worker, _)| format!("its assignment is {worker}'s"),
            );
        Some((
            Invariant::ZombieWrite,
            format!(
                "{} wrote the result of {task} without holding its assignment ({holder})",
                op.session_name
            ),
        ))
    }

    /// Whether the result just created at `result_path` is other than what
    /// the testbed's handler gives for the task's payload: a worker that
    /// ran another task's payload, or wrote another task's answer.
    fn wrong_result(
        &self,
        task: &TaskId,
        result_path: &str,
        tree: &Tree,
    ) -> Option<(Invariant, String)> {
        // The task node is the result's parent: it exists.
        let payload = tree.data(&path::join(&self.tasks_dir, task.as_str()))?;
        let expected = expected_result(payload);
        let written = TaskResult::decode(tree.data(result_path)?);
        if written.as_ref() == Ok(&expected) {
            return None;
        }
        let written = match written {
            Ok(result) => describe_result(&result),
            Err(error) => format!("unreadable ({error})"),
        };
        Some((
            Invariant::ResultMatchesTask,
            format!(
                "the result of {task} is {written}, but its payload gives {}",
                describe_result(&expected)
            ),
        ))
    }

    /// Whether `worker`'s new assignment, `data`, carries a payload other
    /// than its task's. A task deleted before the assignment was created
    /// has no payload left to compare (its worker runs the inline copy,
    /// and its result's create then fails on the missing task).
    fn inline_payload_breach(
        &self,
        worker: &WorkerId,
        data: &[u8],
        tree: &Tree,
    ) -> Option<(Invariant, String)> {
        let view = AssignmentView::decode(data).ok()?;
        let inline = view.payload?;
        // Only a worker whose registration names the format may be given
        // one (a worker gone already is the master's to reclaim from).
        if let Some(registration) = tree.data(&path::join(&self.workers_dir, worker.as_str()))
            && !zkdist_coord::reads_inline_payloads(registration)
        {
            return Some((
                Invariant::InlinePayload,
                format!(
                    "{worker}'s assignment carries {} bytes inline for {}, but its registration does not say it reads inline payloads",
                    inline.len(),
                    view.task
                ),
            ));
        }
        let task_data = tree.data(&path::join(&self.tasks_dir, view.task.as_str()))?;
        (inline != task_data).then(|| {
            (
                Invariant::InlinePayload,
                format!(
                    "{worker}'s assignment carries {} bytes inline for {}, whose payload is {} other bytes",
                    inline.len(),
                    view.task,
                    task_data.len()
                ),
            )
        })
    }

    fn on_assignment_created(
        &mut self,
        op: &AppliedOp,
        worker: &WorkerId,
        data: &str,
        tree: &Tree,
    ) -> Option<(Invariant, String)> {
        let registration = path::join(&self.workers_dir, worker.as_str());
        if !tree.exists(&registration) {
            return Some((
                Invariant::AssignedToUnregistered,
                format!(
                    "{data} assigned to {worker}, which is not registered ({registration} does not exist)"
                ),
            ));
        }
        if let Some((other, _)) = self
            .assignment_nodes
            .iter()
            .find(|(other, held)| *other != worker && held.as_str() == data)
        {
            return Some((
                Invariant::TaskAssignedTwice,
                format!("{data} assigned to {worker} while {other}'s assignment names it too"),
            ));
        }
        if !self.is_elected(op.session, tree) {
            return Some((
                Invariant::DeposedMasterWrite,
                format!(
                    "{} created {worker}'s assignment ({data}) without holding the master node",
                    op.session_name
                ),
            ));
        }
        let task = TaskId::parse(data).ok()?;
        let position = self.submissions_in_order.position(&task);
        let fifo = self
            .fifo_breach(&task, position, tree)
            .or_else(|| self.overtaking_create(op, worker, &task));
        if let Some(position) = position {
            self.last_assigned.assigned(position, &task);
        }
        self.ever_assigned.insert(task);
        fifo.map(|detail| (Invariant::FifoOrder, detail))
    }

    /// Whether `worker`'s assignment to `task`, just created by `op`,
    /// reached the server after a create its master's rounds chose later
    /// (see `create_order`): faults or not, the session's creates arrive
    /// in the order chosen.
    fn overtaking_create(
        &mut self,
        op: &AppliedOp,
        worker: &WorkerId,
        task: &TaskId,
    ) -> Option<String> {
        let actor = actor_of_session(&op.session_name);
        // A session its actor has replaced is no longer judged by the
        // actor's log.
        if self.newest_sessions.get(actor) != Some(&op.session) {
            return None;
        }
        let log = self.master_logs.get_mut(actor)?;
        let (later_worker, later_task) =
            log.creates.applied(&(worker.clone(), task.clone())).err()?;
        Some(format!(
            "{} created {worker}'s assignment ({task}) after {later_worker}'s ({later_task}), \
             chosen after it: one session's creates reach the server in the order chosen",
            op.session_name
        ))
    }

    /// Whether assigning `task`, at `position` in submission order (`None`:
    /// never created), now breaks FIFO order (before any failure).
    fn fifo_breach(
        &self,
        task: &TaskId,
        position: Option<Position>,
        tree: &Tree,
    ) -> Option<String> {
        if self.first_failure.is_some() {
            return None;
        }
        let Some(position) = position else {
            return Some(never_submitted(task));
        };
        if let Some(last) = self.last_assigned.at_or_after(position) {
            return Some(format!(
                "{task} assigned after {last}: assignments must follow submission order, once each"
            ));
        }
        let result_of =
            |older: &TaskId| path::join(&path::join(&self.tasks_dir, older.as_str()), "result");
        let skipped = self
            .submissions_in_order
            .present_before(position)
            .find(|older| !self.ever_assigned.contains(*older) && !tree.exists(&result_of(older)));
        skipped.map(|older| format!("{task} assigned while the older {older} still waits"))
    }

    fn on_deleted(
        &mut self,
        op: &AppliedOp,
        path: &str,
        tree: &Tree,
    ) -> Option<(Invariant, String)> {
        if let Some(name) = path.strip_prefix(&self.assignments_prefix) {
            let worker = WorkerId::parse(name).ok()?;
            let data = self.assignment_nodes.remove(&worker)?;
            // Only the worker's own release says "finished"; anyone else's
            // delete is a master's reclaim.
            let by_the_worker = self.worker_sessions.get(&worker) == Some(&op.session);
            if !by_the_worker {
                if !self.is_elected(op.session, tree) {
                    return Some((
                        Invariant::DeposedMasterWrite,
                        format!(
                            "{} deleted {worker}'s assignment ({data}) without holding the master node",
                            op.session_name
                        ),
                    ));
                }
                // A reclaim is for a worker that left: one still registered
                // runs its task on, and the task, queued again, would run
                // twice.
                if tree.exists(&path::join(&self.workers_dir, worker.as_str())) {
                    return Some((
                        Invariant::TaskAssignedTwice,
                        format!(
                            "{} took {data} back from {worker}, which is still registered and runs it",
                            op.session_name
                        ),
                    ));
                }
                return None;
            }
            let task = TaskId::parse(&data).ok()?;
            let task_node = path::join(&self.tasks_dir, task.as_str());
            if tree.exists(&task_node) && !tree.exists(&path::join(&task_node, "result")) {
                return Some((
                    Invariant::FinishedExactlyOnce,
                    format!("{worker} released {task} before writing its result"),
                ));
            }
        } else if let Some(rest) = path.strip_prefix(&self.tasks_prefix)
            && let Ok(task) = TaskId::parse(rest)
        {
            self.submissions_in_order.deleted(&task);
            // Clients delete a task only once it has its result (a cleanup
            // of an unfinished task is refused): without one it is lost.
            let lost = !self.results_created.contains_key(&task);
            self.deleted_tasks.insert(task.clone());
            if lost {
                return Some((
                    Invariant::FinishedExactlyOnce,
                    format!(
                        "{} deleted {task} before any result was written: it can never finish",
                        op.session_name
                    ),
                ));
            }
        }
        None
    }

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
    fn handler_running_in(&self, session: SessionId) -> Option<String> {
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

/// A result as a violation's detail shows it: the output as text.
fn describe_result(result: &TaskResult) -> String {
    match result {
        TaskResult::Success { output } => {
            format!("success {:?}", String::from_utf8_lossy(output))
        }
        TaskResult::Failure { message } => format!("failure {message:?}"),
    }
}
