//! The server: the tree, its watches and its live sessions. It applies one
//! request at a time, atomically, and says what the reply is and which
//! watch events go to which session. It knows nothing of links or time.

use std::collections::{BTreeMap, BTreeSet};

use zkdist_coord::{
    Reply, Request as Call, SessionId, Stat, WatchEvent, WatchKind, ZkError, ZkResult,
};

use crate::history::{ChangeAt, History};
use crate::multi::apply_multi;
use crate::request::{Request, Response};
use crate::tree::{Journal, Tree, Trigger};
use crate::watches::{ClientWatch, WatchTable, Watches};

/// The result of applying one request (or ending one session).
#[derive(Debug)]
pub(crate) struct Applied {
    /// The transaction's zxid; `None` for reads.
    pub zxid: Option<i64>,
    pub result: ZkResult<Response>,
    /// Watch events, in the order the server fired them.
    pub events: Vec<(SessionId, WatchEvent)>,
    /// What fired them, in order. The node-level changes are derived from
    /// them only when an observer is there to hear of them: each change
    /// copies a path.
    pub triggers: Vec<Trigger>,
}

/// How a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Its owner closed it: the connection is still open while the server
    /// deletes the ephemerals, so the session hears its own watches fire
    /// (`NodeDeleted` for the ephemerals it watched) before its close
    /// reply, as on a 3.8 server.
    Close,
    /// The server expired it: its connection (and with it its watches) is
    /// gone before the ephemerals are deleted.
    Expire,
}

#[derive(Debug, Default)]
pub(crate) struct Server {
    tree: Tree,
    watches: Watches,
    /// Live sessions and whether a connection currently attaches them.
    /// Only attached sessions hold watches.
    sessions: BTreeMap<SessionId, bool>,
    /// The last transactions, when reads may lag behind them (see
    /// [`Server::keep_history`]).
    history: Option<History>,
}

/// A read answered as of an older zxid, as a lagging server answers it.
#[derive(Debug)]
pub(crate) struct LaggingRead {
    pub result: ZkResult<Reply>,
    /// The event the watch the read asked for already owes: the node
    /// changed after `as_of_zxid`, and a lagging server that applies the
    /// change fires the watch at once. With where that change sits.
    pub owed_event: Option<(WatchEvent, ChangeAt)>,
}

/// What a session that reconnects through a server is told of its watches.
#[derive(Debug, Default)]
pub(crate) struct Reattached {
    /// Fired by `SetWatches` itself, as of the server's zxid: sent at once.
    pub fired_now: Vec<WatchEvent>,
    /// Fired as a lagging server applies what it was behind on, in order,
    /// each with where its change sits.
    pub owed: Vec<(WatchEvent, ChangeAt)>,
}

impl Server {
    pub(crate) fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Keeps the last `capacity_txns` transactions from now on, so that
    /// reads can be answered as of any zxid since ([`Server::read_as_of`]).
    pub(crate) fn keep_history(&mut self, capacity_txns: usize) {
        assert!(self.history.is_none(), "the history is kept once");
        self.history = Some(History::new(capacity_txns));
    }

    /// Keeps at least the last `capacity_txns` transactions from now on:
    /// starts the history, or lets the one kept grow.
    pub(crate) fn keep_history_of_at_least(&mut self, capacity_txns: usize) {
        match &mut self.history {
            Some(history) => history.keep_at_least(capacity_txns),
            None => self.keep_history(capacity_txns),
        }
    }

    /// The oldest zxid a read can be answered as of: the current one when
    /// no history is kept.
    pub(crate) fn oldest_readable_zxid(&self) -> i64 {
        let current = self.tree.zxid();
        self.history
            .as_ref()
            .map_or(current, |history| history.oldest_readable_zxid(current))
    }

    /// Moves a parent's sequence counter by hand (a test's knob, see
    /// [`Tree::set_sequence_counter`]). It is no transaction, so no read
    /// can be answered from before it.
    pub(crate) fn set_sequence_counter(&mut self, parent: &str, value: i32) -> ZkResult<()> {
        if let Some(history) = &mut self.history {
            history.clear();
        }
        self.tree.set_sequence_counter(parent, value)
    }

    /// A journal that keeps its undo steps when the history needs them.
    fn journal(&self) -> Journal {
        if self.history.is_some() {
            Journal::default()
        } else {
            Journal::without_undo()
        }
    }

