//! What the real-server test binaries share: where the server is, a runtime,
//! fresh roots that never collide, and cleanup.

#![allow(dead_code)] // Each test binary uses its own part of this module.

pub mod proxy;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proxy::ProxiedEnsemble;

use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{Coordinator, CreateMode, EventStream, Watch, ZkError, ZkResult};

/// Why real-server tests are ignored when no server is named.
pub const NO_SERVER: &str = "ZKDIST_TEST_ZK is not set: it names a ZooKeeper to test against \
     (a connect string such as 127.0.0.1:2181; `bash .ci/run` starts servers and sets it)";

/// The session timeout the tests ask for: short enough for expiry tests,
/// long enough for a loaded machine.
pub const SESSION_TIMEOUT_MS: u64 = 6_000;
pub const CONNECT_TIMEOUT_MS: u64 = 15_000;

/// The connect string of the server under test, if any.
pub fn test_zk() -> Option<String> {
    std::env::var("ZKDIST_TEST_ZK")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// The directory of the 3-node ensemble started by `scripts/zk ensemble`,
/// for tests that kill and restart its nodes.
pub fn test_ensemble_dir() -> Option<PathBuf> {
    std::env::var("ZKDIST_TEST_ENSEMBLE_DIR")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(PathBuf::from)
}

pub fn config(connect: &str) -> ZkConfig {
    ZkConfig::new(connect)
        .with_session_timeout_ms(SESSION_TIMEOUT_MS)
        .with_connect_timeout_ms(CONNECT_TIMEOUT_MS)
}

/// A runtime per test, as the simulator run has; the client does its I/O on
/// its own reactor thread.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a tokio runtime")
}

/// `/<prefix>-<pid>-<nanos>`: one per test process, so runs never collide.
fn run_root(prefix: &str) -> &'static str {
    static ROOT: OnceLock<String> = OnceLock::new();
    ROOT.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos();
        format!("/{prefix}-{}-{nanos}", std::process::id())
    })
}

/// Creates `/<prefix>-<pid>-<nanos>/<name>`, fresh and empty, and returns it.
pub async fn fresh_case_root(config: &ZkConfig, prefix: &str, name: &str) -> String {
    let run_root = run_root(prefix);
    let (admin, _events) = ZkSession::connect(config)
        .await
        .unwrap_or_else(|e| panic!("connect to {} to create the case root: {e}", config.connect));
    match admin.create(run_root, b"", CreateMode::Persistent).await {
        Ok(_) | Err(ZkError::NodeExists { .. }) => {}
        Err(e) => panic!("create {run_root}: {e}"),
    }
    let root = format!("{run_root}/{name}");
    admin
        .create(&root, b"", CreateMode::Persistent)
        .await
        .unwrap_or_else(|e| panic!("create the case root {root}: {e}"));
    admin.close().await.expect("close the admin session");
    root
}

/// Deletes `root` and everything under it (best effort: a node that
/// vanished meanwhile is fine).
pub async fn delete_tree(config: &ZkConfig, root: &str) {
    let Ok((admin, _events)) = ZkSession::connect(config).await else {
        return;
    };
    let mut stack = vec![(root.to_owned(), false)];
    while let Some((path, children_done)) = stack.pop() {
        if children_done {
            let _ = admin.delete(&path, None).await;
            continue;
        }
        stack.push((path.clone(), true));
        if let Ok((children, _)) = admin.get_children(&path, Watch::No).await {
            for child in children {
                stack.push((format!("{path}/{child}"), false));
            }
        }
    }
    let _ = admin.close().await;
}

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
