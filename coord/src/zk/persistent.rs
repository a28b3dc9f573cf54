//! The session's persistent watches (`add_watch`): plain state and
//! decisions, no I/O.
//!
//! Two things make them more than a list of watchers.
//!
//! A 3.8 server keeps one watch mode per node and session (ZOOKEEPER-4466,
//! fixed in 3.9): a one-shot watch set on a node that holds a persistent
//! watch replaces it (the persistent watch is gone once the one-shot
//! fires), and a second `addWatch` on the node replaces the first's mode in
//! both of the server's watch tables. So:
//! - a one-shot watch on a node whose persistent watch reports every change
//!   the one-shot would (any persistent watch for a data watch, a
//!   non-recursive one for a child watch) is not sent to the server: the
//!   read goes out without a watch, and the persistent watch reports the
//!   change, which is all the session's one event stream can show of it;
//! - while such an `add_watch` is in flight, the read waits (with every
//!   later request, to keep their order) until its reply tells whether the
//!   persistent watch exists;
//! - `add_watch` of the other mode on a node that holds (or asked for) a
//!   persistent watch is refused: no request sequence gives a 3.8 server
//!   both at once.
//!
//! And one notification reaches every client-side watcher it concerns, one
//! channel each, while the session's stream carries one event per change:
//! a change below a recursive watch and on a node with a one-shot watch (or
//! under two recursive watches) fires two watchers. The rules that make one
//! event of them, given firings handled in the order the client dispatched
//! them (see `pump.rs`):
//! - a one-shot watcher stays silent when a persistent watcher registered
//!   before it reports the change: that one received the same notification
//!   and reports it;
//! - otherwise the first watcher to report a change emits it; every other
//!   persistent watcher that reports it expects it once more and drops it
//!   when it comes, and the node's live one-shot watchers it triggers are
//!   spent.

use std::collections::{BTreeMap, VecDeque};

use super::watches::{WatchClass, WatchId};
use crate::error::ZkResult;
use crate::{AddWatchMode, WatchEvent};

#[derive(Debug)]
struct LivePersistent {
    path: String,
    mode: AddWatchMode,
    /// Events another watcher already reported, which this one received
    /// too and is yet to hand over, oldest first.
    duplicates: VecDeque<WatchEvent>,
}

/// What to do with a read that asks for a one-shot watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OneShotPlan {
    /// Send it with its watch.
    Send,
    /// Send it without a watch: a persistent watch on the node reports
    /// everything the one-shot would.
    Absorb,
    /// Wait: an `add_watch` on the node is in flight.
    Hold,
}

#[derive(Debug, Default)]
pub(crate) struct PersistentWatches {
    live: BTreeMap<WatchId, LivePersistent>,
    /// `add_watch` requests sent and not answered yet: their path, mode and
    /// number.
    in_flight: BTreeMap<String, (AddWatchMode, usize)>,
}

impl PersistentWatches {
    pub(crate) fn new() -> PersistentWatches {
        PersistentWatches::default()
    }

    fn live_mode(&self, path: &str) -> Option<AddWatchMode> {
        self.live
            .values()
            .find(|watch| watch.path == path)
            .map(|watch| watch.mode)
    }

    /// Refuses an `add_watch` of the other mode on a node that holds, or
    /// asked for, a persistent watch.
    pub(crate) fn check_add(&self, path: &str, mode: AddWatchMode) -> ZkResult<()> {
        let held = self
            .live_mode(path)
            .or_else(|| self.in_flight.get(path).map(|(mode, _)| *mode));
        match held {
            Some(held) if held != mode => Err(mode.refusal(path, held)),
            _ => Ok(()),
        }
    }

    /// An `add_watch` checked by [`PersistentWatches::check_add`] is sent.
    pub(crate) fn sent(&mut self, path: &str, mode: AddWatchMode) {
        let entry = self.in_flight.entry(path.to_owned()).or_insert((mode, 0));
        assert_eq!(entry.0, mode, "add_watch of two modes in flight on {path}");
        entry.1 += 1;
    }

    /// An `add_watch` was answered. With `confirmed`, the watcher it left
    /// gets that id; returns whether the caller is to keep it (a second
    /// watcher of the same node and mode is redundant, and the caller drops
    /// it: the client then sends nothing to the server, since the first
    /// stays).
    pub(crate) fn answered(
        &mut self,
        path: &str,
        mode: AddWatchMode,
        confirmed: Option<WatchId>,
    ) -> bool {
        let entry = self
            .in_flight
            .get_mut(path)
            .expect("an answered add_watch was in flight");
        assert_eq!(entry.0, mode, "add_watch answered in another mode");
        entry.1 -= 1;
        if entry.1 == 0 {
            self.in_flight.remove(path);
        }
        let Some(id) = confirmed else {
            return false;
        };
        if let Some(held) = self.live_mode(path) {
            assert_eq!(held, mode, "two persistent modes on {path}");
            return false;
        }
        let previous = self.live.insert(
            id,
            LivePersistent {
                path: path.to_owned(),
                mode,
                duplicates: VecDeque::new(),
            },
        );
        assert!(previous.is_none(), "watcher id {id} reused");
        true
    }

