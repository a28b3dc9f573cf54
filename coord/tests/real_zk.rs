//! What only a real ZooKeeper can show: the backend's answers to bad input,
//! a session surviving the loss of its server, sessions expiring for real,
//! and interoperability with a client nobody here wrote (python3-kazoo).
//!
//! `ZKDIST_TEST_ZK` names the server (a connect string); tests that kill
//! nodes also need `ZKDIST_TEST_ENSEMBLE_DIR`, the directory of a 3-node
//! ensemble started by `scripts/zk ensemble`. A test whose server is not
//! named is reported as ignored, never as passed. Tests run one at a time:
//! some of them kill servers.

mod common;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::proxy::ProxiedEnsemble;
use libtest_mimic::{Arguments, Trial};
use zkdist_coord::zk::testing::KazooOp;
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{
    AddWatchMode, Client, ClientError, Coordinator, CreateMode, Event, EventStream, Layout,
    MAX_DATA_BYTES, MAX_REPLY_BYTES, Op, OpResult, SessionState, TaskResult, Watch, WatchEvent,
    WatchKind, ZkError,
};

/// How long a test waits for an event that must come.
const EVENT_WAIT: Duration = Duration::from_secs(30);

/// What a test needs to run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    Nothing,
    Server,
    Ensemble,
}

/// The runtime a test runs on. The session's actor is a tokio task: on a
/// multi-threaded runtime it runs in parallel with the caller and with the
/// client's reader thread, which is where ordering races show.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Runtime {
    CurrentThread,
    MultiThread,
}

type TestFn = fn(Env) -> std::pin::Pin<Box<dyn Future<Output = ()>>>;

#[derive(Clone)]
struct Env {
    connect: String,
    ensemble_dir: Option<PathBuf>,
}

macro_rules! tests {
    ($($needs:ident $runtime:ident $name:ident),* $(,)?) => {
        fn all_tests() -> Vec<(&'static str, Needs, Runtime, TestFn)> {
            vec![$((
                stringify!($name),
                Needs::$needs,
                Runtime::$runtime,
                |env| Box::pin($name(env)) as _,
            )),*]
        }
    };
}

tests![
    Nothing CurrentThread malformed_connect_strings_fail_at_once_naming_the_fault,
    Nothing CurrentThread an_unreachable_server_fails_with_connection_loss_naming_it,
    Nothing CurrentThread a_server_that_hangs_up_fails_with_connection_loss_naming_it,
    Nothing CurrentThread a_server_that_never_answers_fails_with_connection_loss_naming_it,
    Server CurrentThread a_missing_chroot_is_named,
    Server CurrentThread the_session_timeout_is_what_the_server_granted,
    Server MultiThread a_listing_over_the_default_reply_limit_is_read_once_the_limit_is_raised,
    Server CurrentThread a_chroot_that_exists_roots_every_path,
    Server CurrentThread a_request_too_large_under_its_chroot_is_refused_before_it_is_sent,
    Server CurrentThread wrong_digest_credentials_read_but_cannot_write,
    Server CurrentThread a_multi_read_of_a_node_closed_to_reading_is_no_auth_not_no_node,
    Server CurrentThread a_layout_made_with_credentials_is_read_by_all_and_changed_by_its_owner_alone,
    Server CurrentThread a_session_cut_off_past_its_timeout_expires_and_a_new_one_works,
    Server CurrentThread a_session_closed_by_a_second_client_sees_expired,
    Server CurrentThread a_client_whose_session_task_stopped_says_closed_not_connection_loss,
    Server CurrentThread a_session_its_client_gave_up_on_lives_on_until_closed_from_a_second_client,
    Server CurrentThread requests_on_a_silent_link_fail_with_connection_loss_and_the_session_survives,
    Server CurrentThread a_session_watching_many_paths_reconnects_with_its_watches,
    Server CurrentThread a_link_back_well_within_the_session_timeout_is_tried_in_time,
    Server CurrentThread kazoo_and_the_rust_backend_see_each_others_nodes_and_watches,
    Server CurrentThread a_wait_hears_of_a_mark_made_while_it_waits,
    Server MultiThread a_pipelined_write_replies_after_the_event_it_fired,
    Server MultiThread pipelined_watches_on_one_node_report_one_change_once,
    Server MultiThread pipelined_data_and_child_watches_report_one_deletion_once,
    Server MultiThread pipelined_persistent_and_one_shot_watches_report_each_change_once,
    Ensemble CurrentThread killing_the_server_a_session_uses_keeps_the_session,
    Ensemble CurrentThread killing_the_leader_keeps_sessions_and_ephemerals,
    Ensemble CurrentThread a_session_kept_through_outages_outlives_a_loss_of_quorum,
    Ensemble CurrentThread a_persistent_watch_follows_its_session_to_another_server,
    Ensemble MultiThread a_sync_on_the_leader_sees_what_a_follower_acknowledged,
    Ensemble MultiThread a_wait_on_a_follower_finds_a_task_the_leader_just_acknowledged,
];

fn main() {
    let mut args = Arguments::from_args();
    // Some tests kill servers that the others would be using.
    args.test_threads = Some(1);
    let server = common::test_zk();
    let ensemble_dir = common::test_ensemble_dir();
    let trials = all_tests()
        .into_iter()
        .map(|(name, needs, runtime, test)| {
            let ignored = match needs {
                Needs::Nothing => false,
                Needs::Server => server.is_none(),
                Needs::Ensemble => server.is_none() || ensemble_dir.is_none(),
            };
            let env = Env {
                connect: server.clone().unwrap_or_default(),
                ensemble_dir: ensemble_dir.clone(),
            };
            Trial::test(name, move || {
                if needs == Needs::Ensemble && env.ensemble_dir.is_none() {
                    return Err(
                        "ZKDIST_TEST_ENSEMBLE_DIR is not set: it names a 3-node ensemble \
                                started by `scripts/zk ensemble`"
                            .into(),
                    );
                }
                if needs != Needs::Nothing && env.connect.is_empty() {
                    return Err(common::NO_SERVER.into());
                }
                let runtime = match runtime {
                    Runtime::CurrentThread => common::runtime(),
                    Runtime::MultiThread => common::multi_thread_runtime(),
                };
                runtime.block_on(test(env));
                Ok(())
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    if server.is_none() {
        eprintln!("real-server tests ignored: {}", common::NO_SERVER);
    } else if ensemble_dir.is_none() {
        eprintln!("node-killing tests ignored: ZKDIST_TEST_ENSEMBLE_DIR is not set");
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(connect) = &server {
        let config = common::config(connect);
        // The tests leave their nodes behind: a passing run removes them
        // all, a failing one keeps them for a look with zkCli or kazoo.
        common::runtime().block_on(async {
            if conclusion.has_failed() {
                common::delete_run_root_if_empty(&config).await
            } else {
                common::delete_run_root_tree(&config).await
            }
        });
    }
    conclusion.exit()
}

// ---------------------------------------------------------------------------
// Helpers.

async fn next_event(events: &mut EventStream) -> Event {
    match tokio::time::timeout(EVENT_WAIT, events.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("event stream closed while waiting for an event"),
        Err(_) => panic!("no event within {EVENT_WAIT:?}"),
    }
}

fn watch(kind: WatchKind, path: &str) -> Event {
    Event::Watch(WatchEvent {
        kind,
        path: path.to_owned(),
    })
}

async fn fresh_root(env: &Env, name: &str) -> String {
    common::fresh_case_root(&common::config(&env.connect), "zkdist-real", name).await
}

async fn connect(config: &ZkConfig) -> (ZkSession, EventStream) {
    let (session, mut events) = ZkSession::connect(config)
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", config.connect));
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected)
    );
    (session, events)
}

fn unique_suffix() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos()
}

/// Runs `connect` and fails the test if it does not return within the
/// connect timeout and a generous margin: a hang guard, not a speed check.
async fn connect_result(config: &ZkConfig) -> Result<(ZkSession, EventStream), ZkError> {
    let guard = Duration::from_millis(config.connect_timeout_ms) + Duration::from_secs(10);
    tokio::time::timeout(guard, ZkSession::connect(config))
        .await
        .unwrap_or_else(|_| panic!("connect to {:?} hung past {guard:?}", config.connect))
}

fn expect_bad_arguments(result: Result<(ZkSession, EventStream), ZkError>, needles: &[&str]) {
    match result {
        Err(ZkError::BadArguments { reason }) => {
            for needle in needles {
                assert!(
                    reason.contains(needle),
                    "{reason:?} does not mention {needle:?}"
                );
            }
        }
        Err(other) => panic!("expected BadArguments mentioning {needles:?}, got {other:?}"),
        Ok(_) => panic!("expected BadArguments mentioning {needles:?}, got a session"),
    }
}

/// The ZooKeeper ids and client ports of the ensemble's nodes.
fn ensemble_nodes(dir: &Path) -> Vec<(String, u16)> {
    let nodes = std::fs::read_to_string(dir.join("nodes"))
        .unwrap_or_else(|e| panic!("read {}/nodes: {e}", dir.display()));
    nodes
        .lines()
        .map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next().expect("node id").to_owned();
            let port = fields.next().expect("node port").parse().expect("port");
            (id, port)
        })
        .collect()
}

