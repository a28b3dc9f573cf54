//! The client library's side of a session: what ZooKeeper's `ClientCnxn`
//! and `ZKWatchManager` keep: the session's state, requests awaiting their
//! reply, the watches the client believes it holds, the last zxid it saw,
//! and the event stream it feeds.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use zkdist_coord::{
    AddWatchMode, Event, EventSender, EventStream, Reply, Request as Call, SessionId, SessionState,
    WatchEvent, WatchKind, ZkError, ZkResult, path,
};

use crate::request::{Request, Response, WatchingRead};
use crate::watches::ClientWatch;

/// What the client believes about its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientState {
    /// The link is up (or the client is reconnecting over a healed link):
    /// requests are sent.
    Up,
    /// The link is down and the client is trying to reconnect: new
    /// requests wait in `Client::unsent` and go out, in order, once it has
    /// (or fail with `SessionExpired` if the session expired meanwhile), as
    /// ZooKeeper's clients queue them.
    Down,
    /// The link died silently (`SimZk::partition`) and the client has not
    /// noticed yet: it believes it is connected, and what it sends is lost
    /// (it fails with `ConnectionLoss` once the client notices).
    Partitioned,
    /// `close` was sent; requests fail with `SessionClosed`.
    Closing,
    Closed,
    /// The client learnt that the server expired the session.
    Expired,
    /// The process died: nothing is sent or heard any more.
    Crashed,
}

/// Where `SimZk::connect`'s answer goes once the session is established.
pub(crate) type ConnectReply = oneshot::Sender<ZkResult<(SessionId, EventStream)>>;

/// A request sent and not yet answered.
#[derive(Debug)]
pub(crate) struct PendingOp {
    /// The request as the trace shows it, shared with the request in
    /// flight.
    pub summary: Arc<str>,
    pub watching: Option<WatchingRead>,
    /// The path of a `get_children`, whose reply the client refuses if it
    /// is over its buffer size.
    pub listed_path: Option<String>,
    pub reply: oneshot::Sender<ZkResult<Response>>,
}

/// A request issued while disconnected, waiting to be sent.
#[derive(Debug)]
pub(crate) struct Unsent {
    pub request_id: u64,
    pub request: Request,
    pub summary: Arc<str>,
}

/// The requests sent and not yet answered, in request id order. Ids are
/// issued in increasing order and a session's replies come back in the
/// order it sent, so a request is added at the back and answered from the
/// front: a deque keeps both cheap and its buffer between requests (a
/// sorted map allocated and freed a node every time one request was in
/// flight alone).
#[derive(Debug, Default)]
pub(crate) struct PendingOps {
    ops: VecDeque<(u64, PendingOp)>,
}

impl PendingOps {
    /// Adds a request issued after every one already pending.
    pub(crate) fn insert(&mut self, request_id: u64, op: PendingOp) {
        assert!(
            self.ops.back().is_none_or(|(last, _)| *last < request_id),
            "request ids are issued in increasing order"
        );
        self.ops.push_back((request_id, op));
    }

    fn position(&self, request_id: u64) -> Option<usize> {
        // Almost always the oldest: look there first.
        match self.ops.front() {
            Some((first, _)) if *first == request_id => Some(0),
            _ => self
                .ops
                .binary_search_by_key(&request_id, |(id, _)| *id)
                .ok(),
        }
    }

    pub(crate) fn remove(&mut self, request_id: &u64) -> Option<PendingOp> {
        let index = self.position(*request_id)?;
        self.ops.remove(index).map(|(_, op)| op)
    }

