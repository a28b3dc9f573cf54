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

use zkdist_coord::retry::until_known;
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

/// Tries to become the master: one `multi` that creates the ephemeral
/// `master` node and bumps the `epoch` node, both with this session's id as
/// data. Returns the new epoch, or `None` when another session leads.
///
/// Creates the layout first if it is missing. After a connection loss the
/// claim is not sent blindly again: the outcome is read back from the tree
/// (`master` held by this session means the claim was applied, and `epoch`
/// holding its id gives its version), so a claim is never applied twice.
/// A `NodeExists` answer is read back the same way, since the node that
/// exists may be this session's own, from a claim whose reply was lost.
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
                match read_claim(zk, layout).await? {
                    ClaimSeen::Ours(epoch) => return Ok(Some(epoch)),
                    ClaimSeen::Theirs => return Ok(None),
                    // Deleted since: claiming again is safe.
                    ClaimSeen::Free => {}
                }
            }
            // A missing root, directory or epoch node: lay the tree out once
            // and claim again.
            Err(ZkError::Multi { error, .. }) if error.code() == ErrorCode::NoNode && !laid_out => {
                layout.ensure_layout(zk).await?;
                laid_out = true;
            }
            Err(error) if error.is_outcome_unknown() => match read_claim(zk, layout).await? {
                ClaimSeen::Ours(epoch) => return Ok(Some(epoch)),
                ClaimSeen::Theirs => return Ok(None),
                // Not applied: claiming again is safe.
                ClaimSeen::Free => {}
            },
            Err(error) => return Err(error),
        }
    }
}

/// Who holds the `master` node, as read back after a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaimSeen {
    /// This session: its claim was applied, in this epoch.
    Ours(Epoch),
    /// Another session leads.
    Theirs,
    /// Nobody: claiming (again) is safe.
    Free,
}

/// Reads who holds `master`, after a `sync`: the server this session now
/// talks to may be a follower that has not applied the claim whose reply
/// was lost, and would answer that nobody leads.
async fn read_claim<C: Coordinator>(zk: &C, layout: &Layout) -> ZkResult<ClaimSeen> {
    let session = zk.session_id();
    let master_path = layout.master();
    until_known(|| zk.sync(&master_path)).await?;
    let (data, stat) = match until_known(|| zk.get_data(&master_path, Watch::No)).await {
        Ok(found) => found,
        Err(ZkError::NoNode { .. }) => return Ok(ClaimSeen::Free),
        Err(error) => return Err(error),
    };
    let ours = data == session.to_string().as_bytes() || stat.ephemeral_owner == session.0;
    if !ours {
        return Ok(ClaimSeen::Theirs);
    }
    // The claim was applied (the multi is atomic): `epoch` was set in the
    // same transaction, and nobody can bump it while this session holds
    // `master`. The sync above covers this read too.
    let epoch_path = layout.epoch();
    let (data, stat) = until_known(|| zk.get_data(&epoch_path, Watch::No)).await?;
    if data != session.to_string().as_bytes() {
        return Err(ZkError::System {
            reason: format!(
                "{master_path} holds this session's claim but {epoch_path} was changed by another session"
            ),
        });
    }
    Ok(ClaimSeen::Ours(Epoch(stat.version)))
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
    let Some(held) = until_known(|| zk.exists(&master, Watch::Yes)).await? else {
        return Ok(StandbyEnd::ClaimAgain);
    };
    if held.ephemeral_owner == 0 {
        // No session holds it, so nothing deletes it: waiting is all a
        // candidate can do, and the operator must hear why.
        tracing::warn!(
            target: "zkdist::master",
            path = %master,
            "the master node is not ephemeral, so no master's (made by hand, or by laying a tree \
             out under it): no master can be elected until it is deleted, with whatever lies under it \
             (`deleteall` in zkCli.sh)"
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lagging::LaggingFollower;
    use zkdist_coord::SessionId;

    const SESSION: i64 = 0x51;

    fn layout() -> Layout {
        Layout::new("/zkdist").unwrap()
    }

    /// A laid-out tree whose epoch node another master bumped `bumps` times.
    fn tree(bumps: usize) -> LaggingFollower {
        let layout = layout();
        let zk = LaggingFollower::new(
            SESSION,
            &[
                (layout.root(), b""),
                (&layout.epoch(), b""),
                (&layout.workers_dir(), b""),
                (&layout.tasks_dir(), b""),
                (&layout.assignments_dir(), b""),
            ],
        );
        for _ in 0..bumps {
            zk.leader_write(vec![Op::SetData {
                path: layout.epoch(),
                data: b"0x99".to_vec(),
                version: None,
            }]);
        }
        zk.catch_up();
        zk
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_whose_reply_was_lost_is_recognised_on_a_lagging_follower() {
        let zk = tree(2);
        zk.lose_next_reply();
        // The claim is applied (epoch 3), its reply lost; reads come from
        // a follower that has not applied it yet. Without a sync the
        // candidate would read no master, claim again, meet its own node
        // and stand by for good.
        let epoch = claim_master(&zk, &layout()).await.unwrap();
        assert_eq!(epoch, Some(Epoch(3)));
        assert_eq!(zk.syncs(), 1, "the read-back was synced once");
    }

    #[tokio::test(start_paused = true)]
    async fn node_exists_on_our_own_master_node_recovers_the_epoch() {
        let zk = tree(1);
        let layout = layout();
        let session = SessionId(SESSION).to_string();
        // An earlier claim of this session was applied (epoch 2) but the
        // candidate never learned it.
        zk.leader_write(vec![
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
        ]);
        assert_eq!(claim_master(&zk, &layout).await.unwrap(), Some(Epoch(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn node_exists_on_another_sessions_master_node_stands_by() {
        let zk = tree(1);
        let layout = layout();
        zk.leader_write(vec![Op::Create {
            path: layout.master(),
            data: b"0x99".to_vec(),
            mode: CreateMode::Persistent,
        }]);
        assert_eq!(claim_master(&zk, &layout).await.unwrap(), None);
    }
}
