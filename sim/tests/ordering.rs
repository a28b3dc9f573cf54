//! Per-session ordering under randomized latency: no session ever observes
//! data newer than a watch event it has not yet been delivered.
//!
//! Writers change a few nodes' data and a directory's children while readers
//! arm one-shot watches (recording the version or pzxid they armed at) and
//! keep re-reading without a watch. After every reply a reader drains its
//! stream: an event disarms its watch. A reply showing a newer version (or
//! pzxid) than the armed one while the watch is still armed means the reply
//! overtook the event: the violation this test exists to catch. Fifty seeds,
//! with delays that let sessions overtake one another, and again with
//! servers whose reads lag behind the newest writes.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkdist_coord::{Coordinator, CreateMode, Event, EventStream, Watch, WatchKind};
use zkdist_sim::{Latency, SimConfig, SimSession, SimZk};

use common::{drain, run_seeded};

const KEYS: [&str; 3] = ["/o/k0", "/o/k1", "/o/k2"];
const DIR: &str = "/o/dir";
const WRITERS: usize = 3;
const READERS: usize = 4;
const ROUNDS: usize = 40;
const SEEDS: u64 = 50;

/// What the readers saw, summed over a run.
#[derive(Debug, Default)]
struct Tally {
    /// Reads made while a watch on the same node was armed.
    checked_reads: usize,
    /// Of those, reads that showed a change the watch reports: allowed only
    /// because its event had already arrived.
    newer_after_event: usize,
    /// Reads a lagging server answered as of an older zxid (the trace's
    /// `as of 0x… (N behind)` lines).
    lagging_reads: usize,
}

/// A reader's armed watches: path -> the version (data) or pzxid
/// (children) it saw when it armed.
type Armed = BTreeMap<String, i64>;

/// Applies the events already on the stream. `arming` is the path whose
/// watch the reply just handled set: its event may already be here too.
fn absorb(events: &mut EventStream, armed: &mut Armed, arming: Option<&str>, name: &str) -> bool {
    let mut arming_fired = false;
    for event in drain(events) {
        let Event::Watch(event) = event else {
            panic!("{name}: unexpected session event {event:?}");
        };
        let expected = if event.path == DIR {
            WatchKind::NodeChildrenChanged
        } else {
            WatchKind::NodeDataChanged
        };
        assert_eq!(event.kind, expected, "{name}: {event:?}");
        if armed.remove(&event.path).is_none() {
            assert_eq!(
                Some(event.path.as_str()),
                arming,
                "{name}: an event for a watch it does not hold (one-shot broken)"
            );
            arming_fired = true;
        }
    }
    arming_fired
}

async fn reader(zk: SimSession, mut events: EventStream, name: String, seed: u64) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut armed = Armed::new();
    let mut last_seen = BTreeMap::<String, i64>::new();
    let mut tally = Tally::default();
    for _ in 0..ROUNDS {
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..4_000))).await;
        let path = if rng.random_bool(0.3) {
            DIR
        } else {
            KEYS[rng.random_range(0..KEYS.len())]
        };
        let arming = !armed.contains_key(path);
        let watch = if arming { Watch::Yes } else { Watch::No };
        let seen = if path == DIR {
            zk.get_children(path, watch).await.expect("read").1.pzxid
        } else {
            i64::from(zk.get_data(path, watch).await.expect("read").1.version)
        };
        // A single system image: one session's reads never go back.
        let previous = last_seen.insert(path.to_owned(), seen).unwrap_or(i64::MIN);
        assert!(
            seen >= previous,
            "{name}: {path} went back from {previous} to {seen}"
        );

        let arming_fired = absorb(&mut events, &mut armed, arming.then_some(path), &name);
        if arming {
            if !arming_fired {
                armed.insert(path.to_owned(), seen);
            }
            continue;
        }
        tally.checked_reads += 1;
        match armed.get(path) {
            Some(&armed_at) => assert!(
                seen <= armed_at,
                "{name}: read {path} at {seen}, newer than {armed_at} where its watch was \
                 armed, before the watch event arrived"
            ),
            None => tally.newer_after_event += 1,
        }
    }
    tally
}

