//! `replay`: one seed's schedule, exactly as `explore` ran it, with its
//! whole trace and its violation.

use zkdist_scenarios::trace::digest;

use super::Outcome;
use super::explore::config_of;
use crate::args::ReplayArgs;

pub fn replay(args: &ReplayArgs) -> anyhow::Result<Outcome> {
    let config = config_of(&args.schedule)?;
    let report = zkdist_scenarios::run_seed(args.seed, &config);
    if !args.quiet {
        for line in &report.trace {
            println!("{line}");
        }
        println!();
    }
    println!(
        "seed {}: {} steps, {} trace lines, trace digest {:016x}",
        args.seed,
        report.steps,
        report.trace.len(),
        digest(&report.trace)
    );
    match &report.violation {
        Some(violation) => {
            print!("{violation}");
            Ok(Outcome::Violations)
        }
        None => {
            println!("no violation");
            Ok(Outcome::Done)
        }
    }
}