    /// Hands a transaction's journal to the history, if one is kept, and
    /// returns its triggers.
    fn remember(&mut self, zxid: Option<i64>, journal: Journal) -> Vec<Trigger> {
        if let (Some(zxid), Some(history)) = (zxid, &mut self.history) {
            let triggers = journal.triggers.clone();
            history.record(zxid, journal);
            return triggers;
        }
        journal.triggers
    }

    pub(crate) fn is_alive(&self, session: SessionId) -> bool {
        self.sessions.contains_key(&session)
    }

    /// Whether a connection attaches the session now; `None` if the session
    /// is not live.
    pub(crate) fn attached(&self, session: SessionId) -> Option<bool> {
        self.sessions.get(&session).copied()
    }

    /// Applies a request from a live session (or the request that creates
    /// it). A close goes through [`Server::end_session`] instead.
    pub(crate) fn apply(&mut self, session: SessionId, request: impl Into<Request>) -> Applied {
        let request = request.into();
        assert!(
            self.is_alive(session) != matches!(request, Request::CreateSession),
            "request from session {session} in the wrong life state"
        );
        assert!(
            !matches!(request, Request::Close),
            "a close ends the session through end_session"
        );
        let mut journal = self.journal();
        let zxid = request.is_write().then(|| self.tree.next_zxid());
        let result = match request {
            Request::CreateSession => {
                self.sessions.insert(session, true);
                Ok(Response::SessionCreated)
            }
            Request::Close => unreachable!("refused above"),
            Request::Call(call) => self
                .apply_call(session, zxid, call, &mut journal)
                .map(Response::Reply),
        };
        let triggers = self.remember(zxid, journal);
        Applied {
            zxid,
            events: self.fire(&triggers),
            triggers,
            result,
        }
    }

    /// Applies a request of the coordination trait; `zxid` is the
    /// transaction's for a write.
    fn apply_call(
        &mut self,
        session: SessionId,
        zxid: Option<i64>,
        call: Call,
        journal: &mut Journal,
    ) -> ZkResult<Reply> {
        match call {
            Call::Create { path, data, mode } => self
                .tree
                .create(zxid.expect("write"), session, &path, &data, mode, journal)
                .map(Reply::Created),
            Call::Delete { path, version } => self
                .tree
                .delete(zxid.expect("write"), &path, version, journal)
                .map(|()| Reply::Deleted),
            Call::SetData {
                path,
                data,
                version,
            } => self
                .tree
                .set_data(zxid.expect("write"), &path, &data, version, journal)
                .map(Reply::DataSet),
            Call::Multi { ops } => apply_multi(&mut self.tree, zxid.expect("write"), session, &ops)
                .map(|(results, multi_journal)| {
                    *journal = multi_journal;
                    Reply::Multi(results)
                }),
            Call::Exists { .. }
            | Call::GetData { .. }
            | Call::GetDataMany { .. }
            | Call::GetChildrenMany { .. }
            | Call::GetChildren { .. }
            | Call::CountDescendants { .. } => {
                let result = answer_read(&self.tree, &call);
                if let Some((table, path)) = watch_left(&call, &result) {
                    self.watches.add(table, path, session);
                }
                result
            }
            Call::Sync { .. } => Ok(Reply::Synced),
            Call::AddWatch { path, mode } => {
                // The node need not exist; nothing fires now.
                self.watches.add(WatchTable::of_mode(mode), &path, session);
                Ok(Reply::WatchAdded)
            }
        }
    }

    /// Closes or expires a session in one transaction: its ephemerals are
    /// deleted, in the order given (a permutation of the tree's list, see
    /// [`Tree::delete_ephemerals`]), firing watches, and its watches are
    /// dropped: before the deletions for an expiry, after them for a close
    /// (see [`Ending`]). `None` if the session is already gone.
    pub(crate) fn end_session(
        &mut self,
        session: SessionId,
        ending: Ending,
        ephemerals_in_order: &[String],
    ) -> Option<Applied> {
        self.sessions.remove(&session)?;
        if ending == Ending::Expire {
            self.watches.remove_session(session);
        }
        let zxid = self.tree.next_zxid();
        let mut journal = self.journal();
        self.tree
            .delete_ephemerals(zxid, session, ephemerals_in_order, &mut journal);
        let triggers = self.remember(Some(zxid), journal);
        let events = self.fire(&triggers);
        self.watches.remove_session(session);
        Some(Applied {
            zxid: Some(zxid),
            result: Ok(Response::Closed),
            events,
            triggers,
        })
    }

