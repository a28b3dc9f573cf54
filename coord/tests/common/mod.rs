//! What the real-server test binaries of this crate share: proxied links
//! and expiry through them. What every crate's real-server tests share
//! (where the server is, a runtime, fresh roots, cleanup, kazoo,
//! `scripts/zk`) lives in `zkdist_coord::zk::testing` and is re-exported
//! here.

#![allow(dead_code)] // Each test binary uses its own part of this module.

pub mod proxy;

use std::time::Duration;

use proxy::ProxiedEnsemble;

pub use zkdist_coord::zk::testing::*;
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{EventStream, ZkResult};

/// Connects a session whose link to the ensemble goes through proxies the
/// test can block.
pub async fn connect_proxied(
    direct: &ZkConfig,
) -> ZkResult<(ZkSession, EventStream, ProxiedEnsemble)> {
    let link = ProxiedEnsemble::start(&direct.connect);
    let mut config = direct.clone();
    config.connect = link.connect.clone();
    let (session, events) = ZkSession::connect(&config).await?;
    Ok((session, events, link))
}

/// Expires `session` the clean way: its link is cut, a second client that
/// reaches the ensemble directly closes the session, the link comes back,
/// and the session learns `Expired` (its stream shows `Disconnected`, then
/// `Expired`, and nothing in between).
pub async fn expire_through_link(session: &ZkSession, link: &ProxiedEnsemble, direct: &ZkConfig) {
    link.block();
    let closed = session.close_from_second_client(direct).await;
    link.unblock();
    closed.expect("close the session from a second client");
    session
        .wait_until_expired(Duration::from_millis(3 * SESSION_TIMEOUT_MS))
        .await
        .expect("the session learns that it expired");
}