/// The answer of a four-letter-word command (empty if the node is down).
fn four_letter(port: u16, word: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(word.as_bytes()).is_err() {
        return String::new();
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// The node of `dir` that serves `session` (from the servers' `cons`).
fn node_serving(dir: &Path, session: &ZkSession) -> String {
    let needle = format!("sid={}", session.session_id());
    let nodes = ensemble_nodes(dir);
    for (id, port) in &nodes {
        if four_letter(*port, "cons").contains(&needle) {
            return id.clone();
        }
    }
    panic!("no node of {} lists {needle} in cons", dir.display());
}

/// Waits for the session to lose its server and reconnect: exactly
/// `Disconnected` then `Connected`, no expiry.
async fn expect_reconnect(events: &mut EventStream) {
    assert_eq!(
        next_event(events).await,
        Event::Session(SessionState::Disconnected),
        "the session notices that its server is gone"
    );
    assert_eq!(
        next_event(events).await,
        Event::Session(SessionState::Connected),
        "the session reconnects to another server"
    );
}

/// Kills node `id` of the ensemble in `dir`; restore it (or let the guard
/// do so if the test fails), so that the next test starts from three
/// nodes.
fn kill_node(dir: &Path, id: &str) -> common::KilledNode {
    common::KilledNode::kill(dir.to_str().expect("utf-8 ensemble dir"), id)
}

// ---------------------------------------------------------------------------
// Bad input.

/// A server holds a session's timeout to its bounds (`scripts/zk` sets
/// them to 1 and 60 s): what a session may outlive its client by is what
/// the server granted, which the session reports.
async fn the_session_timeout_is_what_the_server_granted(env: Env) {
    for (asked_ms, granted_ms) in [(500, 1_000), (5_000, 5_000), (120_000, 60_000)] {
        let config = common::config(&env.connect).with_session_timeout_ms(asked_ms);
        let (session, _events) = connect(&config).await;
        assert_eq!(
            session.granted_session_timeout_ms(),
            granted_ms,
            "asked for {asked_ms} ms"
        );
        session.close().await.unwrap();
    }
}

async fn malformed_connect_strings_fail_at_once_naming_the_fault(_env: Env) {
    for (connect, needles) in [
        ("", &["empty"][..]),
        ("127.0.0.1:99999", &["\"99999\"", "1..=65535"]),
        ("127.0.0.1:2181,,127.0.0.1:2182", &["server 2"]),
        ("127.0.0.1:2181/zk/", &["chroot", "/zk/"]),
        ("host name:2181", &["whitespace"]),
    ] {
        let config = ZkConfig::new(connect).with_connect_timeout_ms(60_000);
        // Refused before any socket: well within the connect timeout.
        let result = tokio::time::timeout(Duration::from_secs(5), ZkSession::connect(&config))
            .await
            .unwrap_or_else(|_| panic!("{connect:?} was not refused at once"));
        expect_bad_arguments(result, needles);
    }
    let no_user = ZkConfig::new("127.0.0.1:2181").with_digest_auth("", "pw");
    expect_bad_arguments(connect_result(&no_user).await, &["user"]);
}

/// The refusal names the server and the connect timeout it waited for. How
/// long it took is not checked here: wall-clock limits belong in benchmarks,
/// and `connect_result` only guards against a hang.
async fn an_unreachable_server_fails_with_connection_loss_naming_it(_env: Env) {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let config = ZkConfig::new(format!("127.0.0.1:{port}")).with_connect_timeout_ms(1_500);
    match connect_result(&config).await {
        Err(ZkError::ConnectionLoss { reason }) => {
            assert!(reason.contains(&format!("127.0.0.1:{port}")), "{reason}");
            assert!(reason.contains("connection refused"), "{reason}");
            assert!(reason.contains("1500 ms"), "{reason}");
        }
        Err(other) => panic!("expected ConnectionLoss, got {other:?}"),
        Ok(_) => panic!("connected to a port nobody listens on"),
    }
}

/// A listener that accepts every connection and then, if `hang_up`, closes
/// it at once (the client reads end of stream), or else keeps it open and
/// says nothing (the client's read never completes). Either way no session
/// can be made. Returns the listener's address; the task ends with the
/// runtime.
async fn fake_server(hang_up: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback listener");
    let address = listener.local_addr().expect("the listener's address");
    tokio::spawn(async move {
        let mut silent = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            if !hang_up {
                silent.push(stream);
            }
        }
    });
    address.to_string()
}

/// A connection to a [`fake_server`] fails with a lost connection naming
/// the server, the connect timeout and that no session was granted: not a
/// hang or a panic. Under a second, the timeout itself is named as a
/// likely cause: a healthy server may need longer for a handshake.
async fn expect_no_session_from_fake_server(hang_up: bool, connect_timeout_ms: u64) {
    let address = fake_server(hang_up).await;
    let config = ZkConfig::new(&address).with_connect_timeout_ms(connect_timeout_ms);
    match connect_result(&config).await {
        Err(ZkError::ConnectionLoss { reason }) => {
            assert!(reason.contains(&address), "{reason}");
            assert!(
                reason.contains(&format!("{connect_timeout_ms} ms")),
                "{reason}"
            );
            assert!(reason.contains("granted no session"), "{reason}");
            assert_eq!(
                reason.contains(&format!(
                    "a connect timeout of {connect_timeout_ms} ms may be too short"
                )),
                connect_timeout_ms < 1_000,
                "{reason}"
            );
        }
        Err(other) => panic!("expected ConnectionLoss, got {other:?}"),
        Ok(_) => panic!("made a session with a server that grants none (hang_up: {hang_up})"),
    }
}

/// The socket's end of stream, read before any reply.
async fn a_server_that_hangs_up_fails_with_connection_loss_naming_it(_env: Env) {
    expect_no_session_from_fake_server(true, 1_500).await;
}

/// A server that accepts and never answers the handshake: the connect
/// timeout ends the attempt.
async fn a_server_that_never_answers_fails_with_connection_loss_naming_it(_env: Env) {
    expect_no_session_from_fake_server(false, 1_500).await;
    expect_no_session_from_fake_server(false, 300).await;
}

/// The server sends a listing of any size; the 1 MiB default is the
/// client's (a Java client's `jute.maxbuffer`), and a session configured
/// with a larger limit reads the listing.
async fn a_listing_over_the_default_reply_limit_is_read_once_the_limit_is_raised(env: Env) {
    let root = fresh_root(&env, "reply-limit").await;
    let (writer, _writer_events) = connect(&common::config(&env.connect)).await;
    // 30,000 names of 32 bytes: some 1.08 MB on the wire.
    let prefix = format!("{root}/task-00000000000000aa-");
    const CHILDREN: usize = 30_000;
    for chunk in 0..CHILDREN / 1_000 {
        let created = futures::future::join_all(
            (0..1_000).map(|_| writer.create(&prefix, b"", CreateMode::PersistentSequential)),
        )
        .await;
        for path in created {
            path.unwrap_or_else(|e| panic!("chunk {chunk}: {e}"));
        }
    }
    match writer.get_children(&root, Watch::No).await {
        Err(ZkError::ConnectionLoss { reason }) => assert!(
            reason.contains("over the client's 1048576-byte limit"),
            "{reason}"
        ),
        other => panic!(
            "a listing over 1 MiB with the default limit: {:?}",
            other.map(|(names, _)| names.len())
        ),
    }
    let raised = common::config(&env.connect).with_max_reply_bytes(4 * MAX_REPLY_BYTES);
    let (reader, _reader_events) = connect(&raised).await;
    let (names, stat) = reader
        .get_children(&root, Watch::No)
        .await
        .expect("the raised limit takes the listing");
    assert_eq!(names.len(), CHILDREN);
    assert_eq!(stat.num_children, CHILDREN as i32);
    // The end-of-run cleanup lists with the default limit: leave it a
    // short listing.
    let paths: Vec<String> = names.iter().map(|name| format!("{root}/{name}")).collect();
    for chunk in paths.chunks(1_000) {
        let deleted =
            futures::future::join_all(chunk.iter().map(|path| writer.delete(path, None))).await;
        for result in deleted {
            result.expect("a child is deleted");
        }
    }
    assert!(
        writer
            .get_children(&root, Watch::No)
            .await
            .unwrap()
            .0
            .is_empty()
    );
}

async fn a_missing_chroot_is_named(env: Env) {
    let chroot = format!("/zkdist-missing-{}", unique_suffix());
    let config = common::config(&format!("{}{chroot}", env.connect));
    expect_bad_arguments(connect_result(&config).await, &[&chroot, "does not exist"]);
}

async fn a_chroot_that_exists_roots_every_path(env: Env) {
    let root = fresh_root(&env, "chroot").await;
    let (plain, _plain_events) = connect(&common::config(&env.connect)).await;
    let (rooted, mut rooted_events) =
        connect(&common::config(&format!("{}{root}", env.connect))).await;
    assert_eq!(rooted.exists("/x", Watch::Yes).await.unwrap(), None);
    assert_eq!(
        rooted
            .create("/x", b"in chroot", CreateMode::Persistent)
            .await
            .unwrap(),
        "/x"
    );
    assert_eq!(
        next_event(&mut rooted_events).await,
        watch(WatchKind::NodeCreated, "/x"),
        "watch paths are relative to the chroot"
    );
    let (data, _) = plain
        .get_data(&format!("{root}/x"), Watch::No)
        .await
        .unwrap();
    assert_eq!(data, b"in chroot");
    let sequential = rooted
        .create("/x/item-", b"", CreateMode::PersistentSequential)
        .await
        .unwrap();
    assert_eq!(sequential, "/x/item-0000000000");
    // A persistent recursive watch (the master's task discovery) and a
    // multi's results name paths under the chroot too.
    rooted
        .add_watch("/x", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let results = rooted
        .multi(vec![
            Op::Create {
                path: "/x/item-".to_owned(),
                data: Vec::new(),
                mode: CreateMode::PersistentSequential,
            },
            Op::Delete {
                path: sequential.clone(),
                version: None,
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        results,
        [
            OpResult::Created {
                path: "/x/item-0000000001".to_owned()
            },
            OpResult::Deleted
        ]
    );
    for expected in [
        watch(WatchKind::NodeCreated, "/x/item-0000000001"),
        watch(WatchKind::NodeDeleted, &sequential),
    ] {
        assert_eq!(
            next_event(&mut rooted_events).await,
            expected,
            "recursive watch paths are relative to the chroot"
        );
    }
    rooted.close().await.unwrap();
    plain.close().await.unwrap();
}

/// Data that fits beside a path as given may not fit once the server sees
/// the path under a long chroot: the server would drop the connection, on
/// every reconnection the request was sent on. The session refuses it at
/// once, naming the chroot, and what fits still goes through.
async fn a_request_too_large_under_its_chroot_is_refused_before_it_is_sent(env: Env) {
    let root = fresh_root(&env, "long-chroot").await;
    let (plain, _plain_events) = connect(&common::config(&env.connect)).await;
    let chroot = format!("{root}/{}", "c".repeat(1000));
    plain
        .create(&chroot, b"", CreateMode::Persistent)
        .await
        .unwrap();
    let (rooted, _rooted_events) =
        connect(&common::config(&format!("{}{chroot}", env.connect))).await;
    let data = vec![b'x'; MAX_DATA_BYTES];
    match rooted.create("/big", &data, CreateMode::Persistent).await {
        Err(ZkError::RequestTooLarge { request, .. }) => {
            assert!(request.contains(&chroot), "{request}");
        }
        other => panic!("expected RequestTooLarge, got {other:?}"),
    }
    let fits = vec![b'x'; MAX_DATA_BYTES - 2048];
    assert_eq!(
        rooted
            .create("/big", &fits, CreateMode::Persistent)
            .await
            .unwrap(),
        "/big"
    );
    rooted.close().await.unwrap();
    plain.close().await.unwrap();
}

/// With digest credentials, a session's nodes are readable by everyone and
/// writable by sessions with the same credentials only; wrong credentials
/// (ZooKeeper accepts any at authentication) and none are refused each
/// write with `NoAuth` naming the path.
async fn wrong_digest_credentials_read_but_cannot_write(env: Env) {
    let root = fresh_root(&env, "digest").await;
    let owned = format!("{root}/owned");
    let inner = format!("{owned}/inner");
    let child = format!("{owned}/child");
    let alice = common::config(&env.connect).with_digest_auth("alice", "right password");
    let (owner, _events) = connect(&alice).await;
    owner
        .create(&owned, b"alice's", CreateMode::Persistent)
        .await
        .unwrap();
    owner
        .create(&inner, b"", CreateMode::Persistent)
        .await
        .unwrap();
    let refused = |path: &str| ZkError::NoAuth { path: path.into() };

    let impostor = common::config(&env.connect).with_digest_auth("alice", "wrong password");
    let anonymous = common::config(&env.connect);
    for outsider in [&impostor, &anonymous] {
        let who = match &outsider.auth {
            Some(_) => "alice with a wrong password",
            None => "a session without credentials",
        };
        let (session, _session_events) = connect(outsider).await;
        // Everyone reads: the ACL gives world:anyone READ.
        let (data, _) = session.get_data(&owned, Watch::No).await.unwrap();
        assert_eq!(data, b"alice's", "{who} reads");
        assert_eq!(
            session.get_children(&owned, Watch::No).await.unwrap().0,
            vec!["inner".to_owned()],
            "{who} lists"
        );
        // Nobody else writes, and the refusal names the path.
        assert_eq!(
            session.set_data(&owned, b"x", None).await,
            Err(refused(&owned)),
            "{who} sets"
        );
        assert_eq!(
            session.create(&child, b"", CreateMode::Persistent).await,
            Err(refused(&child)),
            "{who} creates below"
        );
        assert_eq!(
            session.delete(&inner, None).await,
            Err(refused(&inner)),
            "{who} deletes below"
        );
        let multi = session
            .multi(vec![Op::Create {
                path: child.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            }])
            .await;
        assert_eq!(
            multi,
            Err(ZkError::Multi {
                index: 0,
                error: Box::new(refused(&child))
            }),
            "{who} creates below in a multi"
        );
        session.close().await.unwrap();
    }
    let (data, stat) = owner.get_data(&owned, Watch::No).await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"alice's"[..], 0));
    assert!(owner.exists(&inner, Watch::No).await.unwrap().is_some());

    let (again, _again_events) = connect(&alice).await;
    again
        .create(&child, b"", CreateMode::Persistent)
        .await
        .expect("the right credentials in a new session may write");
    for path in [&child, &inner, &owned] {
        again.delete(path, None).await.unwrap();
    }
    again.close().await.unwrap();
    owner.close().await.unwrap();
}

/// A multi-read answers a node the session may not read with `NoAuth`,
/// and a missing one with `NoNode`: ZooKeeper finds the node before it
/// checks its ACL, so `NoAuth` means the node exists. (A master checking
/// whether tasks are settled relies on it; the simulator has no ACLs.)
async fn a_multi_read_of_a_node_closed_to_reading_is_no_auth_not_no_node(env: Env) {
    let root = fresh_root(&env, "multi-read-acl").await;
    let servers = env.connect.clone();
    let prefix = format!("{root}/closed-");
    let created = tokio::task::spawn_blocking(move || {
        zkdist_coord::zk::testing::run_kazoo(
            &servers,
            Some("owner:s3cret"),
            &[KazooOp::CreateOwnedSequential(prefix)],
        )
    })
    .await
    .expect("the kazoo runner");
    assert_eq!(created[0].outcome, "ok", "{created:?}");
    let closed = created[0]
        .value
        .as_str()
        .expect("the path created")
        .to_owned();
    let missing = format!("{root}/missing");

    let (session, _events) = connect(&common::config(&env.connect)).await;
    assert_eq!(
        session.get_data(&closed, Watch::No).await,
        Err(ZkError::NoAuth {
            path: closed.clone()
        }),
        "the node is closed to this session"
    );
    let listed = session
        .get_children_many(vec![closed.clone(), missing.clone(), root.clone()])
        .await
        .expect("a multi-read with unreadable and missing nodes still succeeds");
    let closed_name = closed.rsplit('/').next().unwrap().to_owned();
    assert_eq!(
        listed,
        vec![
            Err(ZkError::NoAuth {
                path: closed.clone()
            }),
            Err(ZkError::NoNode { path: missing }),
            Ok(vec![closed_name]),
        ]
    );
    let read = session
        .get_data_many(vec![closed.clone()])
        .await
        .expect("a multi-read of an unreadable node still succeeds");
    assert_eq!(read, vec![Err(ZkError::NoAuth { path: closed })]);
    session.close().await.unwrap();
}

/// `Layout::ensure_layout` on a session with credentials: the root (and its
/// missing parent) and the directories carry `[digest:USER:HASH -> ALL,
/// world:anyone -> READ]`, as kazoo reads them (the digest computed by
/// kazoo, not by us), and kazoo without credentials reads everything but is
/// refused every write.
async fn a_layout_made_with_credentials_is_read_by_all_and_changed_by_its_owner_alone(env: Env) {
    let case = fresh_root(&env, "layout-acl").await;
    let parent = format!("{case}/parent");
    let layout = Layout::new(&format!("{parent}/zkdist")).unwrap();
    let auth = "zkdist-owner:s3cret";
    let owner_config = common::config(&env.connect).with_digest_auth("zkdist-owner", "s3cret");
    let (owner, _events) = connect(&owner_config).await;
    layout.ensure_layout(&owner).await.unwrap();
    let task = owner
        .create(
            &layout.task_prefix(),
            br#"{"kind":"pi","samples":10}"#,
            CreateMode::PersistentSequential,
        )
        .await
        .unwrap();
    let worker = format!("{}/worker-0000000000", layout.workers_dir());
    owner
        .create(&worker, b"", CreateMode::Ephemeral)
        .await
        .unwrap();

    let nodes = [
        parent.clone(),
        layout.root().to_owned(),
        layout.workers_dir(),
        layout.tasks_dir(),
        layout.assignments_dir(),
        layout.ids_dir(),
        task.clone(),
        worker.clone(),
    ];
    let acl_reads: Vec<KazooOp> = nodes.iter().map(|n| KazooOp::Acl(n.clone())).collect();
    let mut ops = acl_reads.clone();
    ops.extend([
        KazooOp::Get(task.clone()),
        KazooOp::Children(layout.tasks_dir()),
        KazooOp::Children(layout.workers_dir()),
        KazooOp::CreateSequential(layout.task_prefix()),
        KazooOp::Create(format!("{}/worker-0000000009", layout.assignments_dir())),
        KazooOp::CreateEphemeral(format!("{}/worker-0000000009", layout.workers_dir())),
        KazooOp::Create(format!("{task}/result")),
        KazooOp::Set(task.clone()),
        KazooOp::Set(layout.root().to_owned()),
        KazooOp::Delete(task.clone()),
        KazooOp::Delete(worker.clone()),
        KazooOp::Delete(layout.tasks_dir()),
    ]);
    let servers = env.connect.clone();
    let (outsider, owner_acls, digest) = tokio::task::spawn_blocking(move || {
        (
            common::run_kazoo(&servers, None, &ops),
            common::run_kazoo(&servers, Some(auth), &acl_reads),
            common::digest_id(auth),
        )
    })
    .await
    .expect("the kazoo runner");
    // The owner sees its full digest identity; ZooKeeper shows an outsider
    // (no ADMIN permission) the identity with its hash masked.
    assert!(digest.starts_with("zkdist-owner:"), "{digest}");
    let acl = |id: &str| {
        vec![
            ("digest".to_owned(), id.to_owned(), common::PERM_ALL),
            ("world".to_owned(), "anyone".to_owned(), common::PERM_READ),
        ]
    };
    let (outsider_acls, rest) = outsider.split_at(nodes.len());
    for ((node, owners), outsiders) in nodes.iter().zip(&owner_acls).zip(outsider_acls) {
        assert_eq!(owners.outcome, "ok", "{owners:?}");
        assert_eq!(
            common::acl_entries(owners),
            acl(&digest),
            "the ACL of {node}"
        );
        assert_eq!(outsiders.outcome, "ok", "{outsiders:?}");
        assert_eq!(
            common::acl_entries(outsiders),
            acl("zkdist-owner:x"),
            "the ACL of {node}, read without credentials"
        );
    }
    let name = task.rsplit('/').next().unwrap().to_owned();
    for answer in rest {
        let expected_outcome = if answer.op.is_write() {
            "NoAuthError"
        } else {
            "ok"
        };
        assert_eq!(answer.outcome, expected_outcome, "{answer:?}");
    }
    assert_eq!(rest[0].value, r#"{"kind":"pi","samples":10}"#);
    assert_eq!(rest[1].value, serde_json::json!([name]));
    assert_eq!(rest[2].value, serde_json::json!(["worker-0000000000"]));

    // Nothing changed, and the owner can still do everything.
    let (tasks, _) = owner
        .get_children(&layout.tasks_dir(), Watch::No)
        .await
        .unwrap();
    assert_eq!(tasks, vec![name]);
    assert_eq!(owner.get_data(&task, Watch::No).await.unwrap().1.version, 0);
    owner
        .create(&format!("{task}/result"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    owner.close().await.unwrap();
    common::delete_tree(&owner_config, &parent).await;
    let (check, _check_events) = connect(&common::config(&env.connect)).await;
    assert_eq!(check.exists(&parent, Watch::No).await.unwrap(), None);
    check.close().await.unwrap();
}

// ---------------------------------------------------------------------------
// Expiry.

async fn a_session_cut_off_past_its_timeout_expires_and_a_new_one_works(env: Env) {
    let root = fresh_root(&env, "timeout-expiry").await;
    let direct = common::config(&env.connect);
    let (session, mut events, link) = common::connect_proxied(&direct).await.expect("connect");
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected)
    );
    let ephemeral = format!("{root}/ephemeral");
    session
        .create(&ephemeral, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let (observer, mut observer_events) = connect(&direct).await;
    assert!(
        observer
            .exists(&ephemeral, Watch::Yes)
            .await
            .unwrap()
            .is_some()
    );

    // The client is cut off: no heartbeat reaches the server, which expires
    // the session once its timeout has passed and deletes its ephemeral.
    link.block();
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Disconnected)
    );
    assert_eq!(
        next_event(&mut observer_events).await,
        watch(WatchKind::NodeDeleted, &ephemeral),
        "the server expired the session by itself and deleted its ephemeral"
    );
    link.unblock();
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Expired),
        "back in touch, the client learns that its session expired"
    );
    assert_eq!(
        session.exists("/", Watch::No).await,
        Err(ZkError::SessionExpired)
    );
    assert_eq!(
        session.create(&ephemeral, b"", CreateMode::Ephemeral).await,
        Err(ZkError::SessionExpired)
    );

    let (fresh, _fresh_events) = connect(&direct).await;
    assert_ne!(fresh.session_id(), session.session_id());
    fresh
        .create(&ephemeral, b"again", CreateMode::Ephemeral)
        .await
        .unwrap();
    fresh.close().await.unwrap();
}

