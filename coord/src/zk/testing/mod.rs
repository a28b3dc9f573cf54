//! What the real-server tests of every crate share: where the server under
//! test is (`ZKDIST_TEST_ZK`), how a test that needs it reports itself as
//! *ignored* (never passed) when it is not named, fresh roots that never
//! collide between runs, cleanup, and python3-kazoo as an outsider's client
//! ([`run_kazoo`]).
//!
//! The test binaries run with `harness = false` on `libtest-mimic`, so that
//! whether a server is there is decided at run time, when the binary starts:
//!
//! ```text
//! fn main() {
//!     let trials = vec![testing::server_trial("my_case", |connect| {
//!         testing::runtime().block_on(my_case(connect))
//!     })];
//!     testing::note_if_ignored();
//!     libtest_mimic::run(&libtest_mimic::Arguments::from_args(), trials).exit()
//! }
//! ```

mod kazoo;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use libtest_mimic::Trial;

use super::{ZkConfig, ZkSession};
use crate::{Coordinator, CreateMode, Watch, ZkError};

pub use kazoo::{KazooAnswer, KazooOp, PERM_ALL, PERM_READ, acl_entries, digest_id, run_kazoo};

/// The variable that names the server under test.
pub const TEST_ZK_VAR: &str = "ZKDIST_TEST_ZK";

/// Why real-server tests are ignored when no server is named.
pub const NO_SERVER: &str = "ZKDIST_TEST_ZK is not set: it names a ZooKeeper to test against \
     (a connect string such as 127.0.0.1:2181; `scripts/test-all` starts servers and sets it)";

/// The session timeout the tests ask for: short enough for expiry tests,
/// long enough for a loaded machine.
pub const SESSION_TIMEOUT_MS: u64 = 6_000;
pub const CONNECT_TIMEOUT_MS: u64 = 15_000;

/// The connect string of the server under test, if any.
pub fn test_zk() -> Option<String> {
    std::env::var(TEST_ZK_VAR)
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

/// The configuration tests connect with.
pub fn config(connect: &str) -> ZkConfig {
    ZkConfig::new(connect)
        .with_session_timeout_ms(SESSION_TIMEOUT_MS)
        .with_connect_timeout_ms(CONNECT_TIMEOUT_MS)
}

/// A runtime per test, with I/O enabled: the client's socket is on its reactor.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a tokio runtime")
}

/// A runtime whose tasks (the session's actor among them) run on two
/// worker threads, in parallel with the test's own code: what a
/// multi-threaded service runs on.
pub fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build a multi-threaded tokio runtime")
}

/// A trial that runs `test` with the connect string of the server under
/// test. Without one it is reported as ignored; run anyway
/// (`--include-ignored`), it fails saying why.
pub fn server_trial<F>(name: impl Into<String>, test: F) -> Trial
where
    F: FnOnce(String) + Send + 'static,
{
    let server = test_zk();
    let ignored = server.is_none();
    Trial::test(name, move || match server {
        Some(connect) => {
            test(connect);
            Ok(())
        }
        None => Err(NO_SERVER.into()),
    })
    .with_ignored_flag(ignored)
}

/// Says on stderr why the real-server trials are ignored, if they are.
pub fn note_if_ignored() {
    if test_zk().is_none() {
        eprintln!("real-server tests ignored: {NO_SERVER}");
    }
}

/// `/<prefix>-<pid>-<nanos>`, unique per call: for a root that must not
/// exist yet.
pub fn unique_root(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    format!("/{prefix}-{}-{nanos}", std::process::id())
}

/// This process's run root, once a case root was made under it.
static RUN_ROOT: OnceLock<String> = OnceLock::new();

/// `/<prefix>-<pid>-<nanos>`, the same for the whole test process.
fn run_root(prefix: &str) -> &'static str {
    RUN_ROOT.get_or_init(|| unique_root(prefix))
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

