//! Who leads, and since when: the session that holds the ephemeral `master`
//! node, with the epoch it was elected in.
//!
//! A candidate claims with one `multi` that creates `master` (data = its
//! session id) and bumps the version of the persistent `epoch` node (data =
//! its session id too). The version the bump gives is the new master's
//! epoch. Every write of a master then starts with a check that `epoch` is
//! still at that version (see the shell), so once a successor is elected,
//! nothing a deposed master sends can change the tree.

use std::fmt;

use zkdist_coord::{
    Coordinator, CreateMode, ErrorCode, Event, EventStream, Layout, Op, OpResult, SessionState,
    Watch, WatchKind, ZkError, ZkResult,
};

/// A master's term: the version of the `epoch` node its election set.
/// Epochs only grow, so a later master always has a higher one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub i32);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The `check` a fenced write starts with: the epoch node is still at this
/// master's version.
pub(crate) fn fence(layout: &Layout, epoch: Epoch) -> Op {
    Op::Check {
        path: layout.epoch(),
        version: epoch.0,
    }
}

/// Tries to become the master: one `multi` that creates the ephemeral
/// `master` node and bumps the `epoch` node, both with this session's id as
/// data. Returns the new epoch, or `None` when another session leads.
///
/// Creates the layout first if it is missing. After a connection loss the
/// claim is not sent blindly again: the outcome is read back from the tree
/// (`master` holding this session's id means the claim was applied, and
/// `epoch` holding it gives its version), so a claim is never applied twice.
pub async fn claim_master<C: Coordinator>(zk: &C, layout: &Layout) -> ZkResult<Option<Epoch>> {
    let session = zk.session_id().to_string();
    let claim = || {
        vec![
            Op::Create {
                path: layout.master(),
                data: session.as_bytes().to_vec(),
                mode: CreateMode::Ephemeral,
            },
            Op::SetData {
                path: layout.epoch(),
                data: session.as_bytes().to_vec(),
                version: None,
            },
        ]
    };
    let mut laid_out = false;
    loop {
        match zk.multi(claim()).await {
            Ok(results) => match results.get(1) {
                Some(OpResult::DataSet { stat }) => return Ok(Some(Epoch(stat.version))),
                other => {
                    return Err(ZkError::System {
                        reason: format!("the claim's epoch bump answered {other:?}"),
                    });
                }
            },
            Err(ZkError::Multi { index: 0, error }) if error.code() == ErrorCode::NodeExists => {
                return Ok(None);
            }
            // A missing root, directory or epoch node: lay the tree out once
            // and claim again.
            Err(ZkError::Multi { error, .. }) if error.code() == ErrorCode::NoNode && !laid_out => {
                layout.ensure_layout(zk).await?;
                laid_out = true;
            }
            Err(error) if error.is_outcome_unknown() => {
                if let Some(outcome) = recognise_claim(zk, layout, &session).await? {
                    return Ok(outcome);
                }
                // Not applied: claiming again is safe.
            }
            Err(error) => return Err(error),
        }
    }
}

/// After a claim whose outcome is unknown: `Some(Some(epoch))` if it was
/// applied, `Some(None)` if another session leads, `None` if nobody leads
/// (the claim was not applied and may be sent again).
async fn recognise_claim<C: Coordinator>(
    zk: &C,
    layout: &Layout,
    session: &str,
) -> ZkResult<Option<Option<Epoch>>> {
    let master_path = layout.master();
    let master = match retry_read(|| zk.get_data(&master_path, Watch::No)).await {
        Ok((data, _)) => data,
        Err(ZkError::NoNode { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    if master != session.as_bytes() {
        return Ok(Some(None));
    }
    // The claim was applied (the multi is atomic): `epoch` was set in the
    // same transaction, and nobody can bump it while this session holds
    // `master`.
    let epoch_path = layout.epoch();
    let (data, stat) = retry_read(|| zk.get_data(&epoch_path, Watch::No)).await?;
    if data != session.as_bytes() {
        return Err(ZkError::System {
            reason: format!(
                "{} holds this session's claim but {} was changed by another session",
                layout.master(),
                layout.epoch()
            ),
        });
    }
    Ok(Some(Some(Epoch(stat.version))))
}

/// Sends a read again, after a pause, for as long as its outcome is
/// unknown. Reads are idempotent.
async fn retry_read<T, F: Future<Output = ZkResult<T>>>(read: impl Fn() -> F) -> ZkResult<T> {
    loop {
        match read().await {
            Err(error) if error.is_outcome_unknown() => {
                tokio::time::sleep(std::time::Duration::from_millis(
                    crate::shell::READ_RETRY_DELAY_MS,
                ))
                .await
            }
            outcome => return outcome,
        }
    }
}

/// Why a standby stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StandbyEnd {
    /// The `master` node is gone (or may be): claim again.
    ClaimAgain,
    /// The session ended (`None`: its event stream closed).
    SessionEnded(Option<SessionState>),
}

/// Waits, as a candidate that lost the claim, until the `master` node is
/// deleted: watches it with `exists` and waits for the watch to fire. A
/// reconnection also ends the wait (claiming again is cheap, and it does
/// not depend on the watch surviving the outage).
pub(crate) async fn stand_by<C: Coordinator>(
    zk: &C,
    events: &mut EventStream,
    layout: &Layout,
) -> ZkResult<StandbyEnd> {
    let master = layout.master();
    if retry_read(|| zk.exists(&master, Watch::Yes))
        .await?
        .is_none()
    {
        return Ok(StandbyEnd::ClaimAgain);
    }
    let mut disconnected = false;
    loop {
        match events.recv().await {
            None => return Ok(StandbyEnd::SessionEnded(None)),
            Some(Event::Watch(watch))
                if watch.path == master && watch.kind == WatchKind::NodeDeleted =>
            {
                return Ok(StandbyEnd::ClaimAgain);
            }
            Some(Event::Watch(_)) => {}
            Some(Event::Session(SessionState::Disconnected)) => disconnected = true,
            Some(Event::Session(SessionState::Connected)) => {
                if disconnected {
                    return Ok(StandbyEnd::ClaimAgain);
                }
            }
            Some(Event::Session(
                state @ (SessionState::Expired | SessionState::Closed | SessionState::AuthFailed),
            )) => return Ok(StandbyEnd::SessionEnded(Some(state))),
        }
    }
}
