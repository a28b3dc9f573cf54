//! The explorer: a seed is a schedule, replayed byte for byte; every rule
//! holds under random latencies; with faults, every outcome the explorer
//! reports is reproduced by a replay, a violation at the same step.

use zkdist_master::TaskDiscovery;
use zkdist_scenarios::{ExploreConfig, Faults, SeedOutcome, explore, run_seed, trace};

fn config(faults: Faults) -> ExploreConfig {
    ExploreConfig {
        faults,
        ..ExploreConfig::default()
    }
}

fn outcomes(
    seeds: std::ops::Range<u64>,
    config: &ExploreConfig,
    jobs: usize,
    keep_traces: bool,
) -> Vec<SeedOutcome> {
    let mut all = Vec::new();
    explore(seeds, config, jobs, keep_traces, |outcome| {
        all.push(outcome)
    });
    all
}

#[test]
fn the_same_seed_gives_the_same_trace_and_decisions() {
    for faults in Faults::ALL {
        for seed in [0, 17, 123] {
            let first = run_seed(seed, &config(faults));
            let second = run_seed(seed, &config(faults));
            assert_eq!(first, second, "seed {seed}, faults {faults}");
            let decisions = first
                .trace
                .iter()
                .filter(|line| trace::message(line).starts_with("decide m1:"))
                .count();
            assert!(decisions > 0, "the trace holds the master's decisions");
        }
    }
    // Different seeds, different schedules.
    let a = run_seed(1, &config(Faults::Latency));
    let b = run_seed(2, &config(Faults::Latency));
    assert_ne!(a.trace, b.trace);
}

#[test]
fn no_violation_over_200_seeds_with_random_latency() {
    let found: Vec<_> = outcomes(0..200, &config(Faults::Latency), 2, false)
        .into_iter()
        .filter_map(|outcome| outcome.violation.map(|v| (outcome.seed, v.summary())))
        .collect();
    assert_eq!(found, [], "violations with --faults latency");
}

#[test]
fn no_violation_over_200_seeds_with_zero_latency() {
    let all = outcomes(0..200, &config(Faults::None), 2, false);
    assert_eq!(all.len(), 200);
    let found: Vec<_> = all
        .iter()
        .filter_map(|outcome| {
            outcome
                .violation
                .as_ref()
                .map(|v| (outcome.seed, v.summary()))
        })
        .collect();
    assert_eq!(found, [], "violations with --faults none");
    // Seeds give different schedules even at zero latency.
    let digests: std::collections::BTreeSet<u64> =
        all.iter().map(|outcome| outcome.trace_digest).collect();
    assert!(digests.len() > 150, "{} distinct traces", digests.len());
}

#[test]
fn explored_outcomes_come_in_seed_order_whatever_the_threads() {
    let one = outcomes(10..30, &config(Faults::All), 1, false);
    let three = outcomes(10..30, &config(Faults::All), 3, false);
    assert_eq!(one, three);
    let seeds: Vec<u64> = one.iter().map(|outcome| outcome.seed).collect();
    assert_eq!(seeds, (10..30).collect::<Vec<_>>());
}

/// With faults, a replay of a seed gives back the very same trace, byte
/// for byte, and the same outcome. The system breaks no rule under this
/// config, so every outcome here is a full run; `mutants.rs` replays a
/// violating seed of every mutant (the same rule at the same step, trace
/// line and detail, and an excerpt that ends at that line).
#[test]
fn a_replay_reproduces_the_explorers_trace_and_outcome() {
    let config = config(Faults::All);
    let explored = outcomes(0..60, &config, 2, true);
    let violating: Vec<u64> = explored
        .iter()
        .filter(|outcome| outcome.violation.is_some())
        .map(|outcome| outcome.seed)
        .collect();
    assert_eq!(violating, Vec::<u64>::new(), "the system breaks no rule");
    for outcome in explored.iter().step_by(7) {
        let replayed = run_seed(outcome.seed, &config);
        let explored_trace = outcome.trace.as_ref().expect("traces were kept");
        assert_eq!(&replayed.trace, explored_trace, "seed {}", outcome.seed);
        assert_eq!(trace::digest(&replayed.trace), outcome.trace_digest);
        assert_eq!(replayed.steps, outcome.steps);
        assert_eq!(replayed.violation, None, "seed {}", outcome.seed);
    }
}

