//! Same seed, same trace, byte for byte; another seed, another trace; and
//! the same trace in every process, on every machine (a pinned digest).
//!
//! A randomized workload: eight actors (each driven by its own seeded
//! generator) create, delete, write, read, watch and run multis over a small
//! shared set of paths, reconnecting when their session dies, while a chaos
//! task cuts links (some past the session timeout), expires sessions and
//! holds deliveries. Actors write what they observe into the trace, so the
//! trace covers the client-visible outcomes, not only the server's.

mod common;

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkdist_coord::{Coordinator, CreateMode, ErrorCode, Op, SessionId, Watch, ZkError, ZkResult};
use zkdist_sim::{Latency, SimConfig, SimSession, SimZk};

use common::{drain, run_seeded};

const ACTORS: usize = 8;
const OPS_PER_ACTOR: usize = 80;
const CHAOS_ACTIONS: usize = 30;
const PATHS: [&str; 7] = [
    "/w/a", "/w/b", "/w/c", "/w/a/x", "/w/b/y", "/w/q/t-", "/w/q",
];
const PARENTS: [&str; 4] = ["/w", "/w/a", "/w/b", "/w/q"];
const MODES: [CreateMode; 4] = [
    CreateMode::Persistent,
    CreateMode::Ephemeral,
    CreateMode::PersistentSequential,
    CreateMode::EphemeralSequential,
];

fn pick<T: Copy>(rng: &mut ChaCha8Rng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

fn version(rng: &mut ChaCha8Rng) -> Option<i32> {
    rng.random_bool(0.5).then(|| rng.random_range(0..3))
}

fn watch(rng: &mut ChaCha8Rng) -> Watch {
    if rng.random_bool(0.6) {
        Watch::Yes
    } else {
        Watch::No
    }
}

fn shown<T: std::fmt::Debug>(result: ZkResult<T>) -> (String, Option<ZkError>) {
    match result {
        Ok(value) => (format!("ok {value:?}"), None),
        Err(error) => (format!("err {error}"), Some(error)),
    }
}

/// One random operation; returns what the actor saw and the error, if any.
async fn random_op(zk: &SimSession, rng: &mut ChaCha8Rng) -> (String, Option<ZkError>) {
    let path = pick(rng, &PATHS);
    let data = vec![b'd'; rng.random_range(0..16)];
    match rng.random_range(0..100) {
        0..=19 => shown(zk.create(path, &data, pick(rng, &MODES)).await),
        20..=31 => shown(zk.delete(path, version(rng)).await),
        32..=45 => shown(zk.set_data(path, &data, version(rng)).await),
        46..=57 => shown(zk.get_data(path, watch(rng)).await),
        58..=67 => shown(zk.exists(path, watch(rng)).await),
        68..=81 => shown(zk.get_children(pick(rng, &PARENTS), watch(rng)).await),
        82..=93 => {
            let other = pick(rng, &PATHS);
            let ops = vec![
                Op::Create {
                    path: path.to_owned(),
                    data,
                    mode: pick(rng, &MODES),
                },
                Op::SetData {
                    path: other.to_owned(),
                    data: b"m".to_vec(),
                    version: version(rng),
                },
                Op::Check {
                    path: pick(rng, &PARENTS).to_owned(),
                    version: Some(0),
                },
            ];
            shown(zk.multi(ops).await)
        }
        94..=98 => shown(zk.sync(path).await),
        _ => shown(zk.close().await),
    }
}

async fn actor(sim: SimZk, index: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(index as u64));
    let mut generation = 0;
    let (mut zk, mut events) = sim.connect(&format!("a{index}.0")).await.expect("connect");
    for step in 0..OPS_PER_ACTOR {
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..20_000))).await;
        for event in drain(&mut events) {
            sim.note(format!("a{index}.{generation} saw {event:?}"));
        }
        let (outcome, error) = random_op(&zk, &mut rng).await;
        sim.note(format!("a{index}.{generation} step {step}: {outcome}"));
        let dead = error.is_some_and(|e| {
            matches!(
                e.code(),
                ErrorCode::SessionExpired | ErrorCode::SessionClosed
            )
        });
        if dead {
            generation += 1;
            let name = format!("a{index}.{generation}");
            match sim.connect(&name).await {
                Ok((new_zk, new_events)) => (zk, events) = (new_zk, new_events),
                Err(error) => sim.note(format!("{name} could not connect: {error}")),
            }
        }
    }
    let _ = zk.close().await;
}

/// Faults against session ids picked at random; ids of sessions that do
/// not exist (yet) are ignored by the simulator, which is part of the test.
async fn chaos(sim: SimZk, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC4A0_5EED);
    for _ in 0..CHAOS_ACTIONS {
        tokio::time::sleep(Duration::from_micros(rng.random_range(5_000..50_000))).await;
        let session = SessionId(rng.random_range(2..=16));
        match rng.random_range(0..10) {
            0..=4 => {
                let outage = Duration::from_micros(rng.random_range(100..600_000));
                sim.cut(session, outage).await;
            }
            5..=6 => sim.expire(session).await,
            _ => {
                sim.hold(session).await;
                tokio::time::sleep(Duration::from_micros(rng.random_range(0..20_000))).await;
                sim.release(session).await;
            }
        }
    }
}

