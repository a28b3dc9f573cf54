//! Making the server end a session from outside, for tests and fault drills.
//!
//! ZooKeeper has no "expire this session" request. The established way
//! (Curator's `KillSession`, ZooKeeper's own tests) is to attach a second
//! client to the session with its id and password and close that client:
//! the server closes the session, deletes its ephemerals and fires the
//! watches of other sessions, exactly as on expiry. The session's own client
//! learns it when it next talks to the server, and is told `Expired`.
//!
//! Attaching takes the connection away from the session's own client, which
//! reconnects at once and takes it back: the two can trade the connection a
//! few times (and the session's stream then shows `Connected` between
//! `Disconnected`s) before the second client's close gets through. To expire
//! a session cleanly, first cut its own client off (the tests route each
//! session through a TCP proxy they can block), then call
//! [`ZkSession::close_from_second_client`], restore the link, and wait with
//! [`ZkSession::wait_until_expired`]: the stream then shows exactly
//! `Disconnected`, `Expired`.

use std::time::Duration;

use zookeeper_client as zkc;

use super::config::ZkConfig;
use super::connect::establish;
use super::session::ZkSession;
use crate::Coordinator;
use crate::error::{ZkError, ZkResult};

impl ZkSession {
    /// Attaches a second client to this session through `servers` (the same
    /// ensemble, reached however the caller likes) and closes it. Returns
    /// once the server confirmed the close: from then on the session is
    /// gone, its ephemerals deleted.
    pub async fn close_from_second_client(&self, servers: &ZkConfig) -> ZkResult<()> {
        let target = servers.validate()?;
        let bound = servers.session_timeout() * 3 + servers.connect_timeout();
        let second = match establish(servers, &target, Some(self.session_info().clone())).await {
            Ok(second) => second,
            // The server already dropped the session.
            Err(ZkError::SessionExpired) => return Ok(()),
            Err(error) => return Err(error),
        };
        let mut second_state = second.state_watcher();
        // Dropping the only handle makes the client send closeSession; its
        // state turns Closed when the server has answered.
        drop(second);
        let ended = tokio::time::timeout(bound, async {
            loop {
                let now = second_state.changed().await;
                if now.is_terminated() {
                    return now;
                }
            }
        })
        .await;
        // Only a state the client published is the server's word: a
        // `Closed` its watcher reports after its session task stopped
        // without one (see vendor/zookeeper-client's PATCHES.md) confirms
        // nothing.
        let published = second_state.peek_state().is_terminated();
        match ended {
            Ok(zkc::SessionState::Closed | zkc::SessionState::Expired) if published => Ok(()),
            other => Err(ZkError::OperationTimeout {
                reason: format!(
                    "a second client attached to session {} could not close it: {other:?}",
                    self.session_id()
                ),
            }),
        }
    }

    /// Waits until this session's client has learnt that the session
    /// expired; fails if it ends otherwise or `timeout` passes first.
    pub async fn wait_until_expired(&self, timeout: Duration) -> ZkResult<()> {
        let mut state = self.state_watcher();
        let ended = tokio::time::timeout(timeout, async {
            let mut now = state.state();
            while !now.is_terminated() {
                now = state.changed().await;
            }
            now
        })
        .await;
        match ended {
            Ok(zkc::SessionState::Expired) => Ok(()),
            other => Err(ZkError::OperationTimeout {
                reason: format!(
                    "session {} did not see Expired within {timeout:?}: {other:?}",
                    self.session_id()
                ),
            }),
        }
    }
}
