//! `submit --lines`: many payloads, one per line, queued in order with many
//! creates in flight.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::future::Future;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zkdist_coord::retry::until_known;
use zkdist_coord::{
    Client, ClientError, Coordinator, Layout, TaskId, TaskPayload, TaskToken, validate_data,
};

use super::Outcome;
use super::submit::{is_session_end, missing_runners_soon, settle_ended_session};
use crate::args::SubmitArgs;
use crate::handlers::HandlerError;
use crate::shutdown::{self, Shutdown};
use crate::stdout::{errln, out};
use crate::{connect, handlers};
use zkdist_coord::zk::ZkSession;

/// How many creates are in flight at once: enough to hide the round trip
/// (a server answers thousands of creates a second), few enough that the
/// lookup after a session's end has little to resolve.
const CREATES_IN_FLIGHT: usize = 256;

/// How many payloads go to the server between two updates of the progress
/// bar: each batch waits for its last create, which costs one round trip
/// per this many tasks.
const BATCH_TASKS: usize = 10_000;

/// How many failed or refused lines an error names before it only counts
/// the rest; lines in doubt are named however many there are (see `report`).
const NAMED_LINES: usize = 20;

/// One payload and the line of the input it came from (1-based).
struct Line<'a> {
    number: usize,
    payload: &'a [u8],
}

/// Where one payload stands.
#[derive(Debug)]
pub(crate) enum Queued {
    Task(TaskId),
    /// Its create was sent but unanswered when its session ended: it may
    /// or may not have made a task, which a new session can look up.
    Unanswered {
        token: TaskToken,
        cause: ClientError,
    },
    /// Not sent: its session had ended. Nothing was created for it.
    Unsent(ClientError),
    /// Not queued, or (a [`ClientError::SubmitInDoubt`]) perhaps queued
    /// without anyone being able to tell.
    Failed(ClientError),
    /// Not sent: SIGINT, SIGTERM or SIGHUP came first.
    Interrupted,
}

impl Queued {
    fn awaits_new_session(&self) -> bool {
        matches!(self, Queued::Unanswered { .. } | Queued::Unsent(_))
    }
}

/// Where every payload stands, and what a session's end cost.
#[derive(Debug)]
pub(crate) struct Queue {
    /// One entry per payload, in order; none awaits a new session.
    pub queued: Vec<Queued>,
    /// Payloads whose create was unanswered when the session ended, and
    /// which the lookup on the new session found queued.
    pub found_after_end: usize,
    /// Payloads sent again on the new session.
    pub sent_again: usize,
}

pub async fn submit_lines(args: &SubmitArgs, input: &[u8]) -> anyhow::Result<Outcome> {
    let layout = connect::layout(&args.connect)?;
    let lines = checked_lines(input, &layout, args.no_check)?;
    let payloads: Vec<&[u8]> = lines.iter().map(|line| line.payload).collect();

    // SIGINT, SIGTERM or SIGHUP stops the sending between two batches, and
    // every payload is still accounted for: the ids of those queued, `-`
    // for the others. While connecting, nothing was sent: every line is
    // `-`.
    let stop = Shutdown::install()?.shared();
    let Some(connected) = stop.unless_requested(connect::session(&args.connect)).await else {
        out!("{}", "-\n".repeat(payloads.len()))
            .context("interrupted while connecting, and cannot print the `-` lines")?;
        bail!(
            "interrupted while connecting: none of the {} tasks was submitted (printed as -)",
            payloads.len()
        );
    };
    let (zk, events) = connected?;
    // Standard output failing stops the sending too: the ids of what is
    // queued after it could only be named in the error.
    let stdout_failed = Cell::new(false);
    let interrupted = || stop.is_requested();
    // The layout first, once: a root refused here (one inside another
    // deployment, say) is one error, not one per line after a look for
    // runners under it. A session that ends meanwhile is left to the
    // creates, which go on with a new one.
    let laid_out = stop
        .unless_requested(until_known(|| layout.ensure_layout(&zk)))
        .await;
    let refusal = match laid_out {
        None => Some(anyhow::anyhow!(
            "interrupted while laying out {}: none of the {} tasks was submitted (printed as -)",
            layout.root(),
            payloads.len()
        )),
        Some(Err(error)) if !error.is_transient() => Some(
            anyhow::Error::new(ClientError::from(error)).context(format!(
                "none of the {} tasks was submitted (printed as -)",
                payloads.len()
            )),
        ),
        Some(_) => None,
    };
    if let Some(refusal) = refusal {
        out!("{}", "-\n".repeat(payloads.len()))
            .context("nothing was submitted, and the `-` lines cannot be printed")?;
        return Err(refusal);
    }
    let client = Client::new(zk, events, layout.clone());
    // Tasks queued under a mistyped root (which was just laid out) or for
    // a deployment that is down are said at once, as a plain submit says
    // it of its task.
    if let Some(missing) = missing_runners_soon(client.session(), &layout).await {
        errln!(
            "zkdist: {missing} under {}; the tasks queued there run once they start",
            layout.root()
        );
    }
    // Hidden when stderr is not a terminal.
    let bar =
        ProgressBar::with_draw_target(Some(payloads.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} tasks ({per_sec})")
            .context("the progress bar's template")?
            .progress_chars("=> "),
    );
    let reconnect = |ended: ZkSession| {
        let (stop, layout) = (&stop, &layout);
        async move {
            let connected = stop
                .unless_requested(async {
                    settle_ended_session(&ended).await?;
                    connect::session(&args.connect).await
                })
                .await
                .context("interrupted while opening a new session")?;
            let (zk, events) = connected?;
            Ok(Client::new(zk, events, layout.clone()))
        }
    };
    // The ids are printed as their batches settle, not all at the end: a
    // process killed midway (SIGKILL, the machine going down) has printed
    // the ids of everything queued up to its last batch.
    let mut printer = Printer::default();
    let queue = queue_all(
        client,
        &payloads,
        reconnect,
        &interrupted,
        &|| stdout_failed.get(),
        &bar,
        &mut |queued| {
            let text = printer.newly_settled(queued);
            bar.suspend(|| printer.print(&text));
            stdout_failed.set(printer.failed.is_some());
        },
    )
    .await;
    bar.finish_and_clear();
    let find = args.connect.command_line("find TOKEN");
    let outcome = report(&lines, &queue.queued, printer, stop.is_requested(), &find)?;
    // Should the process still end by a signal (see `main`), whoever sees
    // it could take the run for one cut short and submit it again.
    shutdown::say_if_ended_by_signal(format!(
        "all {} tasks were queued before the signal came (their ids are printed); submitting \
         the lines again would queue them twice",
        lines.len()
    ));
    Ok(outcome)
}

