//! One explorer run's random choices, all drawn from its seed up front:
//! the link latency, the workload (who starts when, how long each task
//! runs) and, when asked, the faults. The simulator draws its own choices
//! from the same seed with a generator of its own, so the two never shift
//! each other.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zkdist_sim::Latency;

use crate::explore::{ExploreConfig, Faults};

/// The most faults one `--faults all` run draws.
pub(crate) const MAX_FAULTS: usize = 4;

/// The furthest behind the newest write a plan lets reads be, in
/// transactions: a follower some milliseconds behind a busy leader.
const MAX_FOLLOWER_LAG_TXNS: u32 = 32;

/// The longest a short cut's server stays behind after the link heals.
const MAX_STALL_AFTER_HEAL_MS: u64 = 200;

/// The most stalls (beside those of short cuts) one lagging plan draws.
const MAX_STALLS: usize = 3;
/// The longest such stall.
const MAX_STALL_MS: u64 = 200;

/// Separates the plan's generator from the simulator's (same seed).
const PLAN_STREAM: u64 = 0x5ce0_a210_0e5a_c0de;

/// Whom a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// The elected master at the time (the session holding the master
    /// node), whichever candidate that is.
    Master,
    /// Worker `w<n>`, from 1.
    Worker(usize),
    /// The client that submits the tasks (only its link is cut: it is not
    /// a process that re-joins).
    Client,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// The link is down for this long (shorter than the session timeout:
    /// the session survives, in-flight requests fail with ConnectionLoss).
    CutShort {
        ms: u64,
    },
    /// Down past the session timeout: the session expires meanwhile.
    CutLong {
        ms: u64,
    },
    Expire,
    /// The process dies with its session, and a new process of the same
    /// actor starts this long after.
    Crash {
        restart_after_ms: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlannedFault {
    /// When, after the master started.
    pub at_us: u64,
    pub target: Target,
    pub kind: FaultKind,
    /// For a short cut in a plan whose reads lag: how long the session's
    /// server stays behind from the cut on (0: it does not), so that the
    /// session comes back through a server that has not applied the writes
    /// whose replies the cut lost, and reads there until it syncs or
    /// writes (see `SimZk::stall`).
    pub server_stall_ms: u64,
    /// For a cut: the link goes silent instead of failing (see
    /// `SimZk::partition`), so the client notices late and the server may
    /// expire the session soon after it does.
    pub silent: bool,
}

/// A stall of the server a session talks to (see `SimZk::stall`): not a
/// failure, a follower that falls behind for a while, as ZooKeeper allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlannedStall {
    /// When, after the master started.
    pub at_us: u64,
    pub target: Target,
    pub ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub latency: Latency,
    pub workers_before_master: usize,
    pub tasks_before_master: usize,
    /// How long each task runs, in submission order.
    pub work_us: Vec<u64>,
    /// The pause before starting each worker that starts after the master.
    pub worker_gaps_us: Vec<u64>,
    /// The pause before submitting each task that comes after the master.
    pub task_gaps_us: Vec<u64>,
    pub faults: Vec<PlannedFault>,
    /// How many master candidates run (the second stands by).
    pub masters: usize,
    /// How many finished tasks the client deletes once all finished, the
    /// oldest first, before the master's view is compared with the tree.
    pub cleanups: usize,
    /// How far reads may lag behind the newest write, in transactions:
    /// sessions talk to followers that have not applied everything yet.
    pub follower_lag_txns: u32,
    /// Servers that fall behind for a while, in a plan whose reads lag.
    pub stalls: Vec<PlannedStall>,
}

