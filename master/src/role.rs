//! A master candidate for the life of a process: sessions come and go, the
//! role stays.
//!
//! Each session: connect, lay the tree out, claim the `master` node or
//! stand by until it is deleted, and lead until the session ends, the
//! master is deposed, or shutdown. A new master rebuilds its whole state
//! from ZooKeeper (the shell's start-up lists and reads everything), so
//! nothing carries over from one session to the next.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use zkdist_coord::{
    Connector, Coordinator, ErrorCode, EventStream, Layout, Observer, SessionState, ZkError,
};

use crate::decision::MasterDecision;
use crate::discovery::TaskDiscovery;
use crate::election::{StandbyEnd, claim_master, stand_by};
use crate::shell::{Master, MasterError, RECONCILE_RETRY_DELAY_MS};
use crate::state::MasterState;

/// The pause before a new session is opened after one ended, so a role
/// whose ensemble is down does not spin.
pub const SESSION_RETRY_DELAY_MS: u64 = 200;

/// The longest a best-effort close of an ended session may take (the
/// worker's bound): a close on a link that is down would otherwise wait
/// for the client's own timeouts, and keep the role from its next session.
const CLOSE_TIMEOUT_MS: u64 = 1_000;

/// How one session of the role ended.
enum SessionEnd {
    /// Shutdown was requested: the role returns, with the master's state
    /// if this session led.
    Shutdown(Option<Box<MasterState>>),
    /// Start over with a new session.
    Restart,
    /// Start over with a new session once `delay_ms` have passed: the
    /// session failed on something that only time can change.
    RestartAfter { delay_ms: u64 },
}

/// Runs a master candidate until `shutdown` completes: in each session it
/// claims the master node (or stands by until the node is deleted and
/// claims again), then leads until the session ends (expired, closed) or a
/// fenced write shows it was deposed; it then closes the session (best
/// effort, which frees the `master` node at once if it still holds it) and,
/// after [`SESSION_RETRY_DELAY_MS`] (after [`RECONCILE_RETRY_DELAY_MS`] when
/// a listing was over the client's reply limit), starts over with a new
/// session from `connector`. It stops acting on a session the moment it
/// learns the session is gone.
///
/// Every decision, including the role's own (`Elected`, `StandingBy`,
/// `SessionLost`, `Restarting`; `Deposed` comes from the master), goes to
/// `observer` (if any) and to the log, in order.
///
/// Returns `Ok(())` on shutdown, and an error only when retrying cannot help:
/// the layout's root cannot be created (`MasterError::Layout`, e.g. its
/// parent is ephemeral), the server refused the credentials
/// (`MasterError::SessionEnded` with `AuthFailed`), or it refused a master
/// request for a reason a new session would meet again
/// (`MasterError::Request`, e.g. `NoAuth` when the tree was made with
/// credentials this role lacks).
pub async fn run_master_role<K: Connector>(
    connector: K,
    layout: Layout,
    discovery: TaskDiscovery,
    shutdown: impl Future<Output = ()>,
    observer: Option<Observer<MasterDecision>>,
) -> Result<(), MasterError> {
    run_master_role_for_state(connector, layout, discovery, shutdown, observer)
        .await
        .map(|_| ())
}

