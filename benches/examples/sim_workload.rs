//! One fixed simulated workload, run once: what `scripts/sim-instructions`
//! counts the instructions of. Wall-clock time on a shared 2-core machine
//! moves by a fifth between identical runs; the instructions a fixed piece
//! of work executes do not (the same seed makes the same schedule), so a
//! change's effect on the simulator's cost shows to the tenth of a percent.
//!
//! ```text
//! cargo run --release -p zkdist-benches --example sim_workload -- stream [WORKERS] [TASKS]
//! cargo run --release -p zkdist-benches --example sim_workload -- explore [SEEDS]
//! ```
//!
//! `stream` is the `assignment_throughput` benchmark's workload (default 16
//! workers, 1,000 tasks), `explore` the `explore` benchmark's standard run
//! on one thread (default 10 seeds). It prints what it ran, with the units
//! the script divides the instruction count by.

use std::process::ExitCode;

use zkdist_benches::simulated::{assignment_throughput, explore_batch};
use zkdist_master::TaskDiscovery;

/// The allocator the `zkdist` binary and the benchmarks run with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: sim_workload stream [WORKERS] [TASKS] | explore [SEEDS]";

/// The `index`th argument as a positive number, `default` when absent.
fn count_arg(args: &[String], index: usize, name: &str, default: u64) -> Result<u64, String> {
    match args.get(index) {
        None => Ok(default),
        Some(text) => match text.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name} must be a positive number, got {text:?}")),
        },
    }
}

fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("stream") if args.len() <= 3 => {
            let workers = count_arg(args, 1, "WORKERS", 16)?;
            let tasks = count_arg(args, 2, "TASKS", 1_000)?;
            let workers = usize::try_from(workers).map_err(|_| "WORKERS is too large")?;
            let run = assignment_throughput(workers, tasks, TaskDiscovery::Watch);
            assert_eq!(run.report.tasks, tasks, "every task of the stream finished");
            println!("stream: {workers} workers, {tasks} tasks");
            println!("units: {tasks} tasks");
            Ok(())
        }
        Some("explore") if args.len() <= 2 => {
            let seeds = count_arg(args, 1, "SEEDS", 10)?;
            let batch = explore_batch(0..seeds, 1);
            assert_eq!(batch.schedules, seeds, "every seed ran");
            println!(
                "explore: the standard run, seeds 0..{seeds}, one thread: {} steps, {} violations",
                batch.steps, batch.violations
            );
            println!("units: {seeds} schedules");
            Ok(())
        }
        _ => Err(USAGE.to_owned()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sim_workload: {message}");
            ExitCode::from(2)
        }
    }
}