/// Without its traces, the explorer sums each run's trace up where the
/// simulator keeps it: the same length, steps and digest as the kept
/// trace of the same seed's replay.
#[test]
fn a_run_summed_up_in_place_matches_its_kept_trace() {
    let config = config(Faults::All);
    for outcome in outcomes(0..6, &config, 1, false) {
        assert_eq!(
            outcome.trace, None,
            "seed {}: no trace asked for",
            outcome.seed
        );
        let replayed = run_seed(outcome.seed, &config);
        assert!(replayed.trace.len() > 100, "seed {}", outcome.seed);
        assert_eq!(
            outcome.trace_lines,
            replayed.trace.len(),
            "seed {}",
            outcome.seed
        );
        assert_eq!(
            outcome.trace_digest,
            trace::digest(&replayed.trace),
            "seed {}",
            outcome.seed
        );
        assert_eq!(
            outcome.steps,
            trace::count_steps(&replayed.trace),
            "seed {}",
            outcome.seed
        );
    }
}

/// The faults mode's goal: processes crash and restart, sessions expire,
/// links go down and heal, and still no rule breaks and every task
/// finishes exactly once, whichever way the masters discover tasks (the
/// watch by default; the founding listing loop too).
#[test]
fn no_violation_over_200_seeds_with_all_faults() {
    for discovery in TaskDiscovery::ALL {
        let config = ExploreConfig {
            discovery,
            ..config(Faults::All)
        };
        let found: Vec<_> = outcomes(0..200, &config, 2, false)
            .into_iter()
            .filter_map(|outcome| outcome.violation.map(|v| (outcome.seed, v.summary())))
            .collect();
        assert_eq!(
            found,
            [],
            "violations with --faults all --discovery {discovery}"
        );
    }
}

#[test]
fn bad_sizes_are_refused_naming_the_flag() {
    let zero_workers = ExploreConfig {
        workers: 0,
        ..ExploreConfig::default()
    };
    let error = zero_workers.validate().unwrap_err();
    assert!(
        error.contains("--workers") && error.contains("got 0"),
        "{error}"
    );
    let too_many_tasks = ExploreConfig {
        tasks: zkdist_scenarios::explore::MAX_TASKS + 1,
        ..ExploreConfig::default()
    };
    assert!(too_many_tasks.validate().unwrap_err().contains("--tasks"));
    assert_eq!("latency".parse::<Faults>(), Ok(Faults::Latency));
    let unknown = "some".parse::<Faults>().unwrap_err();
    assert!(unknown.contains("\"some\"") && unknown.contains("none, latency or all"));
    assert_eq!(
        ExploreConfig::default().replay_command(42),
        "zkdist replay --seed 42 --workers 3 --tasks 20 --faults none --discovery watch"
    );
    let upgrading = ExploreConfig {
        old_workers: 2,
        ..ExploreConfig::default()
    };
    assert_eq!(
        upgrading.replay_command(42),
        "zkdist replay --seed 42 --workers 3 --tasks 20 --faults none --discovery watch \
         --old-workers 2"
    );
    let too_many_old = ExploreConfig {
        old_workers: 4,
        ..ExploreConfig::default()
    };
    assert_eq!(
        too_many_old.validate().unwrap_err(),
        "--old-workers must be at most --workers (3), got 4"
    );
    let wrapping = ExploreConfig {
        first_task_sequence: Some(-5),
        ..ExploreConfig::default()
    };
    assert_eq!(
        wrapping.replay_command(42),
        "zkdist replay --seed 42 --workers 3 --tasks 20 --faults none --discovery watch \
         --first-task-sequence=-5"
    );
}

/// ZooKeeper's sequence counter is a 32-bit int: after 2147483647 it names
/// tasks -2147483648, -2147483647... A queue that crosses that wrap keeps
/// every rule: with random latency alone, FIFO order from the first task to
/// the last (the checker requires it until the first fault); under every
/// kind of fault (reconnections make the master reconcile its queue with a
/// listing whose stat reports the create count doubled in 32 bits), every
/// task finished once.
#[test]
fn a_queue_across_the_sequence_counter_wrap_breaks_no_rule() {
    for faults in [Faults::Latency, Faults::All] {
        let config = ExploreConfig {
            tasks: 40,
            faults,
            first_task_sequence: Some(i32::MAX - 15),
            ..ExploreConfig::default()
        };
        let report = run_seed(0, &config);
        let sequences: Vec<i32> = report
            .submitted
            .iter()
            .map(|task| task.sequence())
            .collect();
        assert!(
            sequences.contains(&i32::MAX) && sequences.contains(&i32::MIN),
            "{faults:?}: the queue crosses the wrap: {sequences:?}"
        );
        let mut found = Vec::new();
        explore(0..40, &config, 1, false, |outcome| {
            if let Some(violation) = outcome.violation {
                found.push((outcome.seed, violation.invariant));
            }
        });
        assert_eq!(found, [], "{faults:?}");
    }
}
