//! The end of a run: the lines left to print, and the error that names
//! what was not queued.

use std::fmt::Write as _;

use zkdist_coord::{ClientError, TaskId};

use super::Line;
use super::lines::name_lines;
use super::printer::Printer;
use super::queue::Queued;
use crate::commands::Outcome;

/// Prints the lines `printer` has not printed yet (one per payload, in
/// order: its task id, `?` if it may or may not have been queued, `-` if
/// it was not); then fails naming the lines of the last two kinds, if any.
/// `find` is the command line that looks a token up (in backquotes).
pub(super) fn report(
    lines: &[Line<'_>],
    queued: &[Queued],
    mut printer: Printer,
    signalled: bool,
    find: &str,
) -> anyhow::Result<Outcome> {
    assert_eq!(lines.len(), queued.len(), "one entry per payload line");
    let rest = printer.newly_settled(queued);
    printer.print(&rest);
    assert_eq!(
        printer.printed,
        queued.len(),
        "every payload is settled before the report"
    );
    let total = lines.len();
    let stdout_failure = printer.failed.take();
    let unprinted_from = printer.unprinted_from.unwrap_or(total);
    // Standard output failed (a closed pipe, a full disk): the ids stop
    // somewhere, and the sending stopped at the next batch. Said first;
    // each task queued whose id may be missing there is named below with
    // its id, and so is each line in doubt: they are all that tells what
    // was queued.
    let unprinted_tasks: Vec<(usize, &TaskId)> = lines
        .iter()
        .zip(queued)
        .skip(unprinted_from)
        .filter_map(|(line, queued)| match queued {
            Queued::Task(task) => Some((line.number, task)),
            _ => None,
        })
        .collect();
    let unprinted = stdout_failure.as_ref().map(|error| {
        let tasks = queued
            .iter()
            .filter(|q| matches!(q, Queued::Task(_)))
            .count();
        format!(
            "{tasks} of {total} tasks were queued, but standard output failed ({error:#}): the \
             ids of {} of them may be missing there, each named below",
            unprinted_tasks.len()
        )
    });
    let mut failures: Vec<(usize, &ClientError)> = Vec::new();
    let mut interrupted = 0;
    for (line, queued) in lines.iter().zip(queued) {
        match queued {
            Queued::Task(_) => {}
            Queued::Interrupted => interrupted += 1,
            Queued::Failed(error) => failures.push((line.number, error)),
            Queued::Unanswered { .. } | Queued::Unsent(_) => {
                unreachable!("every payload is settled before the report")
            }
        }
    }
    // Not sent: a stop signal, or else a failed standard output, stopped
    // the sending (and a `-` reaches standard output only if it works).
    let interruption = (interrupted > 0).then(|| match (signalled, &stdout_failure) {
        (true, None) => {
            format!("interrupted: {interrupted} of {total} tasks were not sent (printed as -)")
        }
        (true, Some(_)) => format!("interrupted: {interrupted} of {total} tasks were not sent"),
        (false, _) => format!(
            "{interrupted} of {total} tasks were not sent: the sending stopped when standard \
             output failed"
        ),
    });
    let mut parts: Vec<String> = unprinted.into_iter().chain(interruption).collect();
    let mut named_tasks = String::new();
    for (number, task) in &unprinted_tasks {
        write!(named_tasks, "\n  line {number}: queued as {task}")
            .expect("writing to a String cannot fail");
    }
    let Some(&(first_line, first_failure)) = failures.first() else {
        return if parts.is_empty() {
            Ok(Outcome::Done)
        } else {
            let mut message = parts.join("; ");
            if !named_tasks.is_empty() {
                message.push(':');
                message.push_str(&named_tasks);
            }
            Err(anyhow::anyhow!(message))
        };
    };
    let in_doubt = failures
        .iter()
        .filter(|(_, error)| matches!(error, ClientError::SubmitInDoubt { .. }))
        .count();
    let not_queued = failures.len() - in_doubt;
    if not_queued > 0 {
        parts.push(format!(
            "{not_queued} of {total} tasks were not queued (printed as -)"
        ));
    }
    if in_doubt > 0 {
        parts.push(format!(
            "{in_doubt} of {total} may or may not have been queued (printed as ?: look each \
             up with {find} before submitting it again, once the session that \
             sent it has ended: a session ends its timeout after the ensemble last heard \
             from it, and an ensemble that lost its quorum ends none until a majority is \
             back)"
        ));
    }
    let mut message = parts.join("; ");
    message.push(':');
    message.push_str(&named_tasks);
    // Every `?` line is named, however many there are: its token, in the
    // error's text, is the only way to learn its fate (`zkdist find`), and
    // stdout shows a bare `?`. A `-` line was not queued, which stdout
    // already says at its place, so those are named up to the limit only.
    name_lines(
        &mut message,
        failures.iter().map(|(number, error)| {
            let in_doubt = matches!(error, ClientError::SubmitInDoubt { .. });
            (*number, error.to_string(), in_doubt)
        }),
    );
    // The first failure goes in the chain, where the binary's edge can
    // explain an ACL's refusal (`--auth`). The chain prints it after this
    // message, so the message says whose it is: after "and N more" it
    // would read as the reason of those lines.
    write!(message, "\nthe first failure, line {first_line}")
        .expect("writing to a String cannot fail");
    Err(anyhow::Error::new(first_failure.clone()).context(message))
}
