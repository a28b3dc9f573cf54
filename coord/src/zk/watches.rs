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
//!
//! A watcher can also fire before the caller registers it: its reply and
//! the notification came in one burst, and the caller found the watcher
//! fired when it handled the reply ([`WatchTable::fired_at_arm`]). The same
//! notification may then have fired a watcher of the same node that was
//! handled earlier, and the two must make one event. What tells them apart
//! is what each read saw: a read answered before the change saw the node as
//! the earlier read did, while a read answered after it saw the change
//! (a new `mzxid`, `pzxid` or `czxid`, or the node appearing or going). So
//! the table remembers each path's last firing with what its read saw, and
//! a firing at arm time of the same kind, on a read that saw the same, is
//! that firing again.
//!
//! A firing is remembered for as long as a reply to a request sent before
//! it is recorded may still be handled: only such a request can have left a
//! watcher that the same notification fired (a request sent later reached
//! the server after the notification left it). The caller tells the table
//! of every request it sends ([`WatchTable::request_sent`]) and every reply
//! it has handled ([`WatchTable::reply_handled`]); a firing is forgotten
//! once every request sent before it is answered. A session that always has
//! a request in flight (a client waiting on thousands of tasks, say) thus
//! keeps the firings of its few oldest outstanding requests, not one per
//! path it ever watched.
//! The one case this cannot tell: two `exists` on a missing node with a
//! create and a delete between them both see "missing", so a second create
//! in the same burst is taken for the first.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::{Stat, WatchEvent, WatchKind};

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

/// A request's place in the order the session sent its requests, from 1.
pub(crate) type RequestNumber = u64;

/// What the read that left a watcher saw of its node: the node's stat (for
/// a child watch, the stat of the node whose children were listed), or
/// `None` when `exists` found the node missing.
pub(crate) type Seen = Option<Stat>;

#[derive(Debug, Clone, PartialEq, Eq)]
struct LiveWatch {
    path: String,
    class: WatchClass,
    seen: Seen,
}

/// The last firing on a path, to recognise the same notification seen
/// through a watcher registered later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LastFiring {
    class: WatchClass,
    kind: WatchKind,
    seen: Seen,
    /// The newest request sent when the firing was recorded: replies to it
    /// and to the requests before it may bring the same notification again.
    sent_before: RequestNumber,
}

impl LastFiring {
    /// Whether a watcher of `class`, left by a read that saw `seen`, firing
    /// with `kind`, was fired by this same notification: the read was
    /// answered before the change (it saw what the earlier one saw) and the
    /// notification would have fired it (same class, or a deletion, which
    /// fires both classes).
    fn is_same_notification(&self, class: WatchClass, kind: WatchKind, seen: &Seen) -> bool {
        self.kind == kind
            && self.seen == *seen
            && (self.class == class || kind == WatchKind::NodeDeleted)
    }
}

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
    live: BTreeMap<WatchId, LiveWatch>,
    last_fired: BTreeMap<String, LastFiring>,
    /// The paths of `last_fired` in the order their firings were recorded,
    /// with the firing's `sent_before`: nondecreasing, so the firings to
    /// forget are at the front. A path recorded again keeps its older
    /// entry here, which is skipped when reached.
    firing_order: VecDeque<(RequestNumber, String)>,
    /// How many requests the session has sent.
    requests_sent: RequestNumber,
    /// The requests sent whose reply the caller has not handled yet.
    unanswered: BTreeSet<RequestNumber>,
}

impl WatchTable {
    pub(crate) fn new() -> WatchTable {
        WatchTable::default()
    }

    /// A new watcher id, greater than every one given before: ids tell
    /// which of two watchers was registered first (persistent watchers
    /// take theirs here too).
    pub(crate) fn allocate_id(&mut self) -> WatchId {
        self.next_id += 1;
        self.next_id
    }

    /// Records a watcher the client returned for `path`, in the order the
    /// replies that left them arrived; `seen` is what that reply showed.
    pub(crate) fn register(&mut self, path: &str, class: WatchClass, seen: Seen) -> Registered {
        let id = self.allocate_id();
        let slots = self.by_path.entry(path.to_owned()).or_default();
        let superseded = slots.slot(class).replace(id);
        if let Some(old) = superseded {
            let removed = self.live.remove(&old);
            assert_eq!(
                removed.as_ref().map(|w| (w.path.as_str(), w.class)),
                Some((path, class)),
                "a slot pointed at a watcher that is not live"
            );
        }
        let watch = LiveWatch {
            path: path.to_owned(),
            class,
            seen,
        };
        self.live.insert(id, watch);
        self.check_invariants();
        Registered { id, superseded }
    }