/// A session whose link goes through proxies, connected, and the
/// ephemeral node it owns under a fresh root: what shows whether the
/// server still holds the session.
struct ProxiedOwner {
    root: String,
    direct: ZkConfig,
    session: ZkSession,
    events: EventStream,
    link: ProxiedEnsemble,
    ephemeral: String,
}

async fn proxied_owner_of_an_ephemeral(env: &Env, name: &str) -> ProxiedOwner {
    let root = fresh_root(env, name).await;
    let direct = common::config(&env.connect);
    let (session, mut events, link) = common::connect_proxied(&direct).await.expect("connect");
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected)
    );
    let ephemeral = format!("{root}/ephemeral");
    session
        .create(&ephemeral, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    ProxiedOwner {
        root,
        direct,
        session,
        events,
        link,
        ephemeral,
    }
}

/// The client library's session task can stop without publishing a
/// terminal state: a panic inside it does that, and so does shutting down
/// the runtime it runs on, which is how this test stops it. Its requests
/// must then fail as closed and its state watchers hear `Closed`: a
/// `ConnectionLoss` (what an unpatched client answers) would have the
/// backend retry for good, and a watcher would wait for good.
async fn a_client_whose_session_task_stopped_says_closed_not_connection_loss(env: Env) {
    let connect = env.connect.clone();
    let (client, one_shot, persistent) = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let watched = runtime.block_on(async {
            let client = zookeeper_client::Client::connect(&connect)
                .await
                .expect("the client connects");
            let (_, _, one_shot) = client
                .get_and_watch_data("/")
                .await
                .expect("the root is read and watched");
            let persistent = client
                .watch("/", zookeeper_client::AddWatchMode::PersistentRecursive)
                .await
                .expect("a recursive watch is added");
            (client, one_shot, persistent)
        });
        // Drops the session task, mid-session, with the client and its
        // watchers kept.
        drop(runtime);
        watched
    })
    .join()
    .expect("the connecting thread ends");
    let mut state = client.state_watcher();
    let answered = tokio::time::timeout(EVENT_WAIT, client.get_data("/"))
        .await
        .expect("a request to a stopped session is answered");
    assert_eq!(answered.unwrap_err(), zookeeper_client::Error::ClientClosed);
    let heard = tokio::time::timeout(Duration::from_secs(5), state.changed())
        .await
        .expect("a watcher of a stopped session hears of it");
    assert_eq!(heard, zookeeper_client::SessionState::Closed);
    // Once, as a terminal state is; and the state the client last
    // published, which only a server's word makes terminal, is not.
    let again = tokio::time::timeout(Duration::from_millis(200), state.changed()).await;
    assert!(again.is_err(), "Closed reported twice: {again:?}");
    assert!(!state.peek_state().is_terminated());
    // Node watches end as their session did, instead of panicking.
    let closed =
        zookeeper_client::WatchedEvent::new_session(zookeeper_client::SessionState::Closed);
    let fired = tokio::time::timeout(Duration::from_secs(5), one_shot.changed())
        .await
        .expect("a one-shot watch of a stopped session ends");
    assert_eq!(fired, closed);
    let mut persistent = persistent;
    let heard = tokio::time::timeout(Duration::from_secs(5), persistent.changed())
        .await
        .expect("a persistent watch of a stopped session ends");
    assert_eq!(heard, closed);
}

