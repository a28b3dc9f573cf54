//! A request reaches the server: it is applied atomically at that instant,
//! and its watch events and reply start back over the links.

use rand::seq::SliceRandom;
use zkdist_coord::{Reply, SessionId};

use crate::applied::{AppliedOp, TxnKind, changes_of};
use crate::digits::hex;
use crate::engine::Engine;
use crate::link::Delivery;
use crate::request::{Request, Response, write_outcome};
use crate::server::{Applied, Ending};
use crate::tree::Trigger;

/// Appends each piece of a trace line in turn.
pub(crate) fn push_words(line: &mut String, words: &[&str]) {
    for word in words {
        line.push_str(word);
    }
}

/// `deleted [/a, /b]` for the ephemerals a session took with it.
pub(crate) fn deleted_list(triggers: &[Trigger]) -> String {
    let paths: Vec<&str> = triggers
        .iter()
        .filter_map(|trigger| match trigger {
            Trigger::Deleted(path) => Some(path.as_str()),
            _ => None,
        })
        .collect();
    format!("deleted [{}]", paths.join(", "))
}

impl Engine {
    /// The head of the session's outbound queue reaches the server.
    pub(crate) fn arrive(&mut self, session: SessionId) {
        let arrived = self
            .peer_mut(session)
            .link
            .outbound
            .pop_front()
            .expect("an arrival has a request");
        self.schedule_outbound_head(session);
        self.apply_request(
            session,
            arrived.request_id,
            arrived.request,
            &arrived.summary,
        );
    }

    /// Applies one request on the server and sends back what it caused:
    /// first the watch events (the server fires them while applying), then
    /// the reply, so that a session hears of a change before any reply that
    /// could show it.
    pub(crate) fn apply_request(
        &mut self,
        session: SessionId,
        request_id: u64,
        request: Request,
        summary: &str,
    ) {
        let name = self.name(session);
        let creates_session = matches!(request, Request::CreateSession);
        if !creates_session && !self.server.is_alive(session) {
            // The server closed this session's connection when it ended the
            // session; the client fails the request when it learns so.
            self.record(format_args!(
                "lost {name} {summary} (the server ended the session)"
            ));
            return;
        }
        if let Request::Call(call) = &request
            && let Some(as_of_zxid) = self.lagging_read_zxid(session, call)
        {
            self.answer_lagging_read(session, request_id, call, summary, as_of_zxid);
            return;
        }
        let kind = request.txn_kind();
        let mut applied: Applied = if let Request::Close = request {
            let order = self.ephemeral_deletion_order(session);
            self.server
                .end_session(session, Ending::Close, &order)
                .expect("a live session closes")
        } else {
            self.server.apply(session, request)
        };
        if let Ok(Response::Reply(Reply::Children(names, _))) = &mut applied.result {
            // ZooKeeper lists children in hash order; a seeded shuffle
            // catches code that relies on any order.
            names.shuffle(&mut self.rng);
        }
        // Only a transaction's line goes on to the observers.
        let line = match applied.zxid {
            Some(zxid) => {
                let closed = matches!(
                    (&kind, &applied.result),
                    (Some(TxnKind::CloseSession), Ok(_))
                );
                // `zxid=0x{zxid:x} {name} {summary} -> {outcome}`.
                self.record_with(|line| {
                    let zxid = hex(zxid);
                    push_words(
                        line,
                        &["zxid=0x", zxid.as_str(), " ", &name, " ", summary, " -> "],
                    );
                    if closed {
                        line.push_str(&deleted_list(&applied.triggers));
                    } else {
                        write_outcome(line, &applied.result)
                            .expect("writing to a String cannot fail");
                    }
                });
                Some(self.trace.len() - 1)
            }
            None => {
                // `read {name} {summary} -> {outcome}`.
                self.record_with(|line| {
                    push_words(line, &["read ", &name, " ", summary, " -> "]);
                    write_outcome(line, &applied.result).expect("writing to a String cannot fail");
                });
                None
            }
        };
        match applied.zxid {
            Some(zxid) => self.send_txn_events(zxid, applied.events),
            None => assert!(applied.events.is_empty(), "a read fires no watch"),
        }
        // The observers see a transaction's error; the reply takes the
        // result itself.
        let error = applied
            .result
            .as_ref()
            .err()
            .filter(|_| kind.is_some() && !self.hooks.is_empty())
            .cloned();
        if creates_session {
            self.send_to_client(session, Delivery::Connected);
        } else {
            let zxid = self.server.tree().zxid();
            self.send_to_client(
                session,
                Delivery::Reply {
                    request_id,
                    result: applied.result,
                    zxid,
                },
            );
        }
        if let (Some(zxid), Some(kind), Some(line)) = (applied.zxid, kind, line) {
            let triggers = applied.triggers;
            self.after_txn(zxid, |engine| AppliedOp {
                zxid,
                session,
                session_name: name.to_string(),
                kind,
                changes: changes_of(&triggers),
                error,
                elapsed: engine.elapsed(),
                trace_line: engine.trace.line(line).to_owned(),
            });
        }
    }

    /// The server ends a session that stopped talking to it, or that a test
    /// expires: one transaction deletes its ephemerals. False if the session
    /// was already gone.
    pub(crate) fn expire_on_server(&mut self, session: SessionId, why: &str) -> bool {
        let order = self.ephemeral_deletion_order(session);
        let Some(applied) = self.server.end_session(session, Ending::Expire, &order) else {
            return false;
        };
        let zxid = applied.zxid.expect("ending a session is a transaction");
        let name = self.name(session);
        self.record(format_args!(
            "zxid=0x{zxid:x} {name} expire ({why}) -> {}",
            deleted_list(&applied.triggers)
        ));
        let line = self.trace.len() - 1;
        self.send_txn_events(zxid, applied.events);
        debug_assert!(applied.result.is_ok(), "ending a session cannot fail");
        let triggers = applied.triggers;
        self.after_txn(zxid, |engine| AppliedOp {
            zxid,
            session,
            session_name: name.to_string(),
            kind: TxnKind::ExpireSession,
            changes: changes_of(&triggers),
            error: None,
            elapsed: engine.elapsed(),
            trace_line: engine.trace.line(line).to_owned(),
        });
        true
    }

    /// The order in which the server deletes a session's ephemerals when
    /// it ends: ZooKeeper walks the session's ephemerals in a `HashSet`'s
    /// order, so the simulation shuffles them with its seed, catching code
    /// (or a test) that relies on any one order of the watch events.
    fn ephemeral_deletion_order(&mut self, session: SessionId) -> Vec<String> {
        let mut order: Vec<String> = self
            .server
            .tree()
            .ephemerals(session)
            .into_iter()
            .map(str::to_owned)
            .collect();
        order.shuffle(&mut self.rng);
        order
    }
}
