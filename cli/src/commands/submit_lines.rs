//! `submit --lines`: many payloads, one per line, queued in order with many
//! creates in flight.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zkdist_coord::zk::ZkSession;
use zkdist_coord::{Client, ClientError, Coordinator, Layout, TaskId, TaskToken, validate_data};

use super::Outcome;
use crate::args::SubmitArgs;
use crate::{connect, handlers};

/// How many creates are in flight at once: enough to hide the round trip
/// (a server answers thousands of creates a second), few enough that the
/// lookup after a session's end has little to resolve.
const CREATES_IN_FLIGHT: usize = 256;

/// How many payloads go to the server between two updates of the progress
/// bar: each batch waits for its last create, which costs one round trip
/// per this many tasks.
const BATCH_TASKS: usize = 10_000;

/// How many refused lines an error names before it only counts the rest.
const NAMED_LINES: usize = 20;

/// One payload and the line of the input it came from (1-based).
struct Line<'a> {
    number: usize,
    payload: &'a [u8],
}

/// Where one payload stands.
enum Queued {
    Task(TaskId),
    /// Not created: its session ended before it was sent, or before its
    /// outcome was known and no task carries its token. Sent again on a
    /// new session.
    Again,
    Failed(ClientError),
}

pub async fn submit_lines(args: &SubmitArgs, input: &[u8]) -> anyhow::Result<Outcome> {
    let layout = connect::layout(&args.connect)?;
    let lines = checked_lines(input, &layout, args.no_check)?;
    let payloads: Vec<&[u8]> = lines.iter().map(|line| line.payload).collect();

    let (zk, events) = connect::session(&args.connect).await?;
    let mut client = Client::new(zk, events, layout.clone());
    // Hidden when stderr is not a terminal.
    let bar =
        ProgressBar::with_draw_target(Some(payloads.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} tasks ({per_sec})")
            .context("the progress bar's template")?
            .progress_chars("=> "),
    );
    let mut queued: Vec<Queued> = Vec::with_capacity(payloads.len());
    let mut in_doubt: Vec<(usize, TaskToken)> = Vec::new();
    for batch in payloads.chunks(BATCH_TASKS) {
        let first = queued.len();
        for (index, outcome) in client
            .submit_many(batch, CREATES_IN_FLIGHT)
            .await
            .into_iter()
            .enumerate()
        {
            queued.push(match outcome {
                Ok(task) => Queued::Task(task),
                Err(ClientError::SubmitInDoubt { token, cause }) if ends_session(&cause) => {
                    in_doubt.push((first + index, token));
                    Queued::Again
                }
                Err(ClientError::Zk(error)) if error.is_session_fatal() => Queued::Again,
                Err(error) => Queued::Failed(error),
            });
        }
        bar.inc(batch.len() as u64);
        if queued[first..].iter().any(|q| matches!(q, Queued::Again)) {
            // The session ended: the batches not yet sent go on the next.
            queued.resize_with(payloads.len(), || Queued::Again);
            break;
        }
    }

    if queued.iter().any(|q| matches!(q, Queued::Again)) {
        // The session ended with creates unsent or unanswered. The old
        // session can apply nothing any more: on a new one, look the
        // unanswered ones up, and send again those no task carries.
        let again = queued.iter().filter(|q| matches!(q, Queued::Again)).count();
        tracing::warn!(
            unanswered = in_doubt.len(),
            unsent = again - in_doubt.len(),
            "the session ended while submitting; looking up the unanswered creates on a new session and sending again what made no task"
        );
        client.session().close().await.ok();
        let (zk, events) = connect::session(&args.connect).await?;
        client = Client::new(zk, events, layout);
        resolve_in_doubt(&client, &mut queued, &in_doubt).await;
        send_again(&client, &payloads, &mut queued).await;
    }
    client.session().close().await.ok();
    bar.finish_and_clear();

    let mut stdout = String::with_capacity(queued.len() * 40);
    let mut failures = Vec::new();
    for (line, queued) in lines.iter().zip(&queued) {
        match queued {
            Queued::Task(task) => writeln!(stdout, "{task}"),
            Queued::Failed(error) => {
                failures.push((line.number, error));
                writeln!(stdout, "-")
            }
            Queued::Again => unreachable!("every payload sent again has an outcome"),
        }
        .expect("writing to a String cannot fail");
    }
    print!("{stdout}");
    if !failures.is_empty() {
        let mut message = format!(
            "{} of {} tasks were not queued (their lines print as -):",
            failures.len(),
            lines.len()
        );
        name_lines(
            &mut message,
            failures
                .iter()
                .map(|(line, error)| (*line, error.to_string())),
        );
        bail!(message);
    }
    Ok(Outcome::Done)
}

