//! The rules judged on the tree: each transaction the simulated server
//! applies, against the tree right after it.

use std::collections::BTreeMap;

use zkdist_coord::{
    AssignmentView, ErrorCode, SessionId, TaskId, TaskResult, WorkerId, ZkError, assignment_label,
    path,
};
use zkdist_sim::{AppliedOp, Change, Tree, TxnKind};

use super::submission_order::Position;
use super::{Checker, Invariant, Step, never_submitted};
use crate::handler::expected_result;

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
