//! `zkdist bench`: its report, and a signal during it.

use std::os::unix::process::ExitStatusExt;

use serde_json::Value;
use zkdist_coord::zk::testing;
use zkdist_coord::{Coordinator, Layout, Watch};

use crate::common::{Scratch, eventually, run};
use crate::{ROOT_PREFIX, SIGINT, Target};

/// SIGINT while a backlog is being queued stops the bench, which deletes
/// its root (tasks whose names it had not learned included) and ends by the signal; a
/// second SIGINT during that clean-up exits at once, naming the root it
/// leaves.
pub(crate) fn an_interrupted_bench_deletes_its_root_unless_interrupted_twice(connect: String) {
    let scratch = Scratch::new("bench-interrupted");
    for twice in [false, true] {
        let target = Target {
            connect: connect.clone(),
            root: testing::unique_root(ROOT_PREFIX),
        };
        let tasks_dir = Layout::new(&target.root).expect("a valid root").tasks_dir();
        let mut bench = target.spawn(
            if twice { "bench-twice" } else { "bench-once" },
            &[
                "bench",
                "--tasks",
                "10",
                "--workers",
                "2",
                "--backlog",
                "1000000",
            ],
            &scratch,
        );
        // Interrupted while the backlog is being queued, with thousands of
        // tasks already there: enough, the second time, that the clean-up
        // takes seconds, well past when the second signal comes.
        let enough = if twice { 20_000 } else { 2_000 };
        eventually("the backlog's queueing is under way", || {
            let queued = target.read(async |zk| {
                zk.exists(&tasks_dir, Watch::No)
                    .await
                    .expect("exists")
                    .map_or(0, |stat| stat.num_children)
            });
            (queued >= enough).then_some(())
        });
        bench.signal("INT");
        eventually("the bench says it is stopping", || {
            bench
                .log()
                .contains("interrupt again to exit at once")
                .then_some(())
        });
        if twice {
            bench.signal("INT");
        }
        let status = bench.wait_exit();
        let log = bench.log();
        assert_eq!(
            status.signal(),
            Some(SIGINT),
            "ended by SIGINT: {status}\n{log}"
        );
        if twice {
            assert!(
                log.contains(&format!("exited without deleting {}", target.root)),
                "{log}"
            );
            assert!(target.exists(&target.root), "the root is left");
            target.delete_root();
        } else {
            assert!(log.contains("interrupted before the run finished"), "{log}");
            assert!(!target.exists(&target.root), "the bench deleted its root");
        }
    }
}