    /// A watcher that had already fired with a change of `kind` when the
    /// caller registered it, handled before anything else the caller had
    /// queued. If a watcher of the same node already reported that same
    /// notification, this one reports nothing (see the module docs).
    pub(crate) fn fired_at_arm(&mut self, id: WatchId, kind: WatchKind) -> Fired {
        let duplicate = self.live.get(&id).is_some_and(|watch| {
            self.last_fired
                .get(&watch.path)
                .is_some_and(|last| last.is_same_notification(watch.class, kind, &watch.seen))
        });
        if duplicate {
            self.forget(id);
            return Fired {
                event: None,
                consumed: Vec::new(),
            };
        }
        self.fired(id, kind)
    }

    /// The caller sent a request: returns its number, to give back to
    /// [`WatchTable::reply_handled`] once its reply is handled.
    pub(crate) fn request_sent(&mut self) -> RequestNumber {
        self.requests_sent += 1;
        self.unanswered.insert(self.requests_sent);
        self.requests_sent
    }

    /// The caller handled the reply to request `number` (and armed the
    /// watcher it brought, if any): forgets the firings that no reply still
    /// outstanding can bring again, so that the table stays as small as the
    /// live watches and the firings of the oldest requests in flight.
    pub(crate) fn reply_handled(&mut self, number: RequestNumber) {
        let was_unanswered = self.unanswered.remove(&number);
        assert!(
            was_unanswered,
            "a reply to request {number}, which is not in flight"
        );
        // Replies to requests numbered `oldest` and later are still to
        // come; a firing recorded before any of them was sent is done.
        let oldest = self
            .unanswered
            .first()
            .copied()
            .unwrap_or(self.requests_sent + 1);
        while let Some((sent_before, _)) = self.firing_order.front()
            && *sent_before < oldest
        {
            let (sent_before, path) = self.firing_order.pop_front().expect("front exists");
            if self
                .last_fired
                .get(&path)
                .is_some_and(|last| last.sent_before == sent_before)
            {
                self.last_fired.remove(&path);
            }
        }
        if self.unanswered.is_empty() {
            assert!(
                self.last_fired.is_empty(),
                "a firing kept with no reply to come"
            );
        }
    }