    /// Answers a read as a server that has applied the transactions up to
    /// `as_of_zxid` only, and no later ones, would: from the tree as it was
    /// then. A watch the read asks for is left as of that zxid too, so if
    /// the node changed since, the watch is owed its event at once (the
    /// lagging server fires it when it applies the change) and is not kept.
    pub(crate) fn read_as_of(
        &mut self,
        session: SessionId,
        call: &Call,
        as_of_zxid: i64,
    ) -> LaggingRead {
        assert_eq!(
            self.sessions.get(&session),
            Some(&true),
            "a read from {session}, which is not attached"
        );
        assert!(
            is_lagging_read(call),
            "only reads can be answered as of the past"
        );
        let history = self
            .history
            .as_mut()
            .expect("reads lag only when a history is kept");
        assert!(
            as_of_zxid <= self.tree.zxid(),
            "a read as of 0x{as_of_zxid:x}, which is in the future"
        );
        let result = history.read_as_of(&mut self.tree, as_of_zxid, |tree| answer_read(tree, call));
        let mut owed_event = None;
        if let Some((table, path)) = watch_left(call, &result) {
            match history.first_firing_after(as_of_zxid, table, path) {
                Some((kind, at)) => {
                    let event = WatchEvent {
                        kind,
                        path: path.to_owned(),
                    };
                    owed_event = Some((event, at));
                }
                None => self.watches.add(table, path, session),
            }
        }
        LaggingRead { result, owed_event }
    }

    /// The session's connection closed: the server forgets its watches (the
    /// client re-registers them on reconnecting). The session lives on.
    pub(crate) fn detach(&mut self, session: SessionId) {
        if let Some(attached) = self.sessions.get_mut(&session) {
            *attached = false;
            self.watches.remove_session(session);
        }
    }

    /// The session reconnected, through a server that has applied the
    /// transactions up to `as_of_zxid` (the newest one, unless reads lag):
    /// ZooKeeper's `SetWatches`. Each watch the client still holds fires at
    /// once if, as of that zxid, the node changed after the last zxid the
    /// client saw (or is gone, or, for an `exists` watch, exists), and is
    /// registered again otherwise. Persistent watches are registered again
    /// without firing: changes made while the session was away are not
    /// reported through them. A lagging server then applies the
    /// transactions after `as_of_zxid`, firing the watches just registered
    /// as it goes.
    pub(crate) fn reattach(
        &mut self,
        session: SessionId,
        client_watches: &BTreeSet<(ClientWatch, String)>,
        last_zxid_seen: i64,
        as_of_zxid: i64,
    ) -> Reattached {
        assert!(
            last_zxid_seen <= as_of_zxid && as_of_zxid <= self.tree.zxid(),
            "{session} reconnects through a server as of 0x{as_of_zxid:x}, behind what it saw \
             (0x{last_zxid_seen:x}) or ahead of the newest (0x{:x})",
            self.tree.zxid()
        );
        let attached = self.sessions.get_mut(&session).expect("live session");
        assert!(!*attached, "session {session} attached twice");
        *attached = true;
        let stats: Vec<Option<Stat>> = self.look_as_of(as_of_zxid, |tree| {
            client_watches
                .iter()
                .map(|(_, path)| tree.stat(path))
                .collect()
        });
        let mut events = Vec::new();
        // The watches the server registers again, apart until it has
        // caught up: only this session's can fire on the way.
        let mut registered = Watches::default();
        let event = |kind, path: &String| WatchEvent {
            kind,
            path: path.clone(),
        };
        for ((watch, path), stat) in client_watches.iter().zip(stats) {
            match (watch, stat) {
                (ClientWatch::Data, None) => events.push(event(WatchKind::NodeDeleted, path)),
                (ClientWatch::Data, Some(s)) if s.mzxid > last_zxid_seen => {
                    events.push(event(WatchKind::NodeDataChanged, path))
                }
                (ClientWatch::Data, Some(_)) => registered.add(WatchTable::Data, path, session),
                (ClientWatch::Exist, Some(_)) => events.push(event(WatchKind::NodeCreated, path)),
                (ClientWatch::Exist, None) => registered.add(WatchTable::Data, path, session),
                (ClientWatch::Child, None) => events.push(event(WatchKind::NodeDeleted, path)),
                (ClientWatch::Child, Some(s)) if s.pzxid > last_zxid_seen => {
                    events.push(event(WatchKind::NodeChildrenChanged, path))
                }
                (ClientWatch::Child, Some(_)) => registered.add(WatchTable::Child, path, session),
                (ClientWatch::Persistent, _) => {
                    registered.add(WatchTable::Persistent, path, session)
                }
                (ClientWatch::PersistentRecursive, _) => {
                    registered.add(WatchTable::Recursive, path, session)
                }
            }
        }
        let mut owed = Vec::new();
        if let Some(history) = &self.history {
            for (at, trigger) in history.triggers_after(as_of_zxid) {
                for (told, event) in registered.fire(trigger) {
                    debug_assert_eq!(told, session, "only the session's own watches");
                    owed.push((event, at));
                }
            }
        }
        for (table, path) in registered.of_session(session) {
            self.watches.add(*table, path, session);
        }
        Reattached {
            fired_now: events,
            owed,
        }
    }