    pub(crate) fn get(&self, request_id: &u64) -> Option<&PendingOp> {
        self.position(*request_id).map(|index| &self.ops[index].1)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &u64> {
        self.ops.iter().map(|(id, _)| id)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &PendingOp> {
        self.ops.iter().map(|(_, op)| op)
    }

    /// Every pending request, oldest first.
    pub(crate) fn into_values(self) -> impl Iterator<Item = PendingOp> {
        self.ops.into_iter().map(|(_, op)| op)
    }
}

#[derive(Debug)]
pub(crate) struct Client {
    pub name: Arc<str>,
    pub state: ClientState,
    events: Option<EventSender>,
    /// The receiving end, handed over with the connect reply.
    connect: Option<(ConnectReply, EventStream)>,
    /// Whether the last session state the application heard is
    /// `Connected`, so that one outage is announced once.
    announced_connected: bool,
    /// Keyed by request id, which grows in issue order.
    pub pending: PendingOps,
    /// Requests issued while disconnected, by request id, in issue order:
    /// pending, but not sent yet.
    pub unsent: VecDeque<Unsent>,
    pub watches: BTreeSet<(ClientWatch, String)>,
    pub last_zxid_seen: i64,
    /// The key [`Client::claim_watch_event`] looks watches up with, kept
    /// between events: the set is keyed by owned paths, and a key built
    /// anew for every event cost an allocation per event delivered.
    watch_key: (ClientWatch, String),
}

impl Client {
    pub(crate) fn new(name: String, connect_reply: ConnectReply) -> Client {
        let (sender, stream) = mpsc::unbounded_channel();
        Client {
            name: name.into(),
            state: ClientState::Up,
            events: Some(sender),
            connect: Some((connect_reply, stream)),
            announced_connected: false,
            pending: PendingOps::default(),
            unsent: VecDeque::new(),
            watches: BTreeSet::new(),
            last_zxid_seen: 0,
            watch_key: (ClientWatch::Data, String::new()),
        }
    }

    /// The handshake finished: `Connected` goes on the stream, and the
    /// first time, `connect` returns with the stream.
    pub(crate) fn connected(&mut self, session: SessionId) {
        self.announce(SessionState::Connected);
        if let Some((reply, stream)) = self.connect.take() {
            // The caller may have given up waiting; nothing to undo then.
            let _ = reply.send(Ok((session, stream)));
        }
    }

    /// Whether `connect` is still waiting for the handshake.
    pub(crate) fn connecting(&self) -> bool {
        self.connect.is_some()
    }

    /// The handshake failed: `connect` returns this error and the stream
    /// is never handed out.
    pub(crate) fn fail_connect(&mut self, error: ZkError) {
        if let Some((reply, _stream)) = self.connect.take() {
            let _ = reply.send(Err(error));
        }
    }

    /// Puts a session state on the stream. `Disconnected` is announced
    /// only after a `Connected`, as ZooKeeper's client does.
    pub(crate) fn announce(&mut self, state: SessionState) {
        if state == SessionState::Disconnected && !self.announced_connected {
            return;
        }
        self.announced_connected = state == SessionState::Connected;
        self.emit(Event::Session(state));
    }

    /// Ends the stream: after `Closed` or `Expired`, or when the process
    /// crashed. Receivers see `None` once they drained it.
    pub(crate) fn end_stream(&mut self) {
        self.events = None;
        self.connect = None;
    }

    /// Fails every pending request (sent or still queued), oldest first,
    /// and returns their summaries for the trace.
    pub(crate) fn fail_pending(&mut self, error: impl Fn() -> ZkError) -> Vec<Arc<str>> {
        self.unsent.clear();
        std::mem::take(&mut self.pending)
            .into_values()
            .map(|op| {
                let _ = op.reply.send(Err(error()));
                op.summary
            })
            .collect()
    }

    /// Records the watch a successful read left, as the client library
    /// does when the reply arrives.
    pub(crate) fn record_watch(&mut self, read: &WatchingRead, response: &Response) {
        let (watch, path) = match (read, response) {
            (WatchingRead::Exists(p), Response::Reply(Reply::Exists(Some(_)))) => {
                (ClientWatch::Data, p)
            }
            (WatchingRead::Exists(p), Response::Reply(Reply::Exists(None))) => {
                (ClientWatch::Exist, p)
            }
            (WatchingRead::GetData(p), Response::Reply(Reply::Data(..))) => (ClientWatch::Data, p),
            (WatchingRead::GetChildren(p), Response::Reply(Reply::Children(..))) => {
                (ClientWatch::Child, p)
            }
            (WatchingRead::AddWatch(p, mode), Response::Reply(Reply::WatchAdded)) => {
                (ClientWatch::of_mode(*mode), p)
            }
            (read, response) => unreachable!("{read:?} answered by {response:?}"),
        };
        self.watches.insert((watch, path.clone()));
    }

    /// The client-side refusal of an `add_watch` of the other mode on a
    /// node that holds, or asked for, a persistent watch (see
    /// `AddWatchMode::refusal`), as the real backend refuses it.
    pub(crate) fn refuse_add_watch(&self, request: &Request) -> Option<ZkError> {
        let Request::Call(Call::AddWatch { path, mode }) = request else {
            return None;
        };
        let other = match mode {
            AddWatchMode::Persistent => AddWatchMode::PersistentRecursive,
            AddWatchMode::PersistentRecursive => AddWatchMode::Persistent,
        };
        let held = self
            .watches
            .contains(&(ClientWatch::of_mode(other), path.clone()));
        let asked = self
            .pending
            .values()
            .any(|op| op.watching.as_ref() == Some(&WatchingRead::AddWatch(path.clone(), other)));
        (held || asked).then(|| mode.refusal(path, other))
    }

    /// Takes the one-shot watches an event consumes and looks up the
    /// persistent ones that report it (`ZKWatchManager.materialize`). True
    /// if any watch claims it: the event then goes on the stream, once
    /// ([`Client::emit_watch_event`]). An event no watch claims is dropped,
    /// as the client library drops it: this is how a duplicate
    /// `NodeDeleted` after a reconnect disappears.
    pub(crate) fn claim_watch_event(&mut self, event: &WatchEvent) -> bool {
        let consumed: &[ClientWatch] = match event.kind {
            WatchKind::NodeCreated | WatchKind::NodeDataChanged => {
                &[ClientWatch::Data, ClientWatch::Exist]
            }
            WatchKind::NodeChildrenChanged => &[ClientWatch::Child],
            WatchKind::NodeDeleted => &[ClientWatch::Data, ClientWatch::Exist, ClientWatch::Child],
        };
        // One key, its kind and path changed in place, for every lookup
        // (taken out while `self` answers them; an empty `String` holds no
        // allocation).
        let mut key = std::mem::replace(&mut self.watch_key, (ClientWatch::Data, String::new()));
        key.1.clear();
        key.1.push_str(&event.path);
        let mut claimed = false;
        for &watch in consumed {
            key.0 = watch;
            claimed |= self.watches.remove(&key);
        }
        claimed |= self.holds_persistent_watch_reporting(event.kind, &mut key);
        self.watch_key = key;
        claimed
    }

    /// Puts a claimed watch event on the stream.
    pub(crate) fn emit_watch_event(&mut self, event: WatchEvent) {
        self.emit(Event::Watch(event));
    }

    /// Whether a persistent watch the client holds reports a change of
    /// `kind` on the path in `key`: one on the node itself, or a recursive
    /// one on the node or an ancestor (never for `NodeChildrenChanged`).
    /// `key` is scratch space.
    fn holds_persistent_watch_reporting(
        &self,
        kind: WatchKind,
        key: &mut (ClientWatch, String),
    ) -> bool {
        key.0 = ClientWatch::Persistent;
        if self.watches.contains(key) {
            return true;
        }
        // Recursive watches sort last: none held, none to look up.
        let holds_recursive = self
            .watches
            .range((ClientWatch::PersistentRecursive, String::new())..)
            .next()
            .is_some();
        if kind == WatchKind::NodeChildrenChanged || !holds_recursive {
            return false;
        }
        key.0 = ClientWatch::PersistentRecursive;
        loop {
            if self.watches.contains(key) {
                return true;
            }
            if key.1 == "/" {
                return false;
            }
            let parent_len = path::parent(&key.1).len();
            key.1.truncate(parent_len);
        }
    }

    fn emit(&mut self, event: Event) {
        if let Some(sender) = &self.events {
            // A dropped stream means nobody listens any more; the session
            // itself goes on.
            let _ = sender.send(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(summary: &str) -> PendingOp {
        let (reply, _answer) = oneshot::channel();
        PendingOp {
            summary: summary.into(),
            watching: None,
            listed_path: None,
            reply,
        }
    }

    #[test]
    fn pending_ops_are_found_wherever_they_are_and_kept_in_order() {
        let mut pending = PendingOps::default();
        for id in [3, 5, 8, 13] {
            pending.insert(id, op(&format!("r{id}")));
        }
        assert_eq!(pending.get(&8).map(|op| &*op.summary), Some("r8"));
        assert!(pending.get(&4).is_none());
        assert_eq!(pending.remove(&3).map(|op| op.summary), Some("r3".into()));
        assert_eq!(pending.remove(&8).map(|op| op.summary), Some("r8".into()));
        assert!(pending.remove(&8).is_none());
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), [5, 13]);
        let left: Vec<Arc<str>> = pending.into_values().map(|op| op.summary).collect();
        assert_eq!(left, [Arc::from("r5"), Arc::from("r13")]);
    }

    #[test]
    #[should_panic(expected = "increasing order")]
    fn pending_ops_refuse_an_id_out_of_order() {
        let mut pending = PendingOps::default();
        pending.insert(5, op("a"));
        pending.insert(4, op("b"));
    }
}
