//! Helpers the cases share: reading events with a bound, asserting that no
//! event is pending, and sessions that start from a known state.

use std::time::Duration;

use crate::{Coordinator, Event, EventStream, SessionState, Watch, WatchEvent, WatchKind};

use super::Backend;

/// How long a case waits for an event that must come. On the simulator the
/// clock is paused, so this costs nothing; on a real server it bounds a hang.
pub const EVENT_WAIT: Duration = Duration::from_secs(10);

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
    /// Asserts that no event is pending for this session. A round trip to the
    /// server first: replies and events reach a session in server order, so
    /// any event produced before the reply is in the stream once it returns.
    pub async fn assert_no_event(&mut self) {
        self.zk.exists("/", Watch::No).await.expect("round trip");
        match self.events.try_recv() {
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
            other => panic!("expected no pending event, got {other:?}"),
        }
    }

    pub async fn next_event(&mut self) -> Event {
        next_event(&mut self.events).await
    }

    pub async fn expect_watch(&mut self, kind: WatchKind, path: &str) {
        expect_watch(&mut self.events, kind, path).await
    }
}

/// `root/name`.
pub fn under(root: &str, name: &str) -> String {
    crate::path::join(root, name)
}
