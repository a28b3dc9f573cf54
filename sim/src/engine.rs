//! The simulation's state and decisions, with no I/O: the server, every
//! session's client side and link, the agenda, the trace, and the one seeded
//! random generator. The driver feeds it commands and tells it the time;
//! everything else follows from the seed.
//!
//! Server-side handling of arrivals is in `arrival.rs`, client-side handling
//! of deliveries in `delivery.rs`, link faults in `faults.rs`, delivery
//! control (hold and release) in `control.rs`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::oneshot;
use zkdist_coord::{
    Reply, Request as Call, SessionId, SessionState, WatchEvent, ZkError, ZkResult,
};

use crate::applied::AppliedOp;
use crate::client::{Client, ClientState, ConnectReply, PendingOp, Unsent};
use crate::command::{ApplyHook, Command, Done, Predicate};
use crate::config::SimConfig;
use crate::history::ChangeAt;
use crate::latency::Latency;
use crate::link::{Delivery, Link};
use crate::request::{Request, Response, error_name, outcome};
use crate::schedule::{Item, Schedule};
use crate::server::Server;
use crate::trace::Trace;

/// At most this long after it starts to owe events, a lagging server
/// has caught up and sent them.
const CATCH_UP_MAX_US: u64 = 5_000;

/// Up to this many nodes, the server's invariants are checked after every
/// transaction (debug builds).
const FULL_CHECK_MAX_NODES: usize = 4_096;
/// Past it, after every transaction whose zxid is a multiple of this.
const SAMPLED_CHECK_EVERY: i64 = 1_024;

/// One session as the simulation sees it: the client library's side and the
/// link to the server.
#[derive(Debug)]
pub(crate) struct Peer {
    pub client: Client,
    pub link: Link,
    /// The newest transaction whose effects the server has sent down this
    /// session's link (in a reply's zxid or as a watch event): the server
    /// the session talks to has applied at least that much, so none of its
    /// reads may be answered as of an older zxid.
    pub view_zxid: i64,
    /// Until when the server the session talks to applies nothing new on
    /// its own (`SimZk::stall`); 0 when it never was stalled.
    pub stalled_until_us: u64,
}

/// Every session the simulation made, by id. Ids are handed out 1, 2, 3...
/// and a session is never forgotten (its finished handle keeps answering),
/// so the table is a vector indexed by id: a lookup on every step costs an
/// index, not a tree search. Iteration is in id order, as a sorted map's.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    by_id: Vec<Peer>,
}

impl Peers {
    fn index(&self, session: SessionId) -> Option<usize> {
        let index = usize::try_from(session.0.checked_sub(1)?).ok()?;
        (index < self.by_id.len()).then_some(index)
    }

    /// The id the next session must take.
    fn next_id(&self) -> SessionId {
        SessionId(i64::try_from(self.by_id.len() + 1).expect("fewer sessions than i64::MAX"))
    }

    pub(crate) fn insert(&mut self, session: SessionId, peer: Peer) {
        assert_eq!(session, self.next_id(), "sessions are made in id order");
        self.by_id.push(peer);
    }

    pub(crate) fn get(&self, session: &SessionId) -> Option<&Peer> {
        self.index(*session).map(|index| &self.by_id[index])
    }

    pub(crate) fn get_mut(&mut self, session: &SessionId) -> Option<&mut Peer> {
        self.index(*session).map(|index| &mut self.by_id[index])
    }