/// Prints the ids of a run's payloads in order, as they settle: each line
/// once, and none before every line above it.
#[derive(Default)]
struct Printer {
    /// How many payloads' lines were printed (or, after a failed write,
    /// passed over).
    printed: usize,
    /// The first payload of the lines the last call to `newly_settled`
    /// gave.
    chunk_start: usize,
    /// The first write to standard output that failed: nothing more is
    /// printed after it.
    failed: Option<anyhow::Error>,
    /// The first payload whose line may be missing from standard output:
    /// the first of the lines whose write failed (a failed write may have
    /// written part of them).
    unprinted_from: Option<usize>,
}

impl Printer {
    /// The lines of the payloads settled since the last call, each up to
    /// the first still unsettled (its create unanswered, or unsent, when
    /// its session ended); marks them printed.
    fn newly_settled(&mut self, queued: &[Queued]) -> String {
        self.chunk_start = self.printed;
        let mut text = String::new();
        for entry in &queued[self.printed..] {
            let Some(printed) = printed_as(entry) else {
                break;
            };
            writeln!(text, "{printed}").expect("writing to a String cannot fail");
            self.printed += 1;
        }
        text
    }

    fn print(&mut self, text: &str) {
        self.print_with(text, |text| out!("{text}"));
    }

    /// [`Printer::print`], writing with `write`.
    fn print_with(&mut self, text: &str, write: impl FnOnce(&str) -> anyhow::Result<()>) {
        if text.is_empty() || self.failed.is_some() {
            return;
        }
        if let Err(error) = write(text) {
            self.failed = Some(error);
            self.unprinted_from = Some(self.chunk_start);
        }
    }
}

/// What a payload's line reads once it is settled: its task id, `?` if it
/// may or may not have been queued, `-` if it was not. `None` while it
/// awaits a new session.
fn printed_as(queued: &Queued) -> Option<&str> {
    match queued {
        Queued::Task(task) => Some(task.as_str()),
        Queued::Failed(ClientError::SubmitInDoubt { .. }) => Some("?"),
        Queued::Failed(_) | Queued::Interrupted => Some("-"),
        Queued::Unanswered { .. } | Queued::Unsent(_) => None,
    }
}

/// Queues every payload, in order, in batches on one session; if that
/// session ends, goes on with a new one from `reconnect`, which is given
/// the ended session to make sure the server ended it too: the creates left
/// unanswered are looked up, and those that made no task are sent again
/// with the ones never sent, behind everything queued before. A second
/// session's end is not followed by a third: what it leaves is reported.
///
/// `settled` is shown where every payload stands after each batch, and
/// after the lookup on a new session (a payload is settled unless it
/// awaits a new session). Nothing more is sent once `interrupted` (a stop
/// signal) or `output_failed` (standard output) says so; after a stop
/// signal no new session is opened either, while after a failed output
/// one still settles the creates the ended session left unanswered.
pub(crate) async fn queue_all<C, R, F>(
    client: Client<C>,
    payloads: &[&[u8]],
    reconnect: R,
    interrupted: &dyn Fn() -> bool,
    output_failed: &dyn Fn() -> bool,
    bar: &ProgressBar,
    settled: &mut dyn FnMut(&[Queued]),
) -> Queue
where
    C: Coordinator,
    R: FnOnce(C) -> F,
    F: Future<Output = anyhow::Result<Client<C>>>,
{
    let stop_sending = || interrupted() || output_failed();
    let mut queue = Queue {
        queued: send_batches(&client, payloads, &stop_sending, bar, settled).await,
        found_after_end: 0,
        sent_again: 0,
    };
    client.session().close().await.ok();
    let queued = &mut queue.queued;
    if !queued.iter().any(Queued::awaits_new_session) {
        return queue;
    }
    let unanswered = queued
        .iter()
        .filter(|q| matches!(q, Queued::Unanswered { .. }))
        .count();
    let unsent = queued
        .iter()
        .filter(|q| matches!(q, Queued::Unsent(_)))
        .count();
    bar.suspend(|| {
        tracing::warn!(
            unanswered,
            unsent,
            "the session ended while submitting; looking up the unanswered creates on a new session and sending again what made no task"
        )
    });
    if interrupted() {
        give_up_on_new_session(queued, true);
        return queue;
    }
    match reconnect(client.into_parts().0).await {
        Ok(client) => {
            queue.found_after_end = look_up_unanswered(&client, queued).await;
            settled(queued);
            queue.sent_again = send_again(&client, payloads, queued, &stop_sending, settled).await;
            client.session().close().await.ok();
            bar.suspend(|| {
                tracing::warn!(
                    found = queue.found_after_end,
                    sent_again = queue.sent_again,
                    "on the new session"
                )
            });
        }
        Err(error) => {
            bar.suspend(|| tracing::warn!("cannot open a new session: {error:#}"));
            give_up_on_new_session(queued, stop_sending());
        }
    }
    debug_assert!(!queue.queued.iter().any(Queued::awaits_new_session));
    queue
}

