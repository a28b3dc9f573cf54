//! Faults on a session's link: cut and heal, crash, expiry, and the session
//! timeout that follows an outage.

use rand::Rng;
use zkdist_coord::{SessionId, SessionState, ZkError};

use crate::client::ClientState;
use crate::engine::Engine;
use crate::link::Delivery;
use crate::schedule::Item;

/// Why a link went down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DownCause {
    /// A test cut it for a while.
    Cut,
    /// The client refused an oversized reply and dropped the connection; it
    /// reconnects at once.
    ReplyTooLarge,
    /// The process died.
    Crash,
}

impl Engine {
    /// Whether the session's handle is finished for good.
    pub(crate) fn finished(&self, session: SessionId) -> Option<ClientState> {
        let state = self.peers[&session].client.state;
        matches!(
            state,
            ClientState::Closed | ClientState::Expired | ClientState::Crashed
        )
        .then_some(state)
    }

    pub(crate) fn cut(&mut self, session: SessionId, duration_us: u64) {
        if !self.known(session, "cut") {
            return;
        }
        let name = self.name(session);
        if let Some(state) = self.finished(session) {
            self.record(format!(
                "control cut {name}: ignored, the handle is {state:?}"
            ));
            return;
        }
        self.record(format!(
            "control cut {name} for {}.{:03}ms",
            duration_us / 1000,
            duration_us % 1000
        ));
        let heal_at_us = self.now_us.saturating_add(duration_us);
        let link = &self.peers[&session].link;
        if link.up {
            self.link_down(session, Some(duration_us), DownCause::Cut);
        } else if link.heal_key.is_none_or(|key| key.due_us < heal_at_us) {
            // Already down: the outage lasts until the later heal.
            self.schedule_timer(session, heal_at_us, Item::Heal(session));
        }
    }

    pub(crate) fn crash(&mut self, session: SessionId) {
        if !self.known(session, "crash") {
            return;
        }
        let name = self.name(session);
        if let Some(state) = self.finished(session) {
            self.record(format!(
                "control crash {name}: ignored, the handle is {state:?}"
            ));
            return;
        }
        self.record(format!("control crash {name}"));
        if self.peers[&session].link.up {
            self.link_down(session, None, DownCause::Crash);
        } else {
            // Requests waiting for the reconnection die with the process.
            self.peer_mut(session).client.state = ClientState::Crashed;
            self.fail_pending(
                session,
                || ZkError::ConnectionLoss {
                    reason: format!("{name}'s process crashed"),
                },
                None,
            );
            let peer = self.peer_mut(session);
            peer.client.end_stream();
            // A dead process neither reconnects nor notices anything.
            let timers = [peer.link.heal_key.take(), peer.link.notice_key.take()];
            for key in timers.into_iter().flatten() {
                self.schedule.cancel(key);
            }
        }
    }

    /// `SimZk::expire`: the server expires the session now. A connected
    /// client then sees its connection closed (`Disconnected`) and learns
    /// `Expired` on reconnecting, as a ZooKeeper client does; a disconnected
    /// one learns it when its link heals.
    pub(crate) fn expire_by_control(&mut self, session: SessionId) {
        if !self.known(session, "expire") {
            return;
        }
        let name = self.name(session);
        self.record(format!("control expire {name}"));
        if !self.expire_on_server(session, "expired by control") {
            self.record(format!("control expire {name}: the session already ended"));
            return;
        }
        let link = &mut self.peer_mut(session).link;
        if link.up {
            // Requests still travelling meet a closed connection.
            if let Some(key) = link.outbound_key.take() {
                self.schedule.cancel(key);
            }
            let lost: Vec<_> = self
                .peer_mut(session)
                .link
                .outbound
                .drain(..)
                .map(|out| out.summary)
                .collect();
            for summary in lost {
                self.record(format!(
                    "lost {name} {summary} (the server ended the session)"
                ));
            }
            self.send_to_client(session, Delivery::ConnectionDropped);
            self.send_to_client(session, Delivery::Expired);
        } else if let Some(key) = link.timeout_key.take() {
            self.schedule.cancel(key);
        }
    }

    /// The link stops carrying the session's requests: a seeded prefix of
    /// those in flight reach the server now (and are applied), and the rest
    /// stay in `outbound` for the caller to drop. Shared by cuts and silent
    /// partitions, which differ only in what the client is told.
    pub(crate) fn arrive_seeded_prefix_in_flight(&mut self, session: SessionId) {
        let in_flight = self.peers[&session].link.outbound.len();
        let reached = if in_flight == 0 {
            0
        } else {
            self.rng.random_range(0..=in_flight)
        };
        if let Some(key) = self.peer_mut(session).link.outbound_key.take() {
            self.schedule.cancel(key);
        }
        for _ in 0..reached {
            let arrived = self
                .peer_mut(session)
                .link
                .outbound
                .pop_front()
                .expect("counted in flight");
            self.peer_mut(session).link.last_arrival_us = self.now_us;
            self.apply_request(
                session,
                arrived.request_id,
                arrived.request,
                &arrived.summary,
            );
        }
    }

