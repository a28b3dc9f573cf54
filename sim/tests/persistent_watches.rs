//! Persistent watches in the simulator, where the conformance suite cannot
//! reach: what the trace shows of them, an oracle check of every event
//! against the transactions the server applied (under latency, concurrent
//! writers and one-shot watches on the same nodes), what a reconnect loses,
//! and determinism.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkdist_coord::{
    AddWatchMode, Coordinator, CreateMode, ErrorCode, Event, Op, SessionState, Watch, WatchEvent,
    WatchKind, path,
};
use zkdist_sim::{Change, Latency, SimConfig, SimSession, SimZk};

use common::{drain, next_event, run_seeded, watch};

const WRITERS: usize = 3;
const WRITES_PER_WRITER: usize = 60;
const NODES: [&str; 6] = ["/w/a", "/w/b", "/w/a/x", "/w/a/y", "/w/b/z", "/w/a/x/deep"];
const WATCHED: &str = "/w/a";

fn heavy_tail(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        latency: Latency::HeavyTail {
            base_us: 1_000,
            tail_probability_pct: 10,
            tail_max_us: 30_000,
        },
        session_timeout_ms: 10_000,
        ..SimConfig::default()
    }
}

async fn writer(zk: SimSession, seed: u64, index: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(7).wrapping_add(index as u64));
    for _ in 0..WRITES_PER_WRITER {
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..5_000))).await;
        let node = NODES[rng.random_range(0..NODES.len())];
        // Failures (a missing parent, a node that exists) are part of the
        // workload: they change nothing and must report nothing.
        let _ = match rng.random_range(0..10) {
            0..=3 => zk.create(node, b"", CreateMode::Persistent).await.map(drop),
            4..=5 => zk.delete(node, None).await,
            6..=8 => zk.set_data(node, b"d", None).await.map(drop),
            _ => {
                let other = NODES[rng.random_range(0..NODES.len())];
                let ops = vec![
                    Op::Create {
                        path: node.to_owned(),
                        data: vec![],
                        mode: CreateMode::Persistent,
                    },
                    Op::SetData {
                        path: other.to_owned(),
                        data: b"m".to_vec(),
                        version: None,
                    },
                ];
                zk.multi(ops).await.map(drop)
            }
        };
    }
}

/// Connects, past the first `Connected`.
async fn connect(sim: &SimZk, name: &str) -> (SimSession, zkdist_coord::EventStream) {
    let (zk, mut events) = sim.connect(name).await.expect("connect");
    assert_eq!(
        next_event(&mut events).await,
        Event::Session(SessionState::Connected)
    );
    (zk, events)
}

/// The events the server's changes owe a recursive watch on `/w` and a
/// persistent one on [`WATCHED`], in zxid order.
fn expected_events(changes: &[Change]) -> (Vec<Event>, Vec<Event>) {
    let mut recursive = Vec::new();
    let mut persistent = Vec::new();
    for change in changes {
        let (kind, node) = match change {
            Change::Created(p) => (WatchKind::NodeCreated, p),
            Change::Deleted(p) => (WatchKind::NodeDeleted, p),
            Change::DataChanged(p) => (WatchKind::NodeDataChanged, p),
        };
        if path::is_same_or_descendant(node, "/w") {
            recursive.push(watch(kind, node));
        }
        if node == WATCHED {
            persistent.push(watch(kind, node));
        }
        let child_change = !matches!(change, Change::DataChanged(_));
        if child_change && node != "/" && path::parent(node) == WATCHED {
            persistent.push(watch(WatchKind::NodeChildrenChanged, WATCHED));
        }
    }
    (recursive, persistent)
}

/// Runs the oracle workload; returns the trace.
fn oracle_run(seed: u64) -> Vec<String> {
    run_seeded(seed, async move {
        let sim = SimZk::start(heavy_tail(seed));
        let changes = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&changes);
        sim.on_apply(move |applied, _tree| {
            recorded
                .lock()
                .expect("not poisoned")
                .extend(applied.changes.iter().cloned());
        })
        .await;
        let (setup, _) = sim.connect("setup").await.expect("connect");
        setup
            .create("/w", b"", CreateMode::Persistent)
            .await
            .expect("/w");
        changes.lock().expect("not poisoned").clear();

        let (recursive, mut recursive_events) = connect(&sim, "recursive").await;
        let (persistent, mut persistent_events) = connect(&sim, "persistent").await;
        recursive
            .add_watch("/w", AddWatchMode::PersistentRecursive)
            .await
            .expect("recursive watch");
        persistent
            .add_watch(WATCHED, AddWatchMode::Persistent)
            .await
            .expect("persistent watch");
        let mut writers = Vec::new();
        for index in 0..WRITERS {
            let (zk, _events) = sim.connect(&format!("w{index}")).await.expect("connect");
            writers.push(tokio::spawn(writer(zk, seed, index)));
        }
        // Meanwhile, one-shot data watches on the nodes the recursive watch
        // covers: they must add no event of their own.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0DD5);
        for _ in 0..WRITES_PER_WRITER {
            tokio::time::sleep(Duration::from_micros(rng.random_range(0..5_000))).await;
            let node = NODES[rng.random_range(0..NODES.len())];
            let _ = recursive.exists(node, Watch::Yes).await;
        }
        for task in writers {
            task.await.expect("writer");
        }
        recursive.sync("/").await.expect("sync");
        persistent.sync("/").await.expect("sync");

        let (want_recursive, want_persistent) =
            expected_events(&changes.lock().expect("not poisoned"));
        assert!(
            want_recursive.len() > 50 && want_persistent.len() > 10,
            "a workload that changes things: {} and {} events owed",
            want_recursive.len(),
            want_persistent.len()
        );
        assert_eq!(drain(&mut recursive_events), want_recursive);
        assert_eq!(drain(&mut persistent_events), want_persistent);
        sim.trace().await
    })
}

