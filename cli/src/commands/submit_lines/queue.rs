//! Queueing the payloads in order, in batches, on one session and, after
//! its end, on a new one that settles what the first left unanswered.

use std::collections::BTreeSet;
use std::future::Future;

use indicatif::ProgressBar;
use zkdist_coord::{Client, ClientError, Coordinator, TaskId, TaskToken};

use super::{BATCH_TASKS, CREATES_IN_FLIGHT};
use crate::commands::submit::is_session_end;

/// Where one payload stands.
#[derive(Debug)]
pub(super) enum Queued {
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
    pub(super) fn awaits_new_session(&self) -> bool {
        matches!(self, Queued::Unanswered { .. } | Queued::Unsent(_))
    }
}

/// Where every payload stands, and what a session's end cost.
#[derive(Debug)]
pub(super) struct Queue {
    /// One entry per payload, in order; none awaits a new session.
    pub queued: Vec<Queued>,
    /// Payloads whose create was unanswered when the session ended, and
    /// which the lookup on the new session found queued.
    pub found_after_end: usize,
    /// Payloads sent again on the new session.
    pub sent_again: usize,
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
pub(super) async fn queue_all<C, R, F>(
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
pub(super) async fn send_batches<C: Coordinator>(
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
        let outcomes = client.submit_many(batch, CREATES_IN_FLIGHT).await;
        queued.extend(outcomes.into_iter().map(queued_from));
        bar.inc(batch.len() as u64);
        settled(&queued);
        if let Some(ending) = queued[first..].iter().find_map(session_ending).cloned() {
            queued.resize_with(payloads.len(), || Queued::Unsent(ending.clone()));
            break;
        }
    }
    queued
}

/// Where a payload stands after its session's `submit_many`: one that met
/// the session's end awaits a new session (its create unanswered, or
/// never sent).
fn queued_from(outcome: Result<TaskId, ClientError>) -> Queued {
    match outcome {
        Ok(task) => Queued::Task(task),
        Err(ClientError::SubmitInDoubt { token, cause }) if is_session_end(&cause) => {
            Queued::Unanswered {
                token,
                cause: *cause,
            }
        }
        Err(error) if is_session_end(&error) => Queued::Unsent(error),
        Err(error) => Queued::Failed(error),
    }
}

/// The error that ended the session, if this payload met it.
pub(super) fn session_ending(queued: &Queued) -> Option<&ClientError> {
    match queued {
        Queued::Unanswered { cause, .. } | Queued::Unsent(cause) => Some(cause),
        Queued::Task(_) | Queued::Failed(_) | Queued::Interrupted => None,
    }
}

/// Looks up, on a new session, the payloads whose create was unanswered
/// when the old session ended: those a task carries are queued; the others
/// become unsent (the old session can apply nothing any more). A lookup
/// that fails leaves them in doubt. Returns how many were found.
pub(super) async fn look_up_unanswered<C: Coordinator>(
    client: &Client<C>,
    queued: &mut [Queued],
) -> usize {
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
pub(super) async fn send_again<C: Coordinator>(
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
    for batch in again.chunks(BATCH_TASKS) {
        if interrupted() {
            for &index in batch {
                queued[index] = Queued::Interrupted;
            }
            continue;
        }
        let resent: Vec<&[u8]> = batch.iter().map(|&index| payloads[index]).collect();
        let outcomes = client.submit_many(&resent, CREATES_IN_FLIGHT).await;
        for (&index, outcome) in batch.iter().zip(outcomes) {
            queued[index] = queued_from(outcome);
            // Not sent: the session had ended (see `submit_many`).
            if !matches!(queued[index], Queued::Unsent(_)) {
                sent += 1;
            }
        }
        let ended = batch
            .iter()
            .any(|&index| session_ending(&queued[index]).is_some());
        if ended {
            // No third session: this one's unanswered creates stay in
            // doubt, and what it did not send, here or in the batches
            // after, was not queued.
            give_up_on_new_session(queued, interrupted());
        }
        settled(queued);
        if ended {
            break;
        }
    }
    sent
}

/// No new session (none could be opened, or `interrupted` came first):
/// the unanswered payloads stay in doubt, the unsent ones were not queued.
pub(super) fn give_up_on_new_session(queued: &mut [Queued], interrupted: bool) {
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
