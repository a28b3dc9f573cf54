//! The system end to end over a sweep of seeds under madsim (simulator lane
//! only: `cargo sim`), each seed seeding both the simulator and madsim's
//! scheduler, with madsim's determinism check on a sample of them.
//!
//! The sweep follows madsim's own variables:
//! - `MADSIM_TEST_SEED`: the first seed (default 0);
//! - `MADSIM_TEST_NUM`: how many seeds (default 500);
//! - `MADSIM_TEST_CHECK_DETERMINISM`: when set, every seed of the sweep is
//!   checked for determinism, not only every 25th.
//!
//! A failing seed is named in the panic; `MADSIM_TEST_SEED=<seed>
//! MADSIM_TEST_NUM=1 cargo sim --test madsim_sweep` replays it alone.

#![cfg(madsim)]

mod common;
mod workload;

use std::ops::Range;

use zkdist_sim::runtime::{block_on, check_determinism, current_seed};

use workload::{Workload, WorkloadRun, run_workload};

const SWEEP: Workload = Workload {
    workers: 3,
    tasks: 30,
    fail_every: 7,
    seeded: true,
};
const DEFAULT_SEEDS: u64 = 500;
/// Without `MADSIM_TEST_CHECK_DETERMINISM`, every this many seeds of the
/// sweep is checked for determinism.
const CHECK_EVERY: u64 = 25;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {text:?}")),
        Err(_) => default,
    }
}

/// The sweep's seeds, from madsim's variables.
fn sweep_seeds() -> Range<u64> {
    let first = env_number("MADSIM_TEST_SEED", 0);
    let count = env_number("MADSIM_TEST_NUM", DEFAULT_SEEDS);
    let end = first
        .checked_add(count)
        .unwrap_or_else(|| panic!("MADSIM_TEST_SEED + MADSIM_TEST_NUM overflows a u64"));
    first..end
}

fn check_every_seed() -> bool {
    std::env::var_os("MADSIM_TEST_CHECK_DETERMINISM").is_some()
}

/// Runs the sweep's workload for the seed of the madsim runtime it runs on
/// (read once running: madsim builds the future before entering the
/// runtime).
async fn sweep_run() -> WorkloadRun {
    run_workload(current_seed(), SWEEP).await
}

fn run_half(half: usize) {
    let seeds = sweep_seeds();
    let middle = seeds.start + (seeds.end - seeds.start) / 2;
    let mine = if half == 0 {
        seeds.start..middle
    } else {
        middle..seeds.end
    };
    assert!(
        !seeds.is_empty(),
        "MADSIM_TEST_NUM=0 leaves the sweep without seeds"
    );
    for seed in mine {
        block_on(seed, run_workload(seed, SWEEP)).check(seed, &SWEEP);
    }
}

#[test]
fn sweep_first_half_of_the_seeds() {
    run_half(0);
}

#[test]
fn sweep_second_half_of_the_seeds() {
    run_half(1);
}

/// madsim runs each sampled seed twice and panics at the first scheduling
/// decision (which task runs next, at which simulated time) where the runs
/// part; the simulator's trace must then also equal a third, plain run's,
/// byte for byte.
#[test]
fn determinism_check_on_a_sample_of_the_seeds() {
    let every = if check_every_seed() { 1 } else { CHECK_EVERY };
    let sample: Vec<u64> = sweep_seeds().step_by(every as usize).collect();
    assert!(!sample.is_empty(), "no seed to check");
    for seed in sample {
        let checked = check_determinism(seed, sweep_run);
        checked.check(seed, &SWEEP);
        let plain = block_on(seed, run_workload(seed, SWEEP));
        assert_eq!(
            checked.trace, plain.trace,
            "seed {seed}: the trace differs between runs"
        );
    }
}