#[test]
fn persistent_watches_report_exactly_the_applied_changes_in_server_order() {
    for seed in [1, 2, 3] {
        oracle_run(seed);
    }
}

#[test]
fn same_seed_same_trace_with_persistent_watches() {
    let first = oracle_run(7);
    assert_eq!(first, oracle_run(7), "same seed, same trace");
    assert_ne!(first, oracle_run(8), "another seed, another trace");
}

#[test]
fn the_trace_shows_add_watch_its_events_and_refusals() {
    let trace = run_seeded(0, async {
        let sim = SimZk::start(SimConfig::default());
        let (watcher, mut events) = connect(&sim, "watcher").await;
        let (writer, _) = sim.connect("writer").await.expect("connect");
        watcher
            .add_watch("/r", AddWatchMode::PersistentRecursive)
            .await
            .expect("add_watch");
        let refused = watcher.add_watch("/r", AddWatchMode::Persistent).await;
        assert_eq!(refused.map_err(|e| e.code()), Err(ErrorCode::BadArguments));
        writer
            .create("/r", b"", CreateMode::Persistent)
            .await
            .expect("create");
        writer
            .create("/r/c", b"", CreateMode::Persistent)
            .await
            .expect("create");
        assert_eq!(
            next_event(&mut events).await,
            watch(WatchKind::NodeCreated, "/r")
        );
        assert_eq!(
            next_event(&mut events).await,
            watch(WatchKind::NodeCreated, "/r/c")
        );
        sim.trace().await
    });
    for needle in [
        "add_watch /r persistent_recursive",
        "reply add_watch /r persistent_recursive -> ok",
        "refuse watcher add_watch /r persistent -> BadArguments",
        "deliver watcher event NodeCreated /r",
        "deliver watcher event NodeCreated /r/c",
    ] {
        assert!(
            trace.iter().any(|line| line.contains(needle)),
            "no trace line contains {needle:?}:\n{}",
            trace.join("\n")
        );
    }
    // The parent's child change is never delivered to a recursive watch.
    assert!(
        !trace
            .iter()
            .any(|line| line.contains("deliver watcher event NodeChildrenChanged")),
        "{}",
        trace.join("\n")
    );
}

#[test]
fn a_reconnect_keeps_persistent_watches_and_loses_what_changed_meanwhile() {
    run_seeded(0, async {
        let sim = SimZk::start(SimConfig::default());
        let (watcher, mut events) = connect(&sim, "watcher").await;
        let (writer, _) = sim.connect("writer").await.expect("connect");
        watcher
            .add_watch("/r", AddWatchMode::PersistentRecursive)
            .await
            .expect("add_watch");
        sim.cut(watcher.session_id(), Duration::from_secs(1)).await;
        assert_eq!(
            next_event(&mut events).await,
            Event::Session(SessionState::Disconnected)
        );
        writer
            .create("/r", b"", CreateMode::Persistent)
            .await
            .expect("create");
        assert_eq!(
            next_event(&mut events).await,
            Event::Session(SessionState::Connected)
        );
        watcher.sync("/").await.expect("sync");
        // The create during the cut is not reported; the watch is back.
        assert_eq!(drain(&mut events), []);
        writer.set_data("/r", b"x", None).await.expect("set_data");
        assert_eq!(
            next_event(&mut events).await,
            Event::Watch(WatchEvent {
                kind: WatchKind::NodeDataChanged,
                path: "/r".into()
            })
        );
        let trace = sim.trace().await;
        assert!(
            trace
                .iter()
                .any(|line| line.contains("heal watcher: reconnected, 1 watches re-sent")),
            "{}",
            trace.join("\n")
        );
    });
}