/// Deletes this process's run root if its cases left it empty: a failing
/// case keeps its nodes, and so the run root, for a look with zkCli or
/// kazoo.
pub async fn delete_run_root_if_empty(config: &ZkConfig) {
    let Some(run_root) = RUN_ROOT.get() else {
        return;
    };
    let Ok((admin, _events)) = ZkSession::connect(config).await else {
        return;
    };
    // `NotEmpty` when a case failed: that is the point.
    let _ = admin.delete(run_root, None).await;
    let _ = admin.close().await;
}

/// Deletes this process's run root and everything under it: for a run
/// whose tests all passed but do not clean up after themselves.
pub async fn delete_run_root_tree(config: &ZkConfig) {
    if let Some(run_root) = RUN_ROOT.get() {
        delete_tree(config, run_root).await;
    }
}

/// Deletes issued at once by [`delete_tree`].
const CLEANUP_DELETES_IN_FLIGHT: usize = 1_000;

/// Deletes `root` and everything under it (best effort: a node that
/// vanished meanwhile is fine).
pub async fn delete_tree(config: &ZkConfig, root: &str) {
    let config = config
        .clone()
        .with_max_reply_bytes(config.max_reply_bytes.max(crate::LARGE_REPLY_BYTES));
    let Ok((admin, _events)) = ZkSession::connect(&config).await else {
        return;
    };
    // A directory's children are deleted together, many at once; those
    // that have children of their own refuse, and are emptied the same way
    // before their parent is deleted. So is a child whose delete's outcome
    // is unknown (a lost connection): listed again, then deleted.
    let mut stack = vec![(root.to_owned(), false)];
    while let Some((path, children_done)) = stack.pop() {
        if children_done {
            let _ = admin.delete(&path, None).await;
            continue;
        }
        stack.push((path.clone(), true));
        let Ok((children, _)) = admin.get_children(&path, Watch::No).await else {
            continue;
        };
        let children: Vec<String> = children
            .iter()
            .map(|child| format!("{path}/{child}"))
            .collect();
        for chunk in children.chunks(CLEANUP_DELETES_IN_FLIGHT) {
            let outcomes =
                futures::future::join_all(chunk.iter().map(|child| admin.delete(child, None)))
                    .await;
            for (child, outcome) in chunk.iter().zip(outcomes) {
                let again = match outcome {
                    Err(ZkError::NotEmpty { .. }) => true,
                    Err(error) => error.is_outcome_unknown(),
                    Ok(()) => false,
                };
                if again {
                    stack.push((child.clone(), false));
                }
            }
        }
    }
    let _ = admin.close().await;
}

/// A node of an ensemble that a test killed. It is started again when this
/// is dropped, also when the test fails before it restores the node
/// itself: otherwise the ensemble would be left a node short for the
/// lane's next tests and test binaries, and the next kill would take its
/// quorum, failing every later test slowly on its time guards.
pub struct KilledNode {
    dir: String,
    id: String,
    restored: bool,
}

impl KilledNode {
    /// SIGKILLs node `id` of the ensemble in `dir`.
    pub fn kill(dir: &str, id: &str) -> KilledNode {
        run_scripts_zk(&["kill", dir, id]);
        KilledNode {
            dir: dir.to_owned(),
            id: id.to_owned(),
            restored: false,
        }
    }

    /// Starts the node again and waits until every node serves.
    pub fn restore(mut self) {
        self.restored = true;
        run_scripts_zk(&["start-node", &self.dir, &self.id]);
        run_scripts_zk(&["wait", &self.dir]);
    }
}

impl Drop for KilledNode {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        // The test failed on the way (this runs as its panic unwinds): no
        // assertion here, since a second panic would abort the whole test
        // binary. Whether the node came back, the next test finds out.
        for args in [
            &["start-node", &self.dir, &self.id][..],
            &["wait", &self.dir][..],
        ] {
            let _ = std::process::Command::new("bash")
                .arg(scripts_zk())
                .args(args)
                .stdin(std::process::Stdio::null())
                .status();
        }
    }
}

/// `scripts/zk` of this repository (starts, stops, kills and restarts the
/// servers under test).
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
