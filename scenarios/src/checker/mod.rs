//! The invariant checker. It sees every transaction the simulated server
//! applies (with the tree right after it), every master and worker
//! decision, every injected fault, and, once a run ends, the tree and the
//! master's final state. The first violation it finds is kept and every
//! later input ignored: the harness then stops the run.
//!
//! The invariants, each with its precise meaning:
//! - [`Invariant::TaskAssignedTwice`]: no two assignment nodes name the same
//!   task; no round assigns a task the master's log shows held; no two
//!   workers run one task at the same time (a worker runs a task from
//!   starting it until it releases it or its session ends).
//! - [`Invariant::WorkerAssignedTwice`]: no round assigns a worker whom the
//!   master's own log shows busy; no create of an assignment node that
//!   already exists (the server refuses it, but the master meant to give a
//!   busy worker a second task); no worker starts a task while running
//!   another.
//! - [`Invariant::AssignedToUnregistered`]: when an assignment node is
//!   created, the worker's registration exists at that zxid. A worker that
//!   leaves later (its session ends while it holds the assignment) breaks
//!   no rule here; what becomes of its task is judged at the end.
//! - [`Invariant::FifoOrder`]: until the first failure (an injected fault, or
//!   a failed assignment create), assignment nodes are created in task
//!   sequence order, never twice for one task, and never while an older task
//!   waits unassigned; the master's rounds assign in that order too.
//! - [`Invariant::FinishedExactlyOnce`]: no task's result is written twice,
//!   no task runs again once finished, a worker releases an assignment only
//!   after writing the task's result, and when the run ends every task has
//!   its result.
//! - [`Invariant::MasterViewMatches`]: at the end of a quiescent run, the
//!   master's workers, their assignments, its pending queue and its
//!   processed set agree with ZooKeeper's tree.

mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use zkdist_coord::{ErrorCode, Layout, TaskId, WorkerId};
use zkdist_master::{MasterDecision, MasterState};
use zkdist_sim::{AppliedOp, Change, Tree, TxnKind};
use zkdist_worker::WorkerDecision;

pub use view::TreeFacts;

/// The rules a run must keep. See the module documentation for the exact
/// meaning of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    TaskAssignedTwice,
    WorkerAssignedTwice,
    AssignedToUnregistered,
    FifoOrder,
    FinishedExactlyOnce,
    MasterViewMatches,
}

