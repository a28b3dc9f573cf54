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
//! A persistent watcher (`add_watch`) is a channel that receives every
//! notification it concerns. It joins the queue like a one-shot watcher,
//! when the reply that left it is handled, and is polled once at once.
//! When it is ready, the actor takes every event buffered in it at that
//! moment, not only the first: the channel woke the queue once, for its
//! first event, and events behind it may have been dispatched before frames
//! woken after it (a reply); taking them all reports them early rather
//! than late. It is then queued and polled again the same way. How the
//! firings of one notification through several watchers make one event,
//! and why some one-shot watches are never sent, is in `persistent.rs`.
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
//!   one wake-up) is reported when it looks, as `Disconnected` then
//!   `Connected` (see `states_to_report`), a little late; one that ends
//!   in a disconnection again is reported as that one;
//! - events a persistent watcher buffered behind its first are reported
//!   ahead of whatever else that burst woke after it (other watchers'
//!   events included);
//! - when the reply to an `add_watch` and a notification it concerns come
//!   in the same burst as a one-shot watcher's firing of that
//!   notification, or as the reply that left that one-shot watcher, the
//!   change can be reported twice.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures::future::{AbortHandle, AbortRegistration, Abortable, BoxFuture, poll_fn};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt, ready};
use tokio::sync::{mpsc, oneshot};
use zookeeper_client as zkc;

use super::ops::{self, Outcome};
use super::persistent::{OneShotPlan, PersistentWatches};
use super::watches::{RequestNumber, WatchClass, WatchId, WatchTable};
use crate::error::{ZkError, ZkResult};
use crate::event::{Event, EventSender, SessionState, WatchEvent, WatchKind};
use crate::request::{Reply, Request};
use crate::types::AddWatchMode;

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
        outcome: Box<Outcome>,
        reply: oneshot::Sender<ZkResult<Reply>>,
        /// The request's number in the watch table's count of requests.
        number: RequestNumber,
        /// The node and mode of an `add_watch`.
        add_watch: Option<(String, AddWatchMode)>,
    },
    Fired {
        id: WatchId,
        event: zkc::WatchedEvent,
    },
    /// A persistent watcher received events: every one buffered when it
    /// was polled, in order.
    Heard {
        id: WatchId,
        events: Vec<zkc::WatchedEvent>,
        watcher: zkc::PersistentWatcher,
    },
    /// A superseded or consumed watcher that was dropped.
    Dropped,
    /// The session's state: read once at start (`woken: false`), then
    /// each time the state channel wakes the pump (`woken: true`).
    State {
        state: zkc::SessionState,
        woken: bool,
        watcher: zkc::StateWatcher,
    },
}

