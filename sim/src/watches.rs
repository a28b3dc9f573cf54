//! The server's watches (ZooKeeper's two `WatchManager`s): who is told
//! about which change. One-shot watches are told once; persistent ones
//! (`addWatch`) every time, and recursive ones for their whole subtree.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use zkdist_coord::{AddWatchMode, SessionId, WatchEvent, WatchKind, path};

use crate::tree::Trigger;

/// Up to this many paths under a recursive watch, a change finds its
/// recursive watchers by checking each path rather than by looking up each
/// of its ancestors.
const RECURSIVE_SCAN_MAX_WATCHED: usize = 4;

/// The server's watch tables. `Data` holds the watches left by `get_data`
/// and by `exists` (on a present or a missing node); `Child` those left by
/// `get_children`; `Persistent` and `Recursive` those left by `add_watch`.
///
/// The one-shot and the persistent tables are kept apart, so that a
/// session can hold a one-shot and a persistent watch on the same node and
/// both fire, as on a 3.9 server (ZOOKEEPER-4466; a 3.8 server keeps one
/// mode per node and session, which the real backend works around: see
/// `zkdist_coord::zk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WatchTable {
    Data,
    Child,
    Persistent,
    Recursive,
}

impl WatchTable {
    pub(crate) fn of_mode(mode: AddWatchMode) -> WatchTable {
        match mode {
            AddWatchMode::Persistent => WatchTable::Persistent,
            AddWatchMode::PersistentRecursive => WatchTable::Recursive,
        }
    }

    fn is_one_shot(self) -> bool {
        matches!(self, WatchTable::Data | WatchTable::Child)
    }
}

/// What a change reports (the event's kind), on which node, and the
/// one-shot tables whose watches on that node it fires.
pub(crate) fn one_shot_reach(trigger: &Trigger) -> (WatchKind, &str, &'static [WatchTable]) {
    match trigger {
        Trigger::Created(p) => (WatchKind::NodeCreated, p, &[WatchTable::Data]),
        Trigger::DataChanged(p) => (WatchKind::NodeDataChanged, p, &[WatchTable::Data]),
        Trigger::Deleted(p) => (
            WatchKind::NodeDeleted,
            p,
            &[WatchTable::Data, WatchTable::Child],
        ),
        Trigger::ChildrenChanged(p) => (WatchKind::NodeChildrenChanged, p, &[WatchTable::Child]),
    }
}

/// A watch as the client remembers it, to re-register it after a
/// reconnect (the three lists of ZooKeeper's `SetWatches`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ClientWatch {
    /// From `get_data`, or `exists` on a present node.
    Data,
    /// From `exists` on a missing node.
    Exist,
    /// From `get_children`.
    Child,
    /// From `add_watch` (the last two lists of `SetWatches2`).
    Persistent,
    PersistentRecursive,
}

impl ClientWatch {
    pub(crate) fn of_mode(mode: AddWatchMode) -> ClientWatch {
        match mode {
            AddWatchMode::Persistent => ClientWatch::Persistent,
            AddWatchMode::PersistentRecursive => ClientWatch::PersistentRecursive,
        }
    }
}

/// The tables are keyed by path and hashed: every change looks its path
/// up in each (and every ancestor's in the recursive one). Nothing depends
/// on their hash order: the sessions told of a change are sorted, and
/// whatever walks a whole table only checks it.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    data: FxHashMap<String, BTreeSet<SessionId>>,
    child: FxHashMap<String, BTreeSet<SessionId>>,
    persistent: FxHashMap<String, BTreeSet<SessionId>>,
    recursive: FxHashMap<String, BTreeSet<SessionId>>,
    /// The same registrations, by session, to drop a session's watches
    /// without scanning every path.
    by_session: BTreeMap<SessionId, BTreeSet<(WatchTable, String)>>,
    /// The sessions a change tells, gathered here and kept empty between
    /// changes: every change fires, so its buffer is reused rather than
    /// allocated each time.
    told: Vec<SessionId>,
}

impl Watches {
    /// Leaves a watch. A session watching the same path in the same table
    /// twice is told once (it is a set).
    pub(crate) fn add(&mut self, table: WatchTable, path: &str, session: SessionId) {
        self.table_mut(table)
            .entry(path.to_owned())
            .or_default()
            .insert(session);
        self.by_session
            .entry(session)
            .or_default()
            .insert((table, path.to_owned()));
    }