    pub(crate) fn contains_key(&self, session: &SessionId) -> bool {
        self.index(*session).is_some()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (SessionId, &Peer)> {
        (1..).map(SessionId).zip(&self.by_id)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Peer> {
        self.by_id.iter()
    }
}

impl std::ops::Index<&SessionId> for Peers {
    type Output = Peer;

    fn index(&self, session: &SessionId) -> &Peer {
        self.get(session).expect("a known session")
    }
}

pub(crate) struct Engine {
    /// Simulated microseconds since start. Never goes back.
    pub(crate) now_us: u64,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) latency: Latency,
    pub(crate) session_timeout_us: u64,
    pub(crate) max_reply_bytes: usize,
    /// See [`SimConfig::follower_lag_txns`]: 0 when reads never lag.
    pub(crate) follower_lag_txns: u32,
    pub(crate) server: Server,
    pub(crate) peers: Peers,
    pub(crate) schedule: Schedule,
    pub(crate) trace: Trace,
    paused: bool,
    next_request_id: u64,
    waiters: Vec<(Predicate, Done)>,
    pub(crate) hooks: Vec<ApplyHook>,
    /// Where request summaries are written before they are shared.
    scratch: String,
}

impl Engine {
    pub(crate) fn new(config: SimConfig) -> Engine {
        let mut server = Server::default();
        if config.follower_lag_txns > 0 {
            server.keep_history(config.follower_lag_txns as usize);
        }
        Engine {
            now_us: 0,
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            latency: config.latency,
            session_timeout_us: config.session_timeout_ms.saturating_mul(1000),
            max_reply_bytes: config.max_reply_bytes,
            follower_lag_txns: config.follower_lag_txns,
            server,
            peers: Peers::default(),
            schedule: Schedule::default(),
            trace: Trace::default(),
            paused: false,
            next_request_id: 1,
            waiters: Vec::new(),
            hooks: Vec::new(),
            scratch: String::new(),
        }
    }

    /// The driver reports the time; simulated time never goes back (after
    /// `step` it may run ahead of the runtime's clock).
    pub(crate) fn advance_clock_to(&mut self, now_us: u64) {
        self.now_us = self.now_us.max(now_us);
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.paused
    }

    pub(crate) fn next_due_us(&self) -> Option<u64> {
        self.schedule.next_due_us()
    }

    /// Appends a line to the trace, stamped with the current time.
    pub(crate) fn record(&mut self, text: impl fmt::Display) {
        self.trace.record(self.now_us, text);
    }

    /// [`Engine::record`] for the busiest lines: `write` appends the text.
    pub(crate) fn record_with(&mut self, write: impl FnOnce(&mut String)) {
        self.trace.record_with(self.now_us, write);
    }

    /// The session's name, as the trace shows it.
    pub(crate) fn name(&self, session: SessionId) -> Arc<str> {
        self.peers.get(&session).map_or_else(
            || session.to_string().into(),
            |peer| peer.client.name.clone(),
        )
    }

    pub(crate) fn elapsed(&self) -> Duration {
        Duration::from_micros(self.now_us)
    }

    pub(crate) fn handle(&mut self, command: Command) {
        match command {
            Command::Connect { name, reply } => self.connect(name, reply),
            Command::Request {
                session,
                request,
                reply,
            } => self.submit(session, request, reply),
            Command::HandleDropped { session } => self.handle_dropped(session),
            Command::Expire { session, done } => {
                self.expire_by_control(session);
                let _ = done.send(());
            }
            Command::Cut {
                session,
                duration_us,
                done,
            } => {
                self.cut(session, duration_us);
                let _ = done.send(());
            }
            Command::Partition {
                session,
                duration_us,
                done,
            } => {
                self.partition(session, duration_us);
                let _ = done.send(());
            }
            Command::Stall {
                session,
                duration_us,
                done,
            } => {
                self.stall(session, duration_us);
                let _ = done.send(());
            }
            Command::Crash { session, done } => {
                self.crash(session);
                let _ = done.send(());
            }
            Command::Hold { session, done } => {
                self.hold(session);
                let _ = done.send(());
            }
            Command::Release { session, done } => {
                self.release(session);
                let _ = done.send(());
            }
            Command::Pause { done } => {
                self.paused = true;
                self.record("control pause");
                let _ = done.send(());
            }
            Command::Resume { done } => {
                self.paused = false;
                self.record("control resume");
                let _ = done.send(());
            }
            Command::Step { reply } => {
                let lines = self.step().map(|lines| lines.join("\n"));
                let _ = reply.send(lines);
            }
            Command::RunUntil {
                mut predicate,
                done,
            } => {
                if predicate(self.server.tree()) {
                    let _ = done.send(());
                } else {
                    self.waiters.push((predicate, done));
                }
            }
            Command::Inspect { view } => view(self.server.tree()),
            Command::Trace { reply } => {
                let _ = reply.send(self.trace.to_lines());
            }
            Command::ReadTrace { read } => read(&mut self.trace.lines_from(0)),
            Command::SetSequenceCounter {
                parent,
                value,
                reply,
            } => {
                let result = self.server.set_sequence_counter(&parent, value);
                let shown = match &result {
                    Ok(()) => "ok".to_owned(),
                    Err(error) => error_name(error),
                };
                self.record(format!(
                    "control set_sequence_counter {parent} {value} -> {shown}"
                ));
                let _ = reply.send(result);
            }
            Command::OnApply { hook, done } => {
                self.hooks.push(hook);
                let _ = done.send(());
            }
            Command::Note { text } => {
                self.record_with(|line| line.push_str(&text));
            }
        }
        if cfg!(debug_assertions) {
            self.check_links();
        }
    }

