//! `replay`: one seed's schedule, exactly as `explore` ran it, with its
//! whole trace and its violation.

use super::Outcome;
use super::explore::config_of;
use crate::args::ReplayArgs;
use crate::stdout::{out, outln};

pub fn replay(args: &ReplayArgs) -> anyhow::Result<Outcome> {
    let config = config_of(&args.schedule)?;
    let report = zkdist_scenarios::run_seed(args.seed, &config);
    if !args.quiet {
        for line in &report.trace {
            outln!("{line}")?;
        }
        outln!()?;
    }
    outln!(
        "seed {}: {} steps, {} trace lines, trace digest {:016x}",
        args.seed,
        report.steps,
        report.trace_lines,
        report.trace_digest
    )?;
    match &report.violation {
        Some(violation) => {
            out!("{violation}")?;
            Ok(Outcome::Violations)
        }
        None => {
            outln!("no violation")?;
            Ok(Outcome::Done)
        }
    }
}
