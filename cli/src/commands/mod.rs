//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod explore;
pub mod replay;
pub mod role;
pub mod status;
pub mod submit;
mod submit_lines;

use std::io::Write;

use anyhow::Context;

use zkdist_coord::TaskResult;

use crate::stdout::errln;

/// How a command that prints a task's result ends: the process's exit code
/// tells a script whether the task succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// The task ran and failed, or it was an `exec` task whose command did
    /// not exit with 0; what happened went to stderr.
    TaskFailed,
    /// The testbed found invariant violations (they were printed).
    Violations,
}

/// Prints a result: a success's output to stdout as it is, a failure's
/// message to stderr. An `exec` task whose command did not exit with 0
/// succeeded (its output is the command's), and is then said on stderr and
/// ends as a failed task does.
pub fn print_result(task: &zkdist_coord::TaskId, result: &TaskResult) -> anyhow::Result<Outcome> {
    match result {
        TaskResult::Success { output } => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(output)
                .and_then(|()| {
                    if output.ends_with(b"\n") {
                        Ok(())
                    } else {
                        stdout.write_all(b"\n")
                    }
                })
                .and_then(|()| stdout.flush())
                .with_context(|| format!("cannot write the result of {task} to standard output"))?;
            match crate::handlers::exec::command_failure(output) {
                Some(failure) => {
                    errln!("task {task} ran, but {failure}");
                    Ok(Outcome::TaskFailed)
                }
                None => Ok(Outcome::Done),
            }
        }
        TaskResult::Failure { message } => {
            errln!("task {task} failed: {message}");
            Ok(Outcome::TaskFailed)
        }
    }
}