async fn a_session_closed_by_a_second_client_sees_expired(env: Env) {
    let ProxiedOwner {
        direct,
        session,
        mut events,
        link,
        ephemeral,
        ..
    } = proxied_owner_of_an_ephemeral(&env, "second-client-expiry").await;
    common::expire_through_link(&session, &link, &direct).await;
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Disconnected)
    );
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Expired)
    );
    assert_eq!(
        session.get_data(&ephemeral, Watch::No).await,
        Err(ZkError::SessionExpired)
    );
    let (fresh, _fresh_events) = connect(&direct).await;
    assert_eq!(
        fresh.exists(&ephemeral, Watch::No).await.unwrap(),
        None,
        "the expired session's ephemeral is gone"
    );
    // Closing an expired session is a no-op.
    session.close().await.unwrap();
    fresh.close().await.unwrap();
}

/// The client declares its session expired on its own clock (unless the
/// session is kept through outages, as the roles' are): when it has
/// heard nothing for some 1.4 session timeouts. A server that still hears
/// the client (here the link swallows only what the server sends) keeps
/// the session past that verdict, and could still apply a create the
/// session had sent. This is why `zkdist submit` closes such a session
/// from a second client before it looks up a create left in doubt: the
/// test shows the session outliving its client's verdict, and the close
/// ending it.
async fn a_session_its_client_gave_up_on_lives_on_until_closed_from_a_second_client(env: Env) {
    let ProxiedOwner {
        root,
        direct,
        session,
        link,
        ephemeral,
        ..
    } = proxied_owner_of_an_ephemeral(&env, "client-declared-expiry").await;
    link.deafen();
    session
        .wait_until_expired(Duration::from_millis(3 * common::SESSION_TIMEOUT_MS))
        .await
        .expect("the client gives up on its session");
    let (observer, _observer_events) = connect(&direct).await;
    observer.sync(&root).await.unwrap();
    assert!(
        observer
            .exists(&ephemeral, Watch::No)
            .await
            .unwrap()
            .is_some(),
        "the server still holds the session its client declared expired"
    );

    session
        .close_from_second_client(&direct)
        .await
        .expect("close the session from a second client");
    observer.sync(&root).await.unwrap();
    assert_eq!(
        observer.exists(&ephemeral, Watch::No).await.unwrap(),
        None,
        "the close ended the session"
    );
    observer.close().await.unwrap();
}