impl Invariant {
    pub const ALL: [Invariant; 6] = [
        Invariant::TaskAssignedTwice,
        Invariant::WorkerAssignedTwice,
        Invariant::AssignedToUnregistered,
        Invariant::FifoOrder,
        Invariant::FinishedExactlyOnce,
        Invariant::MasterViewMatches,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::TaskAssignedTwice => "task-assigned-twice",
            Invariant::WorkerAssignedTwice => "worker-assigned-twice",
            Invariant::AssignedToUnregistered => "assigned-to-unregistered",
            Invariant::FifoOrder => "fifo-order",
            Invariant::FinishedExactlyOnce => "finished-exactly-once",
            Invariant::MasterViewMatches => "master-view-matches",
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

/// How the harness notes an actor's decision in the trace.
pub(crate) fn decision_line(actor: &str, text: &str) -> String {
    format!("decide {actor}: {text}")
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

/// The checker's state: what the transactions and decisions so far
/// established.
#[derive(Debug)]
pub struct Checker {
    assignments_prefix: String,
    tasks_prefix: String,
    workers_dir: String,
    ids_dir: String,
    tasks_dir: String,

    /// Every task node created (and not deleted), in sequence order.
    tasks: BTreeSet<TaskId>,
    /// The assignment nodes that exist now: worker -> data.
    assignment_nodes: BTreeMap<WorkerId, String>,
    /// Every task an assignment node was ever created for.
    ever_assigned: BTreeSet<TaskId>,
    /// The newest task given an assignment node, for FIFO.
    last_assigned: Option<TaskId>,
    /// How many times each task's result node was created.
    results_created: BTreeMap<TaskId, u32>,
    /// The first failure (fault or failed assignment): FIFO is checked only
    /// before it.
    first_failure: Option<String>,

    /// The master's log, replayed: who holds what in its own words.
    master_holding: BTreeMap<WorkerId, TaskId>,
    /// The newest task a round assigned, for FIFO.
    last_round_task: Option<TaskId>,
    /// The workers' logs: who runs what now, and who finished what.
    running: BTreeMap<WorkerId, TaskId>,
    finished_by: BTreeMap<TaskId, WorkerId>,
    /// Which worker each worker session registered as, so that a session's
    /// end ends its worker's run.
    worker_of_session: BTreeMap<String, WorkerId>,

    violation: Option<Violation>,
    /// Set once the run is over: later inputs (teardown) are not judged.
    closed: bool,
}

impl Checker {
    pub fn new(layout: &Layout) -> Checker {
        Checker {
            assignments_prefix: format!("{}/", layout.assignments_dir()),
            tasks_prefix: format!("{}/", layout.tasks_dir()),
            workers_dir: layout.workers_dir(),
            ids_dir: layout.ids_dir(),
            tasks_dir: layout.tasks_dir(),
            tasks: BTreeSet::new(),
            assignment_nodes: BTreeMap::new(),
            ever_assigned: BTreeSet::new(),
            last_assigned: None,
            results_created: BTreeMap::new(),
            first_failure: None,
            master_holding: BTreeMap::new(),
            last_round_task: None,
            running: BTreeMap::new(),
            finished_by: BTreeMap::new(),
            worker_of_session: BTreeMap::new(),
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

    /// The first failure seen (after which FIFO is no longer required).
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

    /// A fault was injected (or another failure happened): from now on the
    /// founding design promises no FIFO order.
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
        if matches!(op.kind, TxnKind::ExpireSession | TxnKind::CloseSession)
            && let Some(worker) = self.worker_of_session.get(&op.session_name)
        {
            // A worker whose session ended runs nothing any more.
            self.running.remove(worker);
        }
        if let Some(detail) = self.refused_double_assignment(op) {
            return self.violate(Invariant::WorkerAssignedTwice, detail, step());
        }
        for change in &op.changes {
            let found = match change {
                Change::Created(path) => self.on_created(path, tree),
                Change::Deleted(path) => self.on_deleted(op, path, tree),
                Change::DataChanged(_) => None,
            };
            if let Some((invariant, detail)) = found {
                return self.violate(invariant, detail, step());
            }
        }
        false
    }

    /// A create of an assignment node that already existed: the master
    /// tried to give a second task to a busy worker. The server refuses it,
    /// so only the transaction's trace line names the path.
    fn refused_double_assignment(&self, op: &AppliedOp) -> Option<String> {
        let refused = op.kind == TxnKind::Create
            && op
                .error
                .as_ref()
                .is_some_and(|error| error.code() == ErrorCode::NodeExists);
        if !refused {
            return None;
        }
        let text = crate::trace::message(&op.trace_line);
        let path = text.split(" create ").nth(1)?.split(' ').next()?;
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

    fn on_created(&mut self, path: &str, tree: &Tree) -> Option<(Invariant, String)> {
        if let Some(name) = path.strip_prefix(&self.assignments_prefix) {
            let worker = WorkerId::parse(name).ok()?;
            let data = String::from_utf8_lossy(tree.data(path).unwrap_or_default()).into_owned();
            let found = self.on_assignment_created(&worker, &data, tree);
            self.assignment_nodes.insert(worker, data);
            return found;
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
        } else if let Ok(task) = TaskId::parse(rest) {
            self.tasks.insert(task);
        }
        None
    }

    fn on_assignment_created(
        &mut self,
        worker: &WorkerId,
        data: &str,
        tree: &Tree,
    ) -> Option<(Invariant, String)> {
        let registration = format!("{}/{worker}", self.workers_dir);
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
        let task = TaskId::parse(data).ok()?;
        let fifo = self.fifo_breach(&task, tree);
        self.last_assigned = self.last_assigned.clone().max(Some(task.clone()));
        self.ever_assigned.insert(task);
        fifo.map(|detail| (Invariant::FifoOrder, detail))
    }

    /// Whether assigning `task` now breaks FIFO order (before any failure).
    fn fifo_breach(&self, task: &TaskId, tree: &Tree) -> Option<String> {
        if self.first_failure.is_some() {
            return None;
        }
        if let Some(last) = &self.last_assigned
            && task <= last
        {
            return Some(format!(
                "{task} assigned after {last}: assignments must follow submission order, once each"
            ));
        }
        let result_of = |older: &TaskId| format!("{}/{older}/result", self.tasks_dir);
        let skipped = self
            .tasks
            .range(..task)
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
            // Only the worker's own release says "finished": its session
            // owns its id node.
            let id_node = format!("{}/{worker}", self.ids_dir);
            let by_the_worker = tree
                .stat(&id_node)
                .is_some_and(|stat| stat.ephemeral_owner == op.session.0);
            let task = TaskId::parse(&data).ok()?;
            let task_node = format!("{}/{task}", self.tasks_dir);
            if by_the_worker
                && tree.exists(&task_node)
                && !tree.exists(&format!("{task_node}/result"))
            {
                return Some((
                    Invariant::FinishedExactlyOnce,
                    format!("{worker} released {task} before writing its result"),
                ));
            }
        } else if let Some(rest) = path.strip_prefix(&self.tasks_prefix)
            && let Ok(task) = TaskId::parse(rest)
        {
            self.tasks.remove(&task);
        }
        None
    }

    /// Checks one master decision against the master's earlier decisions
    /// and the tree as the transactions so far left it.
    pub fn on_master_decision(&mut self, actor: &str, decision: &MasterDecision) -> bool {
        if !self.judging() {
            return false;
        }
        let step = || Step::Decision {
            actor: actor.to_owned(),
            text: decision.to_string(),
        };
        match decision {
            MasterDecision::Round { assigned, .. } => {
                for (worker, task) in assigned {
                    if let Some((invariant, detail)) = self.round_breach(worker, task) {
                        return self.violate(invariant, detail, step());
                    }
                    self.last_round_task = self.last_round_task.clone().max(Some(task.clone()));
                    self.master_holding.insert(worker.clone(), task.clone());
                }
            }
            MasterDecision::AssignmentFailed { worker, error, .. } => {
                self.master_holding.remove(worker);
                self.on_failure(&format!("{actor}: {decision}: {error}"));
            }
            MasterDecision::WorkerIdle { worker, .. }
            | MasterDecision::WorkerLeft { worker, .. } => {
                self.master_holding.remove(worker);
            }
            MasterDecision::TaskInProgress { worker, task } => {
                self.master_holding.insert(worker.clone(), task.clone());
            }
            _ => {}
        }
        false
    }

    fn round_breach(&self, worker: &WorkerId, task: &TaskId) -> Option<(Invariant, String)> {
        if let Some(held) = self.master_holding.get(worker) {
            return Some((
                Invariant::WorkerAssignedTwice,
                format!(
                    "a round assigns {task} to {worker}, which the master's log shows holding {held}"
                ),
            ));
        }
        if let Some((other, _)) = self.master_holding.iter().find(|(_, held)| *held == task) {
            return Some((
                Invariant::TaskAssignedTwice,
                format!(
                    "a round assigns {task} to {worker} while the master's log shows {other} holding it"
                ),
            ));
        }
        if self.first_failure.is_none()
            && let Some(last) = &self.last_round_task
            && task <= last
        {
            return Some((
                Invariant::FifoOrder,
                format!("a round assigns {task} after {last} was assigned"),
            ));
        }
        None
    }

    /// Checks one worker decision against what the workers did before.
    pub fn on_worker_decision(&mut self, actor: &str, decision: &WorkerDecision) -> bool {
        if !self.judging() {
            return false;
        }
        let step = || Step::Decision {
            actor: actor.to_owned(),
            text: decision.to_string(),
        };
        let found = match decision {
            WorkerDecision::TaskStarted { worker, task } => {
                let found = self.start_breach(worker, task);
                self.running.insert(worker.clone(), task.clone());
                found
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
            WorkerDecision::AssignmentReleased { worker, .. } => {
                self.running.remove(worker);
                None
            }
            WorkerDecision::Registered { worker } => {
                self.worker_of_session
                    .insert(actor.to_owned(), worker.clone());
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
        if let Some(by) = self.finished_by.get(task) {
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

    /// The end of a run: every task has its result, and the master's view
    /// (when it survived) is ZooKeeper's.
    pub fn on_end(&mut self, facts: &TreeFacts, master: Option<&MasterState>) -> bool {
        if !self.judging() {
            return false;
        }
        if let Some((task, _)) = facts.tasks.iter().find(|(_, finished)| !**finished) {
            let detail = format!("{task} never finished: {}", facts.whereabouts(task, master));
            return self.violate(Invariant::FinishedExactlyOnce, detail, Step::EndOfRun);
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
