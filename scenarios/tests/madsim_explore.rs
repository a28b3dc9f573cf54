//! The explorer's standard schedules under madsim (simulator lane only:
//! `cargo sim`): madsim's scheduler adds its own seeded interleavings on top
//! of the simulator's, the checker must still find nothing, and on a sample
//! of seeds madsim's determinism check must find the two runs identical.
//!
//! `MADSIM_TEST_SEED` (first seed, default 0) and `MADSIM_TEST_NUM` (how
//! many, default 500) choose the sweep; `MADSIM_TEST_CHECK_DETERMINISM`
//! checks every seed instead of every 25th.

#![cfg(madsim)]

use zkdist_scenarios::{ExploreConfig, Faults, run_seed, run_seed_here};
use zkdist_sim::runtime::{check_determinism, current_seed};

const DEFAULT_SEEDS: u64 = 500;
const CHECK_EVERY: u64 = 25;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {text:?}")),
        Err(_) => default,
    }
}

fn config() -> ExploreConfig {
    ExploreConfig {
        faults: Faults::Latency,
        ..ExploreConfig::default()
    }
}

#[test]
fn explorer_sweep_finds_no_violation_and_is_deterministic() {
    let first = env_number("MADSIM_TEST_SEED", 0);
    let count = env_number("MADSIM_TEST_NUM", DEFAULT_SEEDS);
    let check_all = std::env::var_os("MADSIM_TEST_CHECK_DETERMINISM").is_some();
    assert!(
        count > 0,
        "MADSIM_TEST_NUM=0 leaves the sweep without seeds"
    );
    let mut checked = 0;
    for seed in first..first + count {
        let report = if check_all || seed % CHECK_EVERY == 0 {
            checked += 1;
            // The future is built before madsim's runtime exists, so it
            // reads the seed once running.
            check_determinism(seed, || async {
                run_seed_here(current_seed(), config()).await
            })
        } else {
            run_seed(seed, &config())
        };
        assert_eq!(report.seed, seed);
        assert!(report.steps > 0, "seed {seed} ran no step");
        if let Some(violation) = report.violation {
            panic!("seed {seed} violated an invariant under madsim: {violation:?}");
        }
    }
    assert!(checked > 0, "the sweep checked no seed for determinism");
}