pub(crate) struct Pump {
    /// `None` once the owner closed the session: dropping the last handle
    /// makes the client send closeSession.
    client: Option<zkc::Client>,
    acls: zkc::Acls<'static>,
    /// The largest listing reply accepted (`ZkConfig::max_reply_bytes`).
    max_reply_bytes: usize,
    /// `None` once the session ended, which ends the stream.
    events: Option<EventSender>,
    inflight: FuturesUnordered<BoxFuture<'static, Completion>>,
    watches: WatchTable,
    persistent: PersistentWatches,
    /// Commands waiting, in order, for an `add_watch` reply (see
    /// `persistent.rs`): the first is the one that waits, the others keep
    /// their place behind it.
    held: VecDeque<Command>,
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

/// The session states to write to the stream when the state channel shows
/// `now`, `reported` being the last one written. The client sends a state
/// only when it differs from the one before, and the channel keeps only
/// the latest: woken with the state already reported, the session left it
/// and came back between two looks. Back to a connection, that was a
/// disconnection (whose watch events may be lost), which whoever reads the
/// stream must hear of to read again what matters: it is reported as it
/// happened, `Disconnected` then `Connected`.
fn states_to_report(reported: SessionState, now: SessionState, woken: bool) -> Vec<SessionState> {
    if now != reported {
        vec![now]
    } else if woken && now == SessionState::Connected {
        vec![SessionState::Disconnected, SessionState::Connected]
    } else {
        Vec::new()
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

/// Waits for a persistent watcher's next event, then takes every event
/// buffered behind it (see the module docs), stopping at the end of the
/// session: the watcher's channel closes after it.
async fn hear(id: WatchId, mut watcher: zkc::PersistentWatcher) -> Completion {
    let mut events = vec![watcher.changed().await];
    while !events.last().is_some_and(ends_session) {
        match watcher.changed().now_or_never() {
            Some(event) => events.push(event),
            None => break,
        }
    }
    Completion::Heard {
        id,
        events,
        watcher,
    }
}

fn ends_session(event: &zkc::WatchedEvent) -> bool {
    event.event_type == zkc::EventType::Session && event.session_state.is_terminated()
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
    pub(crate) fn new(
        client: zkc::Client,
        acls: zkc::Acls<'static>,
        max_reply_bytes: usize,
        events: EventSender,
    ) -> Pump {
        let mut pump = Pump {
            acls,
            max_reply_bytes,
            events: Some(events),
            inflight: FuturesUnordered::new(),
            watches: WatchTable::new(),
            persistent: PersistentWatches::new(),
            held: VecDeque::new(),
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
        pump.handle_completion(Completion::State {
            state,
            woken: false,
            watcher,
        });
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
            Completion::State {
                state,
                woken: true,
                watcher,
            }
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
        if !self.held.is_empty() {
            self.held.push_back(command);
            return;
        }
        if let Err(command) = self.run_command(command) {
            self.held.push_back(command);
        }
    }

    /// Runs commands held for an `add_watch` reply, in order, until one
    /// must wait again.
    fn release_held(&mut self) {
        while let Some(command) = self.held.pop_front() {
            if let Err(command) = self.run_command(command) {
                self.held.push_front(command);
                break;
            }
        }
    }

    /// Decides how a request goes out: `Ok(true)` to send it (a one-shot
    /// watch a persistent watch covers is taken off it), `Ok(false)` to
    /// hold it, or the error that refuses it.
    fn plan(&self, request: &mut Request) -> ZkResult<bool> {
        let (path, class, watch) = match request {
            Request::AddWatch { path, mode } => {
                self.persistent.check_add(path, *mode)?;
                return Ok(true);
            }
            Request::Exists { path, watch } | Request::GetData { path, watch } => {
                (path, WatchClass::Data, watch)
            }
            Request::GetChildren { path, watch } => (path, WatchClass::Child, watch),
            _ => return Ok(true),
        };
        if !*watch {
            return Ok(true);
        }
        match self.persistent.plan_one_shot(path, class) {
            OneShotPlan::Send => Ok(true),
            OneShotPlan::Absorb => {
                *watch = false;
                Ok(true)
            }
            OneShotPlan::Hold => {
                debug_assert!(self.persistent.is_in_flight(path));
                Ok(false)
            }
        }
    }

    /// Runs a command, or gives it back when it must wait for an
    /// `add_watch` reply.
    fn run_command(&mut self, command: Command) -> Result<(), Command> {
        match command {
            Command::Run { mut request, reply } => {
                let client = match (&self.client, self.terminal) {
                    (_, Some(state)) => {
                        let _ = reply.send(Err(terminal_error(state)));
                        return Ok(());
                    }
                    (None, None) => {
                        let _ = reply.send(Err(ZkError::SessionClosed));
                        return Ok(());
                    }
                    (Some(client), None) => client.clone(),
                };
                match self.plan(&mut request) {
                    Err(error) => {
                        let _ = reply.send(Err(error));
                        return Ok(());
                    }
                    Ok(false) => return Err(Command::Run { request, reply }),
                    Ok(true) => {}
                }
                self.send(client, request, reply);
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
                    return Ok(());
                }
                // The client sends closeSession once its last handle is
                // dropped, after the requests in flight; the state watcher
                // then reports Closed and the waiters are answered.
                self.client = None;
                self.close_waiters.push(done);
            }
        }
        Ok(())
    }

    /// Queues a planned request; it is sent when first polled.
    fn send(
        &mut self,
        client: zkc::Client,
        request: Request,
        reply: oneshot::Sender<ZkResult<Reply>>,
    ) {
        let add_watch = match &request {
            Request::AddWatch { path, mode } => {
                self.persistent.sent(path, *mode);
                Some((path.clone(), *mode))
            }
            _ => None,
        };
        let acls = self.acls;
        let max_reply_bytes = self.max_reply_bytes;
        let number = self.watches.request_sent();
        // Lazy: the request is sent on the first poll, after this future
        // is in the ready queue; and its reply is taken from a later poll
        // only (see the module docs).
        let run = async move {
            let outcome = Box::new(ops::run(&client, acls, max_reply_bytes, request).await);
            drop(client);
            Completion::Replied {
                outcome,
                reply,
                number,
                add_watch,
            }
        };
        self.inflight
            .push(not_ready_on_first_poll(run.boxed()).boxed());
    }

    /// The session reconnected: asks the server for every persistent watch
    /// again. Upstream `zookeeper-client` 0.11 re-registers one-shot
    /// watches on reconnecting but leaves persistent ones out of its
    /// `SetWatches` (it only ever sent the first three lists); the vendored
    /// copy's fix sends them in `SetWatches2`, and asking again keeps the
    /// backend independent of that and costs one request per watch after a
    /// reconnection. Called just before the stream shows
    /// `Connected`, so that these requests go out before any the
    /// application makes on seeing it: the server then applies the
    /// application's re-reads after the watches are back, and a change is
    /// either read or reported. Each watcher also asks again when it hears
    /// `SyncConnected` on its own channel ([`Pump::register_again`]), which
    /// can come after the stream showed `Connected` and the application
    /// sent requests, and is then only a fallback. The watchers these
    /// requests leave are redundant and dropped.
    fn register_persistent_watches_again(&mut self) {
        for id in self.persistent.live_ids() {
            self.register_again(id);
        }
    }

    /// Asks the server for persistent watch `id` again: for every live
    /// watch as the stream shows `Connected`, and for one watch when its
    /// watcher heard of a reconnection.
    fn register_again(&mut self, id: WatchId) {
        let (Some(client), None) = (&self.client, self.terminal) else {
            return;
        };
        let Some((path, mode)) = self.persistent.watch_of(id) else {
            return;
        };
        let client = client.clone();
        // Nobody waits for this reply.
        let (reply, _) = oneshot::channel();
        self.send(client, Request::AddWatch { path, mode }, reply);
    }

    fn handle_completion(&mut self, completion: Completion) {
        match completion {
            Completion::Replied {
                outcome,
                reply,
                number,
                add_watch,
            } => {
                let Outcome {
                    result,
                    watcher,
                    persistent,
                } = *outcome;
                // The reply goes first: a watch it left fires on a change
                // the server made after answering it.
                let _ = reply.send(result);
                if let Some(new) = watcher {
                    self.arm(new);
                }
                if let Some((path, mode)) = add_watch {
                    self.watch_added(&path, mode, persistent);
                }
                // After the watcher is armed: a firing it finds was
                // recorded while this request was in flight.
                self.watches.reply_handled(number);
            }
            Completion::Fired { id, event } => {
                self.abort_handles.remove(&id);
                self.handle_firing(id, &event, false);
            }
            Completion::Heard {
                id,
                events,
                watcher,
            } => {
                if let Some(listening) = self.handle_heard(id, &events, watcher) {
                    self.listen(listening.0, listening.1);
                }
            }
            Completion::Dropped => {}
            Completion::State {
                state,
                woken,
                watcher,
            } => {
                // The client library reports `Closed` also when its session
                // task stopped without a terminal state (a panic in it):
                // then the state it last published is not terminal, and no
                // server confirmed anything (see vendor/zookeeper-client's
                // PATCHES.md).
                let client_stopped = state.is_terminated() && !watcher.peek_state().is_terminated();
                let state = session_state_of(state);
                for shown in states_to_report(self.reported, state, woken) {
                    if shown == SessionState::Connected {
                        // The stream starts Connected: this is a
                        // reconnection.
                        assert_ne!(self.reported, SessionState::Connected);
                        self.register_persistent_watches_again();
                    }
                    self.reported = shown;
                    self.emit(Event::Session(shown));
                }
                if is_terminal(state) {
                    self.end(state, client_stopped);
                } else {
                    self.watch_state(watcher);
                }
            }
        }
    }

    /// Persistent watcher `id` took `events`: reports them, and returns the
    /// watcher if it is to listen on (the caller queues it again).
    fn handle_heard(
        &mut self,
        id: WatchId,
        events: &[zkc::WatchedEvent],
        watcher: zkc::PersistentWatcher,
    ) -> Option<(WatchId, zkc::PersistentWatcher)> {
        self.abort_handles.remove(&id);
        let mut ended = false;
        let mut reconnected = false;
        for event in events {
            match watch_kind_of(event.event_type) {
                // Session states come from the state watcher; a
                // reconnection makes the watch be asked for again.
                None => {
                    ended |= event.session_state.is_terminated();
                    reconnected |= matches!(
                        event.session_state,
                        zkc::SessionState::SyncConnected | zkc::SessionState::ConnectedReadOnly
                    );
                }
                Some(kind) => self.heard(
                    id,
                    WatchEvent {
                        kind,
                        path: event.path.clone(),
                    },
                ),
            }
        }
        if ended || self.terminal.is_some() || !self.persistent.is_live(id) {
            return None;
        }
        if reconnected {
            // Usually redundant with the re-add made as the stream shows
            // Connected, but not always: a watch whose add_watch was
            // answered on one connection after the pump wrote Connected for
            // a later one became live too late for it.
            self.register_again(id);
        }
        Some((id, watcher))
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
            if self.persistent.reported_by_earlier(&watch_event, id) {
                // That persistent watcher received the same notification
                // and reports it.
                return;
            }
            self.persistent.expect_duplicates(&watch_event, None);
            self.emit(Event::Watch(watch_event));
        }
    }

    /// The reply to an `add_watch` was handled: the watcher it left (if it
    /// succeeded) starts listening, and requests held for it go out.
    fn watch_added(
        &mut self,
        path: &str,
        mode: AddWatchMode,
        new: Option<ops::NewPersistentWatcher>,
    ) {
        if self.terminal.is_some() {
            // The table was cleared with the session; nothing is held.
            assert!(
                self.held.is_empty(),
                "requests held after the session ended"
            );
            return;
        }
        let id = new.as_ref().map(|_| self.watches.allocate_id());
        if self.persistent.answered(path, mode, id) {
            let new = new.expect("a kept watcher exists");
            debug_assert_eq!((new.path.as_str(), new.mode), (path, mode));
            self.listen(id.expect("a kept watcher has an id"), new.watcher);
        }
        // A redundant or missing watcher is dropped here.
        self.release_held();
    }

    /// Queues a persistent watcher and polls it once at once (see
    /// `arm` for why in this order).
    ///
    /// A loop, not a recursion through `handle_completion`: while the
    /// client keeps dispatching notifications as fast as they are taken,
    /// each poll finds more, and the stack must not grow with them.
    fn listen(&mut self, id: WatchId, watcher: zkc::PersistentWatcher) {
        let mut listening = Some((id, watcher));
        while let Some((id, watcher)) = listening.take() {
            let (handle, registration) = AbortHandle::new_pair();
            self.abort_handles.insert(id, handle);
            listening = match self.queue_then_poll(hear(id, watcher).boxed(), Some(registration)) {
                Some(Completion::Heard {
                    id,
                    events,
                    watcher,
                }) => self.handle_heard(id, &events, watcher),
                // `hear` completes only as `Heard`.
                Some(_) => unreachable!("a persistent watcher's poll ended other than heard"),
                None => None,
            };
        }
    }

    /// Persistent watcher `id` received `event`.
    fn heard(&mut self, id: WatchId, event: WatchEvent) {
        if self.terminal.is_some() || self.persistent.is_duplicate(id, &event) {
            return;
        }
        // The one-shot watchers of the node that this notification fired
        // report nothing; their futures are left to complete (dropping an
        // unfired one would make the client remove the node's watch on the
        // server, persistent one included).
        self.watches.spend_triggered(&event);
        self.persistent.expect_duplicates(&event, Some(id));
        self.emit(Event::Watch(event));
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

    /// Ends the session in `state`; `client_stopped` when the client
    /// library stopped serving it rather than hearing its end from a
    /// server.
    fn end(&mut self, state: SessionState, client_stopped: bool) {
        assert!(is_terminal(state), "end({state:?})");
        assert!(
            !client_stopped || state == SessionState::Closed,
            "a stopped client reports Closed, not {state:?}"
        );
        if client_stopped {
            tracing::warn!(
                target: "zkdist::zk",
                "the ZooKeeper client stopped serving this session without its end: \
                 treating the session as closed (the ensemble ends it at its timeout)"
            );
        }
        self.terminal = Some(state);
        for id in self
            .watches
            .clear()
            .into_iter()
            .chain(self.persistent.clear())
        {
            if let Some(handle) = self.abort_handles.remove(&id) {
                handle.abort();
            }
        }
        let answer = match state {
            // A close is confirmed only by the server: a close that settles
            // a create in doubt relies on it, and goes on to close the
            // session from a second client when this fails.
            SessionState::Closed if client_stopped => Err(ZkError::ConnectionLoss {
                reason: "the ZooKeeper client stopped serving the session before the server \
                         confirmed its close"
                    .into(),
            }),
            SessionState::Closed | SessionState::Expired => Ok(()),
            _ => Err(terminal_error(state)),
        };
        for waiter in self.close_waiters.drain(..) {
            let _ = waiter.send(answer.clone());
        }
        // Requests held for an add_watch reply that will not come now fail
        // as any later request does.
        self.release_held();
        assert!(self.held.is_empty(), "a held command outlived the session");
        // Nothing follows a terminal state: dropping the sender ends the
        // stream, so a reader sees `None` after it.
        self.events = None;
        tracing::debug!(?state, "zookeeper session ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disconnection_healed_between_two_looks_is_reported_as_it_happened() {
        use SessionState::{Closed, Connected, Disconnected, Expired};
        // A change is reported as it is.
        assert_eq!(
            states_to_report(Connected, Disconnected, true),
            [Disconnected]
        );
        assert_eq!(states_to_report(Disconnected, Connected, true), [Connected]);
        assert_eq!(states_to_report(Connected, Expired, true), [Expired]);
        assert_eq!(states_to_report(Connected, Closed, false), [Closed]);
        // Woken to the state already reported: the session left it and
        // came back. A reconnection is reported with its disconnection.
        assert_eq!(
            states_to_report(Connected, Connected, true),
            [Disconnected, Connected]
        );
        // A brief connection between two disconnections changes nothing
        // for the reader, who reconciles on the next `Connected`.
        assert!(states_to_report(Disconnected, Disconnected, true).is_empty());
        // Read at start, the state is not a change.
        assert!(states_to_report(Connected, Connected, false).is_empty());
    }
}
