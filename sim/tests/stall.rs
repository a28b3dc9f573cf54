//! `SimZk::stall`: the server a session talks to falls behind for a while,
//! as a follower that stops applying the leader's transactions. Unlike the
//! seeded lag of `SimConfig::follower_lag_txns`, a stall is the script's
//! choice, so a scenario can make a read stale exactly where a `sync`
//! should protect it.

mod common;

use std::time::Duration;

use tokio::time::Instant;
use zkdist_coord::{
    Coordinator, CreateMode, Event, EventStream, SessionState, Watch, WatchKind, ZkError,
};
use zkdist_sim::{SimConfig, SimSession, SimZk};

use common::{drain, next_event, run_seeded, state, watch};

const SEEDS: u64 = 10;
const STALL: Duration = Duration::from_millis(300);
const OUTAGE: Duration = Duration::from_millis(50);

/// Reads lag only where a script stalls a server.
fn fresh(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        ..SimConfig::default()
    }
}

/// Waits for the session to come back after a cut.
async fn reconnected(events: &mut EventStream) {
    loop {
        if next_event(events).await == state(SessionState::Connected) {
            return;
        }
    }
}

/// Asserts that `owed`, an event the stalled server of a session owes it,
/// comes just before the reply of a `sync` on `path` when `catch_up` is
/// that session, and else when the stall (begun at `stalled_at`) ends.
async fn owed_event_comes(
    catch_up: Option<&SimSession>,
    path: &str,
    events: &mut EventStream,
    owed: Event,
    stalled_at: Instant,
    seed: u64,
) {
    match catch_up {
        Some(session) => {
            session.sync(path).await.unwrap();
            assert_eq!(
                drain(events),
                vec![owed],
                "seed {seed}: the event came before the sync's reply"
            );
        }
        None => {
            assert_eq!(next_event(events).await, owed);
            // Within a millisecond: madsim's clock runs a little ahead of
            // the simulator's stamps. A lagging server's catch-up would
            // have come within 5 ms of the reconnect.
            assert!(
                stalled_at.elapsed() >= STALL - Duration::from_millis(1),
                "seed {seed}: the event came {:?} after the stall began",
                stalled_at.elapsed()
            );
        }
    }
}

#[test]
fn a_stalled_server_answers_as_of_what_the_session_saw_until_it_syncs() {
    for seed in 0..SEEDS {
        run_seeded(seed, async move {
            let sim = SimZk::start(fresh(seed));
            let (writer, _writer_events) = sim.connect("writer").await.unwrap();
            let (reader, _reader_events) = sim.connect("reader").await.unwrap();
            writer
                .create("/x", b"", CreateMode::Persistent)
                .await
                .unwrap();
            let version = async || reader.get_data("/x", Watch::No).await.unwrap().1.version;
            assert_eq!(version().await, 0);
            sim.stall(reader.session_id(), STALL).await;
            for _ in 0..3 {
                writer.set_data("/x", b"v", None).await.unwrap();
            }
            assert_eq!(version().await, 0, "seed {seed}: stalled where it read");
            reader.sync("/x").await.unwrap();
            assert_eq!(version().await, 3, "seed {seed}: the sync caught it up");
            writer.set_data("/x", b"v", None).await.unwrap();
            assert_eq!(version().await, 3, "seed {seed}: stalled again after it");
            tokio::time::sleep(STALL).await;
            assert_eq!(
                version().await,
                4,
                "seed {seed}: up to date after the stall"
            );
            let trace = sim.trace().await;
            assert!(
                trace
                    .iter()
                    .any(|line| line.contains("control stall reader's server for 300.000ms")),
                "the trace shows the stall"
            );
            let stale = trace
                .iter()
                .filter(|line| line.contains("read reader get_data /x as of"))
                .count();
            assert_eq!(stale, 2, "seed {seed}: two reads answered from the past");
        });
    }
}

/// A session whose create's reply a cut lost, stalled: it reconnects
/// through a server that has not applied the create, and reads it back
/// as absent until it syncs. Whether the create was applied is checked on
/// the tree itself.
#[test]
fn a_stalled_session_reconnects_through_a_server_without_its_lost_write() {
    for seed in 0..SEEDS {
        run_seeded(seed, async move {
            let sim = SimZk::start(fresh(seed));
            let (me, mut my_events) = sim.connect("me").await.unwrap();
            me.exists("/mine", Watch::No).await.unwrap();
            // Before the write: a server is behind only by what is applied
            // after the first stall began.
            sim.stall(me.session_id(), STALL).await;
            sim.hold(me.session_id()).await;
            let create = tokio::spawn({
                let me = me.clone();
                async move { me.create("/mine", b"", CreateMode::Persistent).await }
            });
            sim.run_until(|tree| tree.exists("/mine")).await;
            sim.cut(me.session_id(), OUTAGE).await;
            sim.release(me.session_id()).await;
            assert!(matches!(
                create.await.unwrap(),
                Err(ZkError::ConnectionLoss { .. })
            ));
            reconnected(&mut my_events).await;
            assert_eq!(
                me.exists("/mine", Watch::No).await.unwrap(),
                None,
                "seed {seed}: the stalled server has not applied the create"
            );
            me.sync("/mine").await.unwrap();
            assert!(
                me.exists("/mine", Watch::No).await.unwrap().is_some(),
                "seed {seed}: the sync caught up"
            );
            let trace = sim.trace().await;
            assert!(
                trace
                    .iter()
                    .any(|line| line.contains("heal me: reconnected, through a server as of")),
                "seed {seed}: the trace names the server behind"
            );
        });
    }
}

