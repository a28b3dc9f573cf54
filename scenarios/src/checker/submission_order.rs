//! The order tasks were submitted in, as the server applied their creates.
//! Task names carry ZooKeeper's 32-bit sequence counter, which wraps; the
//! checker judges FIFO by the zxids of the creates, so that it does not
//! share the order it checks (`TaskId`'s) with the code under test.

use std::collections::BTreeMap;

use zkdist_coord::TaskId;

/// Where a task stands in submission order: its create's zxid, and the
/// create's index among the transaction's changes (for a `multi` that
/// creates several).
pub(super) type Position = (i64, usize);

#[derive(Debug, Default)]
pub(super) struct SubmissionOrder {
    /// Where every task node's create stands, deleted ones included:
    /// decisions reach the checker after the transactions they follow, so
    /// a deleted task may still be assigned in a round it has to judge. A
    /// name is created again only after ZooKeeper's counter came round
    /// (2^32 creates); the latest create counts.
    created_at: BTreeMap<TaskId, Position>,
    /// The task nodes that exist now, in submission order.
    present: BTreeMap<Position, TaskId>,
}

impl SubmissionOrder {
    pub(super) fn created(&mut self, task: &TaskId, position: Position) {
        if let Some(earlier) = self.created_at.insert(task.clone(), position) {
            self.present.remove(&earlier);
        }
        let replaced = self.present.insert(position, task.clone());
        assert!(replaced.is_none(), "one create per change of a transaction");
    }

    pub(super) fn deleted(&mut self, task: &TaskId) {
        if let Some(position) = self.created_at.get(task) {
            self.present.remove(position);
        }
    }

    /// Where `task` stands, if the checker saw its create.
    pub(super) fn position(&self, task: &TaskId) -> Option<Position> {
        self.created_at.get(task).copied()
    }

    /// The task nodes that exist now and were submitted before the one at
    /// `position`, oldest first.
    pub(super) fn present_before(&self, position: Position) -> impl Iterator<Item = &TaskId> {
        self.present.range(..position).map(|(_, task)| task)
    }
}

/// The newest task assigned so far, in submission order.
#[derive(Debug, Default)]
pub(super) struct NewestAssigned(Option<(Position, TaskId)>);

impl NewestAssigned {
    /// The newest task assigned, if it is the task at `position` or was
    /// submitted after it: assigning that task now would break FIFO order.
    pub(super) fn at_or_after(&self, position: Position) -> Option<&TaskId> {
        self.0
            .as_ref()
            .filter(|(newest, _)| *newest >= position)
            .map(|(_, task)| task)
    }

    pub(super) fn assigned(&mut self, position: Position, task: &TaskId) {
        if self.0.as_ref().is_none_or(|(newest, _)| position > *newest) {
            self.0 = Some((position, task.clone()));
        }
    }
}
