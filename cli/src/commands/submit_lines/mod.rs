//! `submit --lines`: many payloads, one per line, queued in order with many
//! creates in flight.

mod lines;
mod printer;
mod queue;
mod report;
#[cfg(test)]
mod tests;

use std::cell::Cell;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zkdist_coord::retry::until_known;
use zkdist_coord::zk::ZkSession;
use zkdist_coord::{Client, ClientError};

use self::lines::checked_lines;
use self::printer::Printer;
use self::queue::queue_all;
use self::report::report;
use super::Outcome;
use super::submit::{missing_runners_soon, settle_ended_session};
use crate::args::SubmitArgs;
use crate::connect;
use crate::shutdown::{self, Shutdown};
use crate::stdout::{errln, out};

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