    /// The link fails now. A seeded prefix of the requests in flight had
    /// reached the server just before (applied, their replies lost); the
    /// rest never arrive. Everything travelling to the client is lost. The
    /// server forgets the session's watches and starts its expiry clock; the
    /// client fails every pending request with `ConnectionLoss`.
    pub(crate) fn link_down(
        &mut self,
        session: SessionId,
        heal_after_us: Option<u64>,
        cause: DownCause,
    ) {
        let name = self.name(session);
        self.arrive_seeded_prefix_in_flight(session);
        self.clear_link(session);
        let down_since_us = self.now_us;
        let link = &mut self.peer_mut(session).link;
        link.up = false;
        link.down_since_us = Some(down_since_us);
        self.server.detach(session);

        let reason = match cause {
            DownCause::Cut => format!("{name}'s link to the server went down"),
            DownCause::ReplyTooLarge => {
                format!("{name} dropped its connection after an oversized reply")
            }
            DownCause::Crash => format!("{name}'s process crashed"),
        };
        let client = &mut self.peer_mut(session).client;
        // A handshake cut short: `connect` fails, no handle ever exists, and
        // the server (if the session reached it) expires it in due time.
        let unborn = client.connecting();
        client.fail_connect(ZkError::ConnectionLoss {
            reason: format!("{reason} during the handshake"),
        });
        let (state, announced) = match (cause, client.state) {
            _ if unborn || cause == DownCause::Crash => (ClientState::Crashed, None),
            (_, ClientState::Closing) => (ClientState::Closed, Some(SessionState::Closed)),
            _ => (ClientState::Down, Some(SessionState::Disconnected)),
        };
        client.state = state;
        self.fail_pending(
            session,
            || ZkError::ConnectionLoss {
                reason: reason.clone(),
            },
            announced,
        );
        if state != ClientState::Down {
            self.peer_mut(session).client.end_stream();
        }
        if self.server.is_alive(session) {
            let expire_at_us = self.now_us.saturating_add(self.session_timeout_us);
            self.schedule_timer(session, expire_at_us, Item::SessionTimeout(session));
        }
        if let Some(after_us) = heal_after_us.filter(|_| !unborn) {
            self.schedule_timer(
                session,
                self.now_us.saturating_add(after_us),
                Item::Heal(session),
            );
        }
    }

    /// The link comes back and the client reconnects. If the server expired
    /// the session meanwhile (the outage reached the session timeout), the
    /// client learns `Expired`; otherwise it sees `Connected`, and its
    /// watches are re-registered relative to the last zxid it saw.
    pub(crate) fn heal(&mut self, session: SessionId) {
        let name = self.name(session);
        if let Some(state) = self.finished(session) {
            self.record(format!(
                "heal {name}: the handle is {state:?}, no reconnect"
            ));
            return;
        }
        let timeout_us = self.session_timeout_us;
        let now_us = self.now_us;
        let peer = self.peer_mut(session);
        assert!(!peer.link.up, "heal of a link that is up");
        peer.link.up = true;
        // The reconnection's handshake: the server hears the client.
        peer.link.last_arrival_us = now_us;
        let down_since_us = peer.link.down_since_us.take().expect("down since");
        peer.client.state = ClientState::Up;
        let timeout_key = peer.link.timeout_key.take();
        if let Some(key) = timeout_key {
            self.schedule.cancel(key);
        }
        if self.server.is_alive(session) && now_us - down_since_us >= timeout_us {
            // The expiry is due at this very instant: it wins.
            self.expire_on_server(session, "session timeout");
        }
        if !self.server.is_alive(session) {
            // Requests queued meanwhile are never sent: they fail with
            // `SessionExpired` when the client learns it.
            let queued = std::mem::take(&mut self.peer_mut(session).client.unsent).len();
            self.record(format!(
                "heal {name}: the session expired on the server, {queued} queued requests not sent"
            ));
            self.send_to_client(session, Delivery::Expired);
            return;
        }
        let client = &self.peers[&session].client;
        let held = client.watches.clone();
        let last_zxid_seen = client.last_zxid_seen;
        let as_of_zxid = self.reconnecting_server_zxid(session, last_zxid_seen);
        let fired = self
            .server
            .reattach(session, &held, last_zxid_seen, as_of_zxid);
        let unsent = std::mem::take(&mut self.peer_mut(session).client.unsent);
        let behind = self.server.tree().zxid() - as_of_zxid;
        let through = if behind > 0 {
            format!(" through a server as of 0x{as_of_zxid:x} ({behind} behind),")
        } else {
            String::new()
        };
        let owed = if fired.owed.is_empty() {
            String::new()
        } else {
            format!(" ({} more owed)", fired.owed.len())
        };
        self.record(format!(
            "heal {name}: reconnected,{through} {} watches re-sent relative to zxid 0x{last_zxid_seen:x}, {} fired{owed}, {} queued requests sent",
            held.len(),
            fired.fired_now.len(),
            unsent.len()
        ));
        // What the session heard through its old connection (events, and
        // replies that were lost) tells the new server nothing.
        self.peer_mut(session).view_zxid = as_of_zxid;
        self.send_to_client_showing(session, Delivery::Connected, as_of_zxid);
        for event in fired.fired_now {
            self.send_to_client_showing(session, Delivery::Event(event), as_of_zxid);
        }
        for (event, at) in fired.owed {
            self.owe_event(session, event, at);
        }
        // What the application asked for while disconnected goes out after
        // the handshake, in the order it was asked.
        for unsent in unsent {
            self.send_to_server(session, unsent.request_id, unsent.request, unsent.summary);
        }
    }

