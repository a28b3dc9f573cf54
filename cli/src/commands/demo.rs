//! `demo`: the whole system on the embedded simulated ZooKeeper. A master,
//! workers and a client run on one paused-clock runtime, so the run takes
//! milliseconds, and the same seed prints the same trace.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, ensure};
use tokio::sync::{mpsc, oneshot};
use zkdist_coord::{Client, Layout, TaskPayload, TaskResult, WorkerId};
use zkdist_master::{Master, MasterDecision, claim_master};
use zkdist_sim::{Latency, SimConfig, SimZk};
use zkdist_worker::{TaskError, TaskHandler, Worker};

use crate::args::DemoArgs;
use crate::handlers::pi;
use crate::stdout::out;

/// How long, in simulated time, the client waits for each result.
const RESULT_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

pub fn demo(args: &DemoArgs) -> anyhow::Result<()> {
    ensure!(args.workers >= 1, "--workers must be at least 1");
    ensure!(args.tasks >= 1, "--tasks must be at least 1");
    // A request and its reply each take up to MAX: a round trip as long as
    // the session timeout leaves the server hearing nothing from a session
    // for that long, and it expires every one.
    let session_timeout_us = SimConfig::default().session_timeout_ms * 1000;
    let (_, max_us) = args.latency_us;
    ensure!(
        max_us.saturating_mul(2) < session_timeout_us,
        "--latency-us up to {max_us} µs each way makes round trips as long as the simulated \
         session timeout ({} ms), which would expire every session: keep MAX under {} µs",
        session_timeout_us / 1000,
        session_timeout_us / 2
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .context("cannot build the simulation runtime")?;
    let summary = runtime.block_on(run(args))?;
    out!("{summary}")?;
    Ok(())
}

/// Computes `pi` tasks in line: on the simulator a task must not leave the
/// runtime's thread, or the paused clock could move while it runs.
struct InlinePi;

impl TaskHandler for InlinePi {
    fn run(&self, task: &[u8]) -> impl Future<Output = Result<Vec<u8>, TaskError>> + Send {
        let outcome = pi::parse(task)
            .map(|task| {
                let result = pi::estimate(&task, &AtomicBool::new(false)).expect("never abandoned");
                serde_json::to_vec(&result).expect("results serialise")
            })
            .map_err(|error| TaskError::from_display(&error));
        std::future::ready(outcome)
    }
}

async fn run(args: &DemoArgs) -> anyhow::Result<String> {
    let (min_us, max_us) = args.latency_us;
    let started_at = tokio::time::Instant::now();
    let sim = SimZk::start(SimConfig {
        seed: args.seed,
        latency: Latency::Uniform { min_us, max_us },
        ..SimConfig::default()
    });
    let layout = Layout::default();
    // One stop signal per role, sent in a fixed order: the roles then wake
    // in that order, and the trace of the shutdown is the same for the same
    // seed. (A broadcast such as a watch channel wakes its receivers in an
    // order of its own choosing.)
    let mut stops: Vec<oneshot::Sender<()>> = Vec::new();
    let mut until_stopped = || {
        let (stop, stopped) = oneshot::channel::<()>();
        stops.push(stop);
        async move {
            // An error means the sender is gone, which also means stop.
            let _ = stopped.await;
        }
    };

    let (zk, events) = sim.connect("master").await?;
    let epoch = claim_master(&zk, &layout).await?;
    ensure!(epoch.is_some(), "a fresh simulation has no other master");
    let epoch = epoch.expect("checked just above");
    let (decisions_tx, mut decisions) = mpsc::unbounded_channel();
    let master = tokio::spawn(
        Master::new(zk, events, layout.clone(), epoch)
            .with_observer(decisions_tx)
            .run_until(until_stopped()),
    );
    let mut workers = Vec::new();
    for index in 1..=args.workers {
        let (zk, events) = sim.connect(&format!("worker-{index}")).await?;
        let worker = Worker::new(zk, events, layout.clone(), InlinePi);
        workers.push(tokio::spawn(worker.run_until(until_stopped())));
    }

    let (zk, events) = sim.connect("client").await?;
    let mut client = Client::new(zk, events, layout.clone());
    let mut submitted = Vec::new();
    for index in 0..args.tasks {
        let samples = 1_000 * (index as u64 + 1);
        let payload = TaskPayload::new("pi")
            .with("samples", samples)
            .with("seed", index as u64);
        let task = client.submit(&payload.encode()?).await?;
        sim.note(format!("client submitted {task} (pi, {samples} samples)"));
        submitted.push(task);
    }
    let mut results = Vec::new();
    for task in &submitted {
        // Simulated time: the bound costs nothing, and turns a stuck run
        // into an error that names the task instead of a hang.
        let result = tokio::time::timeout(RESULT_WAIT, client.wait(task))
            .await
            .with_context(|| {
                format!("no result for {task} within {RESULT_WAIT:?} of simulated time")
            })?
            .with_context(|| format!("waiting for {task}"))?;
        results.push(result);
    }
    let simulated = started_at.elapsed();

    for stop in stops {
        // A role that is gone already failed; awaiting it says how.
        let _ = stop.send(());
    }
    master.await?.context("the master failed")?;
    for worker in workers {
        worker.await?.context("a worker failed")?;
    }

    let mut assignments: Vec<(WorkerId, String)> = Vec::new();
    while let Ok(decision) = decisions.try_recv() {
        if let MasterDecision::Round { assigned, .. } = decision {
            assignments.extend(
                assigned
                    .into_iter()
                    .map(|(worker, task)| (worker, task.to_string())),
            );
        }
    }
    let trace = sim.trace().await;
    Ok(render(
        args,
        &submitted,
        &results,
        &assignments,
        &trace,
        simulated,
    ))
}

fn render(
    args: &DemoArgs,
    submitted: &[zkdist_coord::TaskId],
    results: &[TaskResult],
    assignments: &[(WorkerId, String)],
    trace: &[String],
    simulated: std::time::Duration,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if !args.quiet {
        for line in trace {
            writeln!(out, "{line}").unwrap();
        }
        writeln!(out).unwrap();
    }
    writeln!(
        out,
        "summary (seed {}, {} workers, {} tasks)",
        args.seed, args.workers, args.tasks
    )
    .unwrap();
    for (task, result) in submitted.iter().zip(results) {
        let shown = match result {
            TaskResult::Success { output } => String::from_utf8_lossy(output).into_owned(),
            TaskResult::Failure { message } => format!("FAILED: {message}"),
        };
        writeln!(out, "  {task} -> {shown}").unwrap();
    }
    let mut per_worker: BTreeMap<&WorkerId, usize> = BTreeMap::new();
    for (worker, _) in assignments {
        *per_worker.entry(worker).or_default() += 1;
    }
    for (worker, count) in per_worker {
        writeln!(out, "  {worker} ran {count} tasks").unwrap();
    }
    let assigned_order: Vec<&str> = assignments.iter().map(|(_, task)| task.as_str()).collect();
    let submitted_order: Vec<String> = submitted.iter().map(ToString::to_string).collect();
    let fifo = assigned_order
        .iter()
        .copied()
        .eq(submitted_order.iter().map(String::as_str));
    let succeeded = results.iter().filter(|r| r.is_success()).count();
    writeln!(
        out,
        "{succeeded}/{} tasks succeeded, assigned in submission order: {}, {} trace lines, simulated time {:?}",
        submitted.len(),
        if fifo { "yes" } else { "no" },
        trace.len(),
        simulated
    )
    .unwrap();
    out
}
