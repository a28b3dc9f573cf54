//! `explore`: many seeded random schedules on the simulator with the
//! invariant checker on. Violations are printed as they are found, each
//! with the one-line command that replays it; the last line sums up.

use std::fmt::Write as _;

use anyhow::{Context, ensure};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zkdist_scenarios::{ExploreConfig, Violation};

use super::Outcome;
use crate::args::{ExploreArgs, ScheduleArgs};
use crate::stdout::outln;

/// The explorer's config from the command line, checked.
#[allow(
    clippy::needless_update,
    reason = "the config has one more field when the scenarios' test-only mutants are compiled in"
)]
pub fn config_of(schedule: &ScheduleArgs) -> anyhow::Result<ExploreConfig> {
    let config = ExploreConfig {
        workers: schedule.workers,
        tasks: schedule.tasks,
        faults: schedule.faults,
        discovery: schedule.discovery,
        old_workers: schedule.old_workers,
        first_task_sequence: schedule.first_task_sequence,
        long_tasks: schedule.long_tasks,
        ..ExploreConfig::default()
    };
    config.validate().map_err(anyhow::Error::msg)?;
    Ok(config)
}

pub fn explore(args: &ExploreArgs) -> anyhow::Result<Outcome> {
    ensure!(args.seeds >= 1, "--seeds must be at least 1");
    let config = config_of(&args.schedule)?;
    let end = args
        .from
        .checked_add(args.seeds)
        .with_context(|| format!("--from {} + --seeds {} overflows", args.from, args.seeds))?;
    let jobs = match args.jobs {
        Some(0) => anyhow::bail!("--jobs must be at least 1"),
        Some(jobs) => jobs,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };

    let bar = ProgressBar::with_draw_target(Some(args.seeds), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} seeds, {msg} ({per_sec})",
        )
        .context("the progress bar's template")?
        .progress_chars("=> "),
    );
    bar.set_message("0 violations");
    // Wall-clock time measures the explorer's own speed; the runs inside
    // use simulated time only.
    let started = std::time::Instant::now();
    let mut steps: u64 = 0;
    let mut violations: Vec<(u64, Violation)> = Vec::new();
    // The first line that could not be written ends the command once the
    // seeds have run.
    let mut unwritten: Option<anyhow::Error> = None;
    zkdist_scenarios::explore(args.from..end, &config, jobs, false, |outcome| {
        steps += outcome.steps;
        if let Some(violation) = outcome.violation {
            if !args.json {
                let written = bar.suspend(|| -> anyhow::Result<()> {
                    outln!("seed {}: {}", outcome.seed, violation.summary())?;
                    outln!("  replay: {}", config.replay_command(outcome.seed))
                });
                if let Err(error) = written {
                    unwritten.get_or_insert(error);
                }
            }
            violations.push((outcome.seed, violation));
            bar.set_message(format!("{} violations", violations.len()));
        }
        bar.inc(1);
    });
    bar.finish_and_clear();
    if let Some(error) = unwritten {
        return Err(error);
    }
    let elapsed_s = started.elapsed().as_secs_f64().max(1e-9);
    let steps_per_s = steps as f64 / elapsed_s;

    if args.json {
        let found: Vec<serde_json::Value> = violations
            .iter()
            .map(|(seed, violation)| {
                serde_json::json!({
                    "seed": seed,
                    "invariant": violation.invariant.name(),
                    "step": violation.step.to_string(),
                    "trace_line": violation.trace_line,
                    "detail": violation.detail,
                    "replay": config.replay_command(*seed),
                })
            })
            .collect();
        let summary = serde_json::json!({
            "from": args.from,
            "seeds": args.seeds,
            "workers": config.workers,
            "tasks": config.tasks,
            "faults": config.faults.name(),
            "old_workers": config.old_workers,
            "first_task_sequence": config.first_task_sequence,
            "long_tasks": config.long_tasks,
            "violation_count": violations.len(),
            "violations": found,
            "steps": steps,
            "elapsed_s": elapsed_s,
            "steps_per_s": steps_per_s.round(),
            "seeds_per_s": (args.seeds as f64 / elapsed_s).round(),
        });
        outln!("{summary}")?;
    } else {
        let mut line = String::new();
        write!(
            line,
            "explored {} seeds, {} violations, {:.0} steps/s",
            args.seeds,
            violations.len(),
            steps_per_s
        )
        .expect("writing to a string");
        outln!("{line}")?;
    }
    Ok(if violations.is_empty() {
        Outcome::Done
    } else {
        Outcome::Violations
    })
}
