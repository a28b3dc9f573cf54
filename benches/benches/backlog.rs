//! The cost per task of draining a backlog on the simulator: the master
//! runs, 1,000, 10,000 or 50,000 tasks are queued and the master has queued
//! them all, then 16 workers start; timed from the workers' start to the
//! last task finished (see `zkdist_benches::simulated::backlog_drain`).
//! Criterion's throughput is tasks per second; its inverse is the cost per
//! task.
//!
//! `backlog/watch/N` uses the default task discovery (a recursive watch);
//! `backlog/listing/N` the founding listing loop, at 1,000 and 10,000 only:
//! past some 29,000 tasks its listing is over the client's reply limit and
//! the master stops before the backlog is even queued.
//!
//! 50,000 tasks take seconds per iteration: every size runs ten samples of
//! one iteration each (a flat plan), with a measurement time long enough
//! for them.

use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use zkdist_benches::simulated::backlog_drain;
use zkdist_master::TaskDiscovery;

/// The allocator the `zkdist` binary runs with, so that the benchmarks
/// time what users run (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WORKERS: usize = 16;
/// Each discovery, size, and the measurement time its ten samples get.
const RUNS: [(TaskDiscovery, u64, Duration); 5] = [
    (TaskDiscovery::Watch, 1_000, Duration::from_secs(5)),
    (TaskDiscovery::Watch, 10_000, Duration::from_secs(15)),
    (TaskDiscovery::Watch, 50_000, Duration::from_secs(60)),
    (TaskDiscovery::Listing, 1_000, Duration::from_secs(5)),
    (TaskDiscovery::Listing, 10_000, Duration::from_secs(15)),
];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("backlog");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    for (discovery, tasks, measurement_time) in RUNS {
        group.throughput(Throughput::Elements(tasks));
        group.measurement_time(measurement_time);
        group.bench_with_input(
            BenchmarkId::new(discovery.name(), tasks),
            &tasks,
            |b, &tasks| {
                b.iter_custom(|iterations| {
                    (0..iterations)
                        .map(|_| backlog_drain(WORKERS, tasks, discovery).wall)
                        .sum()
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