    /// Runs `look` on the tree as of `as_of_zxid`: the tree itself when that
    /// is the newest zxid.
    fn look_as_of<R>(&mut self, as_of_zxid: i64, look: impl FnOnce(&Tree) -> R) -> R {
        if as_of_zxid == self.tree.zxid() {
            return look(&self.tree);
        }
        self.history
            .as_mut()
            .expect("only a kept history reaches into the past")
            .read_as_of(&mut self.tree, as_of_zxid, look)
    }

    fn fire(&mut self, triggers: &[Trigger]) -> Vec<(SessionId, WatchEvent)> {
        let mut fired = Vec::new();
        for trigger in triggers {
            self.watches.fire_into(trigger, &mut fired);
        }
        fired
    }

    /// How many watches the server holds, all sessions together.
    #[cfg(test)]
    pub(crate) fn watch_count(&self) -> usize {
        self.watches.count()
    }

    pub(crate) fn check_invariants(&self) {
        self.tree.check_invariants();
        self.watches.check_invariants();
        for session in self.watches.sessions() {
            assert_eq!(
                self.sessions.get(&session),
                Some(&true),
                "only attached live sessions hold watches ({session})"
            );
        }
        for owner in self.tree.ephemeral_owners() {
            assert!(
                self.is_alive(owner),
                "ephemeral owned by dead session {owner}"
            );
        }
        // A get_children watch is only left on a node that exists, and the
        // node's deletion fires it (NodeDeleted) and removes it.
        for path in self.watches.child_paths() {
            assert!(
                self.tree.exists(path),
                "child watch on {path}, which does not exist"
            );
        }
    }
}

/// Whether a lagging server answers `call` from its own, possibly older,
/// tree: the reads. A `sync` is what catches a server up, and `add_watch`
/// is taken as answered by an up-to-date server, one of the states a
/// lagging server may be in.
pub(crate) fn is_lagging_read(call: &Call) -> bool {
    matches!(
        call,
        Call::Exists { .. }
            | Call::GetData { .. }
            | Call::GetDataMany { .. }
            | Call::GetChildrenMany { .. }
            | Call::GetChildren { .. }
            | Call::CountDescendants { .. }
    )
}

/// The reply to a read, from `tree` alone; the watch it leaves is the
/// caller's to register ([`watch_left`]).
fn answer_read(tree: &Tree, call: &Call) -> ZkResult<Reply> {
    let no_node = |path: &str| ZkError::NoNode {
        path: path.to_owned(),
    };
    let data_of = |path: &str| {
        tree.get(path)
            .map(|node| (node.data().to_vec(), node.stat()))
            .ok_or_else(|| no_node(path))
    };
    let children_of = |path: &str| {
        tree.get(path)
            .map(|node| node.children().map(str::to_owned).collect::<Vec<_>>())
            .ok_or_else(|| no_node(path))
    };
    match call {
        Call::Exists { path, .. } => Ok(Reply::Exists(tree.stat(path))),
        Call::GetData { path, .. } => data_of(path).map(|(data, stat)| Reply::Data(data, stat)),
        // Each path on its own, from one state of the tree: a multi-read
        // is served in one go, between two transactions.
        Call::GetDataMany { paths } => Ok(Reply::DataMany(
            paths.iter().map(|path| data_of(path)).collect(),
        )),
        Call::GetChildrenMany { paths } => Ok(Reply::ChildrenMany(
            paths.iter().map(|path| children_of(path)).collect(),
        )),
        Call::GetChildren { path, .. } => tree
            .get(path)
            .map(|node| Reply::Children(node.children().map(str::to_owned).collect(), node.stat()))
            .ok_or_else(|| no_node(path)),
        Call::CountDescendants { path } => tree
            .descendant_count(path)
            .map(Reply::DescendantCount)
            .ok_or_else(|| no_node(path)),
        _ => unreachable!("not a read: {call:?}"),
    }
}

