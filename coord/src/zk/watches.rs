//! The session's one-shot watch table: plain state and decisions, no I/O.
//!
//! `zookeeper-client` hands out one watcher per read that asked for a watch,
//! while ZooKeeper (and the Java client's default watcher, which our single
//! event stream stands for) reports one event per change, per node, per
//! session: "the same watcher registered several times on the same node and
//! type is triggered once". This table turns the first into the second.
//!
//! It keeps at most one live watcher per node and class (a data watch, left
//! by `get_data` or `exists`, and a child watch, left by `get_children`):
//! registering a second one of the same class supersedes the first, which
//! the caller then drops. Both would have fired on the same notification, so
//! nothing is lost, and the dropped watcher never reaches the server (the
//! client keeps the server-side watch while another watcher of the same
//! mode exists on the path).
//!
//! One notification can still fire a data watcher and a child watcher of the
//! same node (a deletion fires both). The caller feeds firings in the order
//! the client dispatched them (see `pump.rs`), so when one of the two fires
//! with `NodeDeleted`, the other, if registered, was fired by the same
//! notification: it is consumed here and its own firing ignored.

use std::collections::BTreeMap;

use crate::{WatchEvent, WatchKind};

/// What a watcher watches, as ZooKeeper's client sorts watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WatchClass {
    /// Left by `get_data` or `exists`: fires on create, data change, delete.
    Data,
    /// Left by `get_children`: fires on a child change and on delete.
    Child,
}

impl WatchClass {
    /// Whether a watch of this class is triggered by a change of `kind`.
    pub(crate) fn is_triggered_by(self, kind: WatchKind) -> bool {
        match self {
            WatchClass::Data => matches!(
                kind,
                WatchKind::NodeCreated | WatchKind::NodeDataChanged | WatchKind::NodeDeleted
            ),
            WatchClass::Child => matches!(
                kind,
                WatchKind::NodeChildrenChanged | WatchKind::NodeDeleted
            ),
        }
    }
}

/// A watcher's identity within one session.
pub(crate) type WatchId = u64;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Slots {
    data: Option<WatchId>,
    child: Option<WatchId>,
}

impl Slots {
    fn slot(&mut self, class: WatchClass) -> &mut Option<WatchId> {
        match class {
            WatchClass::Data => &mut self.data,
            WatchClass::Child => &mut self.child,
        }
    }

    fn is_empty(&self) -> bool {
        self.data.is_none() && self.child.is_none()
    }
}

/// The outcome of registering a watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Registered {
    pub id: WatchId,
    /// The watcher this one replaces; the caller drops it.
    pub superseded: Option<WatchId>,
}

/// The outcome of a watcher firing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fired {
    /// The event to deliver, or `None` when the watcher was superseded or
    /// already consumed by the same notification.
    pub event: Option<WatchEvent>,
    /// Watchers of the same node that the same notification fired; their
    /// own firings are to be ignored (the caller may drop them).
    pub consumed: Vec<WatchId>,
}

#[derive(Debug, Default)]
pub(crate) struct WatchTable {
    next_id: WatchId,
    by_path: BTreeMap<String, Slots>,
    live: BTreeMap<WatchId, (String, WatchClass)>,
}

impl WatchTable {
    pub(crate) fn new() -> WatchTable {
        WatchTable::default()
    }

    /// Records a watcher the client returned for `path`, in the order the
    /// replies that left them arrived.
    pub(crate) fn register(&mut self, path: &str, class: WatchClass) -> Registered {
        self.next_id += 1;
        let id = self.next_id;
        let slots = self.by_path.entry(path.to_owned()).or_default();
        let superseded = slots.slot(class).replace(id);
        if let Some(old) = superseded {
            let removed = self.live.remove(&old);
            assert_eq!(
                removed.as_ref().map(|(p, c)| (p.as_str(), *c)),
                Some((path, class)),
                "a slot pointed at a watcher that is not live"
            );
        }
        self.live.insert(id, (path.to_owned(), class));
        self.check_invariants();
        Registered { id, superseded }
    }

    /// A watcher fired with a change of `kind`. Firings must be fed in the
    /// order the client dispatched them.
    pub(crate) fn fired(&mut self, id: WatchId, kind: WatchKind) -> Fired {
        let Some((path, class)) = self.live.remove(&id) else {
            return Fired {
                event: None,
                consumed: Vec::new(),
            };
        };
        debug_assert!(
            class.is_triggered_by(kind),
            "a {class:?} watch on {path} fired with {kind:?}"
        );
        let slots = self
            .by_path
            .get_mut(&path)
            .expect("a live watcher has a slot");
        assert_eq!(*slots.slot(class), Some(id), "live watcher not in its slot");
        *slots.slot(class) = None;
        let mut consumed = Vec::new();
        for other in [WatchClass::Data, WatchClass::Child] {
            if other == class || !other.is_triggered_by(kind) {
                continue;
            }
            if let Some(other_id) = slots.slot(other).take() {
                let removed = self.live.remove(&other_id);
                assert!(removed.is_some(), "slot pointed at a dead watcher");
                consumed.push(other_id);
            }
        }
        if slots.is_empty() {
            self.by_path.remove(&path);
        }
        self.check_invariants();
        Fired {
            event: Some(WatchEvent { kind, path }),
            consumed,
        }
    }