/// [`run_master_role`], returning on shutdown the state of the master this
/// candidate ran then (`None` if it was standing by), so that a test can
/// compare the leader's view with the tree.
pub async fn run_master_role_for_state<K: Connector>(
    connector: K,
    layout: Layout,
    discovery: TaskDiscovery,
    shutdown: impl Future<Output = ()>,
    observer: Option<Observer<MasterDecision>>,
) -> Result<Option<MasterState>, MasterError> {
    let mut shutdown = pin!(shutdown);
    let publish = |decision: MasterDecision| {
        tracing::info!(target: "zkdist::master", "{decision}");
        if let Some(observer) = &observer {
            observer.observe(decision);
        }
    };
    loop {
        let connected = tokio::select! {
            biased;
            () = &mut shutdown => return Ok(None),
            connected = connector.connect() => connected,
        };
        let end = match connected {
            Ok((zk, events)) => {
                let zk = Arc::new(zk);
                let end = run_session(
                    &zk,
                    events,
                    &layout,
                    discovery,
                    shutdown.as_mut(),
                    &observer,
                    &publish,
                )
                .await;
                // Best effort: frees the `master` node at once if this
                // session still holds it; an ended session refuses, which
                // is fine. Bounded, and raced with a shutdown that has not
                // come yet.
                let close =
                    tokio::time::timeout(Duration::from_millis(CLOSE_TIMEOUT_MS), zk.close());
                if matches!(end, Ok(SessionEnd::Shutdown(_))) {
                    let _ = close.await;
                } else {
                    tokio::select! {
                        biased;
                        () = &mut shutdown => return end.map(|_| None),
                        _ = close => {}
                    }
                }
                end?
            }
            Err(error) if is_permanent(&error) => {
                return Err(MasterError::SessionEnded {
                    state: Some(SessionState::AuthFailed),
                });
            }
            Err(error) => {
                publish(MasterDecision::Restarting {
                    reason: format!("cannot connect: {error}"),
                });
                SessionEnd::Restart
            }
        };
        let delay_ms = match end {
            SessionEnd::Shutdown(state) => return Ok(state.map(|state| *state)),
            SessionEnd::Restart => SESSION_RETRY_DELAY_MS,
            SessionEnd::RestartAfter { delay_ms } => delay_ms,
        };
        tokio::select! {
            biased;
            () = &mut shutdown => return Ok(None),
            () = tokio::time::sleep(Duration::from_millis(delay_ms)) => {}
        }
    }
}

/// Whether retrying with a new session cannot help.
fn is_permanent(error: &ZkError) -> bool {
    error.code() == ErrorCode::AuthFailed
}

/// Whether a layout error is the session's (retry with a new one) rather
/// than the tree's or the configuration's (give up).
fn layout_error_is_transient(error: &ZkError) -> bool {
    error.is_outcome_unknown()
        || (error.is_session_fatal() && !is_permanent(error))
        || error.code() == ErrorCode::SessionMoved
}

/// Whether a failed claim is worth a new session: the session's own end or
/// trouble, a tree changed under the claim (a directory deleted meanwhile),
/// or a claim read back inconsistent (a new session starts clean). Anything
/// else (say, the credentials may not write there) would fail again.
fn claim_error_is_transient(error: &ZkError) -> bool {
    layout_error_is_transient(error)
        || matches!(error.code(), ErrorCode::NoNode | ErrorCode::SystemError)
}

