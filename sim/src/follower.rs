//! Reads answered by a lagging server (see [`SimConfig::follower_lag_txns`]):
//! ZooKeeper answers a read from the server the session is connected to,
//! which may not have applied the newest transactions yet.
//!
//! [`SimConfig::follower_lag_txns`]: crate::SimConfig::follower_lag_txns

use rand::Rng;
use rand::seq::SliceRandom;
use zkdist_coord::{Reply, Request as Call, SessionId};

use crate::arrival::push_words;
use crate::digits::{decimal, hex};
use crate::engine::Engine;
use crate::link::Delivery;
use crate::request::{Response, write_outcome};
use crate::server::{LaggingRead, is_lagging_read};

impl Engine {
    /// The zxid the seed answers `session`'s read as of, when that is older
    /// than the newest: between the newest state the session has heard of
    /// (a session never sees an older state after a newer one) and the
    /// newest applied, at most the configured lag behind. `None` when the
    /// read is answered from the newest state.
    pub(crate) fn lagging_read_zxid(&mut self, session: SessionId, call: &Call) -> Option<i64> {
        if self.follower_lag_txns == 0 || !is_lagging_read(call) {
            return None;
        }
        let newest = self.server.tree().zxid();
        let oldest = self.peers[&session]
            .view_zxid
            .max(self.server.oldest_readable_zxid());
        assert!(
            oldest <= newest,
            "session {session} has heard of zxid 0x{oldest:x}, past the newest 0x{newest:x}"
        );
        if oldest == newest {
            return None;
        }
        let as_of_zxid = self.rng.random_range(oldest..=newest);
        (as_of_zxid < newest).then_some(as_of_zxid)
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