/// A session whose watched paths overflow one `SetWatches` frame (the
/// client re-sends them in frames of up to 128 KiB of paths when it
/// reconnects) loses its connection: it reconnects, keeps its session, and
/// a watch set before the cut still fires. Before the vendored client's
/// fix the frames shared one xid: the second reply found no request and
/// broke the connection, reconnection after reconnection, until the client
/// declared the session expired.
async fn a_session_watching_many_paths_reconnects_with_its_watches(env: Env) {
    let ProxiedOwner {
        root,
        direct,
        session,
        mut events,
        link,
        ..
    } = proxied_owner_of_an_ephemeral(&env, "many-watches").await;
    // Exists watches on absent nodes: nothing to create, some 190 KiB of
    // paths (two frames at least, more if a list is sent again).
    let padding = "w".repeat(48);
    let paths: Vec<String> = (0..3_000)
        .map(|n| format!("{root}/{padding}-{n:05}"))
        .collect();
    let watched_bytes: usize = paths.iter().map(String::len).sum();
    assert!(watched_bytes > 128 * 1024, "{watched_bytes} bytes of paths");
    for batch in paths.chunks(500) {
        let found =
            futures::future::join_all(batch.iter().map(|path| session.exists(path, Watch::Yes)))
                .await;
        assert!(found.into_iter().all(|stat| stat.unwrap().is_none()));
    }

    link.block();
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Disconnected)
    );
    link.unblock();
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected),
        "the session reconnects, its watches sent again"
    );
    let (observer, _observer_events) = connect(&direct).await;
    let last = paths.last().expect("3,000 paths");
    observer
        .create(last, b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut events).await,
        Event::Watch(WatchEvent {
            kind: WatchKind::NodeCreated,
            path: last.clone(),
        }),
        "a watch set before the cut fires after it"
    );
    session.close().await.unwrap();
    observer.close().await.unwrap();
}

/// The link is cut for 7 s of a 10 s session timeout: the client keeps
/// trying at most a second apart, reconnects before the server expires the
/// session, and keeps it. Before the vendored client's cap, its pauses
/// doubled between rounds (0.1 s up to 6.4 s), so the attempt after the one
/// at 6.3 s came at 12.7 s, past the server's expiry, and a 7 s outage cost
/// the session.
async fn a_link_back_well_within_the_session_timeout_is_tried_in_time(env: Env) {
    // The server's largest session timeout (20 ticks of 500 ms).
    let session_timeout_ms = 10_000;
    let direct = common::config(&env.connect).with_session_timeout_ms(session_timeout_ms);
    let (session, mut events, link) = common::connect_proxied(&direct).await.expect("connect");
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected)
    );
    let id_before = session.session_id();
    link.block();
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Disconnected)
    );
    tokio::time::sleep(Duration::from_millis(session_timeout_ms * 7 / 10)).await;
    link.unblock();
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected),
        "the client reconnects before the server expires its session"
    );
    assert_eq!(session.session_id(), id_before);
    session.close().await.unwrap();
}