/// One session of the role: claim or stand by, then lead.
async fn run_session<C: Coordinator>(
    zk: &Arc<C>,
    mut events: EventStream,
    layout: &Layout,
    discovery: TaskDiscovery,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
    observer: &Option<Observer<MasterDecision>>,
    publish: &impl Fn(MasterDecision),
) -> Result<SessionEnd, MasterError> {
    let layout_error = |error: ZkError| -> Result<SessionEnd, MasterError> {
        if layout_error_is_transient(&error) {
            publish(MasterDecision::Restarting {
                reason: format!("laying out {}: {error}", layout.root()),
            });
            Ok(SessionEnd::Restart)
        } else if is_permanent(&error) {
            Err(MasterError::SessionEnded {
                state: Some(SessionState::AuthFailed),
            })
        } else {
            Err(MasterError::Layout {
                root: layout.root().to_owned(),
                error,
            })
        }
    };
    let laid_out = tokio::select! {
        biased;
        () = shutdown.as_mut() => return Ok(SessionEnd::Shutdown(None)),
        laid_out = layout.ensure_layout(&**zk) => laid_out,
    };
    if let Err(error) = laid_out {
        return layout_error(error);
    }
    let epoch = loop {
        let claimed = tokio::select! {
            biased;
            () = shutdown.as_mut() => return Ok(SessionEnd::Shutdown(None)),
            claimed = claim_master(&**zk, layout) => claimed,
        };
        match claimed {
            Ok(Some(epoch)) => break epoch,
            Ok(None) => publish(MasterDecision::StandingBy),
            Err(error) if is_permanent(&error) => {
                return Err(MasterError::SessionEnded {
                    state: Some(SessionState::AuthFailed),
                });
            }
            Err(error) if claim_error_is_transient(&error) => {
                return Ok(session_failed(error, publish));
            }
            Err(error) => {
                return Err(MasterError::Request {
                    what: format!("claiming {}", layout.master()),
                    error,
                });
            }
        }
        let waited = tokio::select! {
            biased;
            () = shutdown.as_mut() => return Ok(SessionEnd::Shutdown(None)),
            waited = stand_by(&**zk, &mut events, layout) => waited,
        };
        match waited {
            Ok(StandbyEnd::ClaimAgain) => {}
            Ok(StandbyEnd::SessionEnded(state)) => {
                publish(MasterDecision::SessionLost { state });
                return Ok(SessionEnd::Restart);
            }
            Err(error) => return Ok(session_failed(error, publish)),
        }
    };
    publish(MasterDecision::Elected { epoch });
    let mut master =
        Master::shared(Arc::clone(zk), events, layout.clone(), epoch).with_discovery(discovery);
    if let Some(observer) = observer {
        master = master.with_observer(observer.clone());
    }
    match master.run_until(shutdown.as_mut()).await {
        Ok(state) => Ok(SessionEnd::Shutdown(Some(Box::new(state)))),
        Err(MasterError::SessionEnded { state }) => {
            publish(MasterDecision::SessionLost { state });
            if state == Some(SessionState::AuthFailed) {
                return Err(MasterError::SessionEnded { state });
            }
            Ok(SessionEnd::Restart)
        }
        // The master already published `Deposed`.
        Err(MasterError::Deposed { .. }) => Ok(SessionEnd::Restart),
        Err(MasterError::Layout { error, .. }) => layout_error(error),
        // A refusal a new session would meet again (no authorisation, an
        // unexpected node) is reported, not looped on. A directory deleted
        // under the master (`NoNode`) is repaired by the next session's
        // layout.
        Err(MasterError::Request { what, error })
            if !error.is_transient() && error.code() != ErrorCode::NoNode =>
        {
            Err(MasterError::Request { what, error })
        }
        Err(error @ MasterError::Request { .. }) => {
            publish(MasterDecision::Restarting {
                reason: error.to_string(),
            });
            // A directory's listing is over the client's reply limit
            // (`tasks/` in practice; `workers/` and `assignments/` would
            // need some 50,000 names at a Java client's 1 MiB): a new
            // session meets the same refusal until the directory shrinks
            // (clients clean finished tasks up) or the operator raises the
            // limit. Each try has the server serialise the whole
            // directory, so they come at the reconcile's pace, not at once.
            Ok(if error.is_listing_over_limit() {
                SessionEnd::RestartAfter {
                    delay_ms: RECONCILE_RETRY_DELAY_MS,
                }
            } else {
                SessionEnd::Restart
            })
        }
    }
}

/// A session-level failure while claiming or standing by.
fn session_failed(error: ZkError, publish: &impl Fn(MasterDecision)) -> SessionEnd {
    match error.code() {
        ErrorCode::SessionExpired => publish(MasterDecision::SessionLost {
            state: Some(SessionState::Expired),
        }),
        ErrorCode::SessionClosed => publish(MasterDecision::SessionLost {
            state: Some(SessionState::Closed),
        }),
        _ => publish(MasterDecision::Restarting {
            reason: format!("claiming the master node: {error}"),
        }),
    }
    SessionEnd::Restart
}
