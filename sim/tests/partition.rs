//! Silent partitions (`SimZk::partition`): the client hears of the dead
//! link only from its own link watch, while the server counts the session
//! timeout from the last message it heard, so the expiry can come much
//! sooner after the `Disconnected` event than after a cut.

mod common;

use std::time::Duration;

use tokio::time::Instant;
use zkdist_coord::{Coordinator, CreateMode, SessionState, Watch, WatchKind, ZkError};
use zkdist_sim::{Latency, SimConfig, SimZk};

use common::{drain, next_event, run_paused, run_seeded, state, watch};

const TIMEOUT_MS: u64 = 1_000;
/// The client's link watch ticks every twentieth of the timeout.
const TICK_MS: u64 = TIMEOUT_MS / 20;

fn config(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        latency: Latency::Fixed { ms: 1 },
        session_timeout_ms: TIMEOUT_MS,
        ..SimConfig::default()
    }
}

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap()
}

/// When, after a long silent partition, the client noticed it and the
/// server expired the session (ms), and the partitioned client's trace.
struct LongPartition {
    noticed_after_ms: u64,
    expired_after_ms: u64,
    trace: Vec<String>,
}

/// `a` holds an ephemeral that `b` watches; `a`'s link goes silent for
/// three session timeouts, with a request of `a` in flight and another
/// sent during the partition.
fn long_partition(seed: u64) -> LongPartition {
    run_seeded(seed, async move {
        let sim = SimZk::start(config(seed));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, mut b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        assert!(b.exists("/e", Watch::Yes).await.unwrap().is_some());
        drain(&mut a_events);
        drain(&mut b_events);
        // Quiet for a while, so that the draws of when each side last
        // heard the other are not bounded by the traffic above.
        tokio::time::sleep(Duration::from_secs(1)).await;

        let partitioned_at = Instant::now();
        sim.partition(a.session_id(), Duration::from_secs(3)).await;
        // Nothing tells the client: it believes it is connected, and what
        // it sends goes nowhere.
        let lost = tokio::spawn({
            let a = a.clone();
            async move { a.set_data("/e", b"x", None).await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(drain(&mut a_events), []);
        assert!(!lost.is_finished());

        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Disconnected)
        );
        let noticed_after_ms = ms(partitioned_at.elapsed());
        let result = lost.await.unwrap();
        assert!(
            matches!(&result, Err(ZkError::ConnectionLoss { reason }) if reason.contains("silent partition")),
            "{result:?}"
        );
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeDeleted, "/e")
        );
        let expired_after_ms = ms(partitioned_at.elapsed());
        // The client learns of the expiry when the link heals.
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Expired)
        );
        assert!(partitioned_at.elapsed() >= Duration::from_secs(3));
        assert_eq!(a.exists("/", Watch::No).await, Err(ZkError::SessionExpired));
        LongPartition {
            noticed_after_ms,
            expired_after_ms,
            trace: sim.trace().await,
        }
    })
}

/// The client notices 8 to 9 ticks after it last heard the server (at
/// most 4 ticks before the partition), the server expires the session a
/// timeout after it last heard the client (also at most 4 ticks before),
/// so the expiry comes at least 7 ticks (0.35 of the timeout) after the
/// `Disconnected` event, and over the seeds it comes sooner than a whole
/// timeout after it: what a grace counted from the event must allow for.
#[test]
fn a_silent_partition_is_noticed_late_and_the_session_may_expire_soon_after() {
    let mut least_gap_ms = u64::MAX;
    let mut early_expiries = 0;
    for seed in 0..40 {
        let run = long_partition(seed);
        let (noticed, expired) = (run.noticed_after_ms, run.expired_after_ms);
        assert!(
            (4 * TICK_MS..=9 * TICK_MS + 1).contains(&noticed),
            "seed {seed}: noticed after {noticed} ms"
        );
        assert!(
            (TIMEOUT_MS - 4 * TICK_MS..=TIMEOUT_MS + 1).contains(&expired),
            "seed {seed}: expired after {expired} ms"
        );
        assert!(
            expired >= noticed + 7 * TICK_MS - 1,
            "seed {seed}: expired {expired} ms, noticed {noticed} ms"
        );
        least_gap_ms = least_gap_ms.min(expired - noticed);
        if expired - noticed < TIMEOUT_MS / 2 {
            early_expiries += 1;
        }
    }
    assert!(
        least_gap_ms < 9 * TICK_MS,
        "the draws come near the worst case: least gap {least_gap_ms} ms"
    );
    assert!(
        early_expiries >= 10,
        "{early_expiries} of 40 seeds expire within half a timeout of the notice"
    );
}

