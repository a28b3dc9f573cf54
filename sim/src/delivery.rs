//! A message reaches the client: the client library's reaction, which is
//! what the application observes (a future completes, an event appears on
//! the stream).

use zkdist_coord::{MAX_REPLY_BYTES, SessionId, SessionState, ZkError, ZkResult};

use crate::client::ClientState;
use crate::engine::Engine;
use crate::faults::DownCause;
use crate::link::Delivery;
use crate::request::{Response, outcome, reply_too_large};

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
                let line = format!("deliver {name} event {:?} {}", event.kind, event.path);
                let claimed = self.peer_mut(session).client.deliver_watch_event(event);
                if claimed {
                    self.record(line);
                } else {
                    self.record(format!("{line} (no watch held: dropped)"));
                }
            }
            Delivery::Connected => {
                self.record(format!("deliver {name} session Connected"));
                self.peer_mut(session).client.connected(session);
            }
            Delivery::ConnectionDropped => {
                self.record(format!("deliver {name} connection closed by the server"));
                let client = &mut self.peer_mut(session).client;
                let failed = client.fail_pending(|| ZkError::ConnectionLoss {
                    reason: "the server closed the connection".to_owned(),
                });
                client.announce(SessionState::Disconnected);
                for summary in failed {
                    self.record(format!("fail {name} {summary} -> ConnectionLoss"));
                }
            }
            Delivery::Expired => {
                self.record(format!("deliver {name} session Expired"));
                let client = &mut self.peer_mut(session).client;
                let failed = client.fail_pending(|| ZkError::SessionExpired);
                client.fail_connect(ZkError::SessionExpired);
                client.state = ClientState::Expired;
                client.announce(SessionState::Expired);
                client.end_stream();
                for summary in failed {
                    self.record(format!("fail {name} {summary} -> SessionExpired"));
                }
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
        let client = &mut self.peer_mut(session).client;
        let pending = client
            .pending
            .remove(&request_id)
            .expect("a reply answers a pending request");
        if let Ok(response) = &result
            && let Some(size_bytes) = reply_too_large(response)
        {
            // The client library refuses a packet over its buffer size and
            // drops the connection; the read's watch is never recorded.
            self.record(format!(
                "deliver {name} reply {} -> refused: {size_bytes}B over the {MAX_REPLY_BYTES}B limit, connection dropped",
                pending.summary
            ));
            let _ = pending.reply.send(Err(ZkError::ConnectionLoss {
                reason: format!(
                    "reply to {} is {size_bytes} bytes, over the client's {MAX_REPLY_BYTES}-byte limit",
                    pending.summary
                ),
            }));
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
        self.record(format!(
            "deliver {name} reply {} -> {}",
            pending.summary,
            outcome(&result)
        ));
        let _ = pending.reply.send(result);
        if closed {
            let client = &mut self.peer_mut(session).client;
            client.announce(SessionState::Closed);
            client.end_stream();
            self.shut_link(session);
        }
    }
}
