//! The runtime a simulation runs on. Tests and tools call [`block_on`]
//! instead of building a runtime themselves, so the same scenario runs on
//! tokio's current-thread runtime with a paused clock (`cargo test`) and on
//! madsim's deterministic runtime (`cargo sim`, built with `--cfg madsim`).

use std::future::Future;

/// Runs `future` to completion on a fresh single-threaded runtime whose clock
/// is paused: time advances only when every task waits, so a simulation
/// takes no wall-clock time, and the only source of order is the program
/// and the seed.
///
/// `seed` seeds the runtime's own randomness where it has any (madsim's
/// scheduler); the simulator's choices come from [`crate::SimConfig::seed`].
pub fn block_on<F: Future>(seed: u64, future: F) -> F::Output {
    let _ = seed;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime can always be built")
        .block_on(future)
}
