//! What one transaction's mutations did: how to take them back, and the
//! watches they trigger.

use zkdist_coord::Stat;

use super::Node;

/// A change that fires watches, in the order the server fires them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trigger {
    Created(String),
    DataChanged(String),
    Deleted(String),
    ChildrenChanged(String),
}

/// How to take back one step of a mutation. Undone in reverse order.
#[derive(Debug)]
pub(crate) enum Undo {
    /// Take back a create: remove the node again.
    Remove { path: String, sequential: bool },
    /// Take back a delete: put the node back.
    Reinsert { path: String, node: Node },
    /// Take back a parent's stat change (counter, pzxid, child count).
    RestoreStat { path: String, stat: Stat },
    /// Take back a `set_data`.
    RestoreData {
        path: String,
        data: Vec<u8>,
        stat: Stat,
    },
}

/// What the mutations of one transaction did: how to take them back, and
/// which watches they trigger, in order.
#[derive(Debug)]
pub(crate) struct Journal {
    pub undo: Vec<Undo>,
    pub triggers: Vec<Trigger>,
    /// Whether the undo steps are kept: only a `multi` can fail after a
    /// mutation, so only it needs them; a single request's journal skips
    /// building them (each names a path, so each costs an allocation).
    pub(super) keeps_undo: bool,
}

impl Default for Journal {
    fn default() -> Journal {
        Journal {
            undo: Vec::new(),
            triggers: Vec::new(),
            keeps_undo: true,
        }
    }
}

impl Journal {
    /// A journal for a transaction that is never taken back: one request
    /// whose checks all run before it mutates anything.
    pub(crate) fn without_undo() -> Journal {
        Journal {
            keeps_undo: false,
            ..Journal::default()
        }
    }

    /// Whether the journal keeps its undo steps (see [`Journal::without_undo`]).
    pub(crate) fn keeps_undo(&self) -> bool {
        self.keeps_undo
    }

    pub(super) fn push_undo(&mut self, step: impl FnOnce() -> Undo) {
        if self.keeps_undo {
            self.undo.push(step());
        }
    }
}
