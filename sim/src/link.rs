//! One session's link to the server: two FIFO queues of messages in
//! flight, like the two directions of its TCP connection. A message may not
//! overtake the one before it, so each queue's due times never decrease;
//! only the queue's head is on the agenda at any time.

use std::collections::VecDeque;
use std::sync::Arc;

use zkdist_coord::{WatchEvent, ZkResult};

use crate::history::ChangeAt;
use crate::request::{Request, Response};
use crate::schedule::Key;

/// A request on its way to the server.
#[derive(Debug)]
pub(crate) struct Outbound {
    pub due_us: u64,
    pub request_id: u64,
    pub request: Request,
    /// The request as the trace shows it (see `PendingOp::summary`).
    pub summary: Arc<str>,
}

/// A message on its way to the client.
#[derive(Debug)]
pub(crate) enum Delivery {
    Reply {
        request_id: u64,
        result: ZkResult<Response>,
        /// The server's last zxid when it answered (the reply header's zxid).
        zxid: i64,
    },
    Event(WatchEvent),
    /// The handshake (first connect or reconnect) completed.
    Connected,
    /// The server closed the connection (it expired the session).
    ConnectionDropped,
    /// The reconnect attempt learnt that the session is expired.
    Expired,
}

#[derive(Debug)]
pub(crate) struct Inbound {
    pub due_us: u64,
    pub delivery: Delivery,
}

#[derive(Debug, Default)]
pub(crate) struct Link {
    /// False while cut (or for good after a crash, a close or an expiry).
    pub up: bool,
    /// Inbound traffic is held back by the test until released.
    pub held: bool,
    /// When the link last went down, to judge the outage at heal time.
    pub down_since_us: Option<u64>,
    pub outbound: VecDeque<Outbound>,
    pub inbound: VecDeque<Inbound>,
    /// The agenda entries for the queue heads and the link's timers.
    pub outbound_key: Option<Key>,
    pub inbound_key: Option<Key>,
    pub heal_key: Option<Key>,
    pub timeout_key: Option<Key>,
    /// The agenda entry for the client noticing a silent partition.
    pub notice_key: Option<Key>,
    /// When a request of the session last reached the server, and when a
    /// message last reached the client: a silent partition's draws of when
    /// each side last heard the other go back no further.
    pub last_arrival_us: u64,
    pub last_delivery_us: u64,
    /// Watch events the server this session talks to owes it, in the order
    /// of the changes they report (each with where its change sits): that
    /// server lags, and sends each once it has applied that change (see
    /// `SimConfig::follower_lag_txns`). Empty unless reads lag.
    pub owed: VecDeque<(WatchEvent, ChangeAt)>,
    /// The agenda entry for the lagging server catching up (sending every
    /// owed event).
    pub catch_up_key: Option<Key>,
}

impl Link {
    pub(crate) fn new() -> Link {
        Link {
            up: true,
            ..Link::default()
        }
    }

    /// Queues a request that would arrive at `earliest_due_us`, or right
    /// after the one before it if that one arrives later.
    pub(crate) fn push_outbound(
        &mut self,
        earliest_due_us: u64,
        request_id: u64,
        request: Request,
        summary: Arc<str>,
    ) {
        let due_us = self
            .outbound
            .back()
            .map_or(earliest_due_us, |last| earliest_due_us.max(last.due_us));
        self.outbound.push_back(Outbound {
            due_us,
            request_id,
            request,
            summary,
        });
    }

    /// Queues a message for the client, in the server's order.
    pub(crate) fn push_inbound(&mut self, earliest_due_us: u64, delivery: Delivery) {
        assert!(self.up, "message queued on a link that is down");
        let due_us = self
            .inbound
            .back()
            .map_or(earliest_due_us, |last| earliest_due_us.max(last.due_us));
        self.inbound.push_back(Inbound { due_us, delivery });
    }

    pub(crate) fn check_invariants(&self) {
        let ordered = |dues: Vec<u64>| dues.windows(2).all(|w| w[0] <= w[1]);
        assert!(ordered(self.outbound.iter().map(|o| o.due_us).collect()));
        assert!(ordered(self.inbound.iter().map(|i| i.due_us).collect()));
        assert_eq!(
            self.outbound_key.is_some(),
            !self.outbound.is_empty(),
            "outbound head scheduled iff queued"
        );
        assert_eq!(
            self.inbound_key.is_some(),
            !self.inbound.is_empty() && !self.held,
            "inbound head scheduled iff queued and not held"
        );
        if !self.up {
            assert!(self.outbound.is_empty() && self.inbound.is_empty());
            assert!(self.owed.is_empty(), "events owed over a link that is down");
        }
        assert_eq!(
            self.catch_up_key.is_some(),
            !self.owed.is_empty(),
            "a catch-up scheduled iff events are owed"
        );
        assert!(
            self.owed
                .iter()
                .zip(self.owed.iter().skip(1))
                .all(|(a, b)| a.1 < b.1),
            "owed events in the order of their changes, each once"
        );
    }
}