    /// Runs the first item on the agenda at its due time (the clock moves
    /// up to it, never back) and returns it. `None` if the agenda is empty.
    pub(crate) fn process_next(&mut self) -> Option<Item> {
        let (key, item) = self.schedule.pop_first()?;
        self.now_us = self.now_us.max(key.due_us);
        match item {
            Item::Arrival(session) => {
                let link = &mut self.peer_mut(session).link;
                link.outbound_key = None;
                link.last_arrival_us = key.due_us;
                self.arrive(session);
            }
            Item::Delivery(session) => {
                let link = &mut self.peer_mut(session).link;
                link.inbound_key = None;
                link.last_delivery_us = key.due_us;
                self.deliver(session);
            }
            Item::Heal(session) => {
                self.peer_mut(session).link.heal_key = None;
                self.heal(session);
            }
            Item::SessionTimeout(session) => {
                self.peer_mut(session).link.timeout_key = None;
                self.session_timeout(session);
            }
            Item::CatchUp(session) => {
                self.peer_mut(session).link.catch_up_key = None;
                self.catch_up(session);
            }
            Item::Notice(session) => {
                self.peer_mut(session).link.notice_key = None;
                self.notice(session);
            }
        }
        if cfg!(debug_assertions) {
            self.check_links();
        }
        Some(item)
    }

    /// `SimZk::step`: [`Engine::process_next`], returning the trace lines
    /// the item produced.
    fn step(&mut self) -> Option<Vec<String>> {
        let first_line = self.trace.len();
        self.process_next()?;
        let lines: Vec<String> = self
            .trace
            .lines_from(first_line)
            .map(str::to_owned)
            .collect();
        assert!(!lines.is_empty(), "every agenda item leaves a trace line");
        Some(lines)
    }

    pub(crate) fn peer_mut(&mut self, session: SessionId) -> &mut Peer {
        self.peers
            .get_mut(&session)
            .expect("agenda items and requests name known sessions")
    }

    fn connect(&mut self, name: String, reply: ConnectReply) {
        let session = self.peers.next_id();
        self.record(format!("connect {name} as session {session}"));
        self.peers.insert(
            session,
            Peer {
                client: Client::new(name, reply),
                link: Link::new(),
                view_zxid: 0,
                stalled_until_us: 0,
            },
        );
        let request_id = self.take_request_id();
        let summary = Request::CreateSession.summary().into();
        self.send_to_server(session, request_id, Request::CreateSession, summary);
    }

    fn take_request_id(&mut self) -> u64 {
        let id = self.next_request_id;
        self.next_request_id += 1;
        id
    }

    /// Refuses a control command on a session the simulation never made.
    pub(crate) fn known(&mut self, session: SessionId, command: &str) -> bool {
        if self.peers.contains_key(&session) {
            return true;
        }
        self.record(format!(
            "control {command} {session}: no such session, ignored"
        ));
        false
    }

