//! What the real-server test binaries of this crate share: proxied links,
//! expiry through them, and `scripts/zk`. What every crate's real-server
//! tests share (where the server is, a runtime, fresh roots, cleanup) lives
//! in `zkdist_coord::zk::testing` and is re-exported here.

#![allow(dead_code)] // Each test binary uses its own part of this module.

pub mod proxy;

use std::path::PathBuf;
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

/// `scripts/zk` of this repository.
pub fn scripts_zk() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/zk")
}

/// Runs `scripts/zk ARGS...` and returns its standard output, failing the
/// test with its standard error if it fails.
pub fn run_scripts_zk(args: &[&str]) -> String {
    let script = scripts_zk();
    let output = std::process::Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "scripts/zk {} failed ({}):\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
