//! `bench`: zkdist's speed on a real ensemble, next to what the server
//! itself can take. The measurement is `zkdist_benches::ensemble`'s; this
//! module opens the sessions, draws the progress bar and prints the report,
//! whose last line is the efficiency.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zkdist_benches::ensemble::{
    self, BenchConfig, BenchError, BenchReport, DEFAULT_IN_FLIGHT_PER_WORKER,
};
use zkdist_benches::{OpCounts, PhaseReport, Progress};
use zkdist_coord::zk::ZkSession;

use crate::args::BenchArgs;
use crate::connect;
use crate::shutdown::{self, Shutdown};
use crate::stdout::{errln, outln};

pub async fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    let mut shutdown = Shutdown::install()?;
    // A second listener of the same signals: the first signal stops the
    // run, which then deletes its root; a second one ends the process at
    // once, leaving the root for the user to delete.
    let mut again = Shutdown::install()?;
    let layout = connect::layout(&args.connect)?;
    let zk_config = connect::config(&args.connect)?;
    let config = BenchConfig {
        tasks: args.tasks,
        workers: args.workers,
        backlog: args.backlog,
        discovery: args.master.discovery,
        in_flight: args
            .in_flight
            // Saturating: the worker count is checked below, and a count
            // too large to multiply must reach that check, not wrap.
            .unwrap_or_else(|| DEFAULT_IN_FLIGHT_PER_WORKER.saturating_mul(args.workers as u64)),
        warmup_tasks: args.warmup_tasks,
        raw_nodes: args.raw_nodes,
        raw_in_flight: args.raw_in_flight,
    };
    config.validate().map_err(anyhow::Error::msg)?;

    let mut bar = Bar::default();
    let root = layout.root().to_owned();
    let run = ensemble::run(
        |_session| {
            let zk_config = zk_config.clone();
            async move { ZkSession::connect(&zk_config).await }
        },
        &layout,
        &config,
        &mut bar,
        shutdown.requested(),
    );
    let interrupted_twice = async {
        again.requested().await;
        errln!(
            "zkdist: interrupted by {}: stopping, then deleting {root} (interrupt again to exit at once, leaving it)",
            shutdown::received_signal_name().unwrap_or("a stop request")
        );
        again.requested().await;
    };
    let outcome = tokio::select! {
        outcome = run => Some(outcome),
        () = interrupted_twice => None,
    };
    bar.clear();
    let Some(outcome) = outcome else {
        anyhow::bail!(
            "interrupted twice: exited without deleting {root}; \
             delete it before the next run with zkCli's `deleteall {root}`"
        )
    };
    let report = outcome.map_err(|error| match error {
        BenchError::Connect { session, error } => anyhow::Error::new(error).context(format!(
            "cannot open a ZooKeeper session on {:?} (for the {session})",
            args.connect.zk
        )),
        other => anyhow::Error::new(other),
    })?;
    let text = if args.json {
        serde_json::to_string_pretty(&json(args, &config, &report))
            .context("the report serialises")?
    } else {
        render(args, &config, &report)
    };
    outln!("{text}")?;
    Ok(())
}