    /// Fires the watches a change triggers and removes the one-shot ones.
    /// Each session is told once per change, whatever number of its
    /// watches the change fires (ZooKeeper collects the watchers in a set):
    /// a delete tells the node's data and child watchers `NodeDeleted` once,
    /// and a persistent watch that reports the change as well adds nothing.
    pub(crate) fn fire(&mut self, trigger: &Trigger) -> Vec<(SessionId, WatchEvent)> {
        let mut fired = Vec::new();
        self.fire_into(trigger, &mut fired);
        fired
    }

    /// As [`Watches::fire`], appending to `fired`: a transaction's changes
    /// fire into one list.
    pub(crate) fn fire_into(
        &mut self,
        trigger: &Trigger,
        fired: &mut Vec<(SessionId, WatchEvent)>,
    ) {
        let (kind, path, tables) = one_shot_reach(trigger);
        let mut told = std::mem::take(&mut self.told);
        assert!(told.is_empty(), "the buffer is emptied after each change");
        for &table in tables {
            told.extend(self.take(table, path));
        }
        self.add_persistent_watchers(kind, path, &mut told);
        // In session order, each once: ZooKeeper collects a change's
        // watchers in a set.
        told.sort_unstable();
        told.dedup();
        fired.extend(told.drain(..).map(|session| {
            (
                session,
                WatchEvent {
                    kind,
                    path: path.to_owned(),
                },
            )
        }));
        self.told = told;
    }

    /// Adds to `sessions` those whose persistent watches report a change
    /// of `kind` on `changed`: a persistent watch on the node itself (any
    /// kind), and a recursive one on the node or any ancestor (any kind but
    /// `NodeChildrenChanged`). `sessions` may then hold one several times,
    /// and is in no order.
    fn add_persistent_watchers(
        &self,
        kind: WatchKind,
        changed: &str,
        sessions: &mut Vec<SessionId>,
    ) {
        if let Some(watchers) = self.persistent.get(changed) {
            sessions.extend(watchers);
        }
        if kind == WatchKind::NodeChildrenChanged || self.recursive.is_empty() {
            return;
        }
        if self.recursive.len() <= RECURSIVE_SCAN_MAX_WATCHED {
            // Few recursive watches (one per master, say): checking each
            // against the changed path costs less than hashing every
            // ancestor of it. The caller sorts the sessions either way.
            for (watched, watchers) in &self.recursive {
                if path::is_same_or_descendant(changed, watched) {
                    sessions.extend(watchers);
                }
            }
            return;
        }
        let mut node = changed;
        loop {
            if let Some(watchers) = self.recursive.get(node) {
                sessions.extend(watchers);
            }
            if node == "/" {
                break;
            }
            node = path::parent(node);
        }
    }

    /// Drops every watch of a session (its connection closed, or it ended).
    pub(crate) fn remove_session(&mut self, session: SessionId) {
        for (table, path) in self.by_session.remove(&session).unwrap_or_default() {
            let watchers = self.table_mut(table);
            let sessions = watchers.get_mut(&path).expect("indexed watch");
            assert!(sessions.remove(&session), "indexed watch not in its table");
            if sessions.is_empty() {
                watchers.remove(&path);
            }
        }
    }

