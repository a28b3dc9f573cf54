//! The measurement workloads on the simulator: they count what they claim
//! to count, drain what they queue, clean up after themselves, and fail
//! rather than hang when an actor stops. Speed is the benchmarks' business;
//! nothing here looks at a clock.

use std::sync::Arc;

use zkdist_benches::ensemble::{self, BenchConfig, BenchError, BenchReport};
use zkdist_benches::simulated::{assignment_throughput, backlog_drain, explore_batch};
use zkdist_benches::system::{System, SystemError};
use zkdist_benches::workload::{NoProgress, Progress, WorkloadError, stream_tasks};
use zkdist_benches::{Counted, OpCounter};
use zkdist_coord::{Client, Coordinator, CreateMode, Layout};
use zkdist_master::TaskDiscovery;
use zkdist_sim::{Latency, SimConfig, SimZk};

fn sim(seed: u64, latency: Latency) -> SimZk {
    SimZk::start(SimConfig {
        seed,
        latency,
        ..SimConfig::default()
    })
}

#[test]
fn a_task_stream_costs_three_writes_per_task() {
    let tasks = 200;
    for discovery in TaskDiscovery::ALL {
        let run = assignment_throughput(4, tasks, discovery);
        let report = run.report;
        assert_eq!(report.tasks, tasks);
        // The submit is a create; the assignment is a multi (the epoch check
        // and the create); the completion is a multi (the result's create and
        // the assignment's delete).
        assert_eq!(report.ops.creates, tasks, "{discovery}");
        assert_eq!(report.ops.multis, 2 * tasks, "{discovery}");
        assert_eq!(report.ops.deletes, 0);
        assert_eq!(report.ops.set_datas, 0);
        assert_eq!(report.writes_per_task(), 3.0);
        // Four nodes change per task: the task, the assignment, the result,
        // and the assignment's deletion.
        assert_eq!(report.ops.multi_node_writes, 3 * tasks);
        assert_eq!(report.node_writes_per_task(), 4.0);
        // Two reads of a payload per task, and almost no exists (a one-shot
        // watch would cost one per task at least). The founding loop's
        // worker reads its assignment and the task (its persistent watch is
        // never re-armed, and its own completion's deletion makes it read
        // nothing). With the watch discovery the master reads queued
        // tasks' payloads ahead, in batches (a multi-read for two or more),
        // and the assignment carries them; a task assigned before that read
        // answers is read by its worker too. With zero latency and two
        // tasks in flight per worker the queue is short and that race is
        // frequent: at most one task in three on this seed. The batches
        // save requests all the same: fewer than two a task.
        match discovery {
            TaskDiscovery::Listing => {
                assert_eq!(report.ops.get_datas, 2 * tasks, "{:?}", report.ops);
                assert_eq!(report.ops.multi_reads, 0);
            }
            TaskDiscovery::Watch => {
                assert!(
                    (2 * tasks..=2 * tasks + tasks / 3).contains(&report.ops.node_reads()),
                    "{:?}",
                    report.ops
                );
                assert!(report.ops.reads() < 2 * tasks, "{:?}", report.ops);
                assert!(report.ops.multi_reads > 0, "{:?}", report.ops);
                assert!(
                    report.ops.multi_read_nodes >= 2 * report.ops.multi_reads,
                    "a single read goes as a get_data: {:?}",
                    report.ops
                );
            }
        }
        assert!(report.ops.exists < tasks / 10, "{:?}", report.ops);
        assert_eq!(report.latencies.len() as u64, tasks);
        assert!(report.latencies.windows(2).all(|w| w[0] <= w[1]), "sorted");
    }
}

#[test]
fn the_watch_discovery_lists_no_task_while_the_founding_loop_lists_them_all_again() {
    let tasks = 200;
    let watch = assignment_throughput(4, tasks, TaskDiscovery::Watch).report;
    let listing = assignment_throughput(4, tasks, TaskDiscovery::Listing).report;
    // What the watch master lists is `workers/` and `assignments/` (at most
    // one name per worker, about once per task); the founding master also
    // lists `tasks/`, which only grows during a stream.
    assert!(
        watch.ops.listed_children <= (4 + 1) * tasks,
        "the watch master listed {} names for {tasks} tasks",
        watch.ops.listed_children
    );
    assert!(
        listing.ops.listed_children > 10 * watch.ops.listed_children,
        "listing {} names, watch {}",
        listing.ops.listed_children,
        watch.ops.listed_children
    );
}

