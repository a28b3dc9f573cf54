//! Schedules per second of the explorer's standard run (4 workers, 100
//! tasks, random latencies and faults, the checker on; see
//! `zkdist_benches::simulated::standard_explore_config`), on one thread and
//! on every core. Each iteration explores the same batch of seeds, so
//! every sample times the same schedules.

use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use zkdist_benches::simulated::explore_batch;

/// The allocator the `zkdist` binary runs with, so that the benchmarks
/// time what users run (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The seeds of one iteration.
const SEEDS: std::ops::Range<u64> = 0..40;

fn bench(c: &mut Criterion) {
    let seeds = SEEDS.end - SEEDS.start;
    // A schedule stops at its first violation, and is then shorter than a
    // full run: say how many of the batch do (none, unless a change broke
    // a rule), since that changes what the figure means.
    let batch = explore_batch(SEEDS, 1);
    eprintln!(
        "explore: seeds {}..{} of the standard run: {} of {} stop at a violation, {} steps in all",
        SEEDS.start, SEEDS.end, batch.violations, batch.schedules, batch.steps
    );
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut group = c.benchmark_group("explore");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(seeds));
    let mut thread_counts = vec![1];
    if cores > 1 {
        thread_counts.push(cores);
    }
    for jobs in thread_counts {
        group.bench_with_input(BenchmarkId::new("threads", jobs), &jobs, |b, &jobs| {
            b.iter(|| explore_batch(SEEDS, jobs));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