    /// Whether a persistent watch of `mode` on `watched` reports every
    /// change a one-shot watch of `class` on the same node would.
    fn covers(mode: AddWatchMode, class: WatchClass) -> bool {
        match class {
            WatchClass::Data => true,
            WatchClass::Child => mode == AddWatchMode::Persistent,
        }
    }

    pub(crate) fn plan_one_shot(&self, path: &str, class: WatchClass) -> OneShotPlan {
        if self
            .live_mode(path)
            .is_some_and(|mode| Self::covers(mode, class))
        {
            return OneShotPlan::Absorb;
        }
        match self.in_flight.get(path) {
            Some((mode, _)) if Self::covers(*mode, class) => OneShotPlan::Hold,
            _ => OneShotPlan::Send,
        }
    }

    /// Whether an add_watch whose reply frees held requests is in flight on
    /// `path`: `false` once none is.
    pub(crate) fn is_in_flight(&self, path: &str) -> bool {
        self.in_flight.contains_key(path)
    }

    /// Whether a persistent watcher registered before watcher `one_shot`
    /// reports `event` (the one-shot's firing is then not reported).
    pub(crate) fn reported_by_earlier(&self, event: &WatchEvent, one_shot: WatchId) -> bool {
        self.live
            .range(..one_shot)
            .any(|(_, watch)| watch.mode.reports(&watch.path, event.kind, &event.path))
    }

    /// `event` was reported (by `reporter`, if persistent): every other
    /// persistent watcher that reports it received it too, and drops it
    /// when it comes.
    pub(crate) fn expect_duplicates(&mut self, event: &WatchEvent, reporter: Option<WatchId>) {
        for (id, watch) in &mut self.live {
            if Some(*id) != reporter && watch.mode.reports(&watch.path, event.kind, &event.path) {
                watch.duplicates.push_back(event.clone());
            }
        }
    }

    /// Whether `event`, received by watcher `id`, was already reported by
    /// another watcher (and is to be dropped).
    pub(crate) fn is_duplicate(&mut self, id: WatchId, event: &WatchEvent) -> bool {
        let Some(watch) = self.live.get_mut(&id) else {
            return false;
        };
        debug_assert!(
            watch.mode.reports(&watch.path, event.kind, &event.path),
            "a {:?} watch on {} received {event:?}",
            watch.mode,
            watch.path
        );
        if watch.duplicates.front() == Some(event) {
            watch.duplicates.pop_front();
            return true;
        }
        false
    }

    /// Every live watcher, in the order they were added.
    pub(crate) fn live_ids(&self) -> Vec<WatchId> {
        self.live.keys().copied().collect()
    }

    /// The node and mode of live watcher `id`.
    pub(crate) fn watch_of(&self, id: WatchId) -> Option<(String, AddWatchMode)> {
        self.live
            .get(&id)
            .map(|watch| (watch.path.clone(), watch.mode))
    }

    pub(crate) fn is_live(&self, id: WatchId) -> bool {
        self.live.contains_key(&id)
    }

