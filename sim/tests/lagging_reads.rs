//! Reads answered by a lagging server (`SimConfig::follower_lag_txns`):
//! a session may miss another session's latest writes until it syncs, but
//! it always sees its own, and never goes back to an older state. After a
//! reconnect it may talk to a server that has not applied a write whose
//! reply it lost, and a persistent watch registered again there reports
//! what that server applies next.

mod common;

use std::time::Duration;

use zkdist_coord::{
    AddWatchMode, Coordinator, CreateMode, EventStream, SessionState, Watch, WatchKind, ZkError,
};
use zkdist_sim::{SimConfig, SimSession, SimZk};

use common::{drain, next_event, run_seeded, state, watch};

const SEEDS: u64 = 40;
/// Writes another session makes before the reader looks.
const WRITES: i32 = 6;

fn lagging(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        follower_lag_txns: 16,
        ..SimConfig::default()
    }
}

/// Connects a writer and a reader, and returns them with the reader's
/// event stream past its `Connected`.
async fn writer_and_reader(sim: &SimZk) -> (SimSession, SimSession, EventStream) {
    let (writer, _writer_events) = sim.connect("writer").await.unwrap();
    let (reader, mut reader_events) = sim.connect("reader").await.unwrap();
    assert_eq!(
        next_event(&mut reader_events).await,
        state(SessionState::Connected)
    );
    (writer, reader, reader_events)
}

/// What one seed's reader saw of `/x`, whose version the writer took to
/// `WRITES` before the reader looked.
#[derive(Debug)]
struct Looks {
    before_sync: i32,
    after_sync: i32,
    lagging_lines: usize,
}

fn look_at_another_sessions_writes(seed: u64, config: SimConfig) -> Looks {
    run_seeded(seed, async move {
        let sim = SimZk::start(config);
        let (writer, reader, _reader_events) = writer_and_reader(&sim).await;
        writer
            .create("/x", b"", CreateMode::Persistent)
            .await
            .unwrap();
        for _ in 0..WRITES {
            writer.set_data("/x", b"v", None).await.unwrap();
        }
        let before_sync = reader.get_data("/x", Watch::No).await;
        reader.sync("/x").await.unwrap();
        let after_sync = reader.get_data("/x", Watch::No).await.unwrap().1.version;
        let lagging_lines = sim
            .trace()
            .await
            .iter()
            .filter(|line| line.contains(" behind) -> "))
            .count();
        Looks {
            // /x may not exist yet as of the reader's first look.
            before_sync: before_sync.map_or(-1, |(_, stat)| stat.version),
            after_sync,
            lagging_lines,
        }
    })
}

#[test]
fn a_read_may_miss_another_sessions_writes_until_the_session_syncs() {
    let mut stale = 0;
    for seed in 0..SEEDS {
        let looks = look_at_another_sessions_writes(seed, lagging(seed));
        assert!(looks.before_sync <= WRITES, "{looks:?}");
        assert_eq!(looks.after_sync, WRITES, "seed {seed}: sync catches up");
        if looks.before_sync < WRITES {
            stale += 1;
            assert!(looks.lagging_lines > 0, "the trace names it: {looks:?}");
        }
    }
    // Not vacuous: the seed made the reader miss the writes in some runs
    // and not in others.
    assert!(stale > 0 && stale < SEEDS, "{stale} stale of {SEEDS}");
}

#[test]
fn without_a_lag_every_read_sees_the_newest_state() {
    for seed in 0..SEEDS {
        let config = SimConfig {
            seed,
            ..SimConfig::default()
        };
        let looks = look_at_another_sessions_writes(seed, config);
        assert_eq!(looks.before_sync, WRITES, "seed {seed}: {looks:?}");
        assert_eq!(looks.lagging_lines, 0);
    }
}

#[test]
fn a_session_reads_its_own_writes_and_never_goes_back() {
    let mut lagging_reads = 0;
    for seed in 0..SEEDS {
        let lagged = run_seeded(seed, async move {
            let sim = SimZk::start(lagging(seed));
            let (other, _other_events) = sim.connect("other").await.unwrap();
            let (me, _my_events) = sim.connect("me").await.unwrap();
            other
                .create("/o", b"", CreateMode::Persistent)
                .await
                .unwrap();
            let mut last_seen = -1;
            for round in 0..10 {
                let path = me
                    .create("/mine-", b"", CreateMode::PersistentSequential)
                    .await
                    .unwrap();
                // Writes after mine: my reads may lag behind them, never
                // behind my own.
                other.set_data("/o", b"", None).await.unwrap();
                other.set_data("/o", b"", None).await.unwrap();
                let (mine, _) = me.get_children("/", Watch::No).await.unwrap();
                assert!(
                    mine.iter().any(|name| path == format!("/{name}")),
                    "seed {seed} round {round}: {path} missing from {mine:?}"
                );
                // Another session's node: possibly stale, never older than
                // what this session saw before.
                if let Some(stat) = me.exists("/o", Watch::No).await.unwrap() {
                    assert!(stat.version >= last_seen, "seed {seed}: went back");
                    last_seen = stat.version;
                }
            }
            sim.trace()
                .await
                .iter()
                .filter(|line| line.starts_with_lagging_read_of("me"))
                .count()
        });
        lagging_reads += lagged;
    }
    // Not vacuous: many of those reads were answered as of the past.
    assert!(
        lagging_reads > SEEDS as usize,
        "{lagging_reads} lagging reads"
    );
}

