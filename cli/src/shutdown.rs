//! SIGINT and SIGTERM end a role cleanly: a worker finishes the task in hand,
//! a master stops assigning, both close their sessions.

use tokio::signal::unix::{SignalKind, signal};

/// Completes on the first SIGINT or SIGTERM.
pub async fn requested() {
    let mut terminate = signal(SignalKind::terminate()).expect("install the SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("install the SIGINT handler");
    tokio::select! {
        biased;
        _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
    }
}
