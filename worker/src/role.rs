//! The worker role: a worker that outlives its sessions. Each session runs
//! one [`Worker`] under a new id; when the session ends (expiry, a crash of
//! the link), the role opens a new session and joins again, while the
//! master re-queues the task the old id held.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use zkdist_coord::{Connector, Coordinator, Layout, Observer};

use crate::decision::WorkerDecision;
use crate::handler::TaskHandler;
use crate::shell::{Worker, WorkerError};

/// The pause before opening a new session after one ended, or after a
/// failed attempt to open one: long enough not to hammer an ensemble that
/// is down, short enough to re-join quickly.
pub const SESSION_RETRY_DELAY_MS: u64 = 200;

/// The longest a best-effort close of a finished session may take before
/// the role moves on.
const CLOSE_TIMEOUT_MS: u64 = 1_000;

/// Runs the worker role until `shutdown` completes.
///
/// Opens a session through `connector`, runs a [`Worker`] on it (a new id
/// each session) and, when the session ends, pauses
/// [`SESSION_RETRY_DELAY_MS`] and starts over. On shutdown the worker in
/// place finishes the task in hand and deregisters (see
/// [`Worker::run_until`]); the role then closes its session and returns
/// `Ok`. Sessions that cannot be opened because the ensemble is unreachable
/// (connection loss) are tried again after the same pause.
///
/// Errors are judged by [`WorkerError::is_transient`] (that is,
/// [`zkdist_coord::ZkError::is_transient`]), as the master role judges
/// them: a session that ended, or a request that failed in a way a new
/// session may not meet (e.g. `SessionMoved`), starts a new session; the
/// role returns an error only for what a new session cannot fix: a layout
/// that cannot be created, a request refused (e.g. not authorised),
/// credentials the server refused, or a connector that refuses its
/// arguments.
///
/// `handler` is shared by the sessions' workers. `observer` receives every
/// worker's decisions, in order, across sessions.
pub async fn run_worker_role<K, H>(
    connector: K,
    layout: Layout,
    handler: H,
    shutdown: impl Future<Output = ()>,
    observer: Option<Observer<WorkerDecision>>,
) -> Result<(), WorkerError>
where
    K: Connector,
    // The role keeps a handle to close the session after its worker ends.
    K::Session: Clone,
    H: TaskHandler,
{
    let handler = Arc::new(handler);
    let mut shutdown = pin!(shutdown);
    // Whether `shutdown` completed: it is polled no more after that.
    let mut shutdown_done = false;
    loop {
        let connected = tokio::select! {
            biased;
            () = shutdown.as_mut() => return Ok(()),
            connected = connector.connect() => connected,
        };
        let (session, events) = match connected {
            Ok(connected) => connected,
            Err(error) if error.is_transient() => {
                tracing::warn!(target: "zkdist::worker", %error, "cannot open a session, trying again");
                if pause_unless_shutdown(shutdown.as_mut()).await {
                    return Ok(());
                }
                continue;
            }
            Err(error) => return Err(WorkerError::Connect { error }),
        };
        let worker = Worker::new(session.clone(), events, layout.clone(), handler.clone())
            .with_optional_observer(observer.clone());
        let outcome = worker
            .run_until(async {
                shutdown.as_mut().await;
                shutdown_done = true;
            })
            .await;
        // Ephemerals go now rather than at the session timeout. The
        // session may be dead already; closing it is best effort.
        let close = session.close();
        let _ = tokio::time::timeout(Duration::from_millis(CLOSE_TIMEOUT_MS), close).await;
        match outcome {
            Ok(worker) => {
                debug_assert!(shutdown_done, "a worker returns Ok only after shutdown");
                tracing::info!(target: "zkdist::worker", %worker, "worker stopped");
                return Ok(());
            }
            Err(error) if error.is_transient() => {
                if shutdown_done {
                    // Shutdown was asked for: the lost session had nothing
                    // more to finish.
                    return Ok(());
                }
                tracing::warn!(target: "zkdist::worker", %error, "the session's worker stopped, joining again with a new session");
                if pause_unless_shutdown(shutdown.as_mut()).await {
                    return Ok(());
                }
            }
            Err(error) => return Err(error),
        }
    }
}

/// Sleeps [`SESSION_RETRY_DELAY_MS`]; true if `shutdown` completed first.
async fn pause_unless_shutdown(shutdown: std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
    tokio::select! {
        biased;
        () = shutdown => true,
        () = tokio::time::sleep(Duration::from_millis(SESSION_RETRY_DELAY_MS)) => false,
    }
}