/// Sends the payloads in batches of [`BATCH_TASKS`], one after another on
/// one session, so that they are queued in order; stops at the first
/// batch in which the session ended, leaving the rest unsent, and before
/// the first batch after `interrupted` says so, leaving the rest
/// interrupted.
async fn send_batches<C: Coordinator>(
    client: &Client<C>,
    payloads: &[&[u8]],
    interrupted: &dyn Fn() -> bool,
    bar: &ProgressBar,
    settled: &mut dyn FnMut(&[Queued]),
) -> Vec<Queued> {
    let mut queued: Vec<Queued> = Vec::with_capacity(payloads.len());
    for batch in payloads.chunks(BATCH_TASKS) {
        if interrupted() {
            queued.resize_with(payloads.len(), || Queued::Interrupted);
            break;
        }
        let first = queued.len();
        for outcome in client.submit_many(batch, CREATES_IN_FLIGHT).await {
            queued.push(match outcome {
                Ok(task) => Queued::Task(task),
                Err(ClientError::SubmitInDoubt { token, cause }) if is_session_end(&cause) => {
                    Queued::Unanswered {
                        token,
                        cause: *cause,
                    }
                }
                Err(ClientError::Zk(error)) if error.is_session_fatal() => {
                    Queued::Unsent(ClientError::Zk(error))
                }
                Err(error) => Queued::Failed(error),
            });
        }
        bar.inc(batch.len() as u64);
        settled(&queued);
        if let Some(ending) = queued[first..].iter().find_map(session_ending).cloned() {
            queued.resize_with(payloads.len(), || Queued::Unsent(ending.clone()));
            break;
        }
    }
    queued
}

/// The error that ended the session, if this payload met it.
fn session_ending(queued: &Queued) -> Option<&ClientError> {
    match queued {
        Queued::Unanswered { cause, .. } | Queued::Unsent(cause) => Some(cause),
        Queued::Task(_) | Queued::Failed(_) | Queued::Interrupted => None,
    }
}

/// Looks up, on a new session, the payloads whose create was unanswered
/// when the old session ended: those a task carries are queued; the others
/// become unsent (the old session can apply nothing any more). A lookup
/// that fails leaves them in doubt. Returns how many were found.
async fn look_up_unanswered<C: Coordinator>(client: &Client<C>, queued: &mut [Queued]) -> usize {
    let tokens: BTreeSet<TaskToken> = queued
        .iter()
        .filter_map(|q| match q {
            Queued::Unanswered { token, .. } => Some(*token),
            _ => None,
        })
        .collect();
    if tokens.is_empty() {
        return 0;
    }
    let found = client.find_submissions(&tokens).await;
    let mut found_count = 0;
    for entry in queued.iter_mut() {
        let Queued::Unanswered { token, cause } = entry else {
            continue;
        };
        *entry = match &found {
            Ok(found) => match found.get(token) {
                Some(task) => {
                    found_count += 1;
                    Queued::Task(task.clone())
                }
                None => Queued::Unsent(cause.clone()),
            },
            Err(error) => Queued::Failed(ClientError::SubmitInDoubt {
                token: *token,
                cause: Box::new(error.clone()),
            }),
        };
    }
    found_count
}