    /// A request from a session handle: refused at once by the client
    /// library when the session's state forbids it, queued while the client
    /// is disconnected, sent otherwise.
    fn submit(
        &mut self,
        session: SessionId,
        request: Request,
        reply: oneshot::Sender<ZkResult<Response>>,
    ) {
        let Some(peer) = self.peers.get_mut(&session) else {
            let _ = reply.send(Err(ZkError::System {
                reason: format!("no simulated session {session}"),
            }));
            return;
        };
        let name = peer.client.name.clone();
        let state = peer.client.state;
        let is_close = matches!(request, Request::Close);
        let refusal = match (state, is_close) {
            (ClientState::Up | ClientState::Down | ClientState::Partitioned, false)
                if let Some(refused) = peer.client.refuse_add_watch(&request) =>
            {
                Some(Err(refused))
            }
            // Over a silent partition the close is lost like any request:
            // the client waits for its answer until it notices.
            (ClientState::Up | ClientState::Partitioned, true) => {
                peer.client.state = ClientState::Closing;
                None
            }
            (ClientState::Up | ClientState::Down | ClientState::Partitioned, false) => None,
            (ClientState::Closing | ClientState::Closed, true) => Some(Ok(Response::Closed)),
            (ClientState::Closing | ClientState::Closed, false) => {
                Some(Err(ZkError::SessionClosed))
            }
            (ClientState::Expired, _) => Some(Err(ZkError::SessionExpired)),
            (ClientState::Crashed, _) => Some(Err(ZkError::ConnectionLoss {
                reason: format!("{name}'s process crashed"),
            })),
            // The handle closes at once, but the server cannot be told: it
            // keeps the session and its ephemerals until it expires.
            (ClientState::Down, true) => Some(Err(ZkError::ConnectionLoss {
                reason: format!(
                    "{name} closed while disconnected; the server keeps the session until it times out"
                ),
            })),
        };
        if let Some(result) = refusal {
            self.record(format!(
                "refuse {name} {} -> {}",
                request.summary(),
                outcome(&result)
            ));
            let _ = reply.send(result);
            if state == ClientState::Down && is_close {
                // Requests waiting for the reconnection were never sent.
                self.peer_mut(session).client.state = ClientState::Closed;
                self.fail_pending(
                    session,
                    || ZkError::SessionClosed,
                    Some(SessionState::Closed),
                );
                self.peer_mut(session).client.end_stream();
            }
            return;
        }
        if matches!(&request, Request::Call(Call::Multi { ops }) if ops.is_empty()) {
            // The client library answers an empty multi itself, as
            // zookeeper-client does: nothing is sent, no zxid is taken, and
            // a disconnection does not hold it back.
            self.record(format!(
                "local {name} multi [] -> ok 0 ops (answered by the client library, not sent)"
            ));
            let _ = reply.send(Ok(Response::Reply(Reply::Multi(Vec::new()))));
            return;
        }
        let request_id = self.take_request_id();
        let summary = request.shared_summary(&mut self.scratch);
        let pending = PendingOp {
            summary: summary.clone(),
            watching: request.watching_read(),
            listed_path: request.listed_path(),
            reply,
        };
        if state == ClientState::Down {
            self.record(format!(
                "queue {name} {} (disconnected: sent once reconnected)",
                pending.summary
            ));
            let client = &mut self.peer_mut(session).client;
            client.pending.insert(request_id, pending);
            client.unsent.push_back(Unsent {
                request_id,
                request,
                summary,
            });
            return;
        }
        let client = &mut self.peer_mut(session).client;
        client.pending.insert(request_id, pending);
        if state == ClientState::Partitioned {
            self.record(format!(
                "lost {name} {summary} (sent into a silent partition)"
            ));
            return;
        }
        self.send_to_server(session, request_id, request, summary);
    }

