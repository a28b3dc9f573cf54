//! What the master still waits for before its state is built.

use std::collections::BTreeSet;

use zkdist_coord::{TaskId, WorkerId};

use crate::decision::Trigger;

#[derive(Debug, Default)]
pub(super) struct Initialisation {
    /// Tasks of the first listing whose `result` has not been checked yet.
    pub(super) unchecked_tasks: BTreeSet<TaskId>,
    /// Assignments of the first listing whose data has not been read yet.
    pub(super) unread_assignments: BTreeSet<WorkerId>,
    /// Why rounds would have run had the state been built: the first round
    /// runs for all of them at once.
    pub(super) triggers: BTreeSet<Trigger>,
}

impl Initialisation {
    pub(super) fn is_complete(&self, all_listed_once: bool) -> bool {
        all_listed_once && self.unchecked_tasks.is_empty() && self.unread_assignments.is_empty()
    }
}