/// A server that stops answering without closing the connection: the
/// client gives up on the connection after its own timeout and fails the
/// requests in flight. Their outcome is unknown, which is `ConnectionLoss`
/// (retry, then check), not a system error; and the session, reconnected
/// within its timeout, is the same.
async fn requests_on_a_silent_link_fail_with_connection_loss_and_the_session_survives(env: Env) {
    let root = fresh_root(&env, "silent-link").await;
    let direct = common::config(&env.connect);
    let (session, mut events, link) = common::connect_proxied(&direct).await.expect("connect");
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected)
    );
    let node = format!("{root}/node");
    session
        .create(&node, b"before", CreateMode::Persistent)
        .await
        .unwrap();
    link.silence();
    let read = session.get_data(&node, Watch::No);
    let write = session.set_data(&node, b"during", None);
    let (read, write) = tokio::join!(read, write);
    for (what, error) in [
        ("get_data", read.map(|_| ())),
        ("set_data", write.map(|_| ())),
    ] {
        match error {
            Err(ZkError::ConnectionLoss { reason }) => {
                assert!(reason.contains(&node), "{what}: {reason}");
                assert!(
                    reason.contains("no response from connection"),
                    "{what}: {reason}"
                );
                assert!(
                    reason.contains("may or may not have been applied"),
                    "{what}: {reason}"
                );
            }
            other => panic!("{what} on a silent link: expected ConnectionLoss, got {other:?}"),
        }
    }
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Disconnected)
    );
    link.unsilence();
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected),
        "back within the session timeout: the same session"
    );
    // The write was swallowed on its way: not applied.
    let (data, stat) = session.get_data(&node, Watch::No).await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"before"[..], 0));
    session.set_data(&node, b"after", None).await.unwrap();
    session.close().await.unwrap();
}

// ---------------------------------------------------------------------------
// Interoperability with python3-kazoo.

const KAZOO_SCRIPT: &str = r#"
import sys
from kazoo.client import KazooClient

hosts, root, rust_session = sys.argv[1], sys.argv[2], int(sys.argv[3], 16)
zk = KazooClient(hosts=hosts, timeout=10.0)
zk.start(timeout=20)
data, _ = zk.get(root + "/from-rust")
print("from_rust=" + data.decode())
data, stat = zk.get(root + "/rust-ephemeral")
print("ephemeral_data=" + data.decode())
print("ephemeral_owned_by_rust=" + str(stat.ephemeralOwner == rust_session))
print("children=" + ",".join(sorted(zk.get_children(root))))
zk.create(root + "/from-kazoo", b"written by kazoo")
zk.set(root + "/from-rust", b"changed by kazoo")
zk.create(root + "/kazoo-later", b"")
zk.stop()
zk.close()
print("done")
"#;

fn run_kazoo(connect: &str, root: &str, session: &str) -> Vec<(String, String)> {
    let output = std::process::Command::new("/usr/bin/python3")
        .args(["-c", KAZOO_SCRIPT, connect, root, session])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run /usr/bin/python3 (scripts/zk install brings python3-kazoo)");
    assert!(
        output.status.success(),
        "the kazoo script failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| match line.split_once('=') {
            Some((key, value)) => (key.to_owned(), value.to_owned()),
            None => (line.to_owned(), String::new()),
        })
        .collect()
}