    /// The application dropped the session's last handle: the client
    /// library closes the session, as `close` does, with nobody waiting for
    /// the answer. A handle already finished has nothing to close; a
    /// crashed one in particular stays silent, as a dead process is.
    fn handle_dropped(&mut self, session: SessionId) {
        let Some(peer) = self.peers.get(&session) else {
            return;
        };
        let name = peer.client.name.clone();
        match peer.client.state {
            ClientState::Up | ClientState::Down | ClientState::Partitioned => {
                self.record(format!("drop {name}: last handle dropped, closing"));
                let (reply, _nobody_waits) = oneshot::channel();
                self.submit(session, Request::Close, reply);
            }
            state @ (ClientState::Closing
            | ClientState::Closed
            | ClientState::Expired
            | ClientState::Crashed) => {
                self.record(format!(
                    "drop {name}: last handle dropped, nothing to close (the handle is {state:?})"
                ));
            }
        }
    }

    /// Fails every pending request of the session with `error` (oldest
    /// first), then puts `announced` on its stream, then traces each
    /// failure: what the client library does when it gives up on a
    /// connection.
    pub(crate) fn fail_pending(
        &mut self,
        session: SessionId,
        error: impl Fn() -> ZkError,
        announced: Option<SessionState>,
    ) {
        let name = self.name(session);
        let shown = error_name(&error());
        let client = &mut self.peer_mut(session).client;
        let failed = client.fail_pending(error);
        if let Some(state) = announced {
            client.announce(state);
        }
        for summary in failed {
            self.record(format!("fail {name} {summary} -> {shown}"));
        }
    }

    /// Puts a request on the session's link to the server.
    pub(crate) fn send_to_server(
        &mut self,
        session: SessionId,
        request_id: u64,
        request: Request,
        summary: Arc<str>,
    ) {
        let delay_us = self.latency.sample_us(&mut self.rng);
        let due_us = self.now_us.saturating_add(delay_us);
        let link = &mut self.peer_mut(session).link;
        assert!(link.up, "request sent over a link that is down");
        link.push_outbound(due_us, request_id, request, summary);
        self.schedule_outbound_head(session);
    }

    /// Sends `delivery` down the session's link, behind everything the
    /// server sent it before. It shows the session the
    /// server's newest state (a reply tells how new in its zxid), so the
    /// session's later reads may not be answered as of anything older.
    pub(crate) fn send_to_client(&mut self, session: SessionId, delivery: Delivery) {
        let shows_zxid = match &delivery {
            Delivery::Reply { zxid, .. } => *zxid,
            _ => self.server.tree().zxid(),
        };
        self.send_to_client_showing(session, delivery, shows_zxid);
    }

    /// [`Engine::send_to_client`] for a delivery that shows the state as
    /// of `shows_zxid`, which a lagging server's may be older than the
    /// newest.
    pub(crate) fn send_to_client_showing(
        &mut self,
        session: SessionId,
        delivery: Delivery,
        shows_zxid: i64,
    ) {
        // A server that shows this state has applied the changes behind
        // the events it owed up to it, and sent those events first.
        self.send_owed_events(session, shows_zxid);
        self.push_to_client(session, delivery, shows_zxid);
    }

    /// Queues `delivery` on the session's link, as it is.
    fn push_to_client(&mut self, session: SessionId, delivery: Delivery, shows_zxid: i64) {
        let delay_us = self.latency.sample_us(&mut self.rng);
        let due_us = self.now_us.saturating_add(delay_us);
        let peer = self.peer_mut(session);
        peer.view_zxid = peer.view_zxid.max(shows_zxid);
        peer.link.push_inbound(due_us, delivery);
        self.schedule_inbound_head(session);
    }