/// Sends again, in order and in batches of [`BATCH_TASKS`], the payloads no
/// task carries, stopping before the first batch after `interrupted` says
/// so, or after the batch in which this session too ended (the rest were
/// not queued: a create issued on an ended session is not sent, but would
/// read as in doubt); returns how many were sent.
async fn send_again<C: Coordinator>(
    client: &Client<C>,
    payloads: &[&[u8]],
    queued: &mut [Queued],
    interrupted: &dyn Fn() -> bool,
    settled: &mut dyn FnMut(&[Queued]),
) -> usize {
    let again: Vec<usize> = (0..queued.len())
        .filter(|&index| matches!(queued[index], Queued::Unsent(_)))
        .collect();
    let mut sent = 0;
    let mut ended: Option<ClientError> = None;
    for batch in again.chunks(BATCH_TASKS) {
        if let Some(ended) = &ended {
            for &index in batch {
                queued[index] = Queued::Failed(ended.clone());
            }
            continue;
        }
        if interrupted() {
            for &index in batch {
                queued[index] = Queued::Interrupted;
            }
            continue;
        }
        let resent: Vec<&[u8]> = batch.iter().map(|&index| payloads[index]).collect();
        let outcomes = client.submit_many(&resent, CREATES_IN_FLIGHT).await;
        for (&index, outcome) in batch.iter().zip(outcomes) {
            if ended.is_none() {
                ended = session_end_met(&outcome).cloned();
            }
            // Not sent: the session had ended (see `submit_many`).
            if !matches!(&outcome, Err(error) if is_session_end(error)) {
                sent += 1;
            }
            queued[index] = match outcome {
                Ok(task) => Queued::Task(task),
                Err(error) => Queued::Failed(error),
            };
        }
        settled(queued);
    }
    sent
}

/// The session's end, if a payload's outcome met it: its create was
/// unanswered when the session ended, or never sent because it had.
fn session_end_met(outcome: &Result<TaskId, ClientError>) -> Option<&ClientError> {
    match outcome {
        Err(ClientError::SubmitInDoubt { cause, .. }) if is_session_end(cause) => Some(cause),
        Err(error) if is_session_end(error) => Some(error),
        _ => None,
    }
}

/// No new session (none could be opened, or `interrupted` came first):
/// the unanswered payloads stay in doubt, the unsent ones were not queued.
fn give_up_on_new_session(queued: &mut [Queued], interrupted: bool) {
    for entry in queued.iter_mut() {
        *entry = match entry {
            Queued::Unanswered { token, cause } => Queued::Failed(ClientError::SubmitInDoubt {
                token: *token,
                cause: Box::new(cause.clone()),
            }),
            Queued::Unsent(_) if interrupted => Queued::Interrupted,
            Queued::Unsent(cause) => Queued::Failed(cause.clone()),
            Queued::Task(_) | Queued::Failed(_) | Queued::Interrupted => continue,
        };
    }
}

/// Prints the lines `printer` has not printed yet (one per payload, in
/// order: its task id, `?` if it may or may not have been queued, `-` if
/// it was not); then fails naming the lines of the last two kinds, if any.
/// `find` is the command line that looks a token up (in backquotes).
fn report(
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

/// Every payload line of `input`, checked as a single submit checks its
/// payload (a JSON object with a `kind`, within the size limit, and, unless
/// `no_check`, valid for its built-in kind); blank lines are skipped. If
/// any line is refused, the error names each (up to [`NAMED_LINES`]) and
/// nothing is returned to send.
fn checked_lines<'a>(
    input: &'a [u8],
    layout: &Layout,
    no_check: bool,
) -> anyhow::Result<Vec<Line<'a>>> {
    let mut lines = Vec::new();
    let mut refused = Vec::new();
    let mut unknown_kinds = false;
    for (index, text) in input.split(|&byte| byte == b'\n').enumerate() {
        let payload = text.strip_suffix(b"\r").unwrap_or(text);
        if payload.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let number = index + 1;
        match check_payload(payload, layout, no_check) {
            Ok(()) => lines.push(Line { number, payload }),
            Err(error) => {
                unknown_kinds |= matches!(
                    error.downcast_ref::<HandlerError>(),
                    Some(HandlerError::UnknownKind(_))
                );
                refused.push((number, format!("{error:#}")));
            }
        }
    }
    if !refused.is_empty() {
        let mut message = format!(
            "{} of {} payload lines refused, so none was submitted",
            refused.len(),
            refused.len() + lines.len()
        );
        if unknown_kinds {
            message.push_str(" (pass --no-check to submit kinds this binary does not know)");
        }
        message.push(':');
        name_lines(
            &mut message,
            refused
                .into_iter()
                .map(|(number, reason)| (number, reason, false)),
        );
        bail!(message);
    }
    if lines.is_empty() {
        bail!("no task to submit: the input holds no payload line");
    }
    Ok(lines)
}

/// What `Client::submit_many` would refuse, and with `no_check` unset what
/// this binary's handlers would.
fn check_payload(payload: &[u8], layout: &Layout, no_check: bool) -> anyhow::Result<()> {
    validate_data(&layout.task_prefix(), payload)?;
    TaskPayload::decode(payload)?;
    if !no_check {
        handlers::validate(payload)?;
    }
    Ok(())
}

