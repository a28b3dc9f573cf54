//! `SimZk`: the handle on a running simulation, for connecting sessions,
//! injecting faults, controlling delivery and observing the tree.

use std::future::Future;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zkdist_coord::{EventStream, SessionId, ZkResult};

use crate::applied::AppliedOp;
use crate::command::{Command, Done};
use crate::config::SimConfig;
use crate::driver;
use crate::engine::Engine;
use crate::session::{SimSession, simulator_stopped};
use crate::tree::Tree;

/// A deterministic, seeded, in-memory ZooKeeper server and the network
/// between it and its sessions. Clones share the simulation; it runs until
/// every handle (this and the sessions) is dropped.
#[derive(Debug, Clone)]
pub struct SimZk {
    commands: mpsc::UnboundedSender<Command>,
    /// Every session's timeout ([`SimConfig::session_timeout_ms`]).
    session_timeout_ms: u64,
}

impl SimZk {
    /// Starts the simulation's driver task on the current tokio runtime
    /// (call it from within one). Simulated time starts now.
    ///
    /// # Panics
    /// If `config.max_reply_bytes` is under `zkdist_coord::MIN_REPLY_BYTES`.
    pub fn start(config: SimConfig) -> SimZk {
        assert!(
            config.max_reply_bytes >= zkdist_coord::MIN_REPLY_BYTES,
            "max_reply_bytes {} is under {}, a Java client's default: the limit may only be raised",
            config.max_reply_bytes,
            zkdist_coord::MIN_REPLY_BYTES
        );
        let (commands, receiver) = mpsc::unbounded_channel();
        let session_timeout_ms = config.session_timeout_ms;
        tokio::spawn(driver::run(Engine::new(config), receiver, Instant::now()));
        SimZk {
            commands,
            session_timeout_ms,
        }
    }

    fn send(&self, command: Command) {
        // A stopped driver answers nothing; every waiting call then sees its
        // reply channel closed and reports it.
        let _ = self.commands.send(command);
    }

    /// Sends the command `command` builds around a reply channel and
    /// waits for the answer: `Err` if the driver stopped (it panicked)
    /// before answering. Each caller decides what a stopped driver means
    /// for it.
    async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, oneshot::error::RecvError> {
        let (reply, answer) = oneshot::channel();
        self.send(command(reply));
        answer.await
    }

    /// Sends a command that answers once it has been carried out, and
    /// waits for that. A stopped driver carries nothing out; the caller
    /// returns all the same, as the simulation it controlled is over.
    async fn control(&self, command: impl FnOnce(Done) -> Command) {
        let _ = self.ask(command).await;
    }

    /// Opens a session named `name` (the trace's name for it). Returns once
    /// the handshake completed; the stream's first event is
    /// `Event::Session(SessionState::Connected)`.
    pub async fn connect(&self, name: &str) -> ZkResult<(SimSession, EventStream)> {
        let (id, events) = self
            .ask(|reply| Command::Connect {
                name: name.to_owned(),
                reply,
            })
            .await
            .unwrap_or_else(|_| Err(simulator_stopped()))?;
        let grace_ms = zkdist_coord::disconnected_grace_ms(self.session_timeout_ms);
        let session = SimSession::new(id, name, grace_ms, self.commands.clone());
        Ok((session, events))
    }

    /// The server expires the session now: its ephemerals are deleted (one
    /// transaction) and its watches dropped. A connected client then sees
    /// `Disconnected` (the server closed its connection) and, on
    /// reconnecting, `Expired`; its pending requests fail with
    /// `ConnectionLoss` and later ones with `SessionExpired`. Returns once
    /// the server applied the expiry.
    pub async fn expire(&self, session: SessionId) {
        self.control(|done| Command::Expire { session, done }).await
    }

    /// Cuts the session's link for `duration`: the client sees
    /// `Disconnected` at once and every pending request fails with
    /// `ConnectionLoss` (a seeded prefix of those in flight was applied
    /// first, the rest never arrived). If the outage reaches the session
    /// timeout, the server expires the session at cut + timeout and the
    /// client sees `Expired` at heal; otherwise it sees `Connected` and its
    /// watches are re-registered (firing if they missed a change).
    pub async fn cut(&self, session: SessionId, duration: Duration) {
        let duration_us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.control(|done| Command::Cut {
            session,
            duration_us,
            done,
        })
        .await
    }

    /// Partitions the session's link silently for at least `duration`, as
    /// a network that drops packets without resetting the connection. The
    /// server stops hearing the session at once and expires it a session
    /// timeout after it last heard it; the client believes it is connected
    /// (what it sends is lost) until its link watch notices the silence,
    /// 8 to 9 ticks of a twentieth of the timeout after it last heard the
    /// server, and only then sees `Disconnected` and fails its pending
    /// requests with `ConnectionLoss`. When each side last heard the other
    /// is drawn from the seed, within the ping interval of zookeeper-client
    /// (4 ticks), so the server may expire the session 0.35 of the timeout
    /// after the client noticed, not a whole timeout as after a [`cut`].
    /// The link heals after `duration`, but no sooner than just after the
    /// client noticed; then as after a cut.
    ///
    /// A session that is connecting, closing or already cut off takes it
    /// as a [`cut`].
    ///
    /// [`cut`]: SimZk::cut
    pub async fn partition(&self, session: SessionId, duration: Duration) {
        let duration_us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.control(|done| Command::Partition {
            session,
            duration_us,
            done,
        })
        .await
    }