    /// The watches `session` holds, by table and path.
    pub(crate) fn of_session(
        &self,
        session: SessionId,
    ) -> impl Iterator<Item = &(WatchTable, String)> + '_ {
        self.by_session.get(&session).into_iter().flatten()
    }

    #[cfg(test)]
    pub(crate) fn has_watches(&self, session: SessionId) -> bool {
        self.by_session.contains_key(&session)
    }

    /// The sessions holding any watch.
    pub(crate) fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.by_session.keys().copied()
    }

    /// The paths holding a child watch.
    pub(crate) fn child_paths(&self) -> impl Iterator<Item = &str> {
        self.child.keys().map(String::as_str)
    }

    /// Number of (table, path, session) registrations.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.by_session.values().map(BTreeSet::len).sum()
    }

    fn take(&mut self, table: WatchTable, path: &str) -> BTreeSet<SessionId> {
        assert!(table.is_one_shot(), "{table:?} watches are never taken");
        let sessions = self.table_mut(table).remove(path).unwrap_or_default();
        if sessions.is_empty() {
            return sessions;
        }
        let key = (table, path.to_owned());
        for session in &sessions {
            let owned = self.by_session.get_mut(session).expect("indexed session");
            assert!(owned.remove(&key), "watch not indexed");
            if owned.is_empty() {
                self.by_session.remove(session);
            }
        }
        sessions
    }

    fn table_mut(&mut self, table: WatchTable) -> &mut FxHashMap<String, BTreeSet<SessionId>> {
        match table {
            WatchTable::Data => &mut self.data,
            WatchTable::Child => &mut self.child,
            WatchTable::Persistent => &mut self.persistent,
            WatchTable::Recursive => &mut self.recursive,
        }
    }

    /// The two views agree.
    pub(crate) fn check_invariants(&self) {
        let mut from_tables = BTreeMap::<SessionId, BTreeSet<(WatchTable, String)>>::new();
        for (table, watchers) in [
            (WatchTable::Data, &self.data),
            (WatchTable::Child, &self.child),
            (WatchTable::Persistent, &self.persistent),
            (WatchTable::Recursive, &self.recursive),
        ] {
            for (path, sessions) in watchers {
                assert!(!sessions.is_empty(), "empty watcher set kept for {path}");
                for session in sessions {
                    from_tables
                        .entry(*session)
                        .or_default()
                        .insert((table, path.clone()));
                }
            }
        }
        assert_eq!(from_tables, self.by_session, "watch index");
        assert!(self.told.is_empty(), "a change's sessions left behind");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use WatchKind::*;

    const A: SessionId = SessionId(1);
    const B: SessionId = SessionId(2);

    fn events(fired: Vec<(SessionId, WatchEvent)>) -> Vec<(SessionId, WatchKind, String)> {
        fired
            .into_iter()
            .map(|(s, e)| (s, e.kind, e.path))
            .collect()
    }

    #[test]
    fn data_watches_fire_once_per_session() {
        let mut watches = Watches::default();
        watches.add(WatchTable::Data, "/a", A);
        watches.add(WatchTable::Data, "/a", A);
        watches.add(WatchTable::Data, "/a", B);
        assert_eq!(watches.count(), 2);
        let fired = watches.fire(&Trigger::DataChanged("/a".into()));
        assert_eq!(
            events(fired),
            [
                (A, NodeDataChanged, "/a".into()),
                (B, NodeDataChanged, "/a".into())
            ]
        );
        // One-shot: gone after firing.
        assert!(watches.fire(&Trigger::DataChanged("/a".into())).is_empty());
        assert_eq!(watches.count(), 0);
        watches.check_invariants();
    }

    #[test]
    fn create_fires_data_table_and_children_changed_fires_child_table() {
        let mut watches = Watches::default();
        watches.add(WatchTable::Data, "/a", A);
        watches.add(WatchTable::Child, "/", B);
        watches.add(WatchTable::Child, "/a", A);
        assert_eq!(
            events(watches.fire(&Trigger::Created("/a".into()))),
            [(A, NodeCreated, "/a".into())]
        );
        assert_eq!(
            events(watches.fire(&Trigger::ChildrenChanged("/".into()))),
            [(B, NodeChildrenChanged, "/".into())]
        );
        // The child watch on /a is untouched by both.
        assert!(watches.has_watches(A));
        watches.check_invariants();
    }

    #[test]
    fn delete_tells_data_and_child_watchers_once() {
        let mut watches = Watches::default();
        watches.add(WatchTable::Data, "/a", A);
        watches.add(WatchTable::Child, "/a", A);
        watches.add(WatchTable::Child, "/a", B);
        assert_eq!(
            events(watches.fire(&Trigger::Deleted("/a".into()))),
            [(A, NodeDeleted, "/a".into()), (B, NodeDeleted, "/a".into())]
        );
        assert_eq!(watches.count(), 0);
        watches.check_invariants();
    }

    fn fire(watches: &mut Watches, trigger: Trigger) -> Vec<(SessionId, WatchKind, String)> {
        let fired = watches.fire(&trigger);
        watches.check_invariants();
        events(fired)
    }

    #[test]
    fn persistent_watches_fire_on_every_change_of_their_node_only() {
        let mut watches = Watches::default();
        watches.add(WatchTable::Persistent, "/a", A);
        for _ in 0..2 {
            assert_eq!(
                fire(&mut watches, Trigger::DataChanged("/a".into())),
                [(A, NodeDataChanged, "/a".into())]
            );
        }
        assert_eq!(
            fire(&mut watches, Trigger::ChildrenChanged("/a".into())),
            [(A, NodeChildrenChanged, "/a".into())]
        );
        assert!(fire(&mut watches, Trigger::Created("/a/b".into())).is_empty());
        assert!(fire(&mut watches, Trigger::DataChanged("/ab".into())).is_empty());
        assert_eq!(
            fire(&mut watches, Trigger::Deleted("/a".into())),
            [(A, NodeDeleted, "/a".into())]
        );
        assert_eq!(watches.count(), 1, "still there after the node went");
    }

    #[test]
    fn recursive_watches_report_the_subtree_but_no_child_changes() {
        let mut watches = Watches::default();
        watches.add(WatchTable::Recursive, "/a", A);
        watches.add(WatchTable::Recursive, "/", B);
        assert_eq!(
            fire(&mut watches, Trigger::Created("/a/b/c".into())),
            [
                (A, NodeCreated, "/a/b/c".into()),
                (B, NodeCreated, "/a/b/c".into())
            ]
        );
        assert_eq!(
            fire(&mut watches, Trigger::DataChanged("/a".into())),
            [
                (A, NodeDataChanged, "/a".into()),
                (B, NodeDataChanged, "/a".into())
            ]
        );
        assert_eq!(
            fire(&mut watches, Trigger::Deleted("/x".into())),
            [(B, NodeDeleted, "/x".into())]
        );
        assert!(fire(&mut watches, Trigger::ChildrenChanged("/a".into())).is_empty());
        assert!(
            fire(&mut watches, Trigger::DataChanged("/ab".into()))
                == [(B, NodeDataChanged, "/ab".into())]
        );
    }

    /// Past `RECURSIVE_SCAN_MAX_WATCHED` watched paths, the recursive
    /// watchers are found by walking the ancestors instead of checking each
    /// watched path: both ways tell the same sessions.
    #[test]
    fn recursive_watchers_are_the_same_found_either_way() {
        let watched = ["/", "/a", "/a/b", "/ab", "/x", "/a/b/c"];
        assert!(watched.len() > RECURSIVE_SCAN_MAX_WATCHED);
        let changes = ["/a/b", "/a/b/c/d", "/ab/c", "/x", "/a"];
        let told = |watches: &Watches, changed: &str| {
            let mut sessions = Vec::new();
            watches.add_persistent_watchers(NodeDataChanged, changed, &mut sessions);
            sessions.into_iter().collect::<BTreeSet<SessionId>>()
        };
        let mut walked = Watches::default();
        for (n, path) in watched.iter().enumerate() {
            walked.add(WatchTable::Recursive, path, SessionId(n as i64 + 1));
        }
        let mut scanned = Watches::default();
        for (n, path) in watched.iter().enumerate().take(RECURSIVE_SCAN_MAX_WATCHED) {
            scanned.add(WatchTable::Recursive, path, SessionId(n as i64 + 1));
        }
        // The sessions on the paths the scanned table lacks.
        let extra: BTreeSet<SessionId> = (RECURSIVE_SCAN_MAX_WATCHED..watched.len())
            .map(|n| SessionId(n as i64 + 1))
            .collect();
        for changed in changes {
            let by_walk = told(&walked, changed);
            let by_scan = told(&scanned, changed);
            let expected: BTreeSet<SessionId> = watched
                .iter()
                .enumerate()
                .filter(|(_, path)| path::is_same_or_descendant(changed, path))
                .map(|(n, _)| SessionId(n as i64 + 1))
                .collect();
            assert_eq!(by_walk, expected, "{changed}");
            assert_eq!(by_scan, &expected - &extra, "{changed}");
        }
        assert_eq!(
            told(&walked, "/a/b/c/d"),
            [1, 2, 3, 6].map(SessionId).into()
        );
    }

    #[test]
    fn one_change_tells_a_session_once_whatever_watches_it_fires() {
        let mut watches = Watches::default();
        watches.add(WatchTable::Data, "/a/b", A);
        watches.add(WatchTable::Child, "/a/b", A);
        watches.add(WatchTable::Persistent, "/a/b", A);
        watches.add(WatchTable::Recursive, "/a", A);
        watches.add(WatchTable::Recursive, "/", A);
        assert_eq!(
            fire(&mut watches, Trigger::Deleted("/a/b".into())),
            [(A, NodeDeleted, "/a/b".into())]
        );
        // The one-shot watches went; the persistent ones stay.
        assert_eq!(watches.count(), 3);
        watches.remove_session(A);
        assert_eq!(watches.count(), 0);
        watches.check_invariants();
    }

    #[test]
    fn removing_a_session_keeps_the_others() {
        let mut watches = Watches::default();
        watches.add(WatchTable::Data, "/a", A);
        watches.add(WatchTable::Child, "/b", A);
        watches.add(WatchTable::Data, "/a", B);
        watches.remove_session(A);
        watches.check_invariants();
        assert_eq!(watches.sessions().collect::<Vec<_>>(), [B]);
        assert_eq!(
            events(watches.fire(&Trigger::DataChanged("/a".into()))),
            [(B, NodeDataChanged, "/a".into())]
        );
        assert!(
            watches
                .fire(&Trigger::ChildrenChanged("/b".into()))
                .is_empty()
        );
    }
}
