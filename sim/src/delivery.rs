//! A message reaches the client: the client library's reaction, which is
//! what the application observes (a future completes, an event appears on
//! the stream).

use zkdist_coord::validate::{check_children_reply, children_reply_bytes};
use zkdist_coord::{Reply, SessionId, SessionState, WatchKind, ZkError, ZkResult};

use crate::arrival::push_words;
use crate::client::ClientState;
use crate::engine::Engine;
use crate::faults::DownCause;
use crate::link::Delivery;
use crate::request::{Response, write_outcome};

/// A watch event's kind as the trace shows it: its `Debug` name, without
/// the formatting machinery.
fn kind_name(kind: WatchKind) -> &'static str {
    match kind {
        WatchKind::NodeCreated => "NodeCreated",
        WatchKind::NodeDeleted => "NodeDeleted",
        WatchKind::NodeDataChanged => "NodeDataChanged",
        WatchKind::NodeChildrenChanged => "NodeChildrenChanged",
    }
}

impl Engine {
    /// The head of the session's inbound queue reaches the client.
    pub(crate) fn deliver(&mut self, session: SessionId) {
        let inbound = self
            .peer_mut(session)
            .link
            .inbound
            .pop_front()
            .expect("a delivery has a message");
        let name = self.name(session);
        match inbound.delivery {
            Delivery::Reply {
                request_id,
                result,
                zxid,
            } => self.deliver_reply(session, request_id, result, zxid),
            Delivery::Event(event) => {
                let client = &mut self.peer_mut(session).client;
                let claimed = client.claim_watch_event(&event);
                let dropped = if claimed {
                    ""
                } else {
                    " (no watch held: dropped)"
                };
                // `deliver {name} event {kind:?} {path}{dropped}`.
                self.record_with(|line| {
                    push_words(
                        line,
                        &[
                            "deliver ",
                            &name,
                            " event ",
                            kind_name(event.kind),
                            " ",
                            &event.path,
                            dropped,
                        ],
                    );
                });
                if claimed {
                    self.peer_mut(session).client.emit_watch_event(event);
                }
            }
            Delivery::Connected => {
                self.record(format_args!("deliver {name} session Connected"));
                self.peer_mut(session).client.connected(session);
            }
            Delivery::ConnectionDropped => {
                self.record(format!("deliver {name} connection closed by the server"));
                self.fail_pending(
                    session,
                    || ZkError::ConnectionLoss {
                        reason: "the server closed the connection".to_owned(),
                    },
                    Some(SessionState::Disconnected),
                );
            }
            Delivery::Expired => {
                self.record(format!("deliver {name} session Expired"));
                let client = &mut self.peer_mut(session).client;
                client.fail_connect(ZkError::SessionExpired);
                client.state = ClientState::Expired;
                self.fail_pending(
                    session,
                    || ZkError::SessionExpired,
                    Some(SessionState::Expired),
                );
                self.peer_mut(session).client.end_stream();
                self.shut_link(session);
            }
        }
        self.schedule_inbound_head(session);
    }

    fn deliver_reply(
        &mut self,
        session: SessionId,
        request_id: u64,
        result: ZkResult<Response>,
        zxid: i64,
    ) {
        let name = self.name(session);
        let max_reply_bytes = self.max_reply_bytes;
        let client = &mut self.peer_mut(session).client;
        let pending = client
            .pending
            .remove(&request_id)
            .expect("a reply answers a pending request");
        if let (Some(path), Ok(Response::Reply(Reply::Children(names, _)))) =
            (&pending.listed_path, &result)
            && let Err(error) = check_children_reply(path, names, max_reply_bytes)
        {
            // The client library refuses a packet over its buffer size and
            // drops the connection; the read's watch is never recorded.
            self.record(format!(
                "deliver {name} reply {} -> refused: {}B over the {}B limit, connection dropped",
                pending.summary,
                children_reply_bytes(names),
                max_reply_bytes,
            ));
            let _ = pending.reply.send(Err(error));
            let reconnect_after_us = self.latency.sample_us(&mut self.rng);
            self.link_down(session, Some(reconnect_after_us), DownCause::ReplyTooLarge);
            return;
        }
        assert!(
            zxid >= client.last_zxid_seen,
            "replies reach {name} in server order"
        );
        client.last_zxid_seen = zxid;
        if let (Some(read), Ok(response)) = (&pending.watching, &result) {
            client.record_watch(read, response);
        }
        let closed = matches!(result, Ok(Response::Closed));
        if closed {
            client.state = ClientState::Closed;
        }
        // `deliver {name} reply {summary} -> {outcome}`.
        self.record_with(|line| {
            push_words(
                line,
                &["deliver ", &name, " reply ", &pending.summary, " -> "],
            );
            write_outcome(line, &result).expect("writing to a String cannot fail");
        });
        let _ = pending.reply.send(result);
        if closed {
            let client = &mut self.peer_mut(session).client;
            client.announce(SessionState::Closed);
            client.end_stream();
            self.shut_link(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_the_debug_names() {
        for kind in [
            WatchKind::NodeCreated,
            WatchKind::NodeDeleted,
            WatchKind::NodeDataChanged,
            WatchKind::NodeChildrenChanged,
        ] {
            assert_eq!(kind_name(kind), format!("{kind:?}"));
        }
    }
}
