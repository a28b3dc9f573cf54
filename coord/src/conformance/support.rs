//! Helpers the cases share: reading events with a bound, asserting that no
//! event is pending, checking errors, and sessions that start from a known
//! state.

use std::fmt::Debug;
use std::time::Duration;

use crate::{
    Coordinator, CreateMode, ErrorCode, Event, EventStream, Op, SessionState, Stat, Watch,
    WatchEvent, WatchKind, ZkError, ZkResult,
};

use super::Backend;

/// How long a case waits for an event that must come. On the simulator the
/// clock is paused, so this costs nothing; on a real server it bounds a hang.
pub const EVENT_WAIT: Duration = Duration::from_secs(10);

/// How many times a case retries an operation that failed with
/// `ConnectionLoss` while its session reconnects (each retry waits for a
/// session event first, so this bounds reconnections, not time).
pub const RECONNECT_ATTEMPTS: usize = 5;

/// A session and its event stream, positioned after the initial `Connected`.
pub struct TestSession<S> {
    pub zk: S,
    pub events: EventStream,
}

/// Connects and checks that the first event is `Connected`.
pub async fn connect<B: Backend>(backend: &B) -> TestSession<B::Session> {
    let (zk, mut events) = backend.connect().await.expect("connect");
    let first = next_event(&mut events).await;
    assert_eq!(
        first,
        Event::Session(SessionState::Connected),
        "first event of a new session"
    );
    TestSession { zk, events }
}

/// The next event, failing the case if none comes within [`EVENT_WAIT`].
pub async fn next_event(events: &mut EventStream) -> Event {
    match tokio::time::timeout(EVENT_WAIT, events.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("event stream closed while waiting for an event"),
        Err(_) => panic!("no event within {EVENT_WAIT:?}"),
    }
}

/// The next event, which must be a watch event of `kind` on `path`.
pub async fn expect_watch(events: &mut EventStream, kind: WatchKind, path: &str) {
    let event = next_event(events).await;
    assert_eq!(
        event,
        Event::Watch(WatchEvent {
            kind,
            path: path.to_owned()
        }),
        "expected {kind:?} on {path}"
    );
}

impl<S: Coordinator> TestSession<S> {
    /// Asserts that no event is pending for this session. A `sync` round trip
    /// first: it brings the session's server up to date with every write
    /// acknowledged so far (by any session), and replies and events reach a
    /// session in server order, so any event those writes produced is in the
    /// stream once the sync returns.
    pub async fn assert_no_event(&mut self) {
        self.zk.sync("/").await.expect("sync round trip");
        self.assert_no_event_now();
    }

    /// The events pending for this session after a `sync` round trip:
    /// every event that writes acknowledged so far produced for it (see
    /// [`TestSession::assert_no_event`]).
    pub async fn events_after_sync(&mut self) -> Vec<Event> {
        self.zk.sync("/").await.expect("sync round trip");
        let mut pending = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            pending.push(event);
        }
        pending
    }

    /// Asserts that the stream holds no event at this instant, without a
    /// round trip: for checks right after a reply that must have been
    /// preceded by every event it could show.
    pub fn assert_no_event_now(&mut self) {
        match self.events.try_recv() {
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
            other => panic!("expected no pending event, got {other:?}"),
        }
    }

    /// The event that must already be in the stream at this instant (no
    /// waiting): used to check that an event arrived before a reply.
    pub fn event_now(&mut self) -> Event {
        match self.events.try_recv() {
            Ok(event) => event,
            Err(e) => panic!("expected an event already delivered, got {e:?}"),
        }
    }

    pub async fn next_event(&mut self) -> Event {
        next_event(&mut self.events).await
    }

    pub async fn expect_watch(&mut self, kind: WatchKind, path: &str) {
        expect_watch(&mut self.events, kind, path).await
    }

    /// The next events, which must be exactly `expected` in this order.
    pub async fn expect_events(&mut self, expected: &[Event]) {
        let mut got = Vec::with_capacity(expected.len());
        for _ in expected {
            got.push(self.next_event().await);
        }
        assert_eq!(got, expected, "events in order");
    }

    /// The next `expected.len()` events, which must be `expected` in any
    /// order (for changes whose relative order the server does not fix, such
    /// as the deletion of several ephemerals by one session close).
    pub async fn expect_events_unordered(&mut self, expected: &[Event]) {
        let mut got = Vec::with_capacity(expected.len());
        for _ in expected {
            got.push(self.next_event().await);
        }
        let mut want = expected.to_vec();
        got.sort();
        want.sort();
        assert_eq!(got, want, "events in any order");
    }

    /// After the server expired this session: the first call must fail with
    /// `SessionExpired` (or `ConnectionLoss`, when a real client is still
    /// finding out), and the stream must then show `Expired`, possibly after
    /// `Disconnected`. A real server drops the expired session's connection,
    /// so its client sees `Disconnected` first; the simulator tells the
    /// session only when it next talks. Both are ZooKeeper behaviour.
    pub async fn learn_expiry(&mut self) {
        match self.zk.exists("/", Watch::No).await {
            Err(ZkError::SessionExpired) | Err(ZkError::ConnectionLoss { .. }) => {}
            other => panic!("first call after expiry: expected SessionExpired, got {other:?}"),
        }
        loop {
            match self.next_event().await {
                Event::Session(SessionState::Disconnected) => continue,
                Event::Session(SessionState::Expired) => break,
                other => panic!("expected Expired after expiry, got {other:?}"),
            }
        }
        self.expect_stream_end().await;
    }

    /// After a terminal state (`Expired`, `Closed`): the stream ends, with
    /// no event after it, within [`EVENT_WAIT`].
    pub async fn expect_stream_end(&mut self) {
        match tokio::time::timeout(EVENT_WAIT, self.events.recv()).await {
            Ok(None) => {}
            Ok(Some(event)) => panic!("expected the stream to end, got {event:?}"),
            Err(_) => panic!("the stream did not end within {EVENT_WAIT:?}"),
        }
    }

    /// Runs `exists(path)` until it succeeds, letting the session reconnect
    /// after a `ConnectionLoss`: each retry first waits for a session event
    /// (`Disconnected` or `Connected`), and the session must not expire.
    pub async fn exists_after_reconnect(&mut self, path: &str) -> Option<Stat> {
        for _ in 0..RECONNECT_ATTEMPTS {
            match self.zk.exists(path, Watch::No).await {
                Ok(stat) => return stat,
                Err(ZkError::ConnectionLoss { .. }) => match self.next_event().await {
                    Event::Session(SessionState::Disconnected | SessionState::Connected) => {}
                    other => panic!("while reconnecting: unexpected {other:?}"),
                },
                Err(e) => panic!("exists({path}) while reconnecting: {e}"),
            }
        }
        panic!("exists({path}) still failing after {RECONNECT_ATTEMPTS} reconnections")
    }
}