    /// The lagging server the session talks to owes it `event`, for the
    /// change `at`, which it has not applied yet: it sends it when it
    /// catches up (after a seeded delay), or before anything it sends that
    /// shows that change. A change fires a session's watches once: two
    /// lagging reads that left a watch on one node before the same change
    /// are owed one event.
    pub(crate) fn owe_event(&mut self, session: SessionId, event: WatchEvent, at: ChangeAt) {
        let peer = self.peer_mut(session);
        assert!(
            peer.link.up,
            "an event owed to {session}, whose link is down"
        );
        assert!(
            at.zxid > peer.view_zxid,
            "an event owed for 0x{:x}, which {session} has been shown",
            at.zxid
        );
        // In the order of the changes: a watch left by an earlier lagging
        // read may be owed a later change.
        let owed = &mut peer.link.owed;
        let index = owed.partition_point(|(_, owed_at)| *owed_at < at);
        if let Some((already, owed_at)) = owed.get(index)
            && *owed_at == at
        {
            assert_eq!(*already, event, "one change, one event for a session");
            return;
        }
        owed.insert(index, (event, at));
        if peer.link.catch_up_key.is_none() {
            // A stalled server catches up when the stall ends, not at a
            // seeded moment (no delay is drawn for it, so runs without a
            // stall draw as they always did).
            let due_us = if self.is_stalled(session) {
                self.peers[&session].stalled_until_us
            } else {
                self.now_us + self.rng.random_range(0..=CATCH_UP_MAX_US)
            };
            self.schedule_timer(session, due_us, Item::CatchUp(session));
        }
    }

    /// Sends the events owed to the session for changes up to `zxid`.
    fn send_owed_events(&mut self, session: SessionId, zxid: i64) {
        loop {
            let link = &mut self.peer_mut(session).link;
            match link.owed.front() {
                Some((_, at)) if at.zxid <= zxid => {
                    let (event, at) = link.owed.pop_front().expect("a front");
                    self.push_to_client(session, Delivery::Event(event), at.zxid);
                }
                _ => break,
            }
        }
        let link = &mut self.peer_mut(session).link;
        if link.owed.is_empty()
            && let Some(key) = link.catch_up_key.take()
        {
            self.schedule.cancel(key);
        }
    }

    /// The lagging server has applied the changes it owed events for: it
    /// sends them all. (The session's later reads may still lag: they are
    /// answered as of anything from the last change sent on.)
    fn catch_up(&mut self, session: SessionId) {
        let owed = &self.peers[&session].link.owed;
        let (count, last) = (owed.len(), owed.back().map_or(0, |(_, at)| at.zxid));
        let name = self.name(session);
        self.record(format!(
            "catch-up {name}: its server applied up to 0x{last:x} and sends the {count} events it owed"
        ));
        self.send_owed_events(session, self.server.tree().zxid());
    }

    pub(crate) fn schedule_outbound_head(&mut self, session: SessionId) {
        let peer = self.peers.get_mut(&session).expect("known session");
        if peer.link.outbound_key.is_some() {
            return;
        }
        let Some(head) = peer.link.outbound.front() else {
            return;
        };
        let due_us = head.due_us.max(self.now_us);
        let tiebreak = self.rng.random();
        peer.link.outbound_key = Some(self.schedule.insert(
            due_us,
            tiebreak,
            Item::Arrival(session),
        ));
    }

    pub(crate) fn schedule_inbound_head(&mut self, session: SessionId) {
        let peer = self.peers.get_mut(&session).expect("known session");
        if peer.link.inbound_key.is_some() || peer.link.held {
            return;
        }
        let Some(head) = peer.link.inbound.front() else {
            return;
        };
        let due_us = head.due_us.max(self.now_us);
        let tiebreak = self.rng.random();
        peer.link.inbound_key = Some(self.schedule.insert(
            due_us,
            tiebreak,
            Item::Delivery(session),
        ));
    }

    /// Schedules one of a link's timers, replacing the previous one.
    pub(crate) fn schedule_timer(&mut self, session: SessionId, due_us: u64, item: Item) {
        let tiebreak = self.rng.random();
        let previous = {
            let link = &mut self.peer_mut(session).link;
            match item {
                Item::Heal(_) => link.heal_key.take(),
                Item::SessionTimeout(_) => link.timeout_key.take(),
                Item::CatchUp(_) => link.catch_up_key.take(),
                Item::Notice(_) => link.notice_key.take(),
                Item::Arrival(_) | Item::Delivery(_) => unreachable!("not a timer: {item:?}"),
            }
        };
        if let Some(key) = previous {
            self.schedule.cancel(key);
        }
        let key = self.schedule.insert(due_us, tiebreak, item);
        let link = &mut self.peer_mut(session).link;
        match item {
            Item::Heal(_) => link.heal_key = Some(key),
            Item::CatchUp(_) => link.catch_up_key = Some(key),
            Item::Notice(_) => link.notice_key = Some(key),
            _ => link.timeout_key = Some(key),
        }
    }

