//! The runtime a simulation runs on. Tests and tools call [`block_on`]
//! instead of building a runtime themselves, so the same scenario runs on
//! tokio's current-thread runtime with a paused clock (`cargo test`) and on
//! madsim's deterministic runtime (`cargo sim`, built with `--cfg madsim`).
//!
//! Under madsim, a simulation can also run in madsim nodes (one per
//! simulated process) that the test kills and restarts, and
//! `check_determinism` (built under madsim only) runs a simulation twice on one seed and fails at
//! the first scheduling decision where the two runs part.

use std::future::Future;

/// Runs `future` to completion on a fresh single-threaded runtime whose clock
/// is paused: time advances only when every task waits, so a simulation
/// takes no wall-clock time, and the only source of order is the program
/// and the seed.
///
/// `seed` seeds the runtime's own randomness where it has any (madsim's
/// scheduler); the simulator's choices come from [`crate::SimConfig::seed`].
#[cfg(not(madsim))]
pub fn block_on<F: Future>(seed: u64, future: F) -> F::Output {
    // tokio's current-thread scheduler has no randomness of its own: the
    // order of ready tasks is the order they were woken.
    let _ = seed;
    // Time only, no I/O driver: simulated code touches no socket or file,
    // and without an I/O driver the runtime parks on a condition variable
    // instead of polling epoll each time the paused clock jumps to the
    // next timer, which a schedule with latencies does at nearly every
    // step (about a quarter of the explorer's time went there).
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime can always be built")
        .block_on(future)
}

/// Runs `future` to completion on a fresh madsim runtime seeded with `seed`.
/// madsim's clock is always virtual (it jumps to the next timer when every
/// task waits), its scheduler picks the next ready task at random from
/// `seed`, and it advances the clock a seeded 50 to 100 ns after every poll,
/// so one seed gives one interleaving and different seeds explore others.
///
/// The simulator's own choices still come from [`crate::SimConfig::seed`];
/// callers usually pass the same value to both.
///
/// # Panics
/// If every task waits and no timer is pending (madsim's deadlock check),
/// or if `future` panics.
#[cfg(madsim)]
pub fn block_on<F: Future>(seed: u64, future: F) -> F::Output {
    madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default()).block_on(future)
}

/// Runs the simulation `make` builds twice on madsim runtimes seeded with
/// `seed`, recording every random decision of the first run (which task runs
/// next, at which simulated time) and panicking at the first decision where
/// the second run differs. Returns the second run's output.
///
/// `make` is a plain function, because it is called once per run on a fresh
/// thread, and it is called before the runtime is entered: the future reads
/// its seed with [`current_seed`] once it runs (in an `async` block), not
/// when it is built.
#[cfg(madsim)]
pub fn check_determinism<F>(seed: u64, make: fn() -> F) -> F::Output
where
    F: Future + 'static,
    F::Output: Send,
{
    madsim::runtime::Runtime::check_determinism(seed, madsim::Config::default(), make)
}

/// The seed of the madsim runtime the caller runs on.
///
/// # Panics
/// Outside a madsim runtime.
#[cfg(madsim)]
pub fn current_seed() -> u64 {
    madsim::runtime::Handle::current().seed()
}
