//! The cost per task of draining a backlog on the simulator: 1,000, 10,000
//! and 50,000 tasks queued, and 16 workers registered, before the master
//! starts; timed from the master's start to the last task finished (see
//! `zkdist_benches::simulated::backlog_drain`). Criterion's throughput is
//! tasks per second; its inverse is the cost per task.
//!
//! 50,000 tasks take seconds per iteration: every size runs ten samples of
//! one iteration each (a flat plan), with a measurement time long enough
//! for them, so the whole group stays around two minutes on two cores.

use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use zkdist_benches::simulated::backlog_drain;

const WORKERS: usize = 16;
/// Each size, and the measurement time its ten samples get.
const SIZES: [(u64, Duration); 3] = [
    (1_000, Duration::from_secs(5)),
    (10_000, Duration::from_secs(15)),
    (50_000, Duration::from_secs(80)),
];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("backlog");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    for (tasks, measurement_time) in SIZES {
        group.throughput(Throughput::Elements(tasks));
        group.measurement_time(measurement_time);
        group.bench_with_input(BenchmarkId::new("tasks", tasks), &tasks, |b, &tasks| {
            b.iter_custom(|iterations| {
                (0..iterations)
                    .map(|_| backlog_drain(WORKERS, tasks).wall)
                    .sum()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