/// Whether a trace line is a read of `session` answered as of the past.
trait LaggingReadLine {
    fn starts_with_lagging_read_of(&self, session: &str) -> bool;
}

impl LaggingReadLine for String {
    fn starts_with_lagging_read_of(&self, session: &str) -> bool {
        self.contains(&format!("] read {session} ")) && self.contains(" behind) -> ")
    }
}

#[test]
fn a_watch_left_by_a_lagging_read_reports_the_change_it_missed() {
    let mut owed = 0;
    for seed in 0..SEEDS {
        owed += run_seeded(seed, async move {
            let sim = SimZk::start(lagging(seed));
            let (writer, reader, mut reader_events) = writer_and_reader(&sim).await;
            writer
                .create("/x", b"", CreateMode::Persistent)
                .await
                .unwrap();
            for _ in 0..WRITES {
                writer.set_data("/x", b"v", None).await.unwrap();
            }
            match reader.get_data("/x", Watch::Yes).await {
                Ok((_, stat)) if stat.version == WRITES => 0,
                Ok(_) => {
                    // It read an older version: the change it missed is
                    // reported at once, without any further write.
                    let event = next_event(&mut reader_events).await;
                    assert_eq!(event, watch(WatchKind::NodeDataChanged, "/x"));
                    1
                }
                Err(error) => {
                    // As of before /x existed: get_data leaves no watch.
                    assert!(error.to_string().contains("/x"), "{error}");
                    0
                }
            }
        });
    }
    assert!(owed > 0, "no seed made the reader lag behind a data change");
}

/// Waits for the session to come back after a cut.
async fn reconnected(events: &mut EventStream) {
    loop {
        if next_event(events).await == state(SessionState::Connected) {
            return;
        }
    }
}

/// What one seed's session saw of its own create, whose reply a cut lost.
#[derive(Debug)]
struct AfterLoss {
    seen_before_sync: bool,
    seen_after_sync: bool,
}

fn read_back_a_write_whose_reply_was_lost(seed: u64, config: SimConfig) -> AfterLoss {
    run_seeded(seed, async move {
        let sim = SimZk::start(config);
        let (other, _other_events) = sim.connect("other").await.unwrap();
        let (me, mut my_events) = sim.connect("me").await.unwrap();
        other
            .create("/o", b"", CreateMode::Persistent)
            .await
            .unwrap();
        me.exists("/o", Watch::No).await.unwrap();
        // The create is applied, and its reply held back, then lost.
        sim.hold(me.session_id()).await;
        let create = tokio::spawn({
            let me = me.clone();
            async move { me.create("/mine", b"", CreateMode::Persistent).await }
        });
        sim.run_until(|tree| tree.exists("/mine")).await;
        for _ in 0..4 {
            other.set_data("/o", b"", None).await.unwrap();
        }
        sim.cut(me.session_id(), Duration::from_millis(50)).await;
        sim.release(me.session_id()).await;
        assert!(matches!(
            create.await.unwrap(),
            Err(ZkError::ConnectionLoss { .. })
        ));
        reconnected(&mut my_events).await;
        let seen_before_sync = me.exists("/mine", Watch::No).await.unwrap().is_some();
        me.sync("/mine").await.unwrap();
        let seen_after_sync = me.exists("/mine", Watch::No).await.unwrap().is_some();
        AfterLoss {
            seen_before_sync,
            seen_after_sync,
        }
    })
}

/// A session whose write's reply was lost may reconnect through a server
/// that has not applied the write: without a `sync` first, reading it back
/// can say it is not there. ZooKeeper only refuses servers behind the last
/// reply the client heard, which came before the write.
#[test]
fn after_a_lost_reply_the_write_may_not_show_until_the_session_syncs() {
    let mut unseen = 0;
    for seed in 0..SEEDS {
        let after = read_back_a_write_whose_reply_was_lost(seed, lagging(seed));
        assert!(after.seen_after_sync, "seed {seed}: {after:?}");
        unseen += u64::from(!after.seen_before_sync);
    }
    assert!(unseen > 0 && unseen < SEEDS, "{unseen} unseen of {SEEDS}");
    for seed in 0..SEEDS {
        let config = SimConfig {
            seed,
            ..SimConfig::default()
        };
        let after = read_back_a_write_whose_reply_was_lost(seed, config);
        assert!(after.seen_before_sync, "seed {seed}: no lag, {after:?}");
    }
}