fn workload_trace(seed: u64) -> Vec<String> {
    workload_trace_lagging(seed, 0)
}

/// [`workload_trace`] with reads that may lag up to `follower_lag_txns`
/// transactions behind the newest.
fn workload_trace_lagging(seed: u64, follower_lag_txns: u32) -> Vec<String> {
    run_seeded(seed, async move {
        let sim = SimZk::start(SimConfig {
            seed,
            latency: Latency::HeavyTail {
                base_us: 1_000,
                tail_probability_pct: 10,
                tail_max_us: 30_000,
            },
            session_timeout_ms: 300,
            follower_lag_txns,
            ..SimConfig::default()
        });
        let (setup, _events) = sim.connect("setup").await.expect("setup");
        for path in ["/w", "/w/a", "/w/b", "/w/q"] {
            setup
                .create(path, b"", CreateMode::Persistent)
                .await
                .expect("setup node");
        }
        let mut tasks = Vec::new();
        for index in 0..ACTORS {
            tasks.push(tokio::spawn(actor(sim.clone(), index, seed)));
        }
        tasks.push(tokio::spawn(chaos(sim.clone(), seed)));
        for task in tasks {
            task.await.expect("workload task");
        }
        // Let the last heals and expiries play out.
        tokio::time::sleep(Duration::from_secs(5)).await;
        sim.trace().await
    })
}

/// FNV-1a, 64 bits, over the trace's lines joined by newlines: a digest
/// that is the same on every platform and in every process.
fn digest(trace: &[String]) -> u64 {
    trace
        .join("\n")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The digest of `workload_trace(42)`. Two runs in one process agree even
/// if an order depends on something that changes from process to process
/// (an address, a hasher's random keys); this pins the trace across
/// processes and machines.
///
/// It changes, deliberately, whenever the simulator's behaviour or the
/// trace's format changes. To update it: run this test, check that the
/// change is one you meant (a diff of the trace before and after is the
/// review: `workload_trace(42)` printed from both commits), and paste the
/// digest the failure reports. Under madsim (`cargo sim`) the scheduler's
/// seeded choices are part of the run, hence a second digest.
#[cfg(not(madsim))]
const PINNED_DIGEST: u64 = 0xfa49_ef97_5023_82ac;
#[cfg(madsim)]
const PINNED_DIGEST: u64 = 0xb384_82ee_6cfe_8c0d;

#[test]
fn the_trace_of_a_fixed_seed_is_pinned_across_processes() {
    let trace = workload_trace(42);
    assert!(
        trace.len() > 500,
        "a non-trivial trace: {} lines",
        trace.len()
    );
    let actual = digest(&trace);
    assert_eq!(
        actual, PINNED_DIGEST,
        "the trace of seed 42 changed: digest 0x{actual:016x} (see PINNED_DIGEST to update it)"
    );
}

#[test]
fn same_seed_gives_the_same_trace_and_another_seed_another() {
    let first = workload_trace(42);
    let again = workload_trace(42);
    assert!(
        first.len() > 500,
        "a non-trivial trace: {} lines",
        first.len()
    );
    assert_eq!(first, again, "same seed, same trace");

    let other = workload_trace(43);
    assert!(other.len() > 500);
    assert_ne!(first, other, "another seed, another trace");

    // The workload really exercised what the trace is meant to pin down
    // (over both seeds: which fault meets which message is up to the seed).
    let contains = |needle: &str| first.iter().chain(&other).any(|line| line.contains(needle));
    for needle in [
        "control cut",
        "control expire",
        "control hold",
        "session timeout",
        "session Expired",
        "session Connected",
        "deliver a",
        "event NodeDataChanged",
        "event NodeChildrenChanged",
        "-> ConnectionLoss",
        "never reached",
        "queue a",
        "queued requests sent",
        "drop a",
        "multi [",
        "_sequential",
        "heal ",
    ] {
        assert!(contains(needle), "the workload never produced {needle:?}");
    }
}

#[test]
fn same_seed_gives_the_same_trace_when_reads_lag() {
    let first = workload_trace_lagging(42, 16);
    assert_eq!(
        first,
        workload_trace_lagging(42, 16),
        "same seed, same trace"
    );
    assert_ne!(first, workload_trace(42), "the lag changes the run");
    // Over two seeds, as above: which heal meets a lagging server is up
    // to the seed.
    let other = workload_trace_lagging(43, 16);
    for needle in [" behind) -> ", "catch-up ", "through a server as of"] {
        assert!(
            first.iter().chain(&other).any(|line| line.contains(needle)),
            "the lagging workload never produced {needle:?}"
        );
    }
}
