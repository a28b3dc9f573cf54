//! Opening sessions on one ensemble, again and again.
//!
//! A role (master candidate, worker) outlives its sessions: when a session
//! expires, the role stops acting on what it knew, opens a new session and
//! joins again. It needs a way to open sessions without knowing the backend,
//! which is what a [`Connector`] is.

use std::future::Future;

use crate::coordinator::Coordinator;
use crate::error::ZkResult;
use crate::event::EventStream;

/// Opens new sessions, each with its own event stream whose first event is
/// `Event::Session(SessionState::Connected)`.
pub trait Connector: Send + Sync + 'static {
    type Session: Coordinator;

    fn connect(&self) -> impl Future<Output = ZkResult<(Self::Session, EventStream)>> + Send;
}
