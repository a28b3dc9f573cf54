//! What a session hears besides replies: watch events and session state
//! changes, on one ordered stream per session. ZooKeeper delivers both through
//! the same per-session channel, in server order, and so do our backends: a
//! watch event is always in the stream before the reply to any later read
//! that could show the change that fired it.

use tokio::sync::mpsc;

/// The kind of change a one-shot watch reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WatchKind {
    NodeCreated,
    NodeDeleted,
    NodeDataChanged,
    NodeChildrenChanged,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchEvent {
    pub kind: WatchKind,
    pub path: String,
}

/// The client's view of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SessionState {
    /// Connected to a server (ZooKeeper's `SyncConnected`).
    Connected,
    /// The connection dropped; the session may still be alive on the server.
    Disconnected,
    /// The server expired the session: ephemerals and watches are gone and
    /// the handle is dead for good.
    Expired,
    /// The owner closed the session.
    Closed,
    /// The server refused the session's credentials.
    AuthFailed,
}

impl SessionState {
    /// Says why a session ended, given the state its event stream ended on
    /// (`None`: it closed without one), for an error that a person reads.
    pub fn describe_end(state: Option<SessionState>) -> &'static str {
        match state {
            Some(SessionState::Expired) => "expired",
            Some(SessionState::Closed) => "closed",
            Some(SessionState::AuthFailed) => "authentication failed",
            Some(SessionState::Connected | SessionState::Disconnected) => {
                "its event stream stopped"
            }
            None => "its event stream closed without saying why",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    Watch(WatchEvent),
    Session(SessionState),
}

impl Event {
    pub fn watch(kind: WatchKind, path: impl Into<String>) -> Event {
        Event::Watch(WatchEvent {
            kind,
            path: path.into(),
        })
    }
}

/// The receiving end of a session's event stream.
pub type EventStream = mpsc::UnboundedReceiver<Event>;
/// The sending end, held by the backend.
pub type EventSender = mpsc::UnboundedSender<Event>;