/// An `exists` watch on a node created during a cut, re-registered through
/// a stalled server that has not applied the create: the event is owed,
/// and comes when the stall ends (not after the seeded catch-up of a
/// lagging server), or before the reply of a sync that catches up sooner.
#[test]
fn events_a_stalled_server_owes_come_at_the_stalls_end_or_before_a_sync() {
    for seed in 0..SEEDS {
        for syncs in [false, true] {
            run_seeded(seed, async move {
                let sim = SimZk::start(fresh(seed));
                let (other, _other_events) = sim.connect("other").await.unwrap();
                let (me, mut my_events) = sim.connect("me").await.unwrap();
                assert_eq!(
                    next_event(&mut my_events).await,
                    state(SessionState::Connected)
                );
                assert_eq!(me.exists("/y", Watch::Yes).await.unwrap(), None);
                let stalled_at = Instant::now();
                sim.stall(me.session_id(), STALL).await;
                sim.cut(me.session_id(), OUTAGE).await;
                other
                    .create("/y", b"", CreateMode::Persistent)
                    .await
                    .unwrap();
                assert_eq!(
                    next_event(&mut my_events).await,
                    state(SessionState::Disconnected)
                );
                reconnected(&mut my_events).await;
                // Past the seeded catch-up of a server that only lags (and
                // a server that does not lag would have fired the watch at
                // the reconnect), well within the stall.
                tokio::time::sleep(Duration::from_millis(20)).await;
                assert_eq!(drain(&mut my_events), Vec::<Event>::new(), "owed, not sent");
                let owed = watch(WatchKind::NodeCreated, "/y");
                let catch_up = syncs.then_some(&me);
                owed_event_comes(catch_up, "/y", &mut my_events, owed, stalled_at, seed).await;
            });
        }
    }
}

/// A stall keeps a longer history than the seeded lag needs; reads of
/// sessions that are not stalled still lag at most `follower_lag_txns`
/// behind.
#[test]
fn a_stall_does_not_let_other_reads_lag_further() {
    const LAG_TXNS: u32 = 2;
    let mut lagging_reads = 0;
    for seed in 0..SEEDS {
        lagging_reads += run_seeded(seed, async move {
            let sim = SimZk::start(SimConfig {
                seed,
                follower_lag_txns: LAG_TXNS,
                ..SimConfig::default()
            });
            let (writer, _writer_events) = sim.connect("writer").await.unwrap();
            let (reader, _reader_events) = sim.connect("reader").await.unwrap();
            sim.stall(writer.session_id(), STALL).await;
            writer
                .create("/x", b"", CreateMode::Persistent)
                .await
                .unwrap();
            for _ in 0..10 {
                writer.set_data("/x", b"v", None).await.unwrap();
                let _ = reader.get_data("/x", Watch::No).await;
            }
            let trace = sim.trace().await;
            let behind: Vec<i64> = trace
                .iter()
                .filter(|line| line.contains("read reader get_data /x as of"))
                .map(|line| {
                    let (_, after) = line.split_once(" (").expect("a lag in the line");
                    let (count, _) = after.split_once(" behind)").expect("a lag in the line");
                    count.parse().expect("a count")
                })
                .collect();
            assert!(
                behind.iter().all(|&count| count <= i64::from(LAG_TXNS)),
                "seed {seed}: {behind:?}"
            );
            behind.len()
        });
    }
    assert!(lagging_reads > 0, "no read lagged at all");
}

#[test]
fn a_stall_of_an_ended_session_is_ignored() {
    run_seeded(0, async {
        let sim = SimZk::start(fresh(0));
        let (me, _my_events) = sim.connect("me").await.unwrap();
        let session = me.session_id();
        me.close().await.unwrap();
        sim.stall(session, STALL).await;
        let trace = sim.trace().await;
        assert!(
            trace
                .iter()
                .any(|line| line.contains("control stall me: ignored, the handle is Closed")),
            "{trace:#?}"
        );
    });
}

/// A stalled server applies nothing new, so it fires no watch for a change
/// made meanwhile: the session hears of it when the stall ends, or just
/// before the reply of a sync that catches the server up. Until then its
/// reads show the state before the change.
#[test]
fn a_stalled_session_hears_of_a_newer_change_at_the_stalls_end_or_its_sync() {
    for seed in 0..SEEDS {
        for syncs in [false, true] {
            run_seeded(seed, async move {
                let sim = SimZk::start(fresh(seed));
                let (writer, _writer_events) = sim.connect("writer").await.unwrap();
                let (reader, mut reader_events) = sim.connect("reader").await.unwrap();
                assert_eq!(
                    next_event(&mut reader_events).await,
                    state(SessionState::Connected)
                );
                writer
                    .create("/x", b"", CreateMode::Persistent)
                    .await
                    .unwrap();
                assert_eq!(
                    reader.get_data("/x", Watch::Yes).await.unwrap().1.version,
                    0
                );
                let stalled_at = Instant::now();
                sim.stall(reader.session_id(), STALL).await;
                writer.set_data("/x", b"v", None).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                assert_eq!(
                    drain(&mut reader_events),
                    Vec::<Event>::new(),
                    "owed, not sent"
                );
                assert_eq!(
                    reader
                        .exists("/x", Watch::No)
                        .await
                        .unwrap()
                        .unwrap()
                        .version,
                    0,
                    "seed {seed}: the stalled server has not applied the change"
                );
                let owed = watch(WatchKind::NodeDataChanged, "/x");
                let catch_up = syncs.then_some(&reader);
                owed_event_comes(catch_up, "/x", &mut reader_events, owed, stalled_at, seed).await;
                assert_eq!(
                    reader
                        .exists("/x", Watch::No)
                        .await
                        .unwrap()
                        .unwrap()
                        .version,
                    1,
                    "seed {seed}: caught up"
                );
            });
        }
    }
}