/// `root/relative`, where `relative` is one name or several joined by '/'.
pub fn under(root: &str, relative: &str) -> String {
    relative
        .split('/')
        .fold(root.to_owned(), |path, name| crate::path::join(&path, name))
}

/// The path an error names, if it is about one node.
pub fn error_path(error: &ZkError) -> Option<&str> {
    match error {
        ZkError::InvalidPath { path, .. }
        | ZkError::DataTooLarge { path, .. }
        | ZkError::NoNode { path }
        | ZkError::NodeExists { path }
        | ZkError::BadVersion { path, .. }
        | ZkError::NotEmpty { path }
        | ZkError::NoChildrenForEphemerals { path }
        | ZkError::NoAuth { path }
        | ZkError::InvalidAcl { path } => Some(path),
        ZkError::Multi { error, .. } => error_path(error),
        _ => None,
    }
}

/// The error of `result`, which must have failed with `code`.
#[track_caller]
pub fn expect_code<T: Debug>(result: ZkResult<T>, code: ErrorCode, what: &str) -> ZkError {
    match result {
        Err(e) if e.code() == code => e,
        other => panic!("{what}: expected {code:?}, got {other:?}"),
    }
}

/// The error of `result`, which must have failed with `code` naming `path`.
#[track_caller]
pub fn expect_error<T: Debug>(result: ZkResult<T>, code: ErrorCode, path: &str) -> ZkError {
    let error = expect_code(result, code, path);
    assert_eq!(
        error_path(&error),
        Some(path),
        "the error must name the path: {error}"
    );
    error
}

/// The failing op's error of a multi, which must have failed at `index`
/// with `code`.
#[track_caller]
pub fn expect_multi_error<T: Debug>(result: ZkResult<T>, index: usize, code: ErrorCode) -> ZkError {
    match result {
        Err(ZkError::Multi {
            index: got_index,
            error,
        }) => {
            assert_eq!(got_index, index, "failing op index ({error})");
            assert_eq!(error.code(), code, "failing op error ({error})");
            *error
        }
        other => panic!("expected a multi failing at op {index} with {code:?}, got {other:?}"),
    }
}

/// The node's children, sorted (ZooKeeper gives them in no order).
pub async fn sorted_children<S: Coordinator>(zk: &S, path: &str) -> Vec<String> {
    let (mut children, _) = zk
        .get_children(path, Watch::No)
        .await
        .unwrap_or_else(|e| panic!("get_children({path}): {e}"));
    children.sort();
    children
}

/// The stat of a node that must exist.
pub async fn stat_of<S: Coordinator>(zk: &S, path: &str) -> Stat {
    zk.exists(path, Watch::No)
        .await
        .unwrap_or_else(|e| panic!("exists({path}): {e}"))
        .unwrap_or_else(|| panic!("{path} must exist"))
}

/// Creates an empty persistent node `root/name` and returns its path.
pub async fn create_dir<S: Coordinator>(zk: &S, root: &str, name: &str) -> String {
    let path = under(root, name);
    let created = zk
        .create(&path, b"", CreateMode::Persistent)
        .await
        .unwrap_or_else(|e| panic!("create({path}): {e}"));
    assert_eq!(created, path);
    path
}

/// Creates a node with `mode` and returns the path the server gave it.
pub async fn create_node<S: Coordinator>(
    zk: &S,
    path: &str,
    data: &[u8],
    mode: CreateMode,
) -> String {
    zk.create(path, data, mode)
        .await
        .unwrap_or_else(|e| panic!("create({path}, {mode:?}): {e}"))
}

/// A watch event, for comparing with what a stream delivered.
pub fn watch_event(kind: WatchKind, path: &str) -> Event {
    Event::watch(kind, path)
}

pub fn op_create(path: &str, data: &[u8], mode: CreateMode) -> Op {
    Op::Create {
        path: path.to_owned(),
        data: data.to_vec(),
        mode,
    }
}

pub fn op_delete(path: &str, version: Option<i32>) -> Op {
    Op::Delete {
        path: path.to_owned(),
        version,
    }
}

pub fn op_set_data(path: &str, data: &[u8], version: Option<i32>) -> Op {
    Op::SetData {
        path: path.to_owned(),
        data: data.to_vec(),
        version,
    }
}

pub fn op_check(path: &str, version: Option<i32>) -> Op {
    Op::Check {
        path: path.to_owned(),
        version,
    }
}
