//! The conformance suite against `SimZk`.
//!
//! Every case runs on a fresh simulation, first with zero latency, then
//! with a seeded heavy-tailed latency (seed derived from the case's name), so
//! the per-session ordering the cases rely on is exercised with messages in
//! flight, and then with that latency and reads that may lag behind the
//! newest writes, as on an ensemble. `ZKDIST_CONFORMANCE_SEEDS=N` runs N
//! seeds of each of the last two per case (default 1).

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use zkdist_coord::conformance::{Backend, Case, run_main};
use zkdist_coord::{Coordinator, CreateMode, EventStream, SessionId, ZkResult};
use zkdist_sim::{Latency, SimConfig, SimSession, SimZk};

/// The node every case works under.
const ROOT: &str = "/conformance";

/// The delays of the second run: mostly 2 to 4 ms, sometimes up to 100 ms,
/// so that messages of different sessions overtake each other. (Each
/// message reaches its client at its own due time, and the task it wakes
/// runs before the next delivery, so shorter delays would not batch
/// deliveries either.)
const SEEDED_LATENCY: Latency = Latency::HeavyTail {
    base_us: 4_000,
    tail_probability_pct: 10,
    tail_max_us: 100_000,
};

/// How far behind the newest write the third run of each case lets reads
/// be, as on an ensemble whose followers lag: a case that passes only when
/// every read sees every other session's latest write would be flaky
/// against a real ensemble.
const FOLLOWER_LAG_TXNS: u32 = 16;

struct SimBackend {
    sim: SimZk,
    /// Whether reads and reconnections may go through lagging servers.
    lagging: bool,
    sessions_opened: AtomicUsize,
    /// Sessions whose link holds back what the server sends until their
    /// next cut.
    deafened: Mutex<BTreeSet<SessionId>>,
}

impl SimBackend {
    /// A fresh simulation with an empty `/conformance`.
    async fn start(config: SimConfig) -> SimBackend {
        let sim = SimZk::start(config);
        let (setup, _events) = sim.connect("setup").await.expect("setup session");
        setup
            .create(ROOT, b"", CreateMode::Persistent)
            .await
            .expect("create the case root");
        setup.close().await.expect("close the setup session");
        SimBackend {
            sim,
            lagging: config.follower_lag_txns > 0,
            sessions_opened: AtomicUsize::new(0),
            deafened: Mutex::new(BTreeSet::new()),
        }
    }
}

impl Backend for SimBackend {
    type Session = SimSession;

    fn root(&self) -> &str {
        ROOT
    }

    async fn connect(&self) -> ZkResult<(SimSession, EventStream)> {
        let number = self.sessions_opened.fetch_add(1, Ordering::Relaxed) + 1;
        self.sim.connect(&format!("s{number}")).await
    }

    fn servers_may_lag(&self) -> bool {
        self.lagging
    }

    async fn expire(&self, session: &SimSession) {
        self.sim.expire(session.session_id()).await
    }

    async fn cut(&self, session: &SimSession, duration: std::time::Duration) {
        let id = session.session_id();
        self.sim.cut(id, duration).await;
        // What was held went with the link; the reconnection hears again.
        let deafened = self.deafened.lock().expect("deafened lock").remove(&id);
        if deafened {
            self.sim.release(id).await;
        }
    }

    async fn deafen(&self, session: &SimSession) {
        let id = session.session_id();
        self.deafened.lock().expect("deafened lock").insert(id);
        self.sim.hold(id).await
    }
}

/// FNV-1a: a stable seed per case name, the same on every platform.
fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs `case` on a fresh simulation under `config`, on the simulation
/// runtime seeded with the config's seed, and names the config if the case
/// fails.
fn run_once(case: &Case<SimBackend>, config: SimConfig) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        zkdist_sim::runtime::block_on(config.seed, async {
            let backend = SimBackend::start(config).await;
            (case.run)(Arc::new(backend)).await;
        })
    }));
    if let Err(panic) = outcome {
        eprintln!("{} failed under {config:?}", case.name);
        resume_unwind(panic);
    }
}

fn main() {
    let extra_seeds: u64 = std::env::var("ZKDIST_CONFORMANCE_SEEDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1);
    run_main::<SimBackend>(None, move |case| {
        let seed = seed_of(case.name);
        run_once(
            case,
            SimConfig {
                seed,
                latency: Latency::Zero,
                ..SimConfig::default()
            },
        );
        for offset in 0..extra_seeds {
            run_once(
                case,
                SimConfig {
                    seed: seed.wrapping_add(offset),
                    latency: SEEDED_LATENCY,
                    ..SimConfig::default()
                },
            );
            run_once(
                case,
                SimConfig {
                    seed: seed.wrapping_add(offset),
                    latency: SEEDED_LATENCY,
                    follower_lag_txns: FOLLOWER_LAG_TXNS,
                    ..SimConfig::default()
                },
            );
        }
    })
}
