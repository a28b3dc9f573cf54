//! How many different interleavings a lane reaches: one fixed workload
//! (zero latency, every task equally long) over the same 300 seeds, in
//! whichever lane runs it. On tokio (`cargo test`) only the simulator's
//! seeded tie-breaks vary between seeds; under madsim (`cargo sim`) the
//! scheduler's order of ready tasks varies too. The figures go in the
//! table in docs/testbed.md; run with `--nocapture` to see them.

mod common;
mod workload;

use std::collections::BTreeSet;

use workload::{Workload, run_workload};

const FIXED: Workload = Workload {
    workers: 3,
    tasks: 12,
    fail_every: 5,
    seeded: false,
};
const SEEDS: std::ops::Range<u64> = 0..300;

const LANE: &str = if cfg!(madsim) {
    "madsim (cargo sim)"
} else {
    "tokio (cargo test)"
};

/// The trace without its timestamps: the order of events. madsim moves its
/// clock a little after every poll, which would make traces of the same
/// order look different by their times alone.
fn order_of_events(trace: &[String]) -> Vec<String> {
    trace
        .iter()
        .map(|line| match line.split_once("] ") {
            Some((_, event)) => event.to_owned(),
            None => line.clone(),
        })
        .collect()
}

/// Runs the fixed workload with simulator seed `sim_seed` on a runtime
/// seeded with each of the 300 seeds; returns how many different orders of
/// events came out.
fn distinct_orders(sim_seed: impl Fn(u64) -> u64) -> usize {
    let mut orders = BTreeSet::new();
    for seed in SEEDS {
        let run = zkdist_sim::runtime::block_on(seed, run_workload(sim_seed(seed), FIXED));
        run.check(seed, &FIXED);
        orders.insert(order_of_events(&run.trace));
    }
    orders.len()
}

#[test]
fn the_simulator_seed_varies_the_interleaving_in_both_lanes() {
    let distinct = distinct_orders(|seed| seed);
    eprintln!(
        "{LANE}: simulator and runtime seeded with each of {SEEDS:?}: distinct traces {distinct}"
    );
    // The simulator's seed breaks ties between simultaneous messages, in
    // either lane: a single interleaving means seeds stopped reaching it.
    assert!(
        distinct > 1,
        "{LANE}: every seed gave the same interleaving"
    );
}

#[test]
fn only_madsim_varies_the_interleaving_when_the_simulator_seed_is_fixed() {
    let distinct = distinct_orders(|_| 0);
    eprintln!(
        "{LANE}: simulator seed 0, runtime seeded with each of {SEEDS:?}: distinct traces {distinct}"
    );
    if cfg!(madsim) {
        // madsim's scheduler picks the next ready task from its seed.
        assert!(distinct > 1, "madsim's seed never changed the interleaving");
    } else {
        // tokio's current-thread scheduler has no randomness: with the
        // simulator's seed fixed, every run is the same run.
        assert_eq!(
            distinct, 1,
            "a tokio-lane run depends on something besides the seed"
        );
    }
}