/// Whether a submission is in doubt because its session ended, which a
/// new session can resolve.
fn ends_session(cause: &ClientError) -> bool {
    matches!(cause, ClientError::Zk(error) if error.is_session_fatal())
}

/// Every payload line of `input`, checked as a single submit checks its
/// payload; blank lines are skipped. If any line is refused, the error
/// names each (up to [`NAMED_LINES`]) and nothing is returned to send.
fn checked_lines<'a>(
    input: &'a [u8],
    layout: &Layout,
    no_check: bool,
) -> anyhow::Result<Vec<Line<'a>>> {
    let mut lines = Vec::new();
    let mut refused = Vec::new();
    for (index, text) in input.split(|&byte| byte == b'\n').enumerate() {
        let payload = text.strip_suffix(b"\r").unwrap_or(text);
        if payload.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let number = index + 1;
        let checked = validate_data(&layout.task_prefix(), payload)
            .map_err(anyhow::Error::from)
            .and_then(|()| match no_check {
                true => Ok(()),
                false => handlers::validate(payload).map_err(anyhow::Error::from),
            });
        match checked {
            Ok(()) => lines.push(Line { number, payload }),
            Err(error) => refused.push((number, format!("{error:#}"))),
        }
    }
    if !refused.is_empty() {
        let mut message = format!(
            "{} of {} payload lines refused, so none was submitted",
            refused.len(),
            refused.len() + lines.len()
        );
        if !no_check {
            message.push_str(" (pass --no-check to submit kinds this binary does not know)");
        }
        message.push(':');
        name_lines(&mut message, refused.into_iter());
        bail!(message);
    }
    if lines.is_empty() {
        bail!("no task to submit: the input holds no payload line");
    }
    Ok(lines)
}

/// Appends `line N: reason` for the first [`NAMED_LINES`] lines, then how
/// many more there are.
fn name_lines(message: &mut String, lines: impl ExactSizeIterator<Item = (usize, String)>) {
    let more = lines.len().saturating_sub(NAMED_LINES);
    for (number, reason) in lines.take(NAMED_LINES) {
        write!(message, "\n  line {number}: {reason}").expect("writing to a String cannot fail");
    }
    if more > 0 {
        write!(message, "\n  and {more} more").expect("writing to a String cannot fail");
    }
}

/// Looks up, on a new session, the payloads whose create was unanswered
/// when the old session ended: those a task carries are queued; the others
/// stay to be sent again. A lookup that fails leaves them in doubt, named
/// by token.
async fn resolve_in_doubt(
    client: &Client<ZkSession>,
    queued: &mut [Queued],
    in_doubt: &[(usize, TaskToken)],
) {
    if in_doubt.is_empty() {
        return;
    }
    let tokens: BTreeSet<TaskToken> = in_doubt.iter().map(|&(_, token)| token).collect();
    match client.find_submissions(&tokens).await {
        Ok(mut found) => {
            for &(index, token) in in_doubt {
                if let Some(task) = found.remove(&token) {
                    queued[index] = Queued::Task(task);
                }
            }
        }
        Err(error) => {
            for &(index, token) in in_doubt {
                queued[index] = Queued::Failed(ClientError::SubmitInDoubt {
                    token,
                    cause: Box::new(error.clone()),
                });
            }
        }
    }
}

/// Sends again, in order, the payloads no task carries. They are queued
/// behind the batch's others. A second session's end is not retried: the
/// payloads it leaves are reported.
async fn send_again(client: &Client<ZkSession>, payloads: &[&[u8]], queued: &mut [Queued]) {
    let again: Vec<usize> = (0..queued.len())
        .filter(|&index| matches!(queued[index], Queued::Again))
        .collect();
    if again.is_empty() {
        return;
    }
    let resent: Vec<&[u8]> = again.iter().map(|&index| payloads[index]).collect();
    let outcomes = client.submit_many(&resent, CREATES_IN_FLIGHT).await;
    for (index, outcome) in again.into_iter().zip(outcomes) {
        queued[index] = match outcome {
            Ok(task) => Queued::Task(task),
            Err(error) => Queued::Failed(error),
        };
    }
}