/// A progress bar on stderr per phase (drawn only on a terminal).
#[derive(Default)]
struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn start(&mut self, phase: &str, total: u64) {
        self.clear();
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{prefix:8} {elapsed_precise} [{bar:40}] {pos}/{len} tasks ({eta} left)",
        )
        .expect("the template is valid")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(phase.to_owned());
        self.bar = Some(bar);
    }

    fn advance(&mut self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    fn finish(&mut self) {
        self.clear();
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn per_task(count: u64, report: &PhaseReport) -> f64 {
    count as f64 / report.tasks.max(1) as f64
}

fn writes_breakdown(ops: &OpCounts, report: &PhaseReport) -> String {
    format!(
        "creates {:.2}, deletes {:.2}, set_data {:.2}, multi {:.2}",
        per_task(ops.creates, report),
        per_task(ops.deletes, report),
        per_task(ops.set_datas, report),
        per_task(ops.multis, report),
    )
}

fn reads_breakdown(ops: &OpCounts, report: &PhaseReport) -> String {
    format!(
        "get_children {:.2} listing {:.0} names, exists {:.2}, get_data {:.2}, \
         get_data_many {:.2} reading {:.2} nodes",
        per_task(ops.get_childrens, report),
        per_task(ops.listed_children, report),
        per_task(ops.exists, report),
        per_task(ops.get_datas, report),
        per_task(ops.multi_reads, report),
        per_task(ops.multi_read_nodes, report),
    )
}

fn render(args: &BenchArgs, config: &BenchConfig, report: &BenchReport) -> String {
    let mut out = String::new();
    let backlog = match config.backlog {
        0 => "no backlog".to_owned(),
        tasks => format!("a backlog of {tasks}"),
    };
    writeln!(
        out,
        "zkdist bench on {} under {}: {} workers, {} tasks ({} in flight, after {} unmeasured), {backlog}, {} discovery",
        args.connect.zk,
        args.connect.root,
        config.workers,
        config.tasks,
        config.in_flight,
        config.warmup_tasks,
        config.discovery
    )
    .unwrap();
    let raw = report.raw();
    writeln!(
        out,
        "raw ceiling: {} creates at {:.0}/s, {} reads at {:.0}/s, {} deletes at {:.0}/s: \
         {:.0} writes/s (one session, {} requests in flight; the better of two measurements, \
         {:.0} writes/s before the tasks and {:.0} after)",
        raw.nodes,
        raw.creates_per_s(),
        raw.nodes,
        raw.reads_per_s(),
        raw.nodes,
        raw.deletes_per_s(),
        raw.writes_per_s(),
        raw.in_flight,
        report.raw_before.writes_per_s(),
        report.raw_after.writes_per_s(),
    )
    .unwrap();
    writeln!(out, "{}", watch_events_line(report)).unwrap();
    writeln!(
        out,
        "multi-reads: the same {} reads, {} nodes to a request, at {:.0} nodes/s: one costs \
         the server about {:.1} single reads (the master reads queued payloads ahead so, in \
         batches; the efficiency lines below price each as one read)",
        raw.nodes,
        zkdist_benches::MULTI_READ_NODES,
        raw.multi_read_nodes_per_s(),
        raw.multi_read_cost_in_reads(),
    )
    .unwrap();
    if let Some(backlog) = &report.backlog {
        let drain = &backlog.drain;
        let takeover = &backlog.takeover;
        writeln!(
            out,
            "takeover: a new master over the {} queued tasks was ready to assign {:.3} s after \
             its claim, having sent {} reads ({} multi-reads of {} nodes, {} exists, {} listings \
             of {} names) and {} writes",
            drain.tasks,
            takeover.ready.as_secs_f64(),
            takeover.ops.reads(),
            takeover.ops.multi_reads,
            takeover.ops.multi_read_nodes,
            takeover.ops.exists,
            takeover.ops.get_childrens,
            takeover.ops.listed_children,
            takeover.ops.writes(),
        )
        .unwrap();
        writeln!(
            out,
            "backlog: {} tasks drained in {:.2} s: {:.0} tasks/s, {:.1} us per task; \
             {:.2} writes and {:.2} reads per task while draining \
             (queueing them took {:.2} writes per task before)",
            drain.tasks,
            drain.elapsed.as_secs_f64(),
            drain.tasks_per_s(),
            drain.per_task().as_secs_f64() * 1e6,
            drain.writes_per_task(),
            drain.reads_per_task(),
            backlog.queueing.writes() as f64 / drain.tasks.max(1) as f64,
        )
        .unwrap();
    }
    let tasks = &report.tasks;
    writeln!(
        out,
        "tasks: {} in {:.2} s: {:.0} tasks/s",
        tasks.tasks,
        tasks.elapsed.as_secs_f64(),
        tasks.tasks_per_s()
    )
    .unwrap();
    let p50 = tasks.latency_percentile(50.0).unwrap_or_default();
    let p99 = tasks.latency_percentile(99.0).unwrap_or_default();
    // With more tasks in flight than workers, a task waits behind the
    // others: the latency is the system's plus that queue's.
    let queueing = if config.in_flight > config.workers as u64 {
        " (waiting behind the others included)"
    } else {
        ""
    };
    writeln!(
        out,
        "latency (submit to result written): p50 {:.2} ms, p99 {:.2} ms, with {} tasks in \
         flight for {} workers{queueing}",
        ms(p50),
        ms(p99),
        config.in_flight,
        config.workers
    )
    .unwrap();
    writeln!(
        out,
        "writes per task: {:.2} ({}), {:.2} node writes",
        tasks.writes_per_task(),
        writes_breakdown(&tasks.ops, tasks),
        tasks.node_writes_per_task(),
    )
    .unwrap();
    writeln!(
        out,
        "reads per task: {:.2} ({})",
        tasks.reads_per_task(),
        reads_breakdown(&tasks.ops, tasks)
    )
    .unwrap();
    writeln!(
        out,
        "efficiency counting reads too: {:.1}% ({:.2} writes and {:.2} reads a task, each at \
         the raw rate for its kind, {:.0} writes/s and {:.0} reads/s; {})",
        100.0 * report.request_efficiency(),
        tasks.writes_per_task(),
        tasks.reads_per_task(),
        raw.writes_per_s(),
        report.raw_reads_per_s(),
        if report.request_efficiency() <= 1.0 {
            "the rest of the server's time went to what the ceiling does not send, watch events \
             above all, or was idle"
        } else {
            "over 100%: the ceiling was measured low in this run"
        },
    )
    .unwrap();
    writeln!(
        out,
        "efficiency counting node writes: {:.1}% (a multi counted as the nodes it writes; \
         the last line counts it once, as one transaction)",
        100.0 * report.node_write_efficiency()
    )
    .unwrap();
    write!(out, "efficiency {:.1}%", 100.0 * report.efficiency()).unwrap();
    out
}

fn ops_json(ops: &OpCounts) -> serde_json::Value {
    serde_json::json!({
        "creates": ops.creates,
        "deletes": ops.deletes,
        "set_datas": ops.set_datas,
        "multis": ops.multis,
        "multi_node_writes": ops.multi_node_writes,
        "exists": ops.exists,
        "get_datas": ops.get_datas,
        "get_childrens": ops.get_childrens,
        "multi_reads": ops.multi_reads,
        "multi_read_nodes": ops.multi_read_nodes,
        "listed_children": ops.listed_children,
    })
}

fn phase_json(phase: &PhaseReport) -> serde_json::Value {
    serde_json::json!({
        "tasks": phase.tasks,
        "elapsed_s": phase.elapsed.as_secs_f64(),
        "tasks_per_s": phase.tasks_per_s(),
        "per_task_us": phase.per_task().as_secs_f64() * 1e6,
        "latency_p50_ms": phase.latency_percentile(50.0).map(ms),
        "latency_p99_ms": phase.latency_percentile(99.0).map(ms),
        "writes_per_task": phase.writes_per_task(),
        "node_writes_per_task": phase.node_writes_per_task(),
        "reads_per_task": phase.reads_per_task(),
        "node_reads_per_task": phase.node_reads_per_task(),
        "ops": ops_json(&phase.ops),
    })
}

/// What a watch event cost the server, in writes: the run's price (the
/// mean of the two measurements'), and each measurement's.
fn watch_events_line(report: &BenchReport) -> String {
    let mean_cost = report.event_cost_in_writes();
    let each = format!(
        "{:.2} before the tasks, {:.2} after",
        report.raw_before.event_cost_in_writes(),
        report.raw_after.event_cost_in_writes()
    );
    if mean_cost >= 0.0 {
        format!(
            "watch events: the same writes under a second session's watch: an event costs about \
             {mean_cost:.2} writes (the mean of the two measurements, {each}; sent by the \
             server, heard by this process)"
        )
    } else {
        // Faster with the events than without: the difference is this
        // run's noise, and a negative price would read as a measurement.
        format!(
            "watch events: the same writes under a second session's watch ran faster than \
             without it: an event costs too little to tell from this run's noise ({each})"
        )
    }
}

fn json(args: &BenchArgs, config: &BenchConfig, report: &BenchReport) -> serde_json::Value {
    let raw_json = |raw: &zkdist_benches::RawCeiling| {
        serde_json::json!({
            "nodes": raw.nodes,
            "in_flight": raw.in_flight,
            "creates_per_s": raw.creates_per_s(),
            "reads_per_s": raw.reads_per_s(),
            "multi_read_nodes_per_s": raw.multi_read_nodes_per_s(),
            "multi_read_cost_in_reads": raw.multi_read_cost_in_reads(),
            "deletes_per_s": raw.deletes_per_s(),
            "writes_per_s": raw.writes_per_s(),
            "watched_writes_per_s": raw.watched_writes_per_s(),
            "event_cost_in_writes": raw.event_cost_in_writes(),
        })
    };
    serde_json::json!({
        "zk": args.connect.zk,
        "root": args.connect.root,
        "workers": config.workers,
        "in_flight": config.in_flight,
        "warmup_tasks": config.warmup_tasks,
        "discovery": config.discovery.name(),
        "raw": raw_json(report.raw()),
        "raw_before": raw_json(&report.raw_before),
        "raw_after": raw_json(&report.raw_after),
        // The faster of the two read rates: what reads are priced at.
        "raw_reads_per_s": report.raw_reads_per_s(),
        // The drain's figures, and what queueing the backlog sent before.
        "backlog": report.backlog.as_ref().map(|backlog| {
            let mut drain = phase_json(&backlog.drain);
            drain["queueing_ops"] = ops_json(&backlog.queueing);
            drain["takeover"] = serde_json::json!({
                "ready_s": backlog.takeover.ready.as_secs_f64(),
                "ops": ops_json(&backlog.takeover.ops),
            });
            drain
        }),
        "tasks": phase_json(&report.tasks),
        "efficiency": report.efficiency(),
        "node_write_efficiency": report.node_write_efficiency(),
        "request_efficiency": report.request_efficiency(),
        // The mean of the two measurements' prices of an event.
        "event_cost_in_writes": report.event_cost_in_writes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ceiling whose unwatched creates and deletes take 100 ms each and
    /// whose watched ones take `watched_ms` each.
    fn ceiling(watched_ms: u64) -> zkdist_benches::RawCeiling {
        zkdist_benches::RawCeiling {
            nodes: 1000,
            in_flight: 100,
            create_elapsed: Duration::from_millis(100),
            read_elapsed: Duration::from_millis(100),
            multi_read_elapsed: Duration::from_millis(20),
            delete_elapsed: Duration::from_millis(100),
            watched_create_elapsed: Duration::from_millis(watched_ms),
            watched_delete_elapsed: Duration::from_millis(watched_ms),
        }
    }

    /// A report whose measurements took `before_ms` and `after_ms` for
    /// each watched step; what the tasks did does not matter here.
    fn report(before_ms: u64, after_ms: u64) -> BenchReport {
        BenchReport {
            raw_before: ceiling(before_ms),
            raw_after: ceiling(after_ms),
            backlog: None,
            tasks: PhaseReport {
                tasks: 1,
                elapsed: Duration::from_secs(1),
                latencies: Vec::new(),
                ops: OpCounts::default(),
            },
        }
    }

    #[test]
    fn an_event_is_priced_at_the_mean_of_the_two_measurements() {
        // A quarter and a half of a write: the mean, not the price of the
        // measurement with the faster unwatched writes (here they tie).
        let report = report(125, 150);
        assert!((report.event_cost_in_writes() - 0.375).abs() < 1e-9);
        assert_eq!(
            watch_events_line(&report),
            "watch events: the same writes under a second session's watch: an event costs \
             about 0.38 writes (the mean of the two measurements, 0.25 before the tasks, 0.50 \
             after; sent by the server, heard by this process)"
        );
    }

    #[test]
    fn watched_writes_that_ran_faster_are_called_noise_not_a_negative_price() {
        // -0.10 and +0.05: the mean is below zero.
        let report = report(90, 105);
        assert!(report.event_cost_in_writes() < 0.0);
        let line = watch_events_line(&report);
        assert!(line.contains("ran faster than without it"), "{line}");
        assert!(line.contains("too little to tell"), "{line}");
        assert!(!line.contains("costs about"), "no price claimed: {line}");
        assert!(
            line.ends_with("(-0.10 before the tasks, 0.05 after)"),
            "{line}"
        );
    }
}
