//! The server's recent transactions, kept so that a read can be answered
//! as a lagging follower would answer it: from the tree as it was some
//! transactions ago.
//!
//! ZooKeeper serves reads from the server a session is connected to, which
//! may not have applied the leader's latest transactions yet: "reads may be
//! stale relative to other clients' writes" (Consistency Guarantees), and a
//! client needs `sync` to be sure it sees them. The simulator has one tree;
//! to answer as of an older zxid it takes the newer transactions back
//! ([`Tree::travel`]), reads, and puts them back.

use std::collections::VecDeque;

use zkdist_coord::WatchKind;

use crate::tree::{Journal, Tree, Trigger, Undo};
use crate::watches::{WatchTable, one_shot_reach};

/// Where a change sits in the order the server applied changes in: its
/// transaction, then its place among that transaction's triggers (a multi
/// or a session's end makes several). A lagging server fires watches in
/// this order as it catches up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ChangeAt {
    pub zxid: i64,
    pub trigger: usize,
}

/// One applied transaction: how to take it back, and what it fired.
#[derive(Debug)]
struct PastTxn {
    zxid: i64,
    undo: Vec<Undo>,
    triggers: Vec<Trigger>,
}

/// The last `capacity_txns` transactions, oldest first, with no gap: a
/// read can go back as far as just before the oldest.
#[derive(Debug)]
pub(crate) struct History {
    capacity_txns: usize,
    txns: VecDeque<PastTxn>,
}

impl History {
    pub(crate) fn new(capacity_txns: usize) -> History {
        assert!(
            capacity_txns > 0,
            "a history keeps at least one transaction"
        );
        History {
            capacity_txns,
            txns: VecDeque::new(),
        }
    }

    /// Keeps at least `capacity_txns` transactions from now on (a stalled
    /// server may fall further behind than reads lag).
    pub(crate) fn keep_at_least(&mut self, capacity_txns: usize) {
        self.capacity_txns = self.capacity_txns.max(capacity_txns);
    }

    /// Keeps transaction `zxid`'s journal (built with its undo steps),
    /// forgetting the oldest transaction past the capacity.
    pub(crate) fn record(&mut self, zxid: i64, journal: Journal) {
        if let Some(newest) = self.txns.back() {
            assert_eq!(zxid, newest.zxid + 1, "the history has no gap");
        }
        assert!(
            journal.keeps_undo() || journal.undo.is_empty() && journal.triggers.is_empty(),
            "transaction 0x{zxid:x} changed the tree without its undo steps"
        );
        if self.txns.len() == self.capacity_txns {
            self.txns.pop_front();
        }
        self.txns.push_back(PastTxn {
            zxid,
            undo: journal.undo,
            triggers: journal.triggers,
        });
    }

    /// Forgets everything: the tree changed outside a transaction (a test
    /// moved a counter), so no older state can be rebuilt across it.
    pub(crate) fn clear(&mut self) {
        self.txns.clear();
    }

    /// The oldest zxid a read can be answered as of, given the tree's
    /// current one.
    pub(crate) fn oldest_readable_zxid(&self, current_zxid: i64) -> i64 {
        match self.txns.front() {
            Some(oldest) => {
                debug_assert_eq!(
                    self.txns.back().map(|newest| newest.zxid),
                    Some(current_zxid),
                    "the history ends at the tree's zxid"
                );
                oldest.zxid - 1
            }
            None => current_zxid,
        }
    }

    /// Runs `read` on `tree` as it was right after transaction `as_of_zxid`:
    /// the transactions after it are taken back, newest first, and put
    /// back, oldest first, once `read` has looked.
    pub(crate) fn read_as_of<R>(
        &mut self,
        tree: &mut Tree,
        as_of_zxid: i64,
        read: impl FnOnce(&Tree) -> R,
    ) -> R {
        let newer = self.newer_than(as_of_zxid);
        for txn in self.txns.range_mut(newer.clone()).rev() {
            // `undo` now holds the steps that redo the transaction.
            txn.undo = tree.travel(std::mem::take(&mut txn.undo));
        }
        let result = read(tree);
        for txn in self.txns.range_mut(newer) {
            txn.undo = tree.travel(std::mem::take(&mut txn.undo));
        }
        result
    }

    /// The first change after `as_of_zxid` that fires a one-shot watch of
    /// `table` on `path`: the event a watch set as of that zxid would have
    /// reported since, and where that change sits.
    pub(crate) fn first_firing_after(
        &self,
        as_of_zxid: i64,
        table: WatchTable,
        path: &str,
    ) -> Option<(WatchKind, ChangeAt)> {
        self.txns
            .range(self.newer_than(as_of_zxid))
            .find_map(|txn| {
                txn.triggers
                    .iter()
                    .enumerate()
                    .find_map(|(index, trigger)| {
                        let (kind, changed, tables) = one_shot_reach(trigger);
                        let at = ChangeAt {
                            zxid: txn.zxid,
                            trigger: index,
                        };
                        (changed == path && tables.contains(&table)).then_some((kind, at))
                    })
            })
    }

    /// The changes made after `as_of_zxid`, in the order they fire
    /// watches, each with where it sits.
    pub(crate) fn triggers_after(
        &self,
        as_of_zxid: i64,
    ) -> impl Iterator<Item = (ChangeAt, &Trigger)> + '_ {
        self.txns
            .range(self.newer_than(as_of_zxid))
            .flat_map(|txn| {
                txn.triggers.iter().enumerate().map(|(index, trigger)| {
                    let at = ChangeAt {
                        zxid: txn.zxid,
                        trigger: index,
                    };
                    (at, trigger)
                })
            })
    }

    /// The index range of the transactions after `as_of_zxid`.
    fn newer_than(&self, as_of_zxid: i64) -> std::ops::Range<usize> {
        let oldest = self.txns.front().map_or(as_of_zxid + 1, |txn| txn.zxid);
        assert!(
            as_of_zxid + 1 >= oldest,
            "a read as of 0x{as_of_zxid:x} reaches before the history (oldest 0x{oldest:x})"
        );
        let start = usize::try_from(as_of_zxid + 1 - oldest).expect("checked above");
        start.min(self.txns.len())..self.txns.len()
    }
}
