//! The session's actor: it owns the `zookeeper-client` handle, runs every
//! request, and writes the session's one ordered event stream.
//!
//! # How the order of events is kept
//!
//! `zookeeper-client` reads the socket on its own task. For each frame it
//! either completes the pending request's reply channel or fires the
//! watchers of a notification, in the order the server sent them, but each
//! on its own channel (one per watcher, one per reply, one for the session
//! state). This actor recovers the server's order from the order in which
//! those channels become ready: every request future, every watcher and the
//! state watcher live in one `FuturesUnordered`, whose ready queue is FIFO in
//! the order its futures were woken, and the client's task wakes them in
//! the order it reads frames. Requests are created lazily (the request is
//! sent on the first poll, after the future is queued), so a reply can only
//! wake its future after that future registered its waker.
//!
//! Consequences the conformance suite relies on:
//! - a watch event is written to the stream before the reply to any request
//!   sent after the change that fired it is handed to the caller;
//! - events reach the stream in the order the server sent them;
//! - requests are sent in the order the trait's methods were called (they
//!   are queued in call order and first polled in queue order).
//!
//! Limits, inherent to a client that hands out per-call watchers:
//! - a watcher returned by a reply is first polled when the actor handles
//!   that reply; if its notification arrived in between (microseconds),
//!   the event is placed at that point, possibly after events of other
//!   watchers that fired in the same window;
//! - session states come from a "latest value" channel: a disconnection
//!   that heals before the actor looks (Disconnected then Connected within
//!   one wake-up) is not reported.

use std::collections::BTreeMap;

use futures::future::{AbortHandle, BoxFuture, abortable};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use zookeeper_client as zkc;

use super::ops::{self, Outcome, Reply, Request};
use super::watches::{WatchId, WatchTable};
use crate::error::{ZkError, ZkResult};
use crate::event::{Event, EventSender, SessionState, WatchKind};

/// What a [`super::ZkSession`] asks its actor.
pub(crate) enum Command {
    Run {
        request: Request,
        reply: oneshot::Sender<ZkResult<Reply>>,
    },
    Close {
        done: oneshot::Sender<ZkResult<()>>,
    },
}

enum Completion {
    Replied {
        outcome: Outcome,
        reply: oneshot::Sender<ZkResult<Reply>>,
    },
    Fired {
        id: WatchId,
        event: zkc::WatchedEvent,
    },
    /// A superseded or consumed watcher that was dropped.
    Dropped,
    State {
        state: zkc::SessionState,
        watcher: zkc::StateWatcher,
    },
}

pub(crate) struct Pump {
    /// `None` once the owner closed the session: dropping the last handle
    /// makes the client send closeSession.
    client: Option<zkc::Client>,
    acls: zkc::Acls<'static>,
    events: EventSender,
    inflight: FuturesUnordered<BoxFuture<'static, Completion>>,
    watches: WatchTable,
    abort_handles: BTreeMap<WatchId, AbortHandle>,
    /// The last state written to the stream.
    reported: SessionState,
    /// Set once the session reached a state it never leaves.
    terminal: Option<SessionState>,
    close_waiters: Vec<oneshot::Sender<ZkResult<()>>>,
}

fn session_state_of(state: zkc::SessionState) -> SessionState {
    match state {
        zkc::SessionState::Disconnected => SessionState::Disconnected,
        zkc::SessionState::SyncConnected | zkc::SessionState::ConnectedReadOnly => {
            SessionState::Connected
        }
        zkc::SessionState::Expired => SessionState::Expired,
        zkc::SessionState::AuthFailed => SessionState::AuthFailed,
        zkc::SessionState::Closed => SessionState::Closed,
    }
}

fn watch_kind_of(event_type: zkc::EventType) -> Option<WatchKind> {
    match event_type {
        zkc::EventType::NodeCreated => Some(WatchKind::NodeCreated),
        zkc::EventType::NodeDeleted => Some(WatchKind::NodeDeleted),
        zkc::EventType::NodeDataChanged => Some(WatchKind::NodeDataChanged),
        zkc::EventType::NodeChildrenChanged => Some(WatchKind::NodeChildrenChanged),
        zkc::EventType::Session => None,
    }
}

fn is_terminal(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
    )
}

/// The error a request gets once the session is over.
pub(crate) fn terminal_error(state: SessionState) -> ZkError {
    match state {
        SessionState::Expired => ZkError::SessionExpired,
        SessionState::AuthFailed => ZkError::AuthFailed {
            reason: "the server refused this session's credentials".into(),
        },
        _ => ZkError::SessionClosed,
    }
}

