//! Opening simulated sessions for a role that outlives them.

use zkdist_coord::{Connector, EventStream, ZkResult};

use crate::session::SimSession;
use crate::sim::SimZk;

/// Opens sessions on one simulation, all named after one actor: the first is
/// `name`, the next ones `name.2`, `name.3`... so the trace tells an actor's
/// sessions apart.
#[derive(Debug)]
pub struct SimConnector {
    sim: SimZk,
    name: String,
    sessions_opened: std::sync::atomic::AtomicU64,
}

impl SimConnector {
    pub fn new(sim: SimZk, name: impl Into<String>) -> SimConnector {
        SimConnector {
            sim,
            name: name.into(),
            sessions_opened: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The actor's name, as its first session is named.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn next_name(&self) -> String {
        let opened = self
            .sessions_opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match opened {
            0 => self.name.clone(),
            n => format!("{}.{}", self.name, n + 1),
        }
    }
}

impl Connector for SimConnector {
    type Session = SimSession;

    async fn connect(&self) -> ZkResult<(SimSession, EventStream)> {
        let name = self.next_name();
        self.sim.connect(&name).await
    }
}