    /// The zxid the server a session reconnects through has applied: the
    /// newest, unless reads lag. Then it may be any server ZooKeeper lets
    /// the client connect to: one that has applied at least what the client
    /// last heard of in a reply (a server behind that refuses it), as far
    /// back as the history reaches. Hence the `sync` before reading what a
    /// write whose reply was lost did. A stalled session (`SimZk::stall`)
    /// reconnects through the oldest such server.
    fn reconnecting_server_zxid(&mut self, session: SessionId, last_zxid_seen: i64) -> i64 {
        let newest = self.server.tree().zxid();
        let stalled = self.is_stalled(session);
        if self.follower_lag_txns == 0 && !stalled {
            return newest;
        }
        let oldest = last_zxid_seen.max(self.oldest_lagging_zxid(stalled));
        if stalled {
            oldest
        } else {
            self.rng.random_range(oldest..=newest)
        }
    }

    /// The session timeout passed with the link down: the server expires the
    /// session. The client hears nothing until its link heals.
    pub(crate) fn session_timeout(&mut self, session: SessionId) {
        assert!(
            !self.peers[&session].link.up,
            "timeout of a connected session"
        );
        let name = self.name(session);
        if !self.expire_on_server(session, "session timeout") {
            self.record(format!("timeout {name}: the session already ended"));
        }
    }

    /// Drops everything in flight on the link, both ways, tracing the loss.
    pub(crate) fn clear_link(&mut self, session: SessionId) {
        let name = self.name(session);
        let peer = self.peer_mut(session);
        let keys = [
            peer.link.outbound_key.take(),
            peer.link.inbound_key.take(),
            peer.link.catch_up_key.take(),
        ];
        let mut lost: Vec<String> = peer
            .link
            .outbound
            .drain(..)
            .map(|out| format!("lost {name} {} (never reached the server)", out.summary))
            .collect();
        for inbound in std::mem::take(&mut peer.link.inbound) {
            let what = match inbound.delivery {
                Delivery::Reply { request_id, .. } => {
                    let summary = peer
                        .client
                        .pending
                        .get(&request_id)
                        .map_or("request", |op| &*op.summary);
                    format!("reply {summary}")
                }
                Delivery::Event(event) => format!("event {:?} {}", event.kind, event.path),
                Delivery::Connected => "session Connected".to_owned(),
                Delivery::ConnectionDropped => "connection closed by the server".to_owned(),
                Delivery::Expired => "session Expired".to_owned(),
            };
            lost.push(format!("lost {name} {what} (never reached the client)"));
        }
        for (event, _) in std::mem::take(&mut peer.link.owed) {
            lost.push(format!(
                "lost {name} event {:?} {} (owed by a lagging server, never sent)",
                event.kind, event.path
            ));
        }
        for key in keys.into_iter().flatten() {
            self.schedule.cancel(key);
        }
        for line in lost {
            self.record(line);
        }
    }

    /// The session is over (closed or expired, and the client knows): the
    /// link goes down for good.
    pub(crate) fn shut_link(&mut self, session: SessionId) {
        assert!(
            !self.server.is_alive(session),
            "link shut on a live session"
        );
        self.clear_link(session);
        let link = &mut self.peer_mut(session).link;
        link.up = false;
        let timers = [
            link.heal_key.take(),
            link.timeout_key.take(),
            link.notice_key.take(),
        ];
        for key in timers.into_iter().flatten() {
            self.schedule.cancel(key);
        }
    }
}