/// Appends `line N: reason` for each of `lines` (line number, reason, and
/// whether it must be named), in order: every line that must be named, and
/// the others up to [`NAMED_LINES`] in all; then how many were left out.
fn name_lines(message: &mut String, lines: impl Iterator<Item = (usize, String, bool)>) {
    let mut named = 0;
    let mut left_out = 0;
    for (number, reason, must_name) in lines {
        if must_name || named < NAMED_LINES {
            named += 1;
            write!(message, "\n  line {number}: {reason}")
                .expect("writing to a String cannot fail");
        } else {
            left_out += 1;
        }
    }
    if left_out > 0 {
        write!(message, "\n  and {left_out} more").expect("writing to a String cannot fail");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use zkdist_coord::{SessionId, TaskPayload, Watch};
    use zkdist_sim::{Latency, SimConfig, SimZk};

    use super::*;

    /// What the report names as the command that looks a token up.
    const FIND: &str = "`zkdist find TOKEN`";

    /// A simulation whose submitter's link can be cut midway: 1 ms links
    /// and a 2 s session timeout.
    fn cut_midway_sim() -> SimZk {
        SimZk::start(SimConfig {
            seed: 11,
            latency: Latency::Fixed { ms: 1 },
            session_timeout_ms: 2_000,
            ..SimConfig::default()
        })
    }

    /// `count` payloads of the `echo` kind, numbered.
    fn echo_payloads(count: u64) -> Vec<Vec<u8>> {
        (0..count)
            .map(|n| TaskPayload::new("echo").with("n", n).encode().unwrap())
            .collect()
    }

    /// Asserts that `tasks/` holds the `queued` tasks and at most the
    /// `in_doubt` ones besides: every task made is reported, as queued or
    /// in doubt.
    async fn assert_every_task_made_is_reported(
        sim: &SimZk,
        layout: &Layout,
        queued: usize,
        in_doubt: usize,
    ) {
        let (reader, _events) = sim.connect("reader").await.unwrap();
        let (names, _) = reader
            .get_children(&layout.tasks_dir(), Watch::No)
            .await
            .unwrap();
        assert!(
            (queued..=queued + in_doubt).contains(&names.len()),
            "{} tasks for {queued} queued and {in_doubt} in doubt",
            names.len()
        );
    }

    /// Cuts `session`'s link some 30 round trips in (a few thousand creates
    /// queued), for longer than its timeout. The flag is set once it is cut.
    fn cut_midway(
        sim: &SimZk,
        session: SessionId,
    ) -> (tokio::task::JoinHandle<()>, Arc<AtomicBool>) {
        let cut = Arc::new(AtomicBool::new(false));
        let cutting = {
            let (sim, cut) = (sim.clone(), Arc::clone(&cut));
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(61)).await;
                sim.cut(session, Duration::from_secs(3)).await;
                cut.store(true, Ordering::SeqCst);
            })
        };
        (cutting, cut)
    }

    /// The session's link is cut in the middle of the batch for longer than
    /// its timeout: a seeded prefix of the creates in flight was applied and
    /// never answered, the rest never arrived, and the batches after were
    /// never sent. On the new session every payload ends up queued exactly
    /// once, in order.
    #[test]
    fn a_session_ending_midway_loses_no_payload_and_queues_none_twice() {
        zkdist_sim::runtime::block_on(11, async {
            let sim = cut_midway_sim();
            let layout = Layout::default();
            let (zk, events) = sim.connect("submitter").await.unwrap();
            let session = zk.session_id();
            let client = Client::new(zk, events, layout.clone());
            let payloads = echo_payloads(BATCH_TASKS as u64 + 2_000);
            let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            let (cutting, _) = cut_midway(&sim, session);
            let reconnect = |ended: zkdist_sim::SimSession| {
                let (sim, layout) = (&sim, &layout);
                async move {
                    assert_eq!(ended.session_id(), session, "given the ended session");
                    let (zk, events) = sim.connect("resumer").await?;
                    Ok(Client::new(zk, events, layout.clone()))
                }
            };
            let mut printer = Printer::default();
            let mut released: Vec<String> = Vec::new();
            let queue = queue_all(
                client,
                &payloads,
                reconnect,
                &|| false,
                &|| false,
                &ProgressBar::hidden(),
                &mut |queued| released.push(printer.newly_settled(queued)),
            )
            .await;
            cutting.await.unwrap();
            // What the cut batch settled was released before the new
            // session, up to the first create left unanswered; the rest as
            // the new session settled it, none left for the report.
            let before_new_session = released[0].lines().count();
            assert!(
                before_new_session > 0 && before_new_session < payloads.len(),
                "{before_new_session} of {} lines released before the new session",
                payloads.len()
            );
            assert_eq!(printer.newly_settled(&queue.queued), "");
            let streamed: Vec<&str> = released.iter().flat_map(|text| text.lines()).collect();
            assert_eq!(streamed.len(), payloads.len());

            assert!(
                queue.found_after_end > 0,
                "no create was applied unanswered ({} sent again)",
                queue.sent_again
            );
            assert!(
                queue.sent_again >= payloads.len() - BATCH_TASKS,
                "the batch never started went on the new session: {}",
                queue.sent_again
            );
            let tasks: Vec<TaskId> = queue
                .queued
                .iter()
                .map(|queued| match queued {
                    Queued::Task(task) => task.clone(),
                    other => panic!("not queued: {other:?}"),
                })
                .collect();
            assert!(
                tasks.windows(2).all(|pair| pair[0] < pair[1]),
                "queued in the payloads' order"
            );
            for (line, task) in streamed.iter().zip(&tasks) {
                assert_eq!(*line, task.as_str(), "a released line is final");
            }
            let (reader, _events) = sim.connect("reader").await.unwrap();
            let (mut names, _) = reader
                .get_children(&layout.tasks_dir(), Watch::No)
                .await
                .unwrap();
            names.sort();
            let mut expected: Vec<String> = tasks.iter().map(|t| t.as_str().to_owned()).collect();
            expected.sort();
            assert_eq!(names, expected, "exactly one task per payload");
            for (task, payload) in tasks.iter().zip(&payloads) {
                let (data, _) = reader
                    .get_data(&layout.task(task), Watch::No)
                    .await
                    .unwrap();
                assert_eq!(data, *payload, "{task}");
            }
        });
    }

    /// Without faults, each batch's ids are released as soon as it is
    /// queued, not all at the end.
    #[test]
    fn every_line_in_doubt_is_named_with_its_token_however_many() {
        // More lines in doubt than the limit on named lines, behind more
        // lines not queued than it: each `?` line's token must reach the
        // message, for it is the only way to look its task up.
        let in_doubt = NAMED_LINES + 5;
        let not_queued = NAMED_LINES + 3;
        let payload: &[u8] = b"{}";
        let lines: Vec<Line<'_>> = (1..=not_queued + in_doubt)
            .map(|number| Line { number, payload })
            .collect();
        let ended = || ClientError::Zk(zkdist_coord::ZkError::SessionExpired);
        let tokens: Vec<TaskToken> = (0..in_doubt as u64)
            .map(|submission| TaskToken::for_submission(SessionId(7), submission))
            .collect();
        let queued: Vec<Queued> = (0..not_queued)
            .map(|_| Queued::Failed(ended()))
            .chain(tokens.iter().map(|&token| {
                Queued::Failed(ClientError::SubmitInDoubt {
                    token,
                    cause: Box::new(ended()),
                })
            }))
            .collect();
        let error =
            report(&lines, &queued, Printer::default(), false, FIND).expect_err("lines failed");
        let message = format!("{error:#}");
        for (index, token) in tokens.iter().enumerate() {
            let number = not_queued + index + 1;
            assert!(
                message.contains(&format!("line {number}: submission {token} is in doubt")),
                "line {number} (token {token}) is not named in: {message}"
            );
        }
        // The lines not queued are named up to the limit, with the lines
        // in doubt counting towards it, and the rest counted.
        assert!(message.contains("line 1: "), "{message}");
        assert!(!message.contains(&format!("line {}: ", NAMED_LINES + 1)));
        assert!(
            message.contains(&format!("and {} more", not_queued - NAMED_LINES)),
            "{message}"
        );
        // The first failure, which the chain prints last, says whose it is
        // rather than following "and N more" as if it were theirs.
        assert!(
            message.ends_with(&format!(
                "and {} more\nthe first failure, line 1: session expired",
                not_queued - NAMED_LINES
            )),
            "{message}"
        );
    }

    #[test]
    fn lines_in_doubt_are_named_when_standard_output_failed_too() {
        let payload: &[u8] = b"{}";
        let lines: Vec<Line<'_>> = (1..=2).map(|number| Line { number, payload }).collect();
        let token = TaskToken::for_submission(SessionId(7), 1);
        let queued = vec![
            Queued::Task(TaskId::parse("task-0000000000000001-0000000000").unwrap()),
            Queued::Failed(ClientError::SubmitInDoubt {
                token,
                cause: Box::new(ClientError::Zk(zkdist_coord::ZkError::SessionExpired)),
            }),
        ];
        let broken = Printer {
            failed: Some(anyhow::anyhow!("broken pipe")),
            unprinted_from: Some(0),
            ..Printer::default()
        };
        let error = report(&lines, &queued, broken, false, FIND).expect_err("stdout failed");
        let message = format!("{error:#}");
        assert!(
            message.contains(
                "1 of 2 tasks were queued, but standard output failed (broken pipe): the ids of \
                 1 of them may be missing there, each named below"
            ),
            "{message}"
        );
        assert!(
            message.contains("line 1: queued as task-0000000000000001-0000000000"),
            "{message}"
        );
        assert!(
            message.contains(&format!("line 2: submission {token} is in doubt")),
            "{message}"
        );
    }

    /// The write of the second batch's lines fails: the lines from that
    /// batch's first on may be missing, whatever is printed after.
    #[test]
    fn the_lines_from_the_first_failed_write_on_count_as_unprinted() {
        let task = |n: u64| {
            Queued::Task(TaskId::parse(&format!("task-0000000000000001-{n:010}")).unwrap())
        };
        let mut queued = vec![task(0), task(1)];
        let mut printer = Printer::default();
        let mut written = String::new();
        let text = printer.newly_settled(&queued);
        printer.print_with(&text, |text| {
            written.push_str(text);
            Ok(())
        });
        queued.extend([task(2), task(3)]);
        let text = printer.newly_settled(&queued);
        printer.print_with(&text, |_| Err(anyhow::anyhow!("broken pipe")));
        queued.push(task(4));
        let text = printer.newly_settled(&queued);
        printer.print_with(&text, |_| panic!("nothing is written after a failed write"));
        assert_eq!(written.lines().count(), 2);
        assert_eq!(printer.unprinted_from, Some(2));
        assert_eq!(printer.printed, 5);

        let payload: &[u8] = b"{}";
        let lines: Vec<Line<'_>> = (1..=5).map(|number| Line { number, payload }).collect();
        let message = format!(
            "{:#}",
            report(&lines, &queued, printer, false, FIND).expect_err("stdout failed")
        );
        assert!(
            message.contains("the ids of 3 of them may be missing"),
            "{message}"
        );
        for n in 2..=4 {
            assert!(
                message.contains(&format!(
                    "line {}: queued as task-0000000000000001-{n:010}",
                    n + 1
                )),
                "{message}"
            );
        }
        for n in 0..2 {
            assert!(
                !message.contains(&format!("queued as task-0000000000000001-{n:010}")),
                "a printed id is not named again: {message}"
            );
        }
    }

    /// Standard output failed on the second line: the first id reached
    /// it and is not repeated; the second is named with its line, and the
    /// payload the sending then left out is counted as not sent.
    #[test]
    fn the_ids_standard_output_may_have_lost_are_named() {
        let payload: &[u8] = b"{}";
        let lines: Vec<Line<'_>> = (1..=3).map(|number| Line { number, payload }).collect();
        let first = TaskId::parse("task-0000000000000001-0000000000").unwrap();
        let second = TaskId::parse("task-0000000000000001-0000000001").unwrap();
        let queued = vec![
            Queued::Task(first.clone()),
            Queued::Task(second.clone()),
            Queued::Interrupted,
        ];
        let broken = Printer {
            printed: 2,
            failed: Some(anyhow::anyhow!("broken pipe")),
            unprinted_from: Some(1),
            ..Printer::default()
        };
        let error = report(&lines, &queued, broken, false, FIND).expect_err("stdout failed");
        let message = format!("{error:#}");
        assert!(
            message.contains(&format!("line 2: queued as {second}")),
            "{message}"
        );
        assert!(!message.contains(first.as_str()), "{message}");
        assert!(
            message.contains(
                "1 of 3 tasks were not sent: the sending stopped when standard output failed"
            ),
            "{message}"
        );
    }

    #[test]
    fn ids_are_released_batch_by_batch() {
        zkdist_sim::runtime::block_on(13, async {
            let sim = SimZk::start(SimConfig {
                seed: 13,
                ..SimConfig::default()
            });
            let layout = Layout::default();
            let (zk, events) = sim.connect("submitter").await.unwrap();
            let client = Client::new(zk, events, layout.clone());
            let payloads = echo_payloads(2 * BATCH_TASKS as u64 + 5);
            let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            let mut printer = Printer::default();
            let mut released = Vec::new();
            let queue = queue_all(
                client,
                &payloads,
                |_| async { unreachable!("the session does not end") },
                &|| false,
                &|| false,
                &ProgressBar::hidden(),
                &mut |queued| released.push(printer.newly_settled(queued)),
            )
            .await;
            let counts: Vec<usize> = released.iter().map(|text| text.lines().count()).collect();
            assert_eq!(counts, [BATCH_TASKS, BATCH_TASKS, 5]);
            assert_eq!(printer.newly_settled(&queue.queued), "", "nothing left");
            let ids: Vec<&str> = released.iter().flat_map(|text| text.lines()).collect();
            let tasks: Vec<&str> = queue
                .queued
                .iter()
                .map(|queued| printed_as(queued).expect("settled"))
                .collect();
            assert_eq!(ids, tasks);
        });
    }

    /// An interruption stops the sending before the next batch: the batch
    /// in hand is queued whole, nothing after it is sent, and every payload
    /// is accounted for.
    #[test]
    fn an_interruption_stops_before_the_next_batch_and_loses_track_of_nothing() {
        zkdist_sim::runtime::block_on(12, async {
            let sim = SimZk::start(SimConfig {
                seed: 12,
                ..SimConfig::default()
            });
            let layout = Layout::default();
            let (zk, events) = sim.connect("submitter").await.unwrap();
            let client = Client::new(zk, events, layout.clone());
            let payloads = echo_payloads(BATCH_TASKS as u64 + 5);
            let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            // Asked once the first batch is under way.
            let asked = std::cell::Cell::new(0);
            let interrupted = || {
                asked.set(asked.get() + 1);
                asked.get() > 1
            };
            let no_new_session = |_| async { anyhow::bail!("not needed") };
            let queue = queue_all(
                client,
                &payloads,
                no_new_session,
                &interrupted,
                &|| false,
                &ProgressBar::hidden(),
                &mut |_| {},
            )
            .await;
            let (queued, interrupted): (Vec<_>, Vec<_>) = queue
                .queued
                .iter()
                .partition(|queued| matches!(queued, Queued::Task(_)));
            assert_eq!((queued.len(), interrupted.len()), (BATCH_TASKS, 5));
            assert!(
                interrupted
                    .iter()
                    .all(|queued| matches!(queued, Queued::Interrupted))
            );
            assert!(
                queue.queued[..BATCH_TASKS]
                    .iter()
                    .all(|q| matches!(q, Queued::Task(_)))
            );
            let (reader, _events) = sim.connect("reader").await.unwrap();
            let (names, _) = reader
                .get_children(&layout.tasks_dir(), Watch::No)
                .await
                .unwrap();
            assert_eq!(names.len(), BATCH_TASKS, "nothing after the batch was sent");
            // The report (three lines of it: it prints one per payload).
            let lines: Vec<Line<'_>> = payloads[..3]
                .iter()
                .enumerate()
                .map(|(index, payload)| Line {
                    number: index + 1,
                    payload,
                })
                .collect();
            let first = match &queue.queued[0] {
                Queued::Task(task) => Queued::Task(task.clone()),
                other => panic!("{other:?}"),
            };
            let queued = [first, Queued::Interrupted, Queued::Interrupted];
            let error = report(&lines, &queued, Printer::default(), true, FIND).unwrap_err();
            assert_eq!(
                error.to_string(),
                "interrupted: 2 of 3 tasks were not sent (printed as -)"
            );
        });
    }

    /// Interrupted after its session ended midway: nothing is sent again,
    /// the unanswered creates stay in doubt (`?`, each with its token), and
    /// everything never sent is reported as interrupted.
    #[test]
    fn an_interruption_after_a_session_ended_sends_nothing_again() {
        zkdist_sim::runtime::block_on(11, async {
            let sim = cut_midway_sim();
            let layout = Layout::default();
            let (zk, events) = sim.connect("submitter").await.unwrap();
            let session = zk.session_id();
            let client = Client::new(zk, events, layout.clone());
            let payloads = echo_payloads(BATCH_TASKS as u64 + 2_000);
            let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            let (cutting, cut) = cut_midway(&sim, session);
            let interrupted = || cut.load(Ordering::SeqCst);
            let reconnect = |_| async { anyhow::bail!("interrupted: no new session") };
            let queue = queue_all(
                client,
                &payloads,
                reconnect,
                &interrupted,
                &|| false,
                &ProgressBar::hidden(),
                &mut |_| {},
            )
            .await;
            cutting.await.unwrap();
            assert_eq!((queue.found_after_end, queue.sent_again), (0, 0));
            let count =
                |wanted: fn(&Queued) -> bool| queue.queued.iter().filter(|q| wanted(q)).count();
            let queued = count(|q| matches!(q, Queued::Task(_)));
            let in_doubt =
                count(|q| matches!(q, Queued::Failed(ClientError::SubmitInDoubt { .. })));
            let interrupted = count(|q| matches!(q, Queued::Interrupted));
            assert_eq!(queued + in_doubt + interrupted, payloads.len());
            assert!(in_doubt > 0, "some creates were in flight at the cut");
            assert!(interrupted >= payloads.len() - BATCH_TASKS, "{interrupted}");
            // Tasks are only those answered, and those in doubt that the
            // server applied before the cut.
            assert_every_task_made_is_reported(&sim, &layout, queued, in_doubt).await;
        });
    }

    /// The new session ends too, in its first batch of payloads sent
    /// again: the batches after it are not sent on the ended session, so
    /// they read as not queued (`-`), not as in doubt (`?`), and only the
    /// creates in flight at that end are in doubt.
    #[test]
    fn a_second_session_end_sends_nothing_more_and_reports_no_false_doubt() {
        zkdist_sim::runtime::block_on(11, async {
            let sim = cut_midway_sim();
            let layout = Layout::default();
            let (zk, events) = sim.connect("submitter").await.unwrap();
            let session = zk.session_id();
            let client = Client::new(zk, events, layout.clone());
            let payloads = echo_payloads(3 * BATCH_TASKS as u64);
            let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            let (cutting, _) = cut_midway(&sim, session);
            let resumer_cut = std::sync::Mutex::new(None);
            let reconnect = |_| {
                let (sim, layout, resumer_cut) = (&sim, &layout, &resumer_cut);
                async move {
                    let (zk, events) = sim.connect("resumer").await?;
                    *resumer_cut.lock().unwrap() = Some(cut_midway(sim, zk.session_id()).0);
                    Ok(Client::new(zk, events, layout.clone()))
                }
            };
            let queue = queue_all(
                client,
                &payloads,
                reconnect,
                &|| false,
                &|| false,
                &ProgressBar::hidden(),
                &mut |_| {},
            )
            .await;
            cutting.await.unwrap();
            let resumer_cut = resumer_cut.lock().unwrap().take();
            resumer_cut
                .expect("a new session was opened")
                .await
                .unwrap();

            let count =
                |wanted: fn(&Queued) -> bool| queue.queued.iter().filter(|q| wanted(q)).count();
            let queued = count(|q| matches!(q, Queued::Task(_)));
            let in_doubt =
                count(|q| matches!(q, Queued::Failed(ClientError::SubmitInDoubt { .. })));
            let not_queued = count(|q| matches!(q, Queued::Failed(error) if is_session_end(error)));
            assert_eq!(queued + in_doubt + not_queued, payloads.len());
            assert!(
                (1..=CREATES_IN_FLIGHT).contains(&in_doubt),
                "{in_doubt} in doubt: only the creates in flight at the second end"
            );
            assert!(
                not_queued >= BATCH_TASKS,
                "the batches after the second end were not sent: {not_queued} not queued"
            );
            assert!(
                queue.sent_again < payloads.len() - queued - not_queued + BATCH_TASKS,
                "{} sent again",
                queue.sent_again
            );
            assert_every_task_made_is_reported(&sim, &layout, queued, in_doubt).await;
        });
    }
}