/// The one-shot watch a read leaves, if it asked for one: `exists` leaves
/// it even on a missing node (it fires on create); `get_data` and
/// `get_children` only on a node they found.
fn watch_left<'a>(call: &'a Call, result: &ZkResult<Reply>) -> Option<(WatchTable, &'a str)> {
    match call {
        Call::Exists { path, watch: true } => Some((WatchTable::Data, path)),
        Call::GetData { path, watch: true } if result.is_ok() => Some((WatchTable::Data, path)),
        Call::GetChildren { path, watch: true } if result.is_ok() => {
            Some((WatchTable::Child, path))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::applied::{Change, changes_of};
    use zkdist_coord::CreateMode;

    const A: SessionId = SessionId(1);
    const B: SessionId = SessionId(2);

    fn server_with_sessions() -> Server {
        let mut server = Server::default();
        server.apply(A, Request::CreateSession);
        server.apply(B, Request::CreateSession);
        server
    }

    /// Ends `session` the way the engine does, its ephemerals in sorted
    /// order.
    fn end(server: &mut Server, session: SessionId, ending: Ending) -> Option<Applied> {
        let order: Vec<String> = server
            .tree()
            .ephemerals(session)
            .into_iter()
            .map(str::to_owned)
            .collect();
        server.end_session(session, ending, &order)
    }

    fn create(server: &mut Server, session: SessionId, path: &str, mode: CreateMode) -> Applied {
        server.apply(
            session,
            Call::Create {
                path: path.into(),
                data: vec![],
                mode,
            },
        )
    }

    #[test]
    fn failed_writes_take_a_zxid_and_reads_do_not() {
        let mut server = server_with_sessions();
        assert_eq!(
            server.tree().zxid(),
            2,
            "creating a session is a transaction"
        );
        let failed = create(&mut server, A, "/missing/x", CreateMode::Persistent);
        assert_eq!(failed.zxid, Some(3));
        assert!(failed.result.is_err() && changes_of(&failed.triggers).is_empty());
        let read = server.apply(
            A,
            Call::Exists {
                path: "/".into(),
                watch: false,
            },
        );
        assert_eq!((read.zxid, server.tree().zxid()), (None, 3));
    }

    #[test]
    fn closing_is_one_transaction() {
        let mut server = server_with_sessions();
        create(&mut server, A, "/e", CreateMode::Ephemeral);
        let before = server.tree().zxid();
        let closed = end(&mut server, A, Ending::Close).unwrap();
        assert_eq!(closed.zxid, Some(before + 1));
        assert_eq!(server.tree().zxid(), before + 1);
        assert!(!server.is_alive(A));
    }

    #[test]
    fn exists_watch_on_missing_node_fires_on_create_then_parent_child_watch() {
        let mut server = server_with_sessions();
        server.apply(
            A,
            Call::Exists {
                path: "/a".into(),
                watch: true,
            },
        );
        server.apply(
            A,
            Call::GetChildren {
                path: "/".into(),
                watch: true,
            },
        );
        let applied = create(&mut server, B, "/a", CreateMode::Persistent);
        let kinds: Vec<_> = applied
            .events
            .iter()
            .map(|(s, e)| (*s, e.kind, e.path.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                (A, WatchKind::NodeCreated, "/a"),
                (A, WatchKind::NodeChildrenChanged, "/")
            ]
        );
        server.check_invariants();
    }

    #[test]
    fn get_data_on_missing_node_leaves_no_watch() {
        let mut server = server_with_sessions();
        let read = server.apply(
            A,
            Call::GetData {
                path: "/a".into(),
                watch: true,
            },
        );
        assert!(matches!(read.result, Err(ZkError::NoNode { .. })));
        assert!(
            create(&mut server, B, "/a", CreateMode::Persistent)
                .events
                .is_empty()
        );
    }

    /// A with ephemerals /e1 and /e2, watching /e1 (and a child watch on
    /// /e2); B watching /e2.
    fn two_watched_ephemerals() -> Server {
        let mut server = server_with_sessions();
        create(&mut server, A, "/e1", CreateMode::Ephemeral);
        create(&mut server, A, "/e2", CreateMode::Ephemeral);
        for (session, path) in [(B, "/e2"), (A, "/e1")] {
            server.apply(
                session,
                Call::Exists {
                    path: path.into(),
                    watch: true,
                },
            );
        }
        server.apply(
            A,
            Call::GetChildren {
                path: "/e2".into(),
                watch: true,
            },
        );
        server
    }

    fn heard(applied: &Applied) -> Vec<(SessionId, WatchKind, &str)> {
        applied
            .events
            .iter()
            .map(|(s, e)| (*s, e.kind, e.path.as_str()))
            .collect()
    }

    #[test]
    fn expiring_a_session_deletes_its_ephemerals_in_one_transaction_unheard_by_it() {
        let mut server = two_watched_ephemerals();
        let before = server.tree().zxid();
        let ended = end(&mut server, A, Ending::Expire).unwrap();
        assert_eq!(ended.zxid, Some(before + 1));
        assert_eq!(
            changes_of(&ended.triggers),
            [Change::Deleted("/e1".into()), Change::Deleted("/e2".into())]
        );
        // Only B hears: A's connection, and its watches, went first.
        assert_eq!(heard(&ended), [(B, WatchKind::NodeDeleted, "/e2")]);
        assert!(end(&mut server, A, Ending::Expire).is_none());
        assert!(!server.watches.has_watches(A));
        server.check_invariants();
    }

    #[test]
    fn closing_a_session_fires_its_own_watches_on_its_ephemerals_first() {
        let mut server = two_watched_ephemerals();
        let ended = end(&mut server, A, Ending::Close).unwrap();
        assert_eq!(
            heard(&ended),
            [
                (A, WatchKind::NodeDeleted, "/e1"),
                (A, WatchKind::NodeDeleted, "/e2"),
                (B, WatchKind::NodeDeleted, "/e2"),
            ]
        );
        assert!(!server.watches.has_watches(A), "the rest is dropped");
        assert!(end(&mut server, A, Ending::Close).is_none());
        server.check_invariants();
    }

    #[test]
    fn reattach_follows_set_watches_rules() {
        let mut server = server_with_sessions();
        create(&mut server, B, "/same", CreateMode::Persistent);
        create(&mut server, B, "/changed", CreateMode::Persistent);
        create(&mut server, B, "/gone", CreateMode::Persistent);
        let last_seen = server.tree().zxid();
        server.detach(A);
        server.apply(
            B,
            Call::SetData {
                path: "/changed".into(),
                data: vec![1],
                version: None,
            },
        );
        server.apply(
            B,
            Call::Delete {
                path: "/gone".into(),
                version: None,
            },
        );
        create(&mut server, B, "/born", CreateMode::Persistent);
        let held: BTreeSet<(ClientWatch, String)> = [
            (ClientWatch::Data, "/same"),
            (ClientWatch::Data, "/changed"),
            (ClientWatch::Data, "/gone"),
            (ClientWatch::Exist, "/born"),
            (ClientWatch::Exist, "/unborn"),
            (ClientWatch::Child, "/"),
            (ClientWatch::Persistent, "/changed"),
            (ClientWatch::PersistentRecursive, "/"),
        ]
        .into_iter()
        .map(|(w, p)| (w, p.to_owned()))
        .collect();
        let newest = server.tree().zxid();
        let reattached = server.reattach(A, &held, last_seen, newest);
        assert!(reattached.owed.is_empty(), "{reattached:?}");
        let fired: Vec<_> = reattached
            .fired_now
            .iter()
            .map(|e| (e.kind, e.path.as_str()))
            .collect();
        assert_eq!(
            fired,
            [
                (WatchKind::NodeDataChanged, "/changed"),
                (WatchKind::NodeDeleted, "/gone"),
                (WatchKind::NodeCreated, "/born"),
                (WatchKind::NodeChildrenChanged, "/"),
            ]
        );
        // The unfired ones are registered again: /same and /unborn, and
        // both persistent watches, which fire for nothing missed.
        assert_eq!(server.watches.count(), 4);
        server.check_invariants();
    }
}