impl Pump {
    /// A pump for a connected client. The caller has already written the
    /// first `Connected` to `events`.
    pub(crate) fn new(client: zkc::Client, acls: zkc::Acls<'static>, events: EventSender) -> Pump {
        let mut pump = Pump {
            acls,
            events,
            inflight: FuturesUnordered::new(),
            watches: WatchTable::new(),
            abort_handles: BTreeMap::new(),
            reported: SessionState::Connected,
            terminal: None,
            close_waiters: Vec::new(),
            client: None,
        };
        let watcher = client.state_watcher();
        pump.client = Some(client);
        // A change between the connect and now is already marked seen in
        // a fresh watcher; report it rather than lose it.
        let state = watcher.peek_state();
        pump.handle_completion(Completion::State { state, watcher });
        pump
    }

    /// Serves commands until every handle is dropped.
    pub(crate) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            tokio::select! {
                biased;
                command = commands.recv() => match command {
                    Some(command) => self.handle_command(command),
                    None => break,
                },
                Some(completion) = self.inflight.next(), if !self.inflight.is_empty() => {
                    self.handle_completion(completion);
                }
            }
        }
        // Every handle is gone: dropping the client closes the session.
        tracing::debug!("zookeeper session handles dropped; closing");
    }

    fn emit(&mut self, event: Event) {
        // A dropped stream only means nobody listens any more.
        let _ = self.events.send(event);
    }

    fn watch_state(&mut self, mut watcher: zkc::StateWatcher) {
        self.inflight.push(
            async move {
                let state = watcher.changed().await;
                Completion::State { state, watcher }
            }
            .boxed(),
        );
    }

    fn handle_command(&mut self, command: Command) {
        match command {
            Command::Run { request, reply } => {
                let client = match (&self.client, self.terminal) {
                    (_, Some(state)) => {
                        let _ = reply.send(Err(terminal_error(state)));
                        return;
                    }
                    (None, None) => {
                        let _ = reply.send(Err(ZkError::SessionClosed));
                        return;
                    }
                    (Some(client), None) => client.clone(),
                };
                let acls = self.acls;
                // Lazy: the request is sent on the first poll, after this
                // future is in the ready queue (see the module docs).
                self.inflight.push(
                    async move {
                        let outcome = ops::run(&client, acls, request).await;
                        drop(client);
                        Completion::Replied { outcome, reply }
                    }
                    .boxed(),
                );
            }
            Command::Close { done } => {
                if let Some(state) = self.terminal {
                    // Closing a session that is already over is a no-op,
                    // as in ZooKeeper's clients.
                    let _ = done.send(if state == SessionState::AuthFailed {
                        Err(terminal_error(state))
                    } else {
                        Ok(())
                    });
                    return;
                }
                // The client sends closeSession once its last handle is
                // dropped, after the requests in flight; the state watcher
                // then reports Closed and the waiters are answered.
                self.client = None;
                self.close_waiters.push(done);
            }
        }
    }

    fn handle_completion(&mut self, completion: Completion) {
        match completion {
            Completion::Replied { outcome, reply } => {
                if let Some(new) = outcome.watcher {
                    self.arm(new);
                }
                let _ = reply.send(outcome.result);
            }
            Completion::Fired { id, event } => {
                self.abort_handles.remove(&id);
                match watch_kind_of(event.event_type) {
                    Some(kind) => {
                        let fired = self.watches.fired(id, kind);
                        for consumed in fired.consumed {
                            if let Some(handle) = self.abort_handles.remove(&consumed) {
                                handle.abort();
                            }
                        }
                        if let Some(watch_event) = fired.event {
                            self.emit(Event::Watch(watch_event));
                        }
                    }
                    // The session ended: the state watcher reports it.
                    None => self.watches.forget(id),
                }
            }
            Completion::Dropped => {}
            Completion::State { state, watcher } => {
                let state = session_state_of(state);
                if state != self.reported {
                    self.reported = state;
                    self.emit(Event::Session(state));
                }
                if is_terminal(state) {
                    self.end(state);
                } else {
                    self.watch_state(watcher);
                }
            }
        }
    }

    fn arm(&mut self, new: ops::NewWatcher) {
        if self.terminal.is_some() {
            return;
        }
        let registered = self.watches.register(&new.path, new.class);
        if let Some(old) = registered.superseded
            && let Some(handle) = self.abort_handles.remove(&old)
        {
            handle.abort();
        }
        let id = registered.id;
        let watcher = new.watcher;
        let (fired, handle) = abortable(async move {
            let event = watcher.changed().await;
            Completion::Fired { id, event }
        });
        self.abort_handles.insert(id, handle);
        self.inflight.push(
            fired
                .map(|result| result.unwrap_or(Completion::Dropped))
                .boxed(),
        );
    }

    fn end(&mut self, state: SessionState) {
        assert!(is_terminal(state), "end({state:?})");
        self.terminal = Some(state);
        for id in self.watches.clear() {
            if let Some(handle) = self.abort_handles.remove(&id) {
                handle.abort();
            }
        }
        let answer = match state {
            SessionState::Closed | SessionState::Expired => Ok(()),
            _ => Err(terminal_error(state)),
        };
        for waiter in self.close_waiters.drain(..) {
            let _ = waiter.send(answer.clone());
        }
        tracing::debug!(?state, "zookeeper session ended");
    }
}