    /// Stalls the server the session talks to for `duration`, as a
    /// follower that falls behind the leader: until then it answers the
    /// session's reads as of the newest state the session has already
    /// been shown (the oldest a read may show), a reconnect of the session
    /// goes through the server furthest behind that ZooKeeper lets it
    /// reconnect to (one that has applied what its last reply showed), and
    /// the watch events such a server owes wait for the stall's end. A
    /// `sync` or a write of the session's own brings the server up to
    /// date as of its reply. The events of changes made meanwhile are owed
    /// too: the session hears of them when the stall ends, or before the
    /// reply of such a `sync` or write. A stall on a session that has
    /// ended is ignored.
    ///
    /// The server keeps the transactions applied from the first stall on
    /// (or from the start, with [`SimConfig::follower_lag_txns`]), so a
    /// stall reaches back only to them: stall a session before the write
    /// it must not see. [`SimZk::set_sequence_counter`] forgets them.
    ///
    /// Scripted scenarios use it to show where a `sync` is needed: after a
    /// write whose reply a cut lost, a stalled session reads the state
    /// from before the write until it syncs.
    pub async fn stall(&self, session: SessionId, duration: Duration) {
        let duration_us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.control(|done| Command::Stall {
            session,
            duration_us,
            done,
        })
        .await
    }

    /// The session's process dies: its link drops silently and for good,
    /// its stream ends, and the server expires the session after the
    /// session timeout. Handles of the session dropped afterwards (the dead
    /// process's memory going away) close nothing.
    ///
    /// The crash takes its place in the simulation's order when `crash` is
    /// called, not when the returned future is first polled, so a test can
    /// crash a session and then kill the madsim node that holds its
    /// handles, with no task of that node running in between (see
    /// `master/tests/madsim_crash.rs`). Awaiting the future waits until the
    /// crash is applied.
    pub fn crash(&self, session: SessionId) -> impl Future<Output = ()> + Send + 'static {
        let (done, finished) = oneshot::channel();
        self.send(Command::Crash { session, done });
        async move {
            let _ = finished.await;
        }
    }

    /// Holds back everything travelling to the session (replies, events)
    /// until `release`; order is kept.
    pub async fn hold(&self, session: SessionId) {
        self.control(|done| Command::Hold { session, done }).await
    }

    pub async fn release(&self, session: SessionId) {
        self.control(|done| Command::Release { session, done })
            .await
    }

    /// Stops time-driven progress: nothing arrives or is delivered until
    /// `resume`, except through `step`.
    pub async fn pause(&self) {
        self.control(|done| Command::Pause { done }).await
    }

    pub async fn resume(&self) {
        self.control(|done| Command::Resume { done }).await
    }

    /// Runs the next item of the agenda (a request's arrival, a delivery,
    /// a heal or a session timeout), whenever it is due, and returns its
    /// trace lines (joined by newlines). `None` if nothing is pending. Meant
    /// for use while paused.
    pub async fn step(&self) -> Option<String> {
        self.ask(|reply| Command::Step { reply })
            .await
            .unwrap_or(None)
    }

    /// Returns once `predicate` holds: checked now and after every
    /// transaction. Wrap it in a timeout if it might never hold.
    pub async fn run_until(&self, predicate: impl FnMut(&Tree) -> bool + Send + 'static) {
        self.control(|done| Command::RunUntil {
            predicate: Box::new(predicate),
            done,
        })
        .await
    }

    /// Runs `view` on the server's tree as it is now.
    ///
    /// # Panics
    /// If the simulation's driver has stopped (it panicked).
    pub async fn inspect<T: Send + 'static>(
        &self,
        view: impl FnOnce(&Tree) -> T + Send + 'static,
    ) -> T {
        self.ask(|reply| Command::Inspect {
            view: Box::new(move |tree| {
                let _ = reply.send(view(tree));
            }),
        })
        .await
        .expect("the simulation's driver has stopped")
    }

    /// Every trace line so far.
    pub async fn trace(&self) -> Vec<String> {
        self.ask(|reply| Command::Trace { reply })
            .await
            .unwrap_or_default()
    }

    /// Runs `read` over every trace line so far, in place: what needs each
    /// line once (a digest, a count) need not copy thousands of them out
    /// first, as [`SimZk::trace`] does.
    ///
    /// # Panics
    /// If the simulation's driver has stopped (it panicked).
    pub async fn read_trace<T: Send + 'static>(
        &self,
        read: impl FnOnce(&mut dyn Iterator<Item = &str>) -> T + Send + 'static,
    ) -> T {
        self.ask(|reply| Command::ReadTrace {
            read: Box::new(move |lines| {
                let _ = reply.send(read(lines));
            }),
        })
        .await
        .expect("the simulation's driver has stopped")
    }

    /// Sets `parent`'s child-create counter (its cversion), so that a test
    /// can reach the 32-bit wrap of sequential names. `NoNode` if `parent`
    /// does not exist.
    pub async fn set_sequence_counter(&self, parent: &str, value: i32) -> ZkResult<()> {
        self.ask(|reply| Command::SetSequenceCounter {
            parent: parent.to_owned(),
            value,
            reply,
        })
        .await
        .unwrap_or_else(|_| Err(simulator_stopped()))
    }

    /// Calls `hook` after every transaction (including failed writes, which
    /// take a zxid too) with the transaction and the tree right after it.
    /// A hook that panics stops the simulation.
    pub async fn on_apply(&self, hook: impl FnMut(&AppliedOp, &Tree) + Send + 'static) {
        self.control(|done| Command::OnApply {
            hook: Box::new(hook),
            done,
        })
        .await
    }

    /// Adds a line to the trace (an actor's decision, a scenario's step),
    /// stamped with the simulated time, in order with the handle's other
    /// commands.
    pub fn note(&self, text: impl Into<String>) {
        self.send(Command::Note { text: text.into() });
    }
}
