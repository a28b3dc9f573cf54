//! Reads answered by a lagging server (see [`SimConfig::follower_lag_txns`]):
//! ZooKeeper answers a read from the server the session is connected to,
//! which may not have applied the newest transactions yet.
//!
//! [`SimConfig::follower_lag_txns`]: crate::SimConfig::follower_lag_txns

use rand::Rng;
use rand::seq::SliceRandom;
use zkdist_coord::{Reply, Request as Call, SessionId, WatchEvent};

use crate::arrival::push_words;
use crate::digits::{decimal, hex};
use crate::engine::Engine;
use crate::history::ChangeAt;
use crate::link::Delivery;
use crate::request::{Response, write_outcome};
use crate::schedule::Item;
use crate::server::{LaggingRead, is_lagging_read};

/// How many transactions a stalled server can be behind: far more than a
/// scenario or an explorer run applies during a stall.
const STALL_HISTORY_TXNS: usize = 4_096;

impl Engine {
    /// The zxid the seed answers `session`'s read as of, when that is older
    /// than the newest: between the newest state the session has heard of
    /// (a session never sees an older state after a newer one) and the
    /// newest applied, at most the configured lag behind. `None` when the
    /// read is answered from the newest state.
    /// A stalled session's read is answered as of the oldest of those.
    pub(crate) fn lagging_read_zxid(&mut self, session: SessionId, call: &Call) -> Option<i64> {
        let stalled = self.is_stalled(session);
        if self.follower_lag_txns == 0 && !stalled || !is_lagging_read(call) {
            return None;
        }
        let newest = self.server.tree().zxid();
        let oldest = self.peers[&session]
            .view_zxid
            .max(self.oldest_lagging_zxid(stalled));
        assert!(
            oldest <= newest,
            "session {session} has heard of zxid 0x{oldest:x}, past the newest 0x{newest:x}"
        );
        if oldest == newest {
            return None;
        }
        let as_of_zxid = if stalled {
            oldest
        } else {
            self.rng.random_range(oldest..=newest)
        };
        (as_of_zxid < newest).then_some(as_of_zxid)
    }

    /// The oldest zxid a server may be at: as far back as the history
    /// reaches for a stalled one, at most `follower_lag_txns` behind the
    /// newest for any other (a stall may have grown the history past it).
    pub(crate) fn oldest_lagging_zxid(&self, stalled: bool) -> i64 {
        let oldest_readable = self.server.oldest_readable_zxid();
        if stalled {
            oldest_readable
        } else {
            let newest = self.server.tree().zxid();
            oldest_readable.max(newest - i64::from(self.follower_lag_txns))
        }
    }

    /// Sends the watch events transaction `zxid` fired, in the order it
    /// fired them. A stalled server has not applied the transaction: it
    /// owes its session the events, and sends them when the stall ends or
    /// before the reply of a `sync` or write that catches it up.
    pub(crate) fn send_txn_events(&mut self, zxid: i64, events: Vec<(SessionId, WatchEvent)>) {
        for (place, (target, event)) in events.into_iter().enumerate() {
            if self.is_stalled(target) && self.peers[&target].link.up {
                // `place` keeps the transaction's order among the events
                // owed to one session.
                self.owe_event(
                    target,
                    event,
                    ChangeAt {
                        zxid,
                        trigger: place,
                    },
                );
            } else {
                self.send_to_client(target, Delivery::Event(event));
            }
        }
    }

    /// Whether the server `session` talks to is stalled now.
    pub(crate) fn is_stalled(&self, session: SessionId) -> bool {
        self.now_us < self.peers[&session].stalled_until_us
    }

    /// `SimZk::stall`: for `duration_us` from now, the server the session
    /// talks to applies nothing new on its own. It answers reads as of the
    /// newest state the session has been shown, a reconnect goes through
    /// the server furthest behind that ZooKeeper allows, and events it
    /// owes wait for the stall's end, those of newer changes too
    /// ([`Engine::send_txn_events`]). The reply of a `sync` or of a write
    /// of the session's own brings that server up to date as of then, as
    /// on a real follower, and is preceded by the events it owed.
    pub(crate) fn stall(&mut self, session: SessionId, duration_us: u64) {
        if !self.known(session, "stall") {
            return;
        }
        let name = self.name(session);
        if let Some(state) = self.finished(session) {
            self.record(format!(
                "control stall {name}: ignored, the handle is {state:?}"
            ));
            return;
        }
        self.record(format!(
            "control stall {name}'s server for {}.{:03}ms",
            duration_us / 1000,
            duration_us % 1000
        ));
        // From now on: a stalled server is behind only by what is applied
        // after the history began (the stall, or the start with lagging
        // reads, whose history may be shorter than a stall needs).
        self.server.keep_history_of_at_least(STALL_HISTORY_TXNS);
        let until_us = self.now_us.saturating_add(duration_us);
        let peer = self.peer_mut(session);
        if until_us <= peer.stalled_until_us {
            return;
        }
        peer.stalled_until_us = until_us;
        // Events already owed wait for the stall's end too (a catch-up due
        // later stays as it is).
        if peer
            .link
            .catch_up_key
            .is_some_and(|key| key.due_us < until_us)
        {
            self.schedule_timer(session, until_us, Item::CatchUp(session));
        }
    }

    /// Answers a read as of `as_of_zxid`: the reply shows the tree as it
    /// was then, and carries that zxid; a watch the read left that a later
    /// change already fired is owed its event, which the lagging server
    /// sends once it applies the change.
    pub(crate) fn answer_lagging_read(
        &mut self,
        session: SessionId,
        request_id: u64,
        call: &Call,
        summary: &str,
        as_of_zxid: i64,
    ) {
        let name = self.name(session);
        let behind = self.server.tree().zxid() - as_of_zxid;
        assert!(behind > 0, "a lagging read is behind the newest state");
        let LaggingRead { result, owed_event } = self.server.read_as_of(session, call, as_of_zxid);
        let mut result = result.map(Response::Reply);
        if let Ok(Response::Reply(Reply::Children(names, _))) = &mut result {
            // In hash order, as every listing (see `apply_request`).
            names.shuffle(&mut self.rng);
        }
        // `read {name} {summary} as of 0x{zxid:x} ({behind} behind) -> {outcome}`.
        self.record_with(|line| {
            let (zxid, behind) = (hex(as_of_zxid), decimal(behind));
            push_words(
                line,
                &[
                    "read ",
                    &name,
                    " ",
                    summary,
                    " as of 0x",
                    zxid.as_str(),
                    " (",
                    behind.as_str(),
                    " behind) -> ",
                ],
            );
            write_outcome(line, &result).expect("writing to a String cannot fail");
        });
        let reply = Delivery::Reply {
            request_id,
            result,
            zxid: as_of_zxid,
        };
        self.send_to_client_showing(session, reply, as_of_zxid);
        if let Some((event, at)) = owed_event {
            self.owe_event(session, event, at);
        }
    }
}
