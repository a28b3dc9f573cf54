//! Silent partitions: a link that stops carrying packets without either
//! end being told, as when a switch or a firewall drops them. Unlike a cut
//! (a reset connection, which the client hears of at once), nothing
//! reaches the client to say that the link died: it learns it from its own
//! link watch, when it has heard nothing for a while. Meanwhile the server,
//! which hears nothing either, counts the session timeout from the last
//! message it received. So the server may expire the session well before
//! `Disconnected + timeout`, and a holder's grace counted from the
//! `Disconnected` event is only as safe as the client's watch is quick.
//!
//! The client's watch is zookeeper-client's (see `zkdist_coord`'s
//! `disconnection.rs` for the grace derived from it). It ticks every
//! twentieth of the session timeout, pings after 3 ticks without sending,
//! and gives up on the connection once it has heard nothing for 8 ticks,
//! which it checks on a tick. So before a partition each side last heard
//! the other at most a ping interval (4 ticks) ago, and the client notices
//! 8 to 9 ticks after it last heard the server.

use rand::Rng;
use zkdist_coord::{SessionId, SessionState, ZkError};

use crate::client::ClientState;
use crate::engine::Engine;
use crate::schedule::Item;

/// The client's link watch ticks this many times per session timeout.
const TICKS_PER_SESSION_TIMEOUT: u64 = 20;
/// It gives up on a connection that has been silent for this many ticks.
const SILENT_TICKS_BEFORE_LOSS: u64 = 8;
/// The longest either side goes without hearing the other on a healthy
/// link: 3 idle ticks until the client pings, and the tick that sends it.
const MAX_HEALTHY_SILENCE_TICKS: u64 = 4;

/// When, after a partition that begins at `now_us`, each side acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionTimes {
    /// The server last heard the client.
    pub server_heard_us: u64,
    /// The client last heard the server.
    pub client_heard_us: u64,
    /// The client notices the silence and reports `Disconnected`.
    pub noticed_us: u64,
    /// The server expires the session (unless the client reconnects
    /// first, which it cannot do before the partition heals).
    pub expires_us: u64,
}

impl PartitionTimes {
    /// Draws the times of a partition beginning at `now_us`. Neither side
    /// last heard the other before what the simulation last carried
    /// between them (`last_arrival_us`, `last_delivery_us`): the draws
    /// stand for the pings the simulation does not send.
    pub(crate) fn draw(
        rng: &mut impl Rng,
        now_us: u64,
        session_timeout_us: u64,
        last_arrival_us: u64,
        last_delivery_us: u64,
    ) -> PartitionTimes {
        let tick_us = (session_timeout_us / TICKS_PER_SESSION_TIMEOUT).max(1);
        let max_silence_us = MAX_HEALTHY_SILENCE_TICKS * tick_us;
        // Half the partitions take the worst case for a holder's grace:
        // the server last heard the client a whole ping interval ago, the
        // client heard the server (a watch event, say) just before, and
        // its watch checks a tick late. The grace must survive exactly
        // that, and uniform draws seldom meet all three at once.
        let (server_silence_us, client_silence_us, phase_us) = if rng.random_bool(0.5) {
            (max_silence_us, 0, tick_us - 1)
        } else {
            (
                rng.random_range(0..=max_silence_us),
                rng.random_range(0..=max_silence_us),
                rng.random_range(0..tick_us),
            )
        };
        let server_heard_us = now_us
            .saturating_sub(server_silence_us)
            .max(last_arrival_us);
        let client_heard_us = now_us
            .saturating_sub(client_silence_us)
            .max(last_delivery_us);
        // The watch checks on its ticks, whose phase is arbitrary.
        let noticed_us =
            (client_heard_us + SILENT_TICKS_BEFORE_LOSS * tick_us + phase_us).max(now_us);
        let expires_us = server_heard_us
            .saturating_add(session_timeout_us)
            .max(now_us);
        let times = PartitionTimes {
            server_heard_us,
            client_heard_us,
            noticed_us,
            expires_us,
        };
        assert!(server_heard_us <= now_us && client_heard_us <= now_us);
        assert!(
            times.noticed_us < times.expires_us,
            "the client notices a partition before the server expires its session: {times:?}"
        );
        times
    }
}

