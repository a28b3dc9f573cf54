//! SIGINT and SIGTERM end a role cleanly: a worker finishes the task in hand,
//! a master stops assigning, both close their sessions.

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The process's shutdown signals. Installed before anything else, so that a
/// signal that arrives while the role is still connecting or claiming ends
/// the process through the same clean path instead of killing it with a
/// session (and its ephemerals) left for the ensemble to time out.
pub struct Shutdown {
    terminate: Signal,
    interrupt: Signal,
}

impl Shutdown {
    pub fn install() -> anyhow::Result<Shutdown> {
        Ok(Shutdown {
            terminate: signal(SignalKind::terminate())
                .context("cannot install the SIGTERM handler")?,
            interrupt: signal(SignalKind::interrupt())
                .context("cannot install the SIGINT handler")?,
        })
    }

    /// Completes on the first SIGINT or SIGTERM.
    pub async fn requested(&mut self) {
        tokio::select! {
            biased;
            _ = self.terminate.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = self.interrupt.recv() => tracing::info!("SIGINT: shutting down"),
        }
    }

    /// Runs `work` unless a shutdown is requested first (then `None`; what
    /// `work` held, such as a session, is dropped, which closes it).
    pub async fn unless_requested<F: Future>(&mut self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.requested() => None,
            output = work => Some(output),
        }
    }
}