#[test]
fn a_partitions_trace_follows_the_seed() {
    let first = long_partition(5).trace;
    assert_eq!(first, long_partition(5).trace);
    assert_ne!(first, long_partition(6).trace);
    assert!(
        first
            .iter()
            .any(|line| line.contains("control partition a for 3000.000ms")),
        "{first:#?}"
    );
    assert!(
        first
            .iter()
            .any(|line| line.contains("lost a set_data /e") && line.contains("silent partition")),
        "{first:#?}"
    );
}

/// A partition shorter than the client's link watch still lasts until the
/// client notices it (a shorter one only delays packets); then the client
/// reconnects at once, keeps its session, and its re-registered watch
/// fires for the change it missed.
#[test]
fn a_short_partition_is_noticed_then_healed_and_the_session_survives() {
    run_paused(async {
        let sim = SimZk::start(config(2));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, _b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        b.create("/w", b"", CreateMode::Persistent).await.unwrap();
        assert!(a.exists("/w", Watch::Yes).await.unwrap().is_some());
        drain(&mut a_events);

        let partitioned_at = Instant::now();
        sim.partition(a.session_id(), Duration::from_millis(10))
            .await;
        b.set_data("/w", b"changed", None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(drain(&mut a_events), [], "nothing heard, nothing noticed");

        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Disconnected)
        );
        let noticed_ms = ms(partitioned_at.elapsed());
        assert!(noticed_ms >= 4 * TICK_MS, "noticed after {noticed_ms} ms");
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Connected)
        );
        assert_eq!(
            next_event(&mut a_events).await,
            watch(WatchKind::NodeDataChanged, "/w")
        );
        assert!(a.exists("/e", Watch::No).await.unwrap().is_some());
        assert!(b.exists("/e", Watch::No).await.unwrap().is_some());
    });
}

/// A close sent into a partition is lost: the handle ends when the client
/// notices, and the server keeps the session (and its ephemeral) until it
/// expires it.
#[test]
fn a_close_lost_in_a_partition_ends_the_handle_when_the_client_notices() {
    run_paused(async {
        let sim = SimZk::start(config(3));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        let (b, mut b_events) = sim.connect("b").await.unwrap();
        a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
        assert!(b.exists("/e", Watch::Yes).await.unwrap().is_some());
        drain(&mut a_events);
        drain(&mut b_events);

        let partitioned_at = Instant::now();
        sim.partition(a.session_id(), Duration::from_secs(5)).await;
        let closed = a.close().await;
        assert!(
            matches!(&closed, Err(ZkError::ConnectionLoss { .. })),
            "{closed:?}"
        );
        assert!(ms(partitioned_at.elapsed()) >= 4 * TICK_MS);
        assert_eq!(next_event(&mut a_events).await, state(SessionState::Closed));
        assert_eq!(a_events.recv().await, None, "the stream ends");
        assert!(b.exists("/e", Watch::No).await.unwrap().is_some());
        assert_eq!(
            next_event(&mut b_events).await,
            watch(WatchKind::NodeDeleted, "/e")
        );
        assert!(ms(partitioned_at.elapsed()) >= TIMEOUT_MS - 4 * TICK_MS);
    });
}

/// A session already cut off takes a partition as a cut: it reconnects
/// after the later of the two.
#[test]
fn a_partition_of_a_session_already_cut_off_is_taken_as_a_cut() {
    run_paused(async {
        let sim = SimZk::start(config(4));
        let (a, mut a_events) = sim.connect("a").await.unwrap();
        drain(&mut a_events);
        let cut_at = Instant::now();
        sim.cut(a.session_id(), Duration::from_millis(100)).await;
        sim.partition(a.session_id(), Duration::from_millis(300))
            .await;
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Disconnected)
        );
        assert_eq!(
            next_event(&mut a_events).await,
            state(SessionState::Connected)
        );
        assert!(cut_at.elapsed() >= Duration::from_millis(300));
        let trace = sim.trace().await;
        assert!(
            trace
                .iter()
                .any(|line| line.contains("control partition a: taken as a cut")),
            "{trace:#?}"
        );
    });
}