impl Engine {
    /// `SimZk::partition`: the link goes silent for at least `duration_us`.
    /// On the server's side it is down at once: a seeded prefix of the
    /// requests in flight had arrived, the rest and everything travelling
    /// to the client are lost, and the session's expiry counts from when
    /// the server last heard it. On the client's side nothing happens until
    /// it notices (`Item::Notice`); requests sent meanwhile are lost. The
    /// link heals at the later of `duration_us` from now and just after the
    /// client noticed: a partition that heals sooner only delays what is in
    /// flight (TCP resends it), which latency already covers.
    ///
    /// A session that is not plainly connected (connecting, closing, or
    /// already cut off) takes it as a cut.
    pub(crate) fn partition(&mut self, session: SessionId, duration_us: u64) {
        if !self.known(session, "partition") {
            return;
        }
        let name = self.name(session);
        let peer = &self.peers[&session];
        if peer.client.state != ClientState::Up || peer.client.connecting() || !peer.link.up {
            self.record(format!(
                "control partition {name}: taken as a cut (not plainly connected)"
            ));
            self.cut(session, duration_us);
            return;
        }
        self.arrive_seeded_prefix_in_flight(session);
        // The requests the server applied above may have ended the session
        // (a close): then the link is already shut.
        if !self.peers[&session].link.up {
            self.record(format!(
                "control partition {name}: the session ended as it began"
            ));
            return;
        }
        let link = &self.peers[&session].link;
        let times = PartitionTimes::draw(
            &mut self.rng,
            self.now_us,
            self.session_timeout_us,
            link.last_arrival_us,
            link.last_delivery_us,
        );
        let heal_at_us = self
            .now_us
            .saturating_add(duration_us)
            .max(times.noticed_us + 1);
        let now_us = self.now_us;
        self.record(format!(
            "control partition {name} for {}.{:03}ms: the server last heard it {}us ago, it last heard the server {}us ago; it notices at +{}us, the server would expire it at +{}us, heals at +{}us",
            duration_us / 1000,
            duration_us % 1000,
            now_us - times.server_heard_us,
            now_us - times.client_heard_us,
            times.noticed_us - now_us,
            times.expires_us - now_us,
            heal_at_us - now_us,
        ));
        self.clear_link(session);
        let link = &mut self.peer_mut(session).link;
        link.up = false;
        link.down_since_us = Some(times.server_heard_us);
        self.server.detach(session);
        self.peer_mut(session).client.state = ClientState::Partitioned;
        self.schedule_timer(session, times.expires_us, Item::SessionTimeout(session));
        self.schedule_timer(session, times.noticed_us, Item::Notice(session));
        self.schedule_timer(session, heal_at_us, Item::Heal(session));
    }

    /// The client has heard nothing for its loss timeout: it gives up on
    /// the connection, as after a cut, and reconnects once the link heals.
    pub(crate) fn notice(&mut self, session: SessionId) {
        let name = self.name(session);
        let state = self.peers[&session].client.state;
        if !matches!(state, ClientState::Partitioned | ClientState::Closing) {
            self.record(format!(
                "notice {name}: nothing to notice, the handle is {state:?}"
            ));
            return;
        }
        let silent_us = self.now_us
            - self.peers[&session]
                .link
                .down_since_us
                .expect("a partitioned link is down");
        self.record(format!(
            "notice {name}: heard nothing for a while, the connection is given up"
        ));
        let reason = format!(
            "{name} heard nothing from the server and gave up on the connection (a silent partition, {silent_us}us after the server last heard it)"
        );
        // A close lost in the partition ends the handle, as a close cut
        // short does; the server keeps the session until it expires.
        let (next, announced) = if state == ClientState::Closing {
            (ClientState::Closed, SessionState::Closed)
        } else {
            (ClientState::Down, SessionState::Disconnected)
        };
        self.peer_mut(session).client.state = next;
        self.fail_pending(
            session,
            || ZkError::ConnectionLoss {
                reason: reason.clone(),
            },
            Some(announced),
        );
        if next == ClientState::Closed {
            self.peer_mut(session).client.end_stream();
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// Over many draws, every partition is noticed 8 to 9 ticks after the
    /// client last heard the server, each side last heard the other at most
    /// 4 ticks before, and the worst cases are reached: what the grace of
    /// `zkdist_coord::disconnected_grace_ms` is derived from.
    #[test]
    fn draws_stay_within_the_client_watch_and_reach_its_worst_case() {
        let timeout_us = 10_000_000;
        let tick_us = timeout_us / 20;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let now_us = 100_000_000;
        let mut least_margin_us = u64::MAX;
        for _ in 0..10_000 {
            let times = PartitionTimes::draw(&mut rng, now_us, timeout_us, 0, 0);
            assert!(now_us - times.server_heard_us <= 4 * tick_us);
            assert!(now_us - times.client_heard_us <= 4 * tick_us);
            let noticed_after_us = times.noticed_us - times.client_heard_us;
            assert!((8 * tick_us..9 * tick_us).contains(&noticed_after_us));
            assert_eq!(times.expires_us, times.server_heard_us + timeout_us);
            least_margin_us = least_margin_us.min(times.expires_us - times.noticed_us);
        }
        // The earliest expiry after the notice: 20 - 4 - 9 ticks, 7 ticks
        // (0.35 of the timeout), reached.
        assert_eq!(least_margin_us, 7 * tick_us + 1);
    }

    /// Neither side last heard the other before the last message the
    /// simulation carried between them.
    #[test]
    fn draws_respect_the_last_messages_carried() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let now_us = 50_000_000;
        for _ in 0..1_000 {
            let times =
                PartitionTimes::draw(&mut rng, now_us, 10_000_000, now_us - 10, now_us - 20);
            assert!(times.server_heard_us >= now_us - 10);
            assert!(times.client_heard_us >= now_us - 20);
        }
    }
}
