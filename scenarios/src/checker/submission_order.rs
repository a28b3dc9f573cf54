//! The order tasks were submitted in, as the server applied their creates.
//! Task names carry ZooKeeper's 32-bit sequence counter, which wraps; the
//! checker judges FIFO by the zxids of the creates, so that it does not
//! share the order it checks (`TaskId`'s) with the code under test.

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::TaskId;

/// Where a task stands in submission order: its create's zxid (and its
/// name, for creates in one `multi`).
pub(super) type Position = (i64, TaskId);

#[derive(Debug, Default)]
pub(super) struct SubmissionOrder {
    /// The zxid of every task node's create, deleted ones included (the
    /// latest, should a name be created again).
    created_at: BTreeMap<TaskId, i64>,
    /// The task nodes that exist now, in submission order.
    present: BTreeSet<Position>,
}

impl SubmissionOrder {
    pub(super) fn created(&mut self, task: &TaskId, zxid: i64) {
        if let Some(earlier) = self.created_at.insert(task.clone(), zxid) {
            self.present.remove(&(earlier, task.clone()));
        }
        self.present.insert((zxid, task.clone()));
    }

    pub(super) fn deleted(&mut self, task: &TaskId) {
        if let Some(&zxid) = self.created_at.get(task) {
            self.present.remove(&(zxid, task.clone()));
        }
    }

    /// Where `task` stands, if the checker saw its create.
    pub(super) fn position(&self, task: &TaskId) -> Option<Position> {
        self.created_at.get(task).map(|&zxid| (zxid, task.clone()))
    }

    /// The task nodes that exist now and were submitted before the one at
    /// `position`, oldest first.
    pub(super) fn present_before(&self, position: &Position) -> impl Iterator<Item = &TaskId> {
        self.present.range(..position).map(|(_, task)| task)
    }
}

/// The newest task assigned so far, in submission order.
#[derive(Debug, Default)]
pub(super) struct NewestAssigned(Option<Position>);

impl NewestAssigned {
    /// The newest task assigned, if it is the task at `position` or was
    /// submitted after it: assigning that task now would break FIFO order.
    pub(super) fn at_or_after(&self, position: &Position) -> Option<&TaskId> {
        self.0
            .as_ref()
            .filter(|newest| *newest >= position)
            .map(|(_, task)| task)
    }

    pub(super) fn assigned(&mut self, position: Position) {
        if self.0.as_ref().is_none_or(|newest| position > *newest) {
            self.0 = Some(position);
        }
    }
}