    /// A watcher ended without a node event (the session ended): forgets it.
    pub(crate) fn forget(&mut self, id: WatchId) {
        if let Some((path, class)) = self.live.remove(&id)
            && let Some(slots) = self.by_path.get_mut(&path)
        {
            *slots.slot(class) = None;
            if slots.is_empty() {
                self.by_path.remove(&path);
            }
        }
        self.check_invariants();
    }

    /// Forgets every watcher (the session is over) and returns their ids.
    pub(crate) fn clear(&mut self) -> Vec<WatchId> {
        self.by_path.clear();
        std::mem::take(&mut self.live).into_keys().collect()
    }

    #[cfg(test)]
    pub(crate) fn live_count(&self) -> usize {
        self.live.len()
    }

    fn check_invariants(&self) {
        if cfg!(debug_assertions) {
            let in_slots: usize = self
                .by_path
                .values()
                .map(|s| usize::from(s.data.is_some()) + usize::from(s.child.is_some()))
                .sum();
            assert_eq!(in_slots, self.live.len(), "every live watcher has a slot");
            assert!(
                self.by_path.values().all(|s| !s.is_empty()),
                "no empty slots kept"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: WatchKind, path: &str) -> Option<WatchEvent> {
        Some(WatchEvent {
            kind,
            path: path.to_owned(),
        })
    }

    #[test]
    fn a_second_watch_of_the_same_class_supersedes_the_first() {
        let mut table = WatchTable::new();
        let first = table.register("/a", WatchClass::Data);
        assert_eq!(first.superseded, None);
        let second = table.register("/a", WatchClass::Data);
        assert_eq!(second.superseded, Some(first.id));
        assert_eq!(table.live_count(), 1);
        // The superseded watcher's firing is ignored; the live one reports.
        assert_eq!(
            table.fired(first.id, WatchKind::NodeDataChanged).event,
            None
        );
        assert_eq!(
            table.fired(second.id, WatchKind::NodeDataChanged).event,
            event(WatchKind::NodeDataChanged, "/a")
        );
        assert_eq!(table.live_count(), 0);
    }

    #[test]
    fn data_and_child_watches_are_separate_slots() {
        let mut table = WatchTable::new();
        let data = table.register("/a", WatchClass::Data);
        let child = table.register("/a", WatchClass::Child);
        assert_eq!(child.superseded, None);
        assert_eq!(
            table.fired(child.id, WatchKind::NodeChildrenChanged).event,
            event(WatchKind::NodeChildrenChanged, "/a")
        );
        // The data watch is still armed.
        assert_eq!(
            table.fired(data.id, WatchKind::NodeDataChanged).event,
            event(WatchKind::NodeDataChanged, "/a")
        );
    }

    #[test]
    fn one_deletion_reports_once_to_data_and_child_watches() {
        let mut table = WatchTable::new();
        let data = table.register("/a", WatchClass::Data);
        let child = table.register("/a", WatchClass::Child);
        let fired = table.fired(child.id, WatchKind::NodeDeleted);
        assert_eq!(fired.event, event(WatchKind::NodeDeleted, "/a"));
        assert_eq!(fired.consumed, vec![data.id]);
        assert_eq!(table.fired(data.id, WatchKind::NodeDeleted).event, None);
        assert_eq!(table.live_count(), 0);
    }

    #[test]
    fn a_data_change_does_not_consume_the_child_watch() {
        let mut table = WatchTable::new();
        let data = table.register("/a", WatchClass::Data);
        let child = table.register("/a", WatchClass::Child);
        let fired = table.fired(data.id, WatchKind::NodeDataChanged);
        assert!(fired.consumed.is_empty());
        assert_eq!(table.live_count(), 1);
        assert_eq!(
            table.fired(child.id, WatchKind::NodeDeleted).event,
            event(WatchKind::NodeDeleted, "/a")
        );
    }

    #[test]
    fn a_watch_registered_after_a_firing_reports_again() {
        let mut table = WatchTable::new();
        let first = table.register("/a", WatchClass::Data);
        assert!(
            table
                .fired(first.id, WatchKind::NodeDataChanged)
                .event
                .is_some()
        );
        let again = table.register("/a", WatchClass::Data);
        assert_eq!(again.superseded, None);
        assert!(
            table
                .fired(again.id, WatchKind::NodeDataChanged)
                .event
                .is_some()
        );
    }

    #[test]
    fn clear_and_forget_drop_everything() {
        let mut table = WatchTable::new();
        let a = table.register("/a", WatchClass::Data);
        let b = table.register("/b", WatchClass::Child);
        table.forget(a.id);
        assert_eq!(table.fired(a.id, WatchKind::NodeDeleted).event, None);
        assert_eq!(table.clear(), vec![b.id]);
        assert_eq!(table.live_count(), 0);
    }
}
