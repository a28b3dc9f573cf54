//! Tasks per second end to end on the simulator (zero latency, a handler
//! that does nothing) for 1, 4, 16 and 64 workers, and at 16 workers for a
//! longer stream. Each iteration is a fresh simulation; only the task
//! stream is timed (see `zkdist_benches::simulated::assignment_throughput`).
//!
//! `workers/N` and `16_workers_tasks/4000` use the default task discovery
//! (a recursive watch). Finished tasks stay under `tasks/`, and the founding
//! design's master lists the whole directory on every change of it, so its
//! cost per task grows with the length of the stream:
//! `listing_16_workers_tasks/N` shows it at 1,000 and 4,000 tasks.

use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use zkdist_benches::simulated::assignment_throughput;
use zkdist_master::TaskDiscovery;

/// The allocator the `zkdist` binary runs with, so that the benchmarks
/// time what users run (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Tasks per iteration of `workers/N`.
const TASKS: u64 = 1_000;
/// Worker counts of `workers/N`.
const WORKERS: [usize; 4] = [1, 4, 16, 64];
/// The longer stream at 16 workers.
const LONG_STREAM_TASKS: u64 = 4_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("assignment_throughput");
    // An iteration takes a tenth of a second to seconds: a flat sampling
    // plan with few samples keeps the group to a minute or two.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(TASKS));
    for workers in WORKERS {
        group.bench_with_input(
            BenchmarkId::new("workers", workers),
            &workers,
            |b, &workers| {
                b.iter_custom(|iterations| {
                    (0..iterations)
                        .map(|_| assignment_throughput(workers, TASKS, TaskDiscovery::Watch).wall)
                        .sum()
                });
            },
        );
    }
    let streams = [
        ("16_workers_tasks", TaskDiscovery::Watch, LONG_STREAM_TASKS),
        ("listing_16_workers_tasks", TaskDiscovery::Listing, TASKS),
        (
            "listing_16_workers_tasks",
            TaskDiscovery::Listing,
            LONG_STREAM_TASKS,
        ),
    ];
    group.measurement_time(Duration::from_secs(20));
    for (name, discovery, tasks) in streams {
        group.throughput(Throughput::Elements(tasks));
        group.bench_with_input(BenchmarkId::new(name, tasks), &tasks, |b, &tasks| {
            b.iter_custom(|iterations| {
                (0..iterations)
                    .map(|_| assignment_throughput(16, tasks, discovery).wall)
                    .sum()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
