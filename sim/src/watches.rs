//! The server's one-shot watches (ZooKeeper's two `WatchManager`s): who is
//! told about which change, once.

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::{SessionId, WatchEvent, WatchKind};

use crate::tree::Trigger;

/// The server's two watch tables. `Data` holds the watches left by
/// `get_data` and by `exists` (on a present or a missing node); `Child`
/// those left by `get_children`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WatchTable {
    Data,
    Child,
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
}

#[derive(Debug, Default)]
pub(crate) struct Watches {
    data: BTreeMap<String, BTreeSet<SessionId>>,
    child: BTreeMap<String, BTreeSet<SessionId>>,
    /// The same registrations, by session, to drop a session's watches
    /// without scanning every path.
    by_session: BTreeMap<SessionId, BTreeSet<(WatchTable, String)>>,
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

    /// Fires the watches a change triggers and removes them. A delete tells
    /// the node's data and child watchers `NodeDeleted`, once per session
    /// even if it held both kinds.
    pub(crate) fn fire(&mut self, trigger: &Trigger) -> Vec<(SessionId, WatchEvent)> {
        let (kind, path, tables): (WatchKind, &str, &[WatchTable]) = match trigger {
            Trigger::Created(p) => (WatchKind::NodeCreated, p, &[WatchTable::Data]),
            Trigger::DataChanged(p) => (WatchKind::NodeDataChanged, p, &[WatchTable::Data]),
            Trigger::Deleted(p) => (
                WatchKind::NodeDeleted,
                p,
                &[WatchTable::Data, WatchTable::Child],
            ),
            Trigger::ChildrenChanged(p) => {
                (WatchKind::NodeChildrenChanged, p, &[WatchTable::Child])
            }
        };
        let mut told = BTreeSet::new();
        for &table in tables {
            for session in self.take(table, path) {
                told.insert(session);
            }
        }
        told.into_iter()
            .map(|session| {
                (
                    session,
                    WatchEvent {
                        kind,
                        path: path.to_owned(),
                    },
                )
            })
            .collect()
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
        let sessions = self.table_mut(table).remove(path).unwrap_or_default();
        for session in &sessions {
            let owned = self.by_session.get_mut(session).expect("indexed session");
            assert!(owned.remove(&(table, path.to_owned())), "watch not indexed");
            if owned.is_empty() {
                self.by_session.remove(session);
            }
        }
        sessions
    }

    fn table_mut(&mut self, table: WatchTable) -> &mut BTreeMap<String, BTreeSet<SessionId>> {
        match table {
            WatchTable::Data => &mut self.data,
            WatchTable::Child => &mut self.child,
        }
    }

    /// The two views agree.
    pub(crate) fn check_invariants(&self) {
        let mut from_tables = BTreeMap::<SessionId, BTreeSet<(WatchTable, String)>>::new();
        for (table, watchers) in [
            (WatchTable::Data, &self.data),
            (WatchTable::Child, &self.child),
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
