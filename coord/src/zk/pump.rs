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
//! sent on the first poll, after the future is queued), and a reply found
//! on that first poll (the server was quicker than the poll) is taken on a
//! later one, after the future woke itself: either way a reply is handled
//! at a place in the queue after everything the client woke before it.
//!
//! A watcher is the exception: the client hands it out with the reply to
//! the read that set it, so it joins the queue only when this actor handles
//! that reply, and its notification may have been dispatched in between,
//! in the same burst as later frames (a reply to a write that fired it,
//! say). So when a reply brings a watcher, the actor queues the watcher,
//! then polls it once at once: if it already fired, its event is written
//! before anything else queued is handled, which keeps it ahead of every
//! later reply; if not, its place in the queue keeps it ahead of everything
//! woken after it (the state watcher is re-armed the same way). The same
//! notification may have fired an older watcher of the same node, already
//! reported; the watch table recognises that and reports it once (see
//! `watches.rs`).
//!
//! Consequences the conformance suite relies on:
//! - a watch event is written to the stream before the reply to any request
//!   sent after the change that fired it is handed to the caller;
//! - events reach the stream in the order the server sent them, but for
//!   the limit below;
//! - requests are sent in the order the trait's methods were called (they
//!   are queued in call order and first polled in queue order);
//! - the stream ends after the session's terminal state (`Closed`,
//!   `Expired`, `AuthFailed`).
//!
//! Limits, inherent to a client that hands out per-call watchers (in both,
//! an event only ever comes early, never after a reply that could show its
//! change):
//! - a watcher that fired before it was queued, or before the queue first
//!   polled it, is reported ahead of whatever else was woken in that burst,
//!   even frames the server sent before its notification (events of other
//!   watchers, replies to requests the server answered before the change);
//! - session states come from a "latest value" channel: a disconnection
//!   that heals before the actor looks (Disconnected then Connected within
//!   one wake-up) is not reported.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures::future::{AbortHandle, AbortRegistration, Abortable, BoxFuture, poll_fn};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt, ready};
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
    /// `None` once the session ended, which ends the stream.
    events: Option<EventSender>,
    inflight: FuturesUnordered<BoxFuture<'static, Completion>>,
    /// Requests sent whose reply this actor has not handled yet.
    requests_in_flight: usize,
    watches: WatchTable,
    abort_handles: BTreeMap<WatchId, AbortHandle>,
    /// The last state written to the stream.
    reported: SessionState,
    /// Set once the session reached a state it never leaves.
    terminal: Option<SessionState>,
    close_waiters: Vec<oneshot::Sender<ZkResult<()>>>,
}