#[test]
fn a_backlog_is_drained_whole_and_counted_without_its_submissions() {
    let tasks = 300;
    for discovery in TaskDiscovery::ALL {
        let report = backlog_drain(3, tasks, discovery).report;
        assert_eq!(report.tasks, tasks);
        assert!(
            report.latencies.is_empty(),
            "a backlog has no submit latency"
        );
        // What the workers cost from their start: an id and a
        // registration each (creates), and per task the fenced assignment
        // and the completion (multis). The submissions and the master's
        // claim came before the clock started.
        assert_eq!(report.ops.creates, 2 * 3, "{discovery}");
        assert_eq!(report.ops.multis, 2 * tasks, "{discovery}");
        assert_eq!(report.ops.deletes, 0);
    }
}

#[test]
fn an_explore_batch_runs_every_seed_of_the_standard_run() {
    let batch = explore_batch(0..3, 1);
    assert_eq!(batch.schedules, 3);
    // The system keeps every rule under faults, so each schedule is a full
    // run: the benchmark times whole runs, not runs cut short.
    assert_eq!(batch.violations, 0);
    assert!(batch.steps > 0);
    assert_eq!(
        batch,
        explore_batch(0..3, 2),
        "the same seeds, the same runs"
    );
}

/// Counts what the progress reporter was told.
#[derive(Default)]
struct Recorded {
    phases: Vec<(String, u64)>,
    last: u64,
    finished: usize,
}

impl Progress for Recorded {
    fn start(&mut self, phase: &str, total: u64) {
        self.phases.push((phase.to_owned(), total));
    }
    fn advance(&mut self, done: u64) {
        assert!(
            done >= self.last || done == 0,
            "progress only grows within a phase"
        );
        self.last = done;
    }
    fn finish(&mut self) {
        self.finished += 1;
        self.last = 0;
    }
}

