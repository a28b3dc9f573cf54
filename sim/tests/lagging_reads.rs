//! Reads answered by a lagging server (`SimConfig::follower_lag_txns`):
//! a session may miss another session's latest writes until it syncs, but
//! it always sees its own, and never goes back to an older state.

mod common;

use zkdist_coord::{Coordinator, CreateMode, Watch, WatchKind};
use zkdist_sim::{SimConfig, SimZk};

use common::{next_event, run_seeded, watch};

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
        let (writer, _writer_events) = sim.connect("writer").await.unwrap();
        let (reader, _reader_events) = sim.connect("reader").await.unwrap();
        writer.create("/x", b"", CreateMode::Persistent).await.unwrap();
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
    for seed in 0..SEEDS {
        run_seeded(seed, async move {
            let sim = SimZk::start(lagging(seed));
            let (other, _other_events) = sim.connect("other").await.unwrap();
            let (me, _my_events) = sim.connect("me").await.unwrap();
            other.create("/o", b"", CreateMode::Persistent).await.unwrap();
            let mut last_seen = -1;
            for round in 0..10 {
                other.set_data("/o", b"", None).await.unwrap();
                let path = me
                    .create("/mine-", b"", CreateMode::PersistentSequential)
                    .await
                    .unwrap();
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
        });
    }
}

#[test]
fn a_watch_left_by_a_lagging_read_reports_the_change_it_missed() {
    let mut owed = 0;
    for seed in 0..SEEDS {
        owed += run_seeded(seed, async move {
            let sim = SimZk::start(lagging(seed));
            let (writer, _writer_events) = sim.connect("writer").await.unwrap();
            let (reader, mut reader_events) = sim.connect("reader").await.unwrap();
            next_event(&mut reader_events).await; // Connected.
            writer.create("/x", b"", CreateMode::Persistent).await.unwrap();
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