    /// Forgets every watcher (the session is over) and returns their ids.
    pub(crate) fn clear(&mut self) -> Vec<WatchId> {
        self.in_flight.clear();
        std::mem::take(&mut self.live).into_keys().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{WatchKind, ZkError};
    use AddWatchMode::{Persistent, PersistentRecursive};

    fn event(kind: WatchKind, path: &str) -> WatchEvent {
        WatchEvent {
            kind,
            path: path.to_owned(),
        }
    }

    fn confirmed(watches: &mut PersistentWatches, id: WatchId, path: &str, mode: AddWatchMode) {
        watches.sent(path, mode);
        assert!(watches.answered(path, mode, Some(id)));
    }

    #[test]
    fn the_other_mode_on_the_same_node_is_refused_the_same_mode_is_not() {
        let mut watches = PersistentWatches::new();
        watches.sent("/a", PersistentRecursive);
        assert!(matches!(
            watches.check_add("/a", Persistent),
            Err(ZkError::BadArguments { reason }) if reason.contains("/a")
        ));
        assert_eq!(watches.check_add("/a", PersistentRecursive), Ok(()));
        assert_eq!(watches.check_add("/a/b", Persistent), Ok(()));
        assert!(watches.answered("/a", PersistentRecursive, Some(1)));
        assert!(watches.check_add("/a", Persistent).is_err());
        // A second watcher of the same node and mode is redundant.
        watches.sent("/a", PersistentRecursive);
        assert!(!watches.answered("/a", PersistentRecursive, Some(2)));
        assert!(!watches.is_live(2));
    }

    /// What a reconnection asks the server for again: every live watch,
    /// once, in the order they were added; not a failed one.
    #[test]
    fn the_live_watches_are_listed_once_in_the_order_added() {
        let mut watches = PersistentWatches::new();
        confirmed(&mut watches, 3, "/b", PersistentRecursive);
        confirmed(&mut watches, 5, "/a", Persistent);
        watches.sent("/b", PersistentRecursive);
        assert!(!watches.answered("/b", PersistentRecursive, Some(6)));
        watches.sent("/c", Persistent);
        assert!(!watches.answered("/c", Persistent, None));
        assert_eq!(watches.live_ids(), [3, 5]);
        assert_eq!(
            watches.watch_of(3),
            Some(("/b".to_owned(), PersistentRecursive))
        );
        assert!(watches.clear().len() == 2 && watches.live_ids().is_empty());
    }

    #[test]
    fn a_failed_add_watch_leaves_nothing() {
        let mut watches = PersistentWatches::new();
        watches.sent("/a", Persistent);
        assert_eq!(
            watches.plan_one_shot("/a", WatchClass::Data),
            OneShotPlan::Hold
        );
        assert!(!watches.answered("/a", Persistent, None));
        assert_eq!(
            watches.plan_one_shot("/a", WatchClass::Data),
            OneShotPlan::Send
        );
        assert_eq!(watches.check_add("/a", PersistentRecursive), Ok(()));
    }

    #[test]
    fn one_shots_on_a_covered_node_are_absorbed_or_held() {
        let mut watches = PersistentWatches::new();
        confirmed(&mut watches, 1, "/p", Persistent);
        confirmed(&mut watches, 2, "/r", PersistentRecursive);
        assert_eq!(
            watches.plan_one_shot("/p", WatchClass::Data),
            OneShotPlan::Absorb
        );
        assert_eq!(
            watches.plan_one_shot("/p", WatchClass::Child),
            OneShotPlan::Absorb
        );
        assert_eq!(
            watches.plan_one_shot("/r", WatchClass::Data),
            OneShotPlan::Absorb
        );
        // A recursive watch never reports child changes: the one-shot goes.
        assert_eq!(
            watches.plan_one_shot("/r", WatchClass::Child),
            OneShotPlan::Send
        );
        // Below a watched node, the server keeps them apart.
        assert_eq!(
            watches.plan_one_shot("/r/x", WatchClass::Data),
            OneShotPlan::Send
        );
        watches.sent("/q", Persistent);
        assert_eq!(
            watches.plan_one_shot("/q", WatchClass::Child),
            OneShotPlan::Hold
        );
        assert!(watches.is_in_flight("/q"));
    }

    #[test]
    fn a_change_two_watchers_receive_is_reported_once() {
        let mut watches = PersistentWatches::new();
        confirmed(&mut watches, 1, "/a", PersistentRecursive);
        confirmed(&mut watches, 2, "/", PersistentRecursive);
        confirmed(&mut watches, 3, "/a/b", Persistent);
        let change = event(WatchKind::NodeDataChanged, "/a/b");
        // Watcher 2 reports first: 1 and 3 drop their copies.
        assert!(!watches.is_duplicate(2, &change));
        watches.expect_duplicates(&change, Some(2));
        assert!(watches.is_duplicate(3, &change));
        assert!(watches.is_duplicate(1, &change));
        // The next, genuine, change is reported again.
        assert!(!watches.is_duplicate(1, &change));
        // A child change only concerns the non-recursive watcher.
        let children = event(WatchKind::NodeChildrenChanged, "/a/b");
        watches.expect_duplicates(&children, None);
        assert!(watches.is_duplicate(3, &children));
        assert!(!watches.is_duplicate(1, &change));
    }

    #[test]
    fn a_one_shot_is_silent_when_an_earlier_persistent_watcher_reports_its_change() {
        let mut watches = PersistentWatches::new();
        confirmed(&mut watches, 5, "/a", PersistentRecursive);
        let deleted = event(WatchKind::NodeDeleted, "/a/b");
        assert!(watches.reported_by_earlier(&deleted, 6));
        assert!(!watches.reported_by_earlier(&deleted, 4));
        let children = event(WatchKind::NodeChildrenChanged, "/a/b");
        assert!(!watches.reported_by_earlier(&children, 6));
        assert_eq!(watches.clear(), vec![5]);
        assert!(!watches.reported_by_earlier(&deleted, 6));
    }
}