    /// Tells observers about transaction `zxid`, then wakes the
    /// `run_until` callers whose predicate now holds. The observers' view
    /// of it is built only if a hook is there to read it: it copies the
    /// trace line, the session's name and every changed path.
    pub(crate) fn after_txn(&mut self, zxid: i64, op: impl FnOnce(&Engine) -> AppliedOp) {
        // The full check is O(nodes): after every transaction while the
        // tree is small, and after one in `SAMPLED_CHECK_EVERY` once it is
        // large, so that a test of a big backlog is not quadratic.
        let check_due =
            self.server.tree().len() <= FULL_CHECK_MAX_NODES || zxid % SAMPLED_CHECK_EVERY == 0;
        if cfg!(debug_assertions) && check_due {
            self.server.check_invariants();
        }
        if !self.hooks.is_empty() {
            let op = op(self);
            debug_assert_eq!(op.zxid, zxid, "the observers hear of this transaction");
            let tree = self.server.tree();
            for hook in &mut self.hooks {
                hook(&op, tree);
            }
        }
        if self.waiters.is_empty() {
            return;
        }
        let tree = self.server.tree();
        for (mut predicate, done) in std::mem::take(&mut self.waiters) {
            if done.is_closed() {
                continue;
            }
            if predicate(tree) {
                let _ = done.send(());
            } else {
                self.waiters.push((predicate, done));
            }
        }
    }

    /// Links, client states and the server's view of each session agree.
    /// O(messages in flight).
    fn check_links(&self) {
        for (session, peer) in self.peers.iter() {
            peer.link.check_invariants();
            let state = peer.client.state;
            let up = peer.link.up;
            match state {
                ClientState::Up => {
                    assert!(up, "{session} is {state:?} over a link that is down");
                }
                // A close sent into a silent partition waits for the client
                // to notice.
                ClientState::Closing => {
                    assert!(
                        up || peer.link.notice_key.is_some(),
                        "{session} is Closing over a link that is down, and will not notice"
                    );
                }
                ClientState::Partitioned => {
                    assert!(!up, "{session} is Partitioned over a link that is up");
                    assert!(
                        peer.link.notice_key.is_some() && peer.link.heal_key.is_some(),
                        "{session} is Partitioned and will not notice or heal"
                    );
                }
                ClientState::Down => {
                    assert!(!up, "{session} is Down over a link that is up");
                    assert!(
                        peer.link.heal_key.is_some(),
                        "{session} is Down with no reconnection scheduled"
                    );
                }
                ClientState::Closed | ClientState::Expired | ClientState::Crashed => {
                    assert!(
                        peer.client.pending.is_empty(),
                        "{session} is {state:?} with requests pending"
                    );
                }
            }
            if state == ClientState::Down {
                assert!(
                    peer.client.pending.keys().eq(peer
                        .client
                        .unsent
                        .iter()
                        .map(|unsent| &unsent.request_id)),
                    "{session}: while Down, every pending request is one waiting to be sent"
                );
            } else {
                assert!(
                    peer.client.unsent.is_empty(),
                    "{session} is {state:?} with requests waiting to be sent"
                );
            }
            if let Some(attached) = self.server.attached(session) {
                assert_eq!(
                    attached, up,
                    "{session}: the server attaches a live session exactly when its link is up"
                );
            }
            if !up {
                assert!(peer.link.outbound_key.is_none() && peer.link.inbound_key.is_none());
            }
        }
        let keys: usize = self
            .peers
            .values()
            .map(|p| {
                [
                    p.link.outbound_key,
                    p.link.inbound_key,
                    p.link.heal_key,
                    p.link.timeout_key,
                    p.link.catch_up_key,
                    p.link.notice_key,
                ]
                .iter()
                .flatten()
                .count()
            })
            .sum();
        assert_eq!(
            self.schedule.len(),
            keys,
            "every agenda item belongs to a link"
        );
    }
}