/// `Client::wait` on a task that a worker marks refused while the wait is
/// on: the wait's persistent watch on `refused/` reports the directory's
/// creation, then the mark, and the wait ends with the refusal (the
/// simulator's counterpart is in `worker/tests/client_sim.rs`).
async fn a_wait_hears_of_a_mark_made_while_it_waits(env: Env) {
    let root = fresh_root(&env, "wait-refused").await;
    let layout = Layout::new(&root).unwrap();
    let config = common::config(&env.connect);
    let (marker, _marker_events) = connect(&config).await;
    let (session, events) = connect(&config).await;
    let mut client = Client::new(session.clone(), events, layout.clone());
    let task = client
        .submit(br#"{"kind":"echo","data":"x"}"#)
        .await
        .unwrap();
    let mark = layout.refused(&task);
    let marking = async {
        // Far longer than the wait's first round trip on loopback: the
        // directory and then the mark come while the wait watches.
        tokio::time::sleep(Duration::from_millis(300)).await;
        marker
            .create(&layout.refused_dir(), b"", CreateMode::Persistent)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        marker
            .create(
                &mark,
                &TaskResult::failure("not authorised").encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
    };
    let (waited, ()) = tokio::join!(
        tokio::time::timeout(EVENT_WAIT, client.wait(&task)),
        marking
    );
    match waited.expect("the wait ends once the task is marked") {
        Err(ClientError::ResultRefused {
            task: refused,
            reason,
            mark: named,
        }) => {
            assert_eq!(
                (refused, reason.as_str(), named),
                (task, "not authorised", mark)
            );
        }
        other => panic!("expected the refusal, got {other:?}"),
    }
    session.close().await.unwrap();
    marker.close().await.unwrap();
}

async fn kazoo_and_the_rust_backend_see_each_others_nodes_and_watches(env: Env) {
    let root = fresh_root(&env, "kazoo").await;
    let (rust, mut events) = connect(&common::config(&env.connect)).await;
    let from_rust = format!("{root}/from-rust");
    let ephemeral = format!("{root}/rust-ephemeral");
    let later = format!("{root}/kazoo-later");
    rust.create(&from_rust, b"written by rust", CreateMode::Persistent)
        .await
        .unwrap();
    rust.create(&ephemeral, b"alive", CreateMode::Ephemeral)
        .await
        .unwrap();
    // Watches kazoo's writes must fire.
    rust.get_data(&from_rust, Watch::Yes).await.unwrap();
    assert_eq!(rust.exists(&later, Watch::Yes).await.unwrap(), None);

    let connect = env.connect.clone();
    let session = format!("{:x}", rust.session_id().0);
    let kazoo_root = root.clone();
    let seen = tokio::task::spawn_blocking(move || run_kazoo(&connect, &kazoo_root, &session))
        .await
        .expect("the kazoo runner");
    let value = |key: &str| {
        seen.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("kazoo printed no {key}: {seen:?}"))
    };
    assert_eq!(value("from_rust"), "written by rust");
    assert_eq!(value("ephemeral_data"), "alive");
    assert_eq!(value("ephemeral_owned_by_rust"), "True");
    assert_eq!(value("children"), "from-rust,rust-ephemeral");
    assert_eq!(value("done"), "");

    // Kazoo's writes, in its order: set from-rust, then create kazoo-later.
    assert_eq!(
        next_event(&mut events).await,
        watch(WatchKind::NodeDataChanged, &from_rust)
    );
    assert_eq!(
        next_event(&mut events).await,
        watch(WatchKind::NodeCreated, &later)
    );
    let (data, stat) = rust
        .get_data(&format!("{root}/from-kazoo"), Watch::No)
        .await
        .unwrap();
    assert_eq!(data, b"written by kazoo");
    assert_eq!(stat.ephemeral_owner, 0);
    let (data, stat) = rust.get_data(&from_rust, Watch::No).await.unwrap();
    assert_eq!(
        (data.as_slice(), stat.version),
        (&b"changed by kazoo"[..], 1)
    );
    rust.close().await.unwrap();
}

// ---------------------------------------------------------------------------
// Losing servers of the ensemble.

async fn killing_the_server_a_session_uses_keeps_the_session(env: Env) {
    let dir = env.ensemble_dir.clone().expect("ensemble dir");
    let root = fresh_root(&env, "kill-own-server").await;
    let config = common::config(&env.connect);
    let (session, mut events) = connect(&config).await;
    let id_before = session.session_id();
    let ephemeral = format!("{root}/ephemeral");
    session
        .create(&ephemeral, b"mine", CreateMode::Ephemeral)
        .await
        .unwrap();
    let victim = node_serving(&dir, &session);
    let killed = kill_node(&dir, &victim);

    expect_reconnect(&mut events).await;
    assert_eq!(session.session_id(), id_before);
    let survivor = node_serving(&dir, &session);
    assert_ne!(survivor, victim, "the session moved to another server");
    // The session is the same on the servers: its ephemeral is still there,
    // still owned by it, and it can write again.
    let (data, stat) = session.get_data(&ephemeral, Watch::No).await.unwrap();
    assert_eq!(
        (data.as_slice(), stat.ephemeral_owner),
        (&b"mine"[..], id_before.0)
    );
    session
        .create(&format!("{root}/after"), b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let (other, _other_events) = connect(&config).await;
    other.sync(&ephemeral).await.unwrap();
    let stat = other.exists(&ephemeral, Watch::No).await.unwrap();
    assert_eq!(stat.map(|s| s.ephemeral_owner), Some(id_before.0));
    killed.restore();
    session.close().await.unwrap();
    other.sync(&root).await.unwrap();
    assert_eq!(other.exists(&ephemeral, Watch::No).await.unwrap(), None);
    other.close().await.unwrap();
}

/// The session's server dies: the session moves to another one, which
/// learns the session's persistent watches from the client (the backend
/// asks for them again, see `zkdist_coord::zk`), and they report again.
async fn a_persistent_watch_follows_its_session_to_another_server(env: Env) {
    let dir = env.ensemble_dir.clone().expect("ensemble dir");
    let root = fresh_root(&env, "kill-persistent").await;
    let config = common::config(&env.connect);
    let (session, mut events) = connect(&config).await;
    session
        .add_watch(&root, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let plain = format!("{root}/plain");
    session
        .add_watch(&plain, AddWatchMode::Persistent)
        .await
        .unwrap();
    let victim = node_serving(&dir, &session);
    let killed = kill_node(&dir, &victim);
    expect_reconnect(&mut events).await;
    assert_ne!(node_serving(&dir, &session), victim, "the session moved");
    // A round trip: whatever the client sent on reconnecting is in place.
    session.sync(&root).await.unwrap();

    let (writer, _writer_events) = connect(&config).await;
    // One change at a time: within one burst of changes, events through
    // different persistent watchers may come out of order (see pump.rs).
    writer
        .create(&plain, b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut events).await,
        Event::Watch(WatchEvent {
            kind: WatchKind::NodeCreated,
            path: plain.clone()
        }),
    );
    writer
        .create(&format!("{plain}/c"), b"", CreateMode::Persistent)
        .await
        .unwrap();
    for (kind, path) in [
        (WatchKind::NodeCreated, format!("{plain}/c")),
        (WatchKind::NodeChildrenChanged, plain.clone()),
    ] {
        assert_eq!(
            next_event(&mut events).await,
            Event::Watch(WatchEvent { kind, path }),
        );
    }
    session.sync(&root).await.unwrap();
    match events.try_recv() {
        Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
        other => panic!("one event per change, got {other:?} more"),
    }
    killed.restore();
    session.close().await.unwrap();
    writer.close().await.unwrap();
}

async fn killing_the_leader_keeps_sessions_and_ephemerals(env: Env) {
    let dir = env.ensemble_dir.clone().expect("ensemble dir");
    let root = fresh_root(&env, "kill-leader").await;
    let config = common::config(&env.connect);
    let (session, mut events) = connect(&config).await;
    let ephemeral = format!("{root}/ephemeral");
    session
        .create(&ephemeral, b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let leader = common::run_scripts_zk(&["leader", dir.to_str().unwrap()])
        .trim()
        .to_owned();
    let killed = kill_node(&dir, &leader);
    // Every server drops its clients while the survivors elect a leader.
    expect_reconnect(&mut events).await;
    let stat = session.exists(&ephemeral, Watch::No).await.unwrap();
    assert_eq!(
        stat.map(|s| s.ephemeral_owner),
        Some(session.session_id().0)
    );
    session
        .set_data(&ephemeral, b"written under the new leader", None)
        .await
        .unwrap();
    let new_leader = common::run_scripts_zk(&["leader", dir.to_str().unwrap()])
        .trim()
        .to_owned();
    assert_ne!(new_leader, leader);
    killed.restore();
    session.close().await.unwrap();
}

/// How long [`a_session_kept_through_outages_outlives_a_loss_of_quorum`]
/// keeps the ensemble without a majority: well past the 1.4 session
/// timeouts after which a client gives its session up on its own clock.
const QUORUM_LOSS: Duration = Duration::from_millis(5 * common::SESSION_TIMEOUT_MS / 2);

/// A session kept through outages (`ZkConfig::keep_session_through_outages`,
/// which the roles set) waits out a loss of quorum however long it lasts,
/// and comes back with its ephemeral: without a majority the servers
/// expire nothing, and the new leader gives every session a fresh timeout.
/// A session on the default configuration, beside it, is given up by its
/// own client some 1.4 session timeouts in, although the servers still
/// hold it.
async fn a_session_kept_through_outages_outlives_a_loss_of_quorum(env: Env) {
    let dir = env.ensemble_dir.clone().expect("ensemble dir");
    let dir_name = dir.to_str().expect("utf-8 ensemble dir");
    let root = fresh_root(&env, "quorum-loss").await;
    let plain = common::config(&env.connect);
    let (kept, mut kept_events) = connect(&plain.clone().with_session_kept_through_outages()).await;
    let (given_up, _given_up_events) = connect(&plain).await;
    let kept_node = format!("{root}/kept");
    kept.create(&kept_node, b"", CreateMode::Ephemeral)
        .await
        .unwrap();

    let leader = common::run_scripts_zk(&["leader", dir_name])
        .trim()
        .to_owned();
    let follower = ensemble_nodes(&dir)
        .into_iter()
        .map(|(id, _)| id)
        .find(|id| *id != leader)
        .expect("a follower");
    let outage_began = tokio::time::Instant::now();
    let killed_leader = kill_node(&dir, &leader);
    let killed_follower = kill_node(&dir, &follower);
    assert_eq!(
        next_event(&mut kept_events).await,
        Event::Session(SessionState::Disconnected)
    );
    given_up
        .wait_until_expired(Duration::from_millis(3 * common::SESSION_TIMEOUT_MS))
        .await
        .expect("a session on the default configuration is given up by its client");
    tokio::time::sleep_until(outage_began + QUORUM_LOSS).await;
    assert_eq!(kept.state(), SessionState::Disconnected);
    assert_eq!(
        kept_events.try_recv(),
        Err(tokio::sync::mpsc::error::TryRecvError::Empty),
        "the kept session reported nothing more while the quorum was lost"
    );

    // Off the runtime's thread: once the quorum is back, the new leader
    // counts a fresh timeout for every session, and the kept client must
    // be free to reconnect meanwhile.
    let restored = tokio::task::spawn_blocking(move || {
        killed_follower.restore();
        killed_leader.restore();
    });
    assert_eq!(
        next_event(&mut kept_events).await,
        Event::Session(SessionState::Connected),
        "the kept session is back"
    );
    let stat = kept.exists(&kept_node, Watch::No).await.unwrap();
    assert_eq!(
        stat.map(|s| s.ephemeral_owner),
        Some(kept.session_id().0),
        "the kept session still owns its ephemeral"
    );
    kept.set_data(&kept_node, b"written after the outage", None)
        .await
        .unwrap();
    restored.await.expect("both nodes restored");
    kept.close().await.unwrap();
    // The servers still hold the session its client gave up: closed here
    // rather than left to expire.
    given_up.close_from_second_client(&plain).await.unwrap();
}

/// A session's configuration for the node that leads `dir`'s ensemble,
/// and one for a node that follows; each names that one node alone.
fn leader_and_follower(dir: &Path) -> (ZkConfig, ZkConfig) {
    let leader = common::run_scripts_zk(&["leader", dir.to_str().unwrap()])
        .trim()
        .to_owned();
    let nodes = ensemble_nodes(dir);
    let config_of = |wanted: &dyn Fn(&str) -> bool| {
        let (_, port) = nodes
            .iter()
            .find(|(id, _)| wanted(id))
            .expect("a node of the ensemble");
        common::config(&format!("127.0.0.1:{port}"))
    };
    (config_of(&|id| id == leader), config_of(&|id| id != leader))
}

/// Rounds of [`a_wait_on_a_follower_finds_a_task_the_leader_just_acknowledged`],
/// for the same reason as [`LEADER_SYNC_ROUNDS`].
const FOLLOWER_WAIT_ROUNDS: usize = 1_000;

/// A client on the leader submits a task and writes its result; as soon
/// as both are acknowledged, a client on a follower waits for the task.
/// The follower may not have applied the create yet (the leader answers
/// once a quorum has the write, before every follower applied it), and
/// the wait must not take the task for missing: it looks again after a
/// `sync` (`Client::wait`).
async fn a_wait_on_a_follower_finds_a_task_the_leader_just_acknowledged(env: Env) {
    let dir = env.ensemble_dir.clone().expect("ensemble dir");
    let root = fresh_root(&env, "follower-wait").await;
    let layout = Layout::new(&root).unwrap();
    let (leader, follower) = leader_and_follower(&dir);
    let (session, events) = connect(&leader).await;
    let submitter = Client::new(session.clone(), events, layout.clone());
    let (waiter_session, waiter_events) = connect(&follower).await;
    let mut waiter = Client::new(waiter_session.clone(), waiter_events, layout.clone());
    let result = TaskResult::Success {
        output: b"done".to_vec(),
    };
    for round in 1..=FOLLOWER_WAIT_ROUNDS {
        let task = submitter
            .submit(br#"{"kind":"echo","data":"x"}"#)
            .await
            .unwrap();
        session
            .create(
                &layout.result(&task),
                &result.encode(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        match waiter.wait(&task).await {
            Ok(got) => assert_eq!(got, result, "round {round}"),
            Err(error) => panic!("round {round}: a wait on a follower: {error}"),
        }
    }
    session.close().await.unwrap();
    waiter_session.close().await.unwrap();
}

/// Rounds of [`a_sync_on_the_leader_sees_what_a_follower_acknowledged`]:
/// the window it guards against lasts as long as the leader takes to apply
/// a commit it has already sent, so only some rounds can fall in it.
const LEADER_SYNC_ROUNDS: usize = 3_000;

/// A writer on a follower, a reader on the leader. Each round the writer
/// changes the node; once the follower acknowledged it, the reader syncs
/// and reads, and must see the change (`Coordinator::sync`). ZooKeeper
/// serves a sync on the leader as a read, which may run before the leader
/// applies a commit a follower already applied and acknowledged; the
/// backend makes up for that (see `zkdist_coord::zk::ops`).
async fn a_sync_on_the_leader_sees_what_a_follower_acknowledged(env: Env) {
    let dir = env.ensemble_dir.clone().expect("ensemble dir");
    let root = fresh_root(&env, "leader-sync").await;
    let (leader, follower) = leader_and_follower(&dir);
    let (reader, _reader_events) = connect(&leader).await;
    let (writer, _writer_events) = connect(&follower).await;

    let node = format!("{root}/node");
    writer
        .create(&node, b"0", CreateMode::Persistent)
        .await
        .unwrap();
    for round in 1..=LEADER_SYNC_ROUNDS {
        let written = round.to_string();
        writer
            .set_data(&node, written.as_bytes(), None)
            .await
            .unwrap();
        reader.sync(&node).await.unwrap();
        let (read, _) = reader.get_data(&node, Watch::No).await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&read),
            written,
            "round {round}: a read after sync misses a write the follower acknowledged"
        );
    }
    reader.close().await.unwrap();
    writer.close().await.unwrap();
}

// ---------------------------------------------------------------------------
// Pipelined requests on a multi-threaded runtime.

/// Rounds per pipelining test. A round pipelines reads that set watches and
/// a write that fires them; what the tests guard against needs the
/// notification and a later reply to reach the client in one burst, which
/// happens in a fraction of the rounds only.
const PIPELINE_ROUNDS: usize = 300;

/// The events already in the stream, without waiting.
fn events_now(events: &mut EventStream) -> Vec<Event> {
    std::iter::from_fn(|| events.try_recv().ok()).collect()
}

async fn a_pipelined_write_replies_after_the_event_it_fired(env: Env) {
    let root = fresh_root(&env, "pipelined-write").await;
    let (s, mut events) = connect(&common::config(&env.connect)).await;
    let node = format!("{root}/n");
    s.create(&node, b"", CreateMode::Persistent).await.unwrap();
    for round in 0..PIPELINE_ROUNDS {
        // Both requests are sent now, in this order; the write's reply
        // follows the notification of the change it made.
        let value = round.to_string();
        let read = s.get_data(&node, Watch::Yes);
        let write = s.set_data(&node, value.as_bytes(), None);
        let (read, write) = tokio::join!(read, write);
        let (_, seen) = read.unwrap();
        assert_eq!(write.unwrap().version, seen.version + 1, "round {round}");
        assert_eq!(
            events_now(&mut events),
            vec![watch(WatchKind::NodeDataChanged, &node)],
            "round {round}: when set_data returns, the NodeDataChanged it fired is in the stream, once"
        );
    }
    s.close().await.unwrap();
}

async fn pipelined_watches_on_one_node_report_one_change_once(env: Env) {
    let root = fresh_root(&env, "pipelined-watches").await;
    let (s, mut events) = connect(&common::config(&env.connect)).await;
    let node = format!("{root}/n");
    s.create(&node, b"", CreateMode::Persistent).await.unwrap();
    for round in 0..PIPELINE_ROUNDS {
        // Three watchers of the same node and class, set before one change:
        // "the same watcher registered several times is triggered once".
        let value = round.to_string();
        let get = s.get_data(&node, Watch::Yes);
        let exists = s.exists(&node, Watch::Yes);
        let get_again = s.get_data(&node, Watch::Yes);
        let write = s.set_data(&node, value.as_bytes(), None);
        let (get, exists, get_again, write) = tokio::join!(get, exists, get_again, write);
        let seen = get.unwrap().1;
        assert_eq!(exists.unwrap(), Some(seen), "round {round}");
        assert_eq!(get_again.unwrap().1, seen, "round {round}");
        write.unwrap();
        assert_eq!(
            events_now(&mut events),
            vec![watch(WatchKind::NodeDataChanged, &node)],
            "round {round}"
        );
        // A watch set after the change is a new one: the next change fires
        // it, once.
        let read = s.get_data(&node, Watch::Yes);
        let write = s.set_data(&node, b"again", None);
        let (read, write) = tokio::join!(read, write);
        read.unwrap();
        write.unwrap();
        assert_eq!(
            events_now(&mut events),
            vec![watch(WatchKind::NodeDataChanged, &node)],
            "round {round}: the re-armed watch"
        );
    }
    s.close().await.unwrap();
}

async fn pipelined_persistent_and_one_shot_watches_report_each_change_once(env: Env) {
    let root = fresh_root(&env, "pipelined-persistent").await;
    let (s, mut events) = connect(&common::config(&env.connect)).await;
    let dir = format!("{root}/dir");
    s.create(&dir, b"", CreateMode::Persistent).await.unwrap();
    s.add_watch(&dir, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    for round in 0..PIPELINE_ROUNDS / 3 {
        // A one-shot watch below the recursive one, and the change that
        // fires both, in one burst: one event, in the stream when the
        // write returns.
        let node = format!("{dir}/n{round}");
        let exists = s.exists(&node, Watch::Yes);
        let create = s.create(&node, b"", CreateMode::Persistent);
        let (exists, create) = tokio::join!(exists, create);
        assert_eq!(exists.unwrap(), None, "round {round}");
        create.unwrap();
        assert_eq!(
            events_now(&mut events),
            vec![watch(WatchKind::NodeCreated, &node)],
            "round {round}: the create"
        );
        // A persistent watch on a node outside the recursive one, a
        // one-shot watch on the same node asked for while the first is in
        // flight, and a change.
        let other = format!("{root}/p{round}");
        s.create(&other, b"", CreateMode::Persistent).await.unwrap();
        let add = s.add_watch(&other, AddWatchMode::Persistent);
        let read = s.get_data(&other, Watch::Yes);
        let write = s.set_data(&other, b"x", None);
        let (add, read, write) = tokio::join!(add, read, write);
        add.unwrap();
        read.unwrap();
        write.unwrap();
        assert_eq!(
            events_now(&mut events),
            vec![watch(WatchKind::NodeDataChanged, &other)],
            "round {round}: the first write"
        );
        // The persistent watch outlived the one-shot one on its node (a
        // 3.8 server would have let the one-shot replace it).
        s.set_data(&other, b"y", None).await.unwrap();
        s.delete(&node, None).await.unwrap();
        s.delete(&other, None).await.unwrap();
        assert_eq!(
            events_now(&mut events),
            vec![
                watch(WatchKind::NodeDataChanged, &other),
                watch(WatchKind::NodeDeleted, &node),
                watch(WatchKind::NodeDeleted, &other),
            ],
            "round {round}: the second write and the deletes"
        );
    }
    s.close().await.unwrap();
}

async fn pipelined_data_and_child_watches_report_one_deletion_once(env: Env) {
    let root = fresh_root(&env, "pipelined-deletion").await;
    let (s, mut events) = connect(&common::config(&env.connect)).await;
    let node = format!("{root}/n");
    for round in 0..PIPELINE_ROUNDS {
        s.create(&node, b"", CreateMode::Persistent).await.unwrap();
        let children = s.get_children(&node, Watch::Yes);
        let data = s.get_data(&node, Watch::Yes);
        let delete = s.delete(&node, None);
        let (children, data, delete) = tokio::join!(children, data, delete);
        assert_eq!(children.unwrap().0, Vec::<String>::new(), "round {round}");
        data.unwrap();
        delete.unwrap();
        assert_eq!(
            events_now(&mut events),
            vec![watch(WatchKind::NodeDeleted, &node)],
            "round {round}: one deletion, one event, in the stream when delete returns"
        );
    }
    s.close().await.unwrap();
}