pub(crate) fn bench_reports_every_phase_ends_with_the_efficiency_and_deletes_its_root(
    connect: String,
) {
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let bench = target.run(&[
        "bench",
        "--tasks",
        "200",
        "--workers",
        "3",
        "--backlog",
        "100",
        "--warmup-tasks",
        "50",
        "--raw-nodes",
        "500",
    ]);
    bench.expect_code(0);
    let lines = bench.stdout_lines();
    for prefix in [
        "zkdist bench on ",
        "raw ceiling: 500 creates at ",
        "watch events: the same writes under a second session's watch",
        "multi-reads: the same 500 reads, 16 nodes to a request, at ",
        "backlog: 100 tasks drained in ",
        "tasks: 200 in ",
        "latency (submit to result written): p50 ",
        // The submission is a create; the assignment (with the master's
        // epoch check) and the completion (the result and the
        // assignment's deletion) are a multi each.
        "writes per task: 3.00 (creates 1.00, deletes 0.00, set_data 0.00, multi 2.00)",
        "efficiency counting reads too: ",
        "efficiency counting node writes: ",
    ] {
        assert!(
            lines.iter().any(|line| line.starts_with(prefix)),
            "no line starting {prefix:?} in:\n{}",
            bench.stdout
        );
    }
    // The drain's writes are the assignments and completions (2 a task,
    // and the workers' ids and registrations: 6 in all); the submissions
    // are counted apart, as what queueing cost before the clock started.
    let drained = lines
        .iter()
        .find(|line| line.starts_with("backlog: "))
        .expect("a backlog line");
    assert!(
        drained.contains("; 2.06 writes and ")
            && drained.ends_with(" (queueing them took 1.00 writes per task before)"),
        "{drained}"
    );
    // The new master checks the 100 queued tasks, 32 to a request, two
    // nodes each: four multi-reads of 200 nodes (its few `exists` look at
    // the layout, whatever the backlog).
    let takeover = lines
        .iter()
        .find(|line| line.starts_with("takeover: "))
        .expect("a takeover line");
    assert!(
        takeover
            .starts_with("takeover: a new master over the 100 queued tasks was ready to assign ")
            && takeover.contains(" reads (4 multi-reads of 200 nodes, ")
            && takeover.contains(" exists, 3 listings of 100 names) and "),
        "{takeover}"
    );
    let last = lines.last().copied().unwrap_or_default();
    let percent: f64 = last
        .strip_prefix("efficiency ")
        .and_then(|rest| rest.strip_suffix('%'))
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("the last line is not the efficiency: {last:?}"));
    assert!(percent > 0.0, "{last}");
    assert!(
        !target.exists(&target.root),
        "the bench deletes {}",
        target.root
    );

    // The same figures as JSON, as docs/performance.md describes them; under a
    // root whose parents do not exist either, which the bench deletes too.
    let nested_root = format!("{}/nested/bench", target.root);
    let bench = run(&[
        "bench",
        "--zk",
        &target.connect,
        "--root",
        &nested_root,
        "--json",
        "--tasks",
        "50",
        "--workers",
        "2",
        "--backlog",
        "20",
        "--warmup-tasks",
        "10",
        "--raw-nodes",
        "200",
    ]);
    bench.expect_code(0);
    let report: Value = serde_json::from_str(&bench.stdout)
        .unwrap_or_else(|e| panic!("bench --json printed {:?}: {e}", bench.stdout));
    let number = |value: &Value| {
        value
            .as_f64()
            .unwrap_or_else(|| panic!("not a number: {value} in {report}"))
    };
    assert_eq!(report["workers"], 2, "{report}");
    assert_eq!(report["discovery"], "watch", "{report}");
    assert_eq!(report["raw_before"]["nodes"], 200, "{report}");
    let raw_best = number(&report["raw_before"]["writes_per_s"])
        .max(number(&report["raw_after"]["writes_per_s"]));
    assert_eq!(number(&report["raw"]["writes_per_s"]), raw_best);
    // The drain: an assignment and a completion (a multi each) per task;
    // queueing it: one create per task, before the drain's clock started.
    let backlog = &report["backlog"];
    assert_eq!(backlog["tasks"], 20, "{report}");
    assert_eq!(backlog["ops"]["multis"], 40, "{report}");
    assert_eq!(backlog["queueing_ops"]["creates"], 20, "{report}");
    assert_eq!(backlog["queueing_ops"]["multis"], 0, "{report}");
    let takeover = &backlog["takeover"];
    assert!(number(&takeover["ready_s"]) > 0.0, "{report}");
    assert_eq!(takeover["ops"]["multi_reads"], 1, "{report}");
    assert_eq!(takeover["ops"]["multi_read_nodes"], 40, "{report}");
    let tasks = &report["tasks"];
    assert_eq!(tasks["tasks"], 50, "{report}");
    assert_eq!(number(&tasks["writes_per_task"]), 3.0, "{report}");
    assert!(
        number(&tasks["latency_p50_ms"]) <= number(&tasks["latency_p99_ms"]),
        "{report}"
    );
    let efficiency = number(&tasks["tasks_per_s"]) * 3.0 / raw_best;
    assert!(
        (number(&report["efficiency"]) - efficiency).abs() < 1e-9,
        "{report}"
    );
    // Counting node writes: the submission's create, the assignment's
    // create (its epoch check writes nothing), and the completion's result
    // and deletion: four.
    let by_nodes = number(&tasks["tasks_per_s"]) * 4.0 / raw_best;
    assert!(
        (number(&report["node_write_efficiency"]) - by_nodes).abs() < 1e-9,
        "{report}"
    );
    // Counting reads too, at the faster raw read rate: the worker's read of
    // its assignment and the master's read ahead of the payload, at least,
    // as nodes, and at most one more, the worker's read of a task assigned
    // by name before its read-ahead answered (and now and then a look);
    // as requests, fewer when the read-ahead batched some into a
    // multi-read, which counts once.
    let raw = &report["raw"];
    let reads = number(&tasks["reads_per_task"]);
    let node_reads = number(&tasks["node_reads_per_task"]);
    assert!((2.0..3.2).contains(&node_reads), "{report}");
    assert!((1.0..=node_reads).contains(&reads), "{report}");
    let ops = &tasks["ops"];
    let read_requests = ["exists", "get_datas", "get_childrens", "multi_reads"]
        .iter()
        .map(|kind| number(&ops[*kind]))
        .sum::<f64>();
    assert!((read_requests - reads * 50.0).abs() < 1e-6, "{report}");
    let raw_reads_best = number(&report["raw_before"]["reads_per_s"])
        .max(number(&report["raw_after"]["reads_per_s"]));
    assert_eq!(number(&report["raw_reads_per_s"]), raw_reads_best);
    let by_requests = number(&tasks["tasks_per_s"]) * (3.0 / raw_best + reads / raw_reads_best);
    assert!(
        (number(&report["request_efficiency"]) - by_requests).abs() < 1e-9,
        "{report}"
    );
    // The multi-read step read every node too; its price in single reads
    // is its definition: 16 reads' time at the single rate over a batch's.
    let multi_cost = 16.0 * number(&raw["reads_per_s"]) / number(&raw["multi_read_nodes_per_s"]);
    assert!(
        (number(&raw["multi_read_cost_in_reads"]) - multi_cost).abs() < 1e-9,
        "{report}"
    );
    assert!(number(&raw["multi_read_nodes_per_s"]) > 0.0, "{report}");
    let event_cost = raw_best / number(&raw["watched_writes_per_s"]) - 1.0;
    assert!(
        (number(&raw["event_cost_in_writes"]) - event_cost).abs() < 1e-9,
        "{report}"
    );
    // The run's price of an event: the mean of the two measurements'.
    let mean_cost = (number(&report["raw_before"]["event_cost_in_writes"])
        + number(&report["raw_after"]["event_cost_in_writes"]))
        / 2.0;
    assert!(
        (number(&report["event_cost_in_writes"]) - mean_cost).abs() < 1e-9,
        "{report}"
    );
    assert!(
        !target.exists(&target.root),
        "the JSON run deletes its root and the parents it made"
    );

    // A root that exists is refused, and left as it was.
    let status_before = {
        target
            .run(&["submit", r#"{"kind":"pi","samples":10}"#])
            .expect_code(0);
        target.status()
    };
    target
        .run(&["bench", "--tasks", "10"])
        .expect_code(1)
        .expect_stderr(&[&format!("{} already exists", target.root)]);
    assert_eq!(target.status(), status_before);
    target.delete_root();
}