pub(crate) fn session_state_of(state: zkc::SessionState) -> SessionState {
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

/// `future`, except that an output ready on its first poll is held back:
/// the poll wakes the task and returns `Pending`, and the next poll returns
/// the output.
///
/// A request is sent on its first poll, and on a busy machine its reply can
/// arrive before that poll returns. The task was in the ready queue since it
/// was pushed, ahead of whatever the client woke meanwhile, such as the
/// watcher of a notification the server sent before that reply; taking the
/// reply then would hand it out before that event. Waking itself puts the
/// task behind everything woken so far, which is a place after its reply
/// arrived, as a reply's own wake-up would have put it.
fn not_ready_on_first_poll<T: Send + 'static>(
    mut future: BoxFuture<'static, T>,
) -> impl std::future::Future<Output = T> + Send + 'static {
    let mut first_poll = true;
    let mut held: Option<T> = None;
    poll_fn(move |cx| {
        if let Some(output) = held.take() {
            return Poll::Ready(output);
        }
        let poll = future.as_mut().poll(cx);
        if std::mem::take(&mut first_poll)
            && let Poll::Ready(output) = poll
        {
            held = Some(output);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        poll
    })
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
            events: Some(events),
            inflight: FuturesUnordered::new(),
            requests_in_flight: 0,
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
        debug_assert!(
            self.events.is_some(),
            "{event:?} emitted after the session ended"
        );
        if let Some(events) = &self.events {
            // A dropped receiver only means nobody listens any more.
            let _ = events.send(event);
        }
    }

    fn watch_state(&mut self, mut watcher: zkc::StateWatcher) {
        let changed = async move {
            let state = watcher.changed().await;
            Completion::State { state, watcher }
        };
        if let Some(completion) = self.queue_then_poll(changed.boxed(), None) {
            self.handle_completion(completion);
        }
    }

    /// Puts `future` in the ready queue, then polls it once here: if it is
    /// ready, its completion is returned (to be handled now, ahead of
    /// everything queued) and the queued copy completes as `Dropped`.
    ///
    /// Why in this order: a future polled before it is queued holds a waker
    /// that is not the queue's, so a wake-up between that poll and the push
    /// would be lost, and whatever the client dispatched right after it
    /// (a reply) could be queued ahead of it. Queued first, it is polled
    /// before anything woken after the push; polled once now, it is handled
    /// before anything woken before.
    fn queue_then_poll(
        &mut self,
        future: BoxFuture<'static, Completion>,
        abort: Option<AbortRegistration>,
    ) -> Option<Completion> {
        let slot = Arc::new(Mutex::new(Some(future)));
        let queued_slot = Arc::clone(&slot);
        // Both polls run on this actor's task, one after the other: the
        // lock is never contended, it only makes the slot shareable.
        let queued = poll_fn(move |cx| {
            let mut guard = queued_slot
                .lock()
                .expect("the slot's lock is never poisoned");
            let Some(future) = guard.as_mut() else {
                return Poll::Ready(Completion::Dropped);
            };
            let completion = ready!(future.as_mut().poll(cx));
            *guard = None;
            Poll::Ready(completion)
        });
        match abort {
            Some(registration) => self.inflight.push(
                Abortable::new(queued, registration)
                    .map(|result| result.unwrap_or(Completion::Dropped))
                    .boxed(),
            ),
            None => self.inflight.push(queued.boxed()),
        }
        let mut guard = slot.lock().expect("the slot's lock is never poisoned");
        let future = guard.as_mut().expect("the queue has not polled it yet");
        let completion = future.as_mut().now_or_never()?;
        *guard = None;
        Some(completion)
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
                self.requests_in_flight += 1;
                // Lazy: the request is sent on the first poll, after this
                // future is in the ready queue; and its reply is taken from
                // a later poll only (see the module docs).
                let run = async move {
                    let outcome = ops::run(&client, acls, request).await;
                    drop(client);
                    Completion::Replied { outcome, reply }
                };
                self.inflight
                    .push(not_ready_on_first_poll(run.boxed()).boxed());
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
                // The reply goes first: a watch it left fires on a change
                // the server made after answering it.
                let _ = reply.send(outcome.result);
                if let Some(new) = outcome.watcher {
                    self.arm(new);
                }
                assert!(self.requests_in_flight > 0, "a reply nobody waited for");
                self.requests_in_flight -= 1;
                if self.requests_in_flight == 0 {
                    // No reply sent before a firing can still come.
                    self.watches.forget_firings();
                }
            }
            Completion::Fired { id, event } => {
                self.abort_handles.remove(&id);
                self.handle_firing(id, &event, false);
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

    fn handle_firing(&mut self, id: WatchId, event: &zkc::WatchedEvent, at_arm: bool) {
        let Some(kind) = watch_kind_of(event.event_type) else {
            // The session ended: the state watcher reports it.
            self.watches.forget(id);
            return;
        };
        let fired = if at_arm {
            self.watches.fired_at_arm(id, kind)
        } else {
            self.watches.fired(id, kind)
        };
        for consumed in fired.consumed {
            if let Some(handle) = self.abort_handles.remove(&consumed) {
                handle.abort();
            }
        }
        if let Some(watch_event) = fired.event {
            self.emit(Event::Watch(watch_event));
        }
    }

    fn arm(&mut self, new: ops::NewWatcher) {
        if self.terminal.is_some() {
            return;
        }
        let registered = self.watches.register(&new.path, new.class, new.seen);
        if let Some(old) = registered.superseded
            && let Some(handle) = self.abort_handles.remove(&old)
        {
            handle.abort();
        }
        let id = registered.id;
        let watcher = new.watcher;
        let fired = async move {
            let event = watcher.changed().await;
            Completion::Fired { id, event }
        };
        let (handle, registration) = AbortHandle::new_pair();
        self.abort_handles.insert(id, handle);
        // The notification may have been dispatched already, in the same
        // burst as replies queued behind this one: if so, it is handled
        // now, ahead of them (see the module docs).
        match self.queue_then_poll(fired.boxed(), Some(registration)) {
            None => {}
            Some(Completion::Fired {
                id: fired_id,
                event,
            }) => {
                assert_eq!(fired_id, id);
                self.abort_handles.remove(&id);
                self.handle_firing(id, &event, true);
            }
            Some(_) => unreachable!("a watcher completes as Fired"),
        }
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
        // Nothing follows a terminal state: dropping the sender ends the
        // stream, so a reader sees `None` after it.
        self.events = None;
        tracing::debug!(?state, "zookeeper session ended");
    }
}