async fn writer(zk: SimSession, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..ROUNDS {
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..4_000))).await;
        match rng.random_range(0..10) {
            0..=5 => {
                let key = KEYS[rng.random_range(0..KEYS.len())];
                zk.set_data(key, b"v", None).await.expect("set_data");
            }
            6..=7 => {
                zk.create(&format!("{DIR}/c-"), b"", CreateMode::EphemeralSequential)
                    .await
                    .expect("create");
            }
            _ => {
                let (mut children, _) = zk.get_children(DIR, Watch::No).await.expect("list");
                children.sort();
                if let Some(child) = children.first() {
                    // Another writer may have taken it first.
                    let _ = zk.delete(&format!("{DIR}/{child}"), None).await;
                }
            }
        }
    }
}

fn run(seed: u64, follower_lag_txns: u32) -> Tally {
    run_seeded(seed, async move {
        let sim = SimZk::start(SimConfig {
            seed,
            latency: Latency::Uniform {
                min_us: 0,
                max_us: 5_000,
            },
            follower_lag_txns,
            ..SimConfig::default()
        });
        let (setup, _events) = sim.connect("setup").await.expect("setup");
        for path in ["/o", DIR].into_iter().chain(KEYS) {
            setup
                .create(path, b"", CreateMode::Persistent)
                .await
                .expect("setup");
        }
        let mut writers = Vec::new();
        for index in 0..WRITERS {
            let (zk, _events) = sim.connect(&format!("w{index}")).await.expect("connect");
            writers.push(tokio::spawn(writer(zk, seed * 100 + index as u64)));
        }
        let mut readers = Vec::new();
        for index in 0..READERS {
            let name = format!("r{index}");
            let (zk, mut events) = sim.connect(&name).await.expect("connect");
            assert_eq!(drain(&mut events).len(), 1, "only Connected so far");
            readers.push(tokio::spawn(reader(
                zk,
                events,
                name,
                seed * 100 + 50 + index as u64,
            )));
        }
        for task in writers {
            task.await.expect("writer");
        }
        let mut tally = Tally::default();
        for task in readers {
            let one = task.await.expect("reader");
            tally.checked_reads += one.checked_reads;
            tally.newer_after_event += one.newer_after_event;
        }
        tally.lagging_reads = sim
            .trace()
            .await
            .iter()
            .filter(|line| line.contains(" behind) -> "))
            .count();
        tally
    })
}

fn run_seeds(follower_lag_txns: u32) -> Tally {
    let mut total = Tally::default();
    for seed in 0..SEEDS {
        let tally = run(seed, follower_lag_txns);
        total.checked_reads += tally.checked_reads;
        total.newer_after_event += tally.newer_after_event;
        total.lagging_reads += tally.lagging_reads;
    }
    total
}

#[test]
fn no_session_sees_data_newer_than_an_undelivered_watch_event() {
    let total = run_seeds(0);
    assert_eq!(total.lagging_reads, 0, "{total:?}");
    // Not vacuous: many reads raced the watch they were armed with, and many
    // of them did see a newer value, always after its event.
    assert!(total.checked_reads > 2_000, "{total:?}");
    assert!(total.newer_after_event > 500, "{total:?}");
}

/// The same readers against servers that lag: a read may be answered as
/// of an older zxid, and a watch it leaves then is owed the change it
/// missed. Still no read overtakes an event, and no read goes back.
#[test]
fn no_session_sees_data_newer_than_an_undelivered_watch_event_when_reads_lag() {
    let total = run_seeds(8);
    assert!(total.lagging_reads > 1_000, "{total:?}");
    assert!(total.checked_reads > 2_000, "{total:?}");
    assert!(total.newer_after_event > 500, "{total:?}");
}