impl Plan {
    pub(crate) fn draw(seed: u64, config: &ExploreConfig) -> Plan {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ PLAN_STREAM);
        let latency = match config.faults {
            Faults::None => Latency::Zero,
            Faults::Latency | Faults::All => draw_latency(&mut rng),
        };
        let workers_before_master = rng.random_range(0..=config.workers);
        let tasks_before_master = rng.random_range(0..=config.tasks / 3);
        // Zero-length tasks make finishes coincide with other events.
        let mut work_us: Vec<u64> = (0..config.tasks)
            .map(|_| match rng.random_range(0..4) {
                0 => 0,
                _ => rng.random_range(1..=20_000),
            })
            .collect();
        let worker_gaps_us = (workers_before_master..config.workers)
            .map(|_| rng.random_range(0..=3_000))
            .collect();
        let task_gaps_us = (tasks_before_master..config.tasks)
            .map(|_| match rng.random_range(0..3) {
                0 => 0,
                _ => rng.random_range(1..=4_000),
            })
            .collect();
        let (faults, masters, cleanups) = match config.faults {
            Faults::All => (
                draw_faults(&mut rng, config, crate::explore::SESSION_TIMEOUT_MS),
                2,
                rng.random_range(0..=config.tasks / 2),
            ),
            Faults::None | Faults::Latency => (Vec::new(), 1, 0),
        };
        // Drawn last, so that it shifts none of the choices above: a seed
        // runs the same workload and faults as before reads could lag.
        let follower_lag_txns = match config.faults {
            Faults::None => 0,
            Faults::Latency | Faults::All => match rng.random_range(0..2) {
                0 => 0,
                _ => rng.random_range(1..=MAX_FOLLOWER_LAG_TXNS),
            },
        };
        // Drawn after the lag, for the same reason: half the short cuts of
        // a lagging plan bring their session back through a stalled
        // server, where the seeded lag of each read seldom meets the one
        // read-back that a sync protects.
        let mut faults = faults;
        if follower_lag_txns > 0 {
            for fault in &mut faults {
                if let FaultKind::CutShort { ms } = fault.kind
                    && rng.random_range(0..2) == 1
                {
                    fault.server_stall_ms = ms + rng.random_range(1..=MAX_STALL_AFTER_HEAL_MS);
                }
            }
        }
        // Drawn last too: servers that fall behind at random times, with
        // or without faults (a slow follower is no failure: FIFO order is
        // still required through it).
        let stalls = if follower_lag_txns > 0 {
            draw_stalls(&mut rng, config)
        } else {
            Vec::new()
        };
        let timeout_us = crate::explore::SESSION_TIMEOUT_MS * 1_000;
        // Drawn after the stalls, so that every choice above stays as it
        // was (and before the long tasks, which change nothing else): half
        // the cuts are silent partitions, which the client notices only
        // from its own link watch. Each strikes up to half a session
        // timeout later than drawn above: the server may then have gone a
        // whole ping interval without hearing the session (the worst case
        // for a grace counted from the client's notice), which the traffic
        // of a run's first milliseconds rules out.
        for fault in &mut faults {
            if matches!(
                fault.kind,
                FaultKind::CutShort { .. } | FaultKind::CutLong { .. }
            ) && rng.random_range(0..2) == 1
                && config.draws_silent_partitions()
            {
                fault.silent = true;
                fault.at_us += rng.random_range(0..=timeout_us / 2);
            }
        }
        faults.sort_by_key(|fault| fault.at_us);
        // Drawn last of all, and only when asked for: the first tasks
        // submitted, two for each worker (any worker may get them), run
        // while the faults strike (within 80 ms of the start, silent
        // partitions up to half a session timeout later), and long enough
        // for a cut to outlast a worker's grace in the middle of one.
        if config.long_tasks {
            let first = (2 * config.workers).min(config.tasks);
            for work in &mut work_us[..first] {
                *work = rng.random_range(timeout_us / 4..=2 * timeout_us);
            }
        }
        Plan {
            latency,
            workers_before_master,
            tasks_before_master,
            work_us,
            worker_gaps_us,
            task_gaps_us,
            faults,
            masters,
            cleanups,
            follower_lag_txns,
            stalls,
        }
    }
}

/// Whom a fault or a stall hits: the master, among the workers + 1
/// processes, or the client.
fn draw_target(rng: &mut ChaCha8Rng, config: &ExploreConfig) -> Target {
    match rng.random_range(0..=config.workers + 1) {
        0 => Target::Master,
        n if n <= config.workers => Target::Worker(n),
        _ => Target::Client,
    }
}

fn draw_stalls(rng: &mut ChaCha8Rng, config: &ExploreConfig) -> Vec<PlannedStall> {
    let count = rng.random_range(0..=MAX_STALLS);
    let mut stalls: Vec<PlannedStall> = (0..count)
        .map(|_| PlannedStall {
            target: draw_target(rng, config),
            at_us: rng.random_range(0..=80_000),
            ms: rng.random_range(1..=MAX_STALL_MS),
        })
        .collect();
    stalls.sort_by_key(|stall| stall.at_us);
    stalls
}

fn draw_latency(rng: &mut ChaCha8Rng) -> Latency {
    match rng.random_range(0..3) {
        0 => Latency::Fixed {
            ms: rng.random_range(0..=2),
        },
        1 => Latency::Uniform {
            min_us: rng.random_range(0..=300),
            max_us: rng.random_range(500..=5_000),
        },
        _ => Latency::HeavyTail {
            base_us: rng.random_range(200..=1_500),
            tail_probability_pct: rng.random_range(2..=10),
            tail_max_us: rng.random_range(20_000..=200_000),
        },
    }
}