/// Data changes a persistent watch reported after a cut, over `SEEDS`.
fn persistent_reports_after_a_cut(config: impl Fn(u64) -> SimConfig) -> Vec<usize> {
    (0..SEEDS)
        .map(|seed| {
            run_seeded(seed, async {
                let sim = SimZk::start(config(seed));
                let (other, _other_events) = sim.connect("other").await.unwrap();
                let (me, mut my_events) = sim.connect("me").await.unwrap();
                other
                    .create("/p", b"", CreateMode::Persistent)
                    .await
                    .unwrap();
                me.add_watch("/p", AddWatchMode::Persistent).await.unwrap();
                sim.cut(me.session_id(), Duration::from_millis(50)).await;
                for _ in 0..WRITES {
                    other.set_data("/p", b"", None).await.unwrap();
                }
                reconnected(&mut my_events).await;
                // Past the longest catch-up.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let reported = drain(&mut my_events)
                    .into_iter()
                    .filter(|event| *event == watch(WatchKind::NodeDataChanged, "/p"))
                    .count();
                // Each reported change is one the session's server applied
                // after the reconnect: never more than all of them.
                let version = me.exists("/p", Watch::No).await.unwrap().unwrap().version;
                assert!(reported <= version as usize, "seed {seed}");
                reported
            })
        })
        .collect()
}

/// A persistent watch does not report changes made while its session was
/// away (the client must reconcile), but one registered again through a
/// lagging server does report those that server applies afterwards.
#[test]
fn a_persistent_watch_registered_again_through_a_lagging_server_reports_what_it_applies_next() {
    let without_lag = persistent_reports_after_a_cut(|seed| SimConfig {
        seed,
        ..SimConfig::default()
    });
    assert!(without_lag.iter().all(|&n| n == 0), "{without_lag:?}");
    let with_lag = persistent_reports_after_a_cut(lagging);
    assert!(
        with_lag.iter().any(|&n| n > 0) && with_lag.contains(&0),
        "{with_lag:?}"
    );
}

/// How many times the reader was told of `/x`'s one change, and whether
/// both its watching reads were answered as of before it.
fn watch_twice_before_one_change(seed: u64) -> (usize, bool) {
    run_seeded(seed, async move {
        let sim = SimZk::start(lagging(seed));
        let (writer, reader, _reader_events) = writer_and_reader(&sim).await;
        writer
            .create("/x", b"", CreateMode::Persistent)
            .await
            .unwrap();
        for n in 0..WRITES {
            writer
                .create(&format!("/other-{n}"), b"", CreateMode::Persistent)
                .await
                .unwrap();
        }
        writer.set_data("/x", b"once", None).await.unwrap();
        let first = reader.get_data("/x", Watch::Yes).await;
        let second = reader.get_data("/x", Watch::Yes).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before_the_change = |read: &Result<(Vec<u8>, zkdist_coord::Stat), ZkError>| matches!(read, Ok((_, stat)) if stat.version == 0);
        let told = sim
            .trace()
            .await
            .iter()
            .filter(|line| line.contains("deliver reader event NodeDataChanged /x"))
            .count();
        (
            told,
            before_the_change(&first) && before_the_change(&second),
        )
    })
}

/// A change fires a session's watches once. Two lagging reads that left a
/// watch on one node before its only change owe the session one event,
/// not two.
#[test]
fn two_watching_reads_before_one_change_are_told_of_it_once() {
    let mut both_before = 0;
    for seed in 0..SEEDS {
        let (told, before) = watch_twice_before_one_change(seed);
        assert!(told <= 1, "seed {seed}: told {told} times of one change");
        if before {
            assert_eq!(
                told, 1,
                "seed {seed}: the watch fires when the server catches up"
            );
            both_before += 1;
        }
    }
    assert!(
        both_before > 0,
        "no seed answered both reads as of before the change"
    );
}

/// A delete fires the node's watch, then its parent's child watch, in one
/// transaction. A lagging server owes them in that order, whichever
/// watching read came first.
#[test]
fn the_events_of_one_transaction_come_in_the_order_it_fired_them() {
    let mut both_owed = 0;
    for seed in 0..SEEDS {
        both_owed += run_seeded(seed, async move {
            let sim = SimZk::start(lagging(seed));
            let (writer, reader, mut reader_events) = writer_and_reader(&sim).await;
            writer
                .create("/w", b"", CreateMode::Persistent)
                .await
                .unwrap();
            writer
                .create("/w/e", b"", CreateMode::Persistent)
                .await
                .unwrap();
            writer.delete("/w/e", None).await.unwrap();
            // The parent's child watch first, then the node's data watch.
            let (children, _) = reader
                .get_children("/w", Watch::Yes)
                .await
                .unwrap_or_default();
            let data = reader.get_data("/w/e", Watch::Yes).await;
            if children.is_empty() || data.is_err() {
                // Not both as of before the delete: not this case.
                return 0;
            }
            let events = [
                next_event(&mut reader_events).await,
                next_event(&mut reader_events).await,
            ];
            assert_eq!(
                events,
                [
                    watch(WatchKind::NodeDeleted, "/w/e"),
                    watch(WatchKind::NodeChildrenChanged, "/w")
                ],
                "seed {seed}"
            );
            1
        });
    }
    assert!(
        both_owed > 0,
        "no seed answered both reads as of before the delete"
    );
}