    /// A watcher fired with a change of `kind`. Firings must be fed in the
    /// order the client dispatched them.
    pub(crate) fn fired(&mut self, id: WatchId, kind: WatchKind) -> Fired {
        let Some(LiveWatch { path, class, seen }) = self.live.remove(&id) else {
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
        let sent_before = self.requests_sent;
        debug_assert!(
            self.firing_order
                .back()
                .is_none_or(|(last, _)| *last <= sent_before),
            "firings are recorded in the order requests were sent"
        );
        // With nothing in flight, no reply can bring this notification
        // again: there is nothing to remember.
        if !self.unanswered.is_empty() {
            self.last_fired.insert(
                path.clone(),
                LastFiring {
                    class,
                    kind,
                    seen,
                    sent_before,
                },
            );
            self.firing_order.push_back((sent_before, path.clone()));
        }
        self.check_invariants();
        Fired {
            event: Some(WatchEvent { kind, path }),
            consumed,
        }
    }

    /// A persistent watcher reported `event`: the live one-shot watchers of
    /// its node that the same notification fired are spent, and their own
    /// firings will report nothing. Returns their ids.
    pub(crate) fn spend_triggered(&mut self, event: &WatchEvent) -> Vec<WatchId> {
        let Some(slots) = self.by_path.get_mut(&event.path) else {
            return Vec::new();
        };
        let mut spent = Vec::new();
        for class in [WatchClass::Data, WatchClass::Child] {
            if class.is_triggered_by(event.kind)
                && let Some(id) = slots.slot(class).take()
            {
                let removed = self.live.remove(&id);
                assert!(removed.is_some(), "slot pointed at a dead watcher");
                spent.push(id);
            }
        }
        if slots.is_empty() {
            self.by_path.remove(&event.path);
        }
        self.check_invariants();
        spent
    }

    /// A watcher ended without a node event (the session ended): forgets it.
    pub(crate) fn forget(&mut self, id: WatchId) {
        if let Some(LiveWatch { path, class, .. }) = self.live.remove(&id)
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
        self.last_fired.clear();
        self.firing_order.clear();
        std::mem::take(&mut self.live).into_keys().collect()
    }

    #[cfg(test)]
    pub(crate) fn live_count(&self) -> usize {
        self.live.len()
    }

    #[cfg(test)]
    fn remembered_firings(&self) -> usize {
        self.last_fired.len()
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
            assert!(
                self.firing_order.len() >= self.last_fired.len(),
                "every remembered firing is in the order queue"
            );
            assert!(
                self.last_fired
                    .values()
                    .all(|last| last.sent_before <= self.requests_sent),
                "a firing stamped with a request not yet sent"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a firing of watcher `id` makes an event.
    fn reports(table: &mut WatchTable, id: WatchId, kind: WatchKind) -> bool {
        table.fired(id, kind).event.is_some()
    }

    /// Whether a firing found when watcher `id` is armed makes an event.
    fn reports_at_arm(table: &mut WatchTable, id: WatchId, kind: WatchKind) -> bool {
        table.fired_at_arm(id, kind).event.is_some()
    }

    fn event(kind: WatchKind, path: &str) -> Option<WatchEvent> {
        Some(WatchEvent {
            kind,
            path: path.to_owned(),
        })
    }

    #[test]
    fn a_second_watch_of_the_same_class_supersedes_the_first() {
        let mut table = WatchTable::new();
        let first = table.register("/a", WatchClass::Data, None);
        assert_eq!(first.superseded, None);
        let second = table.register("/a", WatchClass::Data, None);
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
        let data = table.register("/a", WatchClass::Data, None);
        let child = table.register("/a", WatchClass::Child, None);
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
        let data = table.register("/a", WatchClass::Data, None);
        let child = table.register("/a", WatchClass::Child, None);
        let fired = table.fired(child.id, WatchKind::NodeDeleted);
        assert_eq!(fired.event, event(WatchKind::NodeDeleted, "/a"));
        assert_eq!(fired.consumed, vec![data.id]);
        assert_eq!(table.fired(data.id, WatchKind::NodeDeleted).event, None);
        assert_eq!(table.live_count(), 0);
    }

    #[test]
    fn a_data_change_does_not_consume_the_child_watch() {
        let mut table = WatchTable::new();
        let data = table.register("/a", WatchClass::Data, None);
        let child = table.register("/a", WatchClass::Child, None);
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
        let first = table.register("/a", WatchClass::Data, None);
        assert!(reports(&mut table, first.id, WatchKind::NodeDataChanged));
        let again = table.register("/a", WatchClass::Data, None);
        assert_eq!(again.superseded, None);
        assert!(reports(&mut table, again.id, WatchKind::NodeDataChanged));
    }

    #[test]
    fn a_persistent_report_spends_the_one_shots_it_triggers() {
        let mut table = WatchTable::new();
        let data = table.register("/a", WatchClass::Data, None);
        let child = table.register("/a", WatchClass::Child, None);
        let changed = WatchEvent {
            kind: WatchKind::NodeDataChanged,
            path: "/a".into(),
        };
        assert_eq!(table.spend_triggered(&changed), vec![data.id]);
        assert_eq!(table.fired(data.id, WatchKind::NodeDataChanged).event, None);
        assert_eq!(table.live_count(), 1);
        let deleted = WatchEvent {
            kind: WatchKind::NodeDeleted,
            path: "/a".into(),
        };
        assert_eq!(table.spend_triggered(&deleted), vec![child.id]);
        assert_eq!(table.live_count(), 0);
        assert!(table.allocate_id() > child.id);
    }

    #[test]
    fn clear_and_forget_drop_everything() {
        let mut table = WatchTable::new();
        let a = table.register("/a", WatchClass::Data, None);
        let b = table.register("/b", WatchClass::Child, None);
        table.forget(a.id);
        assert_eq!(table.fired(a.id, WatchKind::NodeDeleted).event, None);
        assert_eq!(table.clear(), vec![b.id]);
        assert_eq!(table.live_count(), 0);
    }

    fn seen(mzxid: i64) -> Seen {
        Some(Stat {
            czxid: 1,
            mzxid,
            pzxid: 1,
            ..Stat::default()
        })
    }

    #[test]
    fn a_watcher_fired_at_arm_by_a_reported_notification_reports_nothing() {
        // Two reads answered before one change: the first watcher's firing
        // was reported; the second watcher, found fired when its reply was
        // handled, saw the same node and fired with the same kind.
        let mut table = WatchTable::new();
        let reads = [table.request_sent(), table.request_sent()];
        let first = table.register("/a", WatchClass::Data, seen(5));
        assert!(reports_at_arm(
            &mut table,
            first.id,
            WatchKind::NodeDataChanged
        ));
        let second = table.register("/a", WatchClass::Data, seen(5));
        assert_eq!(second.superseded, None);
        let fired = table.fired_at_arm(second.id, WatchKind::NodeDataChanged);
        assert_eq!(fired.event, None);
        assert_eq!(table.live_count(), 0);
        for read in reads {
            table.reply_handled(read);
        }
        assert_eq!(table.remembered_firings(), 0);
    }

    #[test]
    fn a_watcher_fired_at_arm_after_a_read_that_saw_the_change_reports_again() {
        // The second read was answered after the first change (it saw a
        // new mzxid): its watcher fired on a second change.
        let mut table = WatchTable::new();
        table.request_sent();
        let first = table.register("/a", WatchClass::Data, seen(5));
        assert!(reports(&mut table, first.id, WatchKind::NodeDataChanged));
        let second = table.register("/a", WatchClass::Data, seen(6));
        assert_eq!(
            table
                .fired_at_arm(second.id, WatchKind::NodeDataChanged)
                .event,
            event(WatchKind::NodeDataChanged, "/a")
        );
        // A different kind is a different notification, whatever was seen.
        let third = table.register("/a", WatchClass::Data, seen(6));
        assert_eq!(
            table.fired_at_arm(third.id, WatchKind::NodeDeleted).event,
            event(WatchKind::NodeDeleted, "/a")
        );
    }

    #[test]
    fn one_deletion_seen_through_both_classes_at_arm_reports_once() {
        let mut table = WatchTable::new();
        table.request_sent();
        let data = table.register("/a", WatchClass::Data, seen(5));
        assert!(reports_at_arm(&mut table, data.id, WatchKind::NodeDeleted));
        let child = table.register("/a", WatchClass::Child, seen(5));
        assert_eq!(
            table.fired_at_arm(child.id, WatchKind::NodeDeleted).event,
            None
        );
        // A child change is never taken for a data change.
        let data = table.register("/b", WatchClass::Data, seen(5));
        assert!(reports(&mut table, data.id, WatchKind::NodeDataChanged));
        let child = table.register("/b", WatchClass::Child, seen(5));
        assert!(reports_at_arm(
            &mut table,
            child.id,
            WatchKind::NodeChildrenChanged
        ));
    }

    #[test]
    fn firings_are_forgotten_once_no_reply_is_outstanding() {
        let mut table = WatchTable::new();
        let read = table.request_sent();
        let first = table.register("/a", WatchClass::Data, seen(5));
        assert!(reports(&mut table, first.id, WatchKind::NodeDataChanged));
        assert_eq!(table.remembered_firings(), 1);
        table.reply_handled(read);
        assert_eq!(table.remembered_firings(), 0);
        let second = table.register("/a", WatchClass::Data, seen(5));
        assert!(reports_at_arm(
            &mut table,
            second.id,
            WatchKind::NodeDataChanged
        ));
    }

    #[test]
    fn a_firing_is_kept_while_a_request_sent_before_it_is_outstanding() {
        let mut table = WatchTable::new();
        let older = table.request_sent();
        let watch = table.register("/a", WatchClass::Data, seen(5));
        assert!(reports(&mut table, watch.id, WatchKind::NodeDataChanged));
        // Requests sent after the firing, answered first, do not end it:
        // `older`'s reply may still bring a watcher the same change fired.
        let later = table.request_sent();
        table.reply_handled(later);
        assert_eq!(table.remembered_firings(), 1);
        let again = table.register("/a", WatchClass::Data, seen(5));
        assert_eq!(
            table
                .fired_at_arm(again.id, WatchKind::NodeDataChanged)
                .event,
            None
        );
        table.reply_handled(older);
        assert_eq!(table.remembered_firings(), 0);
    }

    #[test]
    fn a_session_never_idle_remembers_only_the_firings_of_its_outstanding_requests() {
        // A client waiting on many tasks: a read of each task leaves a
        // child watch that fires when the task's result is written, and a
        // newer read is always in flight, so the session never has nothing
        // outstanding. One remembered firing per task would grow without
        // bound.
        let mut table = WatchTable::new();
        let mut in_flight = std::collections::VecDeque::from([table.request_sent()]);
        let mut most_remembered = 0;
        for task in 0..10_000 {
            in_flight.push_back(table.request_sent());
            let answered = in_flight.pop_front().expect("a read in flight");
            let path = format!("/tasks/task-{task:010}");
            let watch = table.register(&path, WatchClass::Child, seen(task));
            table.reply_handled(answered);
            assert!(reports(
                &mut table,
                watch.id,
                WatchKind::NodeChildrenChanged
            ));
            most_remembered = most_remembered.max(table.remembered_firings());
        }
        assert!(
            most_remembered <= 2,
            "remembered up to {most_remembered} firings"
        );
        for read in in_flight {
            table.reply_handled(read);
        }
        assert_eq!(table.remembered_firings(), 0);
    }

    #[test]
    fn a_firing_with_nothing_in_flight_is_not_remembered() {
        let mut table = WatchTable::new();
        let watch = table.register("/a", WatchClass::Data, seen(5));
        assert!(reports(&mut table, watch.id, WatchKind::NodeDataChanged));
        assert_eq!(table.remembered_firings(), 0);
    }
}