/// Runs the ensemble bench on `sim`, each session a connection of its own.
async fn bench_on(
    sim: &SimZk,
    layout: &Layout,
    config: &BenchConfig,
    progress: &mut dyn Progress,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<BenchReport, BenchError> {
    let sim = sim.clone();
    ensemble::run(
        move |name| {
            let sim = sim.clone();
            async move { sim.connect(&name).await }
        },
        layout,
        config,
        progress,
        interrupt,
    )
    .await
}

fn small_config() -> BenchConfig {
    BenchConfig {
        tasks: 60,
        workers: 3,
        backlog: 25,
        discovery: TaskDiscovery::default(),
        in_flight: 6,
        warmup_tasks: 10,
        raw_nodes: 100,
        raw_in_flight: 16,
    }
}

#[test]
fn the_ensemble_bench_measures_every_phase_and_leaves_no_node_behind() {
    zkdist_sim::runtime::block_on(5, async {
        let sim = sim(
            5,
            Latency::Uniform {
                min_us: 50,
                max_us: 500,
            },
        );
        // `/bench` is somebody else's; `/bench/made` is made by the run.
        let (outsider, _events) = sim.connect("outsider").await.unwrap();
        outsider
            .create("/bench", b"", zkdist_coord::CreateMode::Persistent)
            .await
            .unwrap();
        let layout = Layout::new("/bench/made/run").expect("a valid root");
        let config = small_config();
        let mut progress = Recorded::default();
        let report = bench_on(
            &sim,
            &layout,
            &config,
            &mut progress,
            std::future::pending(),
        )
        .await
        .expect("the bench runs");

        // Measured twice, before and after the tasks; the ceiling is the
        // better of the two.
        assert_eq!(report.raw_before.nodes, 100);
        assert_eq!(report.raw_after.nodes, 100);
        let best = report
            .raw_before
            .writes_per_s()
            .max(report.raw_after.writes_per_s());
        assert_eq!(report.raw().writes_per_s(), best);
        for raw in [&report.raw_before, &report.raw_after] {
            // Every step sent its requests and took simulated time (each
            // message has a latency).
            for elapsed in [
                raw.create_elapsed,
                raw.read_elapsed,
                raw.multi_read_elapsed,
                raw.delete_elapsed,
                raw.watched_create_elapsed,
                raw.watched_delete_elapsed,
            ] {
                assert!(elapsed > std::time::Duration::ZERO, "{raw:?}");
            }
        }
        let backlog = report.backlog.as_ref().expect("a backlog was asked for");
        assert_eq!(backlog.drain.tasks, 25);
        // Queueing is a create per task, counted apart from the drain,
        // whose writes are the assignments and completions (and the
        // workers' ids and registrations).
        assert_eq!(backlog.queueing.creates, 25);
        assert_eq!(backlog.queueing.multis, 0);
        // A new master took over the backlog before the drain: it checked
        // the 25 queued tasks in one multi-read of their results and
        // marks, and took simulated time (each message has a latency).
        let takeover = &backlog.takeover;
        assert_eq!(takeover.ops.multi_reads, 1, "{takeover:?}");
        assert_eq!(takeover.ops.multi_read_nodes, 2 * 25, "{takeover:?}");
        assert_eq!(takeover.ops.listed_children, 25, "{takeover:?}");
        assert!(takeover.ready > std::time::Duration::ZERO, "{takeover:?}");
        assert_eq!(backlog.drain.ops.creates, 2 * 3);
        assert_eq!(backlog.drain.ops.multis, 2 * 25);
        assert_eq!(report.tasks.tasks, 60);
        assert_eq!(report.tasks.latencies.len(), 60);
        assert_eq!(report.tasks.writes_per_task(), 3.0);
        // With latency, every task takes simulated time end to end.
        assert!(
            report.tasks.latency_percentile(50.0).expect("measured") > std::time::Duration::ZERO
        );
        assert!(report.raw().writes_per_s() > 0.0 && report.efficiency() > 0.0);
        assert_eq!(
            report.efficiency(),
            report.tasks.tasks_per_s() * 3.0 / best,
            "against the better ceiling"
        );
        // A task's reads: the worker's read of its assignment, and the
        // master's read ahead of its payload, batched with others' (and the
        // worker's read of a task assigned by name before its read-ahead
        // answered, and now and then a look): two or three nodes a task, in
        // fewer requests when batches formed.
        let reads = report.tasks.reads_per_task();
        let node_reads = report.tasks.node_reads_per_task();
        assert!(
            (2.0..3.1).contains(&node_reads),
            "{node_reads} nodes read a task"
        );
        assert!((1.0..=node_reads).contains(&reads), "{reads} reads a task");
        assert_eq!(
            report.request_efficiency(),
            report.tasks.tasks_per_s() * (3.0 / best + reads / report.raw_reads_per_s()),
        );
        assert_eq!(
            report.raw_reads_per_s(),
            report
                .raw_before
                .reads_per_s()
                .max(report.raw_after.reads_per_s()),
            "reads are priced at the faster of the two read rates"
        );
        assert_eq!(
            report.event_cost_in_writes(),
            (report.raw_before.event_cost_in_writes() + report.raw_after.event_cost_in_writes())
                / 2.0,
            "an event is priced at the mean of the two measurements' prices"
        );
        assert_eq!(
            progress.phases,
            vec![
                ("backlog".to_owned(), 25),
                ("warm-up".to_owned(), 10),
                ("tasks".to_owned(), 60)
            ]
        );
        assert_eq!(progress.finished, 3);

        let (root_left, made_left, existing_left) = sim
            .inspect(|tree| {
                (
                    tree.exists("/bench/made/run"),
                    tree.exists("/bench/made"),
                    tree.exists("/bench"),
                )
            })
            .await;
        assert!(!root_left, "the run deletes its root");
        assert!(!made_left, "and the parent it made");
        assert!(existing_left, "and leaves the parent it found alone");
    });
}

#[test]
fn the_ensemble_bench_refuses_a_root_that_exists_and_leaves_it_alone() {
    zkdist_sim::runtime::block_on(6, async {
        let sim = sim(6, Latency::Zero);
        let (zk, _events) = sim.connect("someone").await.expect("connects");
        zk.create("/taken", b"mine", CreateMode::Persistent)
            .await
            .expect("creates");
        let layout = Layout::new("/taken").expect("a valid root");
        let outcome = bench_on(
            &sim,
            &layout,
            &small_config(),
            &mut NoProgress,
            std::future::pending(),
        )
        .await;
        match outcome {
            Err(error @ BenchError::RootExists { .. }) => {
                assert!(
                    error.to_string().contains("/taken already exists"),
                    "{error}"
                );
            }
            other => panic!("expected RootExists, got {other:?}"),
        }
        let data = sim
            .inspect(|tree| tree.data("/taken").map(<[u8]>::to_vec))
            .await;
        assert_eq!(data.as_deref(), Some(&b"mine"[..]));
    });
}

#[test]
fn an_interrupted_bench_still_deletes_its_root() {
    zkdist_sim::runtime::block_on(8, async {
        let sim = sim(8, Latency::Fixed { ms: 1 });
        let layout = Layout::new("/interrupted").expect("a valid root");
        // Far into the stream phase, in simulated time (every message takes
        // a millisecond), but long before 5,000 tasks are done.
        let interrupt = tokio::time::sleep(std::time::Duration::from_millis(400));
        let config = BenchConfig {
            tasks: 5_000,
            ..small_config()
        };
        let outcome = bench_on(&sim, &layout, &config, &mut NoProgress, interrupt).await;
        assert!(
            matches!(outcome, Err(BenchError::Interrupted)),
            "{outcome:?}"
        );
        let (root_left, nodes) = sim
            .inspect(|tree| {
                (
                    tree.exists("/interrupted"),
                    tree.children("/").map(|c| c.len()),
                )
            })
            .await;
        assert!(!root_left, "the root goes even when the run is interrupted");
        // Only /zookeeper is left at the top.
        assert_eq!(nodes, Some(1));
    });
}

#[test]
fn a_stream_fails_naming_the_actor_that_stopped_instead_of_hanging() {
    zkdist_sim::runtime::block_on(7, async {
        let sim = sim(7, Latency::Zero);
        let layout = Layout::default();
        let counter = OpCounter::new();
        let mut system = System::new(layout.clone(), TaskDiscovery::default());
        let (zk, events) = sim.connect("w1").await.expect("connects");
        system.start_worker(Counted::new(zk, Arc::clone(&counter)), events);
        system.wait_registered().await.expect("registers");
        let (zk, events) = sim.connect("master").await.expect("connects");
        let master_session = zk.session_id();
        system
            .start_master(Counted::new(zk, Arc::clone(&counter)), events)
            .await
            .expect("leads");
        system.wait_master_sees(1).await.expect("sees the worker");
        sim.expire(master_session).await;

        let (zk, events) = sim.connect("client").await.expect("connects");
        let client = Client::new(Counted::new(zk, Arc::clone(&counter)), events, layout);
        let outcome = stream_tasks(&client, &mut system, &counter, 0, 10, 2, &mut NoProgress).await;
        match outcome {
            Err(WorkloadError::System(SystemError::ActorEnded { actor, outcome })) => {
                assert_eq!(actor, "master");
                assert!(outcome.contains("session ended"), "{outcome}");
            }
            other => panic!("expected the master's end, got {other:?}"),
        }
        assert!(matches!(system.stop().await, Err(SystemError::Master(_))));
    });
}

#[test]
fn a_counted_session_counts_requests_by_kind_and_the_names_it_lists() {
    zkdist_sim::runtime::block_on(9, async {
        let sim = sim(9, Latency::Zero);
        let counter = OpCounter::new();
        let (zk, _events) = sim.connect("counted").await.expect("connects");
        let zk = Counted::new(zk, Arc::clone(&counter));
        zk.create("/d", b"", CreateMode::Persistent)
            .await
            .expect("creates");
        for name in ["a", "b", "c"] {
            zk.create(&format!("/d/{name}"), b"", CreateMode::Persistent)
                .await
                .expect("creates");
        }
        let before = counter.snapshot();
        let (children, _) = zk
            .get_children("/d", zkdist_coord::Watch::No)
            .await
            .expect("lists");
        assert_eq!(children.len(), 3);
        zk.delete("/d/a", None).await.expect("deletes");
        // A failed write is a transaction too, and counts.
        assert!(zk.delete("/d/a", None).await.is_err());
        zk.exists("/d", zkdist_coord::Watch::No)
            .await
            .expect("exists");
        let during = counter.snapshot().since(&before);
        assert_eq!(
            during,
            zkdist_benches::OpCounts {
                deletes: 2,
                exists: 1,
                get_childrens: 1,
                listed_children: 3,
                ..Default::default()
            }
        );
        assert_eq!((during.writes(), during.reads()), (2, 2));
        assert_eq!(before.creates, 4);
    });
}