fn draw_faults(
    rng: &mut ChaCha8Rng,
    config: &ExploreConfig,
    session_timeout_ms: u64,
) -> Vec<PlannedFault> {
    let count = rng.random_range(1..=MAX_FAULTS);
    let mut faults: Vec<PlannedFault> = (0..count)
        .map(|_| {
            let target = draw_target(rng, config);
            let kinds = if target == Target::Client { 1 } else { 4 };
            let kind = match rng.random_range(0..kinds) {
                0 => FaultKind::CutShort {
                    ms: rng.random_range(1..=session_timeout_ms / 2),
                },
                1 => FaultKind::CutLong {
                    ms: rng.random_range(session_timeout_ms..=2 * session_timeout_ms),
                },
                2 => FaultKind::Expire,
                _ => FaultKind::Crash {
                    restart_after_ms: rng.random_range(0..=2 * session_timeout_ms),
                },
            };
            PlannedFault {
                at_us: rng.random_range(0..=80_000),
                target,
                kind,
                server_stall_ms: 0,
                silent: false,
            }
        })
        .collect();
    faults.sort_by_key(|fault| fault.at_us);
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_seed_and_the_mode() {
        let config = ExploreConfig::default();
        assert_eq!(Plan::draw(7, &config), Plan::draw(7, &config));
        assert_ne!(Plan::draw(7, &config), Plan::draw(8, &config));
        let none = Plan::draw(7, &config);
        assert_eq!(none.latency, Latency::Zero);
        assert!(none.faults.is_empty());
        assert_eq!((none.masters, none.cleanups), (1, 0));
        assert_eq!(none.follower_lag_txns, 0, "zero latency: reads never lag");
        assert_eq!(none.work_us.len(), config.tasks);
        assert_eq!(
            none.task_gaps_us.len(),
            config.tasks - none.tasks_before_master
        );
        let all = ExploreConfig {
            faults: Faults::All,
            ..ExploreConfig::default()
        };
        let with_faults = (0..20).map(|seed| Plan::draw(seed, &all));
        for plan in with_faults {
            assert!((1..=MAX_FAULTS).contains(&plan.faults.len()));
            assert_eq!(plan.masters, 2);
            assert!(plan.cleanups <= all.tasks / 2);
            assert!(plan.faults.windows(2).all(|w| w[0].at_us <= w[1].at_us));
            for fault in &plan.faults {
                match fault.target {
                    Target::Worker(n) => assert!((1..=all.workers).contains(&n)),
                    Target::Client => {
                        assert!(matches!(fault.kind, FaultKind::CutShort { .. }))
                    }
                    Target::Master => {}
                }
            }
        }
    }

    #[test]
    fn long_tasks_lengthen_the_first_two_per_worker_and_change_nothing_else() {
        let all = ExploreConfig {
            faults: Faults::All,
            workers: 4,
            tasks: 100,
            ..ExploreConfig::default()
        };
        let long = ExploreConfig {
            long_tasks: true,
            ..all.clone()
        };
        let timeout_us = crate::explore::SESSION_TIMEOUT_MS * 1_000;
        for seed in 0..50 {
            let short_plan = Plan::draw(seed, &all);
            let long_plan = Plan::draw(seed, &long);
            let (first, rest) = long_plan.work_us.split_at(8);
            assert!(
                first
                    .iter()
                    .all(|work_us| (timeout_us / 4..=2 * timeout_us).contains(work_us)),
                "seed {seed}: {first:?}"
            );
            assert_eq!(rest, &short_plan.work_us[8..], "seed {seed}");
            let without_work = |plan: &Plan| Plan {
                work_us: Vec::new(),
                ..plan.clone()
            };
            assert_eq!(
                without_work(&long_plan),
                without_work(&short_plan),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn about_half_the_short_cuts_of_lagging_plans_stall_their_server() {
        let all = ExploreConfig {
            faults: Faults::All,
            ..ExploreConfig::default()
        };
        let (mut short_cuts, mut stalled) = (0, 0);
        for seed in 0..200 {
            let plan = Plan::draw(seed, &all);
            for fault in &plan.faults {
                match fault.kind {
                    FaultKind::CutShort { ms } if plan.follower_lag_txns > 0 => {
                        short_cuts += 1;
                        if fault.server_stall_ms > 0 {
                            stalled += 1;
                            // Past the heal: the reconnect meets it.
                            assert!(fault.server_stall_ms > ms, "{fault:?}");
                            assert!(fault.server_stall_ms <= ms + MAX_STALL_AFTER_HEAL_MS);
                        }
                    }
                    // Only where a history lets a server be behind.
                    _ => assert_eq!(fault.server_stall_ms, 0, "{fault:?}"),
                }
            }
        }
        assert!(
            short_cuts > 20 && (short_cuts / 4..=3 * short_cuts / 4).contains(&stalled),
            "{stalled} of {short_cuts} short cuts stalled"
        );
    }

    #[test]
    fn only_lagging_plans_stall_servers_and_some_do() {
        for faults in [Faults::Latency, Faults::All] {
            let config = ExploreConfig {
                faults,
                ..ExploreConfig::default()
            };
            let mut stalled_plans = 0;
            for seed in 0..100 {
                let plan = Plan::draw(seed, &config);
                if plan.follower_lag_txns == 0 {
                    assert_eq!(plan.stalls, [], "{faults:?} seed {seed}");
                    continue;
                }
                assert!(plan.stalls.len() <= MAX_STALLS);
                assert!(plan.stalls.windows(2).all(|w| w[0].at_us <= w[1].at_us));
                for stall in &plan.stalls {
                    assert!((1..=MAX_STALL_MS).contains(&stall.ms), "{stall:?}");
                }
                stalled_plans += usize::from(!plan.stalls.is_empty());
            }
            assert!(
                (10..=60).contains(&stalled_plans),
                "{faults:?}: {stalled_plans}"
            );
        }
    }

    #[test]
    fn about_half_the_plans_with_latency_let_reads_lag() {
        for faults in [Faults::Latency, Faults::All] {
            let config = ExploreConfig {
                faults,
                ..ExploreConfig::default()
            };
            let lags: Vec<u32> = (0..100)
                .map(|seed| Plan::draw(seed, &config).follower_lag_txns)
                .collect();
            let lagging = lags.iter().filter(|&&lag| lag > 0).count();
            assert!((25..=75).contains(&lagging), "{faults:?}: {lags:?}");
            assert!(lags.iter().all(|&lag| lag <= MAX_FOLLOWER_LAG_TXNS));
        }
    }

    /// About half the cuts are silent, each striking at most half a
    /// session timeout after the latest an ordinary fault does, and the
    /// faults stay in time order; no other kind of fault is silent.
    #[test]
    fn about_half_the_cuts_are_silent_and_some_strike_later() {
        let config = ExploreConfig {
            faults: Faults::All,
            ..ExploreConfig::default()
        };
        let timeout_us = crate::explore::SESSION_TIMEOUT_MS * 1_000;
        let (mut cuts, mut silent, mut later) = (0, 0, 0);
        for seed in 0..200 {
            let plan = Plan::draw(seed, &config);
            assert!(plan.faults.windows(2).all(|w| w[0].at_us <= w[1].at_us));
            for fault in &plan.faults {
                match fault.kind {
                    FaultKind::CutShort { .. } | FaultKind::CutLong { .. } => {
                        cuts += 1;
                        silent += usize::from(fault.silent);
                        if fault.silent {
                            assert!(fault.at_us <= 80_000 + timeout_us / 2, "{fault:?}");
                            later += usize::from(fault.at_us > 80_000);
                        } else {
                            assert!(fault.at_us <= 80_000, "{fault:?}");
                        }
                    }
                    _ => assert!(!fault.silent, "{fault:?}"),
                }
            }
        }
        assert!(
            cuts > 100 && (cuts / 3..=2 * cuts / 3).contains(&silent),
            "{silent} of {cuts} cuts silent"
        );
        assert!(
            later > silent / 2,
            "{later} of {silent} silent cuts struck late"
        );
    }

    /// With silent partitions off, the same plans with every cut loud.
    #[cfg(feature = "mutants")]
    #[test]
    fn without_silent_partitions_plans_differ_only_in_their_cuts() {
        let with = ExploreConfig {
            faults: Faults::All,
            ..ExploreConfig::default()
        };
        let without = ExploreConfig {
            silent_partitions: false,
            ..with.clone()
        };
        for seed in 0..100 {
            let loud = Plan::draw(seed, &without);
            assert!(loud.faults.iter().all(|fault| !fault.silent), "seed {seed}");
            let plan = Plan::draw(seed, &with);
            let kinds = |plan: &Plan| -> Vec<(Target, FaultKind)> {
                let mut kinds: Vec<_> = plan.faults.iter().map(|f| (f.target, f.kind)).collect();
                kinds.sort_by_key(|(target, kind)| format!("{target:?} {kind:?}"));
                kinds
            };
            assert_eq!(kinds(&plan), kinds(&loud), "seed {seed}");
            assert_eq!(plan.work_us, loud.work_us, "seed {seed}");
        }
    }
}
