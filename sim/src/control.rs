//! Delivery control on a session's link: a test holds back everything
//! travelling to the client, then releases it, in order.

use zkdist_coord::SessionId;

use crate::engine::Engine;

impl Engine {
    /// Holds back everything travelling to the session (replies, events)
    /// until `release`.
    pub(crate) fn hold(&mut self, session: SessionId) {
        if !self.known(session, "hold") {
            return;
        }
        let name = self.name(session);
        self.record(format!("control hold {name}"));
        let link = &mut self.peer_mut(session).link;
        link.held = true;
        if let Some(key) = link.inbound_key.take() {
            self.schedule.cancel(key);
        }
    }

    /// Lets what was held travel on, in order.
    pub(crate) fn release(&mut self, session: SessionId) {
        if !self.known(session, "release") {
            return;
        }
        let name = self.name(session);
        let held = self.peers[&session].link.inbound.len();
        self.record(format!("control release {name} ({held} held)"));
        self.peer_mut(session).link.held = false;
        self.schedule_inbound_head(session);
    }
}
