//! Queueing tasks: one, or many pipelined, and finding what a submission
//! whose outcome is unknown created.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;

use futures::stream::{FuturesOrdered, StreamExt};

use super::{Client, ClientError};
use crate::codec::TaskPayload;
use crate::error::ZkError;
use crate::names::{TaskId, TaskToken};
use crate::retry::until_known;
use crate::{Coordinator, CreateMode, path, validate_data};

impl<C: Coordinator> Client<C> {
    /// Queues a task: creates `tasks/task-<token>-NNNNNNNNNN` with `payload`
    /// as its data. The payload must be a JSON object with a string `kind`
    /// and fit in a node ([`crate::MAX_DATA_BYTES`]); both are checked before
    /// anything is sent. Creates the layout if it is missing.
    ///
    /// Never creates two tasks for one call: the token is chosen before the
    /// create, and when a create's outcome is unknown (connection loss) the
    /// client looks for its token ([`Client::find_submission`]) before
    /// creating again.
    ///
    /// When the outcome cannot be found out on this session, it returns
    /// [`ClientError::SubmitInDoubt`] with the token: the session ended with
    /// the create unanswered (or answered by the session's end, which a
    /// client may report for a request the server had applied), or the
    /// lookup failed. The caller resolves it with
    /// [`Client::find_submission`] on a new session; submitting again
    /// without looking could create the task twice.
    pub async fn submit(&self, payload: &[u8]) -> Result<TaskId, ClientError> {
        let submission = self.submissions_started.fetch_add(1, Ordering::Relaxed);
        let token = TaskToken::for_submission(self.zk.session_id(), submission);
        let prefix = self.layout.protected_task_prefix(token);
        validate_data(&prefix, payload).map_err(ClientError::PayloadTooLarge)?;
        TaskPayload::decode(payload).map_err(ClientError::InvalidPayload)?;
        let in_doubt = |cause: ClientError| ClientError::SubmitInDoubt {
            token,
            cause: Box::new(cause),
        };
        let mut layout_ensured = false;
        loop {
            match self
                .zk
                .create(&prefix, payload, CreateMode::PersistentSequential)
                .await
            {
                Ok(created) => {
                    let task = TaskId::parse(path::name(&created))?;
                    debug_assert_eq!(task.token(), Some(token), "created under our prefix");
                    return Ok(task);
                }
                // A missing parent: nothing was created.
                Err(ZkError::NoNode { .. }) if !layout_ensured => {
                    until_known(|| self.layout.ensure_layout(&self.zk)).await?;
                    layout_ensured = true;
                }
                Err(error) if error.is_outcome_unknown() => match self.find_submission(token).await
                {
                    Ok(Some(task)) => return Ok(task),
                    // Not applied: creating again cannot duplicate it.
                    Ok(None) => {}
                    Err(cause) => return Err(in_doubt(cause)),
                },
                Err(error) if error.session_end().is_some() => return Err(in_doubt(error.into())),
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Queues one task per payload, like [`Client::submit`] called for
    /// each, but with up to `window` creates in flight at once instead of a
    /// round trip each. Returns each payload's outcome, in the payloads'
    /// order: its task, or what [`Client::submit`] would have returned (a
    /// payload refused by the checks gets its error and nothing is sent for
    /// it; the others go out all the same).
    ///
    /// The creates are issued in the payloads' order, and one session's
    /// requests are applied in the order they were issued, so the tasks
    /// are queued (their sequence numbers, the master's FIFO order) in the
    /// payloads' order. That holds while no create fails: a create sent
    /// again after a connection loss or a missing layout is queued behind
    /// the batch's creates that were applied before it.
    ///
    /// The same idempotence as [`Client::submit`]: every payload has its
    /// own token, chosen before anything is sent. At the first create whose
    /// reply is not a task, no further create is issued; once those in
    /// flight are answered, one `sync` and one listing of `tasks/` tell
    /// which of the creates whose outcome is unknown were applied; the
    /// others are created again, in order. A payload whose outcome cannot
    /// be found out on this session gets [`ClientError::SubmitInDoubt`]
    /// with its token; one never sent because the session ended gets the
    /// session's error (nothing was created for it).
    pub async fn submit_many<P: AsRef<[u8]>>(
        &self,
        payloads: &[P],
        window: usize,
    ) -> Vec<Result<TaskId, ClientError>> {
        assert!(window >= 1, "at least one create in flight");
        let count = payloads.len() as u64;
        let first = self.submissions_started.fetch_add(count, Ordering::Relaxed);
        let session = self.zk.session_id();
        let token_of = |index: usize| TaskToken::for_submission(session, first + index as u64);
        let mut outcomes: Vec<Option<Result<TaskId, ClientError>>> = vec![None; payloads.len()];
        let prefixes: Vec<String> = (0..payloads.len())
            .map(|index| self.layout.protected_task_prefix(token_of(index)))
            .collect();
        // Indices still to create, in order.
        let mut pending: VecDeque<usize> = VecDeque::new();
        for ((index, payload), prefix) in payloads.iter().enumerate().zip(&prefixes) {
            let checked = validate_data(prefix, payload.as_ref())
                .map_err(ClientError::PayloadTooLarge)
                .and_then(|()| {
                    TaskPayload::decode(payload.as_ref()).map_err(ClientError::InvalidPayload)
                });
            match checked {
                Ok(_) => pending.push_back(index),
                Err(error) => outcomes[index] = Some(Err(error)),
            }
        }
        let mut layout_ensured = false;
        while !pending.is_empty() {
            let failed = self
                .create_in_order(payloads, &prefixes, &mut pending, window, &mut outcomes)
                .await;
            if failed.is_empty() {
                break;
            }
            let mut again: Vec<usize> = Vec::new();
            let mut unknown: BTreeMap<TaskToken, usize> = BTreeMap::new();
            let mut session_ended: Option<ZkError> = None;
            for (index, error) in failed {
                match error {
                    // A missing parent: nothing was created.
                    ZkError::NoNode { .. } if !layout_ensured => again.push(index),
                    error if error.is_outcome_unknown() => {
                        unknown.insert(token_of(index), index);
                    }
                    error if error.session_end().is_some() => {
                        session_ended.get_or_insert(error.clone());
                        outcomes[index] = Some(Err(ClientError::SubmitInDoubt {
                            token: token_of(index),
                            cause: Box::new(error.into()),
                        }));
                    }
                    error => outcomes[index] = Some(Err(error.into())),
                }
            }
            if let Some(ended) = session_ended {
                // Nothing more can be sent or read on this session. In
                // doubt: the creates whose outcome is unknown. Not
                // created: those refused for a missing parent and those
                // never sent.
                for index in unknown.into_values() {
                    outcomes[index] = Some(Err(ClientError::SubmitInDoubt {
                        token: token_of(index),
                        cause: Box::new(ended.clone().into()),
                    }));
                }
                refuse_unsent(
                    &mut outcomes,
                    again.into_iter().chain(pending.drain(..)),
                    &ended,
                );
                break;
            }
            if !again.is_empty() {
                if let Err(error) = until_known(|| self.layout.ensure_layout(&self.zk)).await {
                    // The layout cannot be made: a create would meet the
                    // same missing parent, or the session's end.
                    refuse_unsent(
                        &mut outcomes,
                        again.drain(..).chain(pending.drain(..)),
                        &error,
                    );
                }
                layout_ensured = true;
            }
            if !unknown.is_empty() {
                let tokens: BTreeSet<TaskToken> = unknown.keys().copied().collect();
                match self.find_submissions(&tokens).await {
                    Ok(mut found) => {
                        for (token, index) in unknown {
                            match found.remove(&token) {
                                Some(task) => outcomes[index] = Some(Ok(task)),
                                // Not applied: creating again cannot
                                // duplicate it.
                                None => again.push(index),
                            }
                        }
                    }
                    Err(cause) => {
                        for (token, index) in unknown {
                            outcomes[index] = Some(Err(ClientError::SubmitInDoubt {
                                token,
                                cause: Box::new(cause.clone()),
                            }));
                        }
                        // The lookup met the session's end: a create issued
                        // now would fail unsent, and read as in doubt.
                        if let ClientError::Zk(ended) = cause
                            && ended.session_end().is_some()
                        {
                            let unsent = again.into_iter().chain(pending.drain(..));
                            refuse_unsent(&mut outcomes, unsent, &ended);
                            break;
                        }
                    }
                }
            }
            // Sent again first, in the payloads' order, then the rest.
            again.sort_unstable();
            for index in again.into_iter().rev() {
                pending.push_front(index);
            }
        }
        outcomes
            .into_iter()
            .map(|outcome| outcome.expect("every payload has an outcome"))
            .collect()
    }

    /// Issues the creates of `pending`, in order, up to `window` at a time,
    /// and records each task created in `outcomes`. Stops issuing at the
    /// first reply that is not a task, waits for the creates in flight,
    /// and returns the ones that failed, in order; what was not issued
    /// stays in `pending`.
    async fn create_in_order<P: AsRef<[u8]>>(
        &self,
        payloads: &[P],
        prefixes: &[String],
        pending: &mut VecDeque<usize>,
        window: usize,
        outcomes: &mut [Option<Result<TaskId, ClientError>>],
    ) -> Vec<(usize, ZkError)> {
        let mut in_flight = FuturesOrdered::new();
        let mut failed: Vec<(usize, ZkError)> = Vec::new();
        loop {
            while failed.is_empty() && in_flight.len() < window {
                let Some(index) = pending.pop_front() else {
                    break;
                };
                // Called here, in order: a backend that sends at the call
                // sends in order, and one that sends at the first poll is
                // polled in this order (the queue polls new futures in the
                // order they were pushed).
                let create = self.zk.create(
                    &prefixes[index],
                    payloads[index].as_ref(),
                    CreateMode::PersistentSequential,
                );
                in_flight.push_back(async move { (index, create.await) });
            }
            let Some((index, reply)) = in_flight.next().await else {
                return failed;
            };
            let created = reply.and_then(|created| {
                TaskId::parse(path::name(&created)).map_err(|error| ZkError::System {
                    reason: format!("the server named a task {created:?}: {error}"),
                })
            });
            match created {
                Ok(task) => {
                    debug_assert!(
                        prefixes[index].ends_with(&format!("task-{}-", task.token().unwrap())),
                        "created under our prefix"
                    );
                    outcomes[index] = Some(Ok(task));
                }
                Err(error) => failed.push((index, error)),
            }
        }
    }

    /// The task a submission with `token` created, if its create was
    /// applied: the resolution of a [`ClientError::SubmitInDoubt`]. Works on
    /// any session, e.g. a new one after the submitting session ended:
    /// `sync` first, so that the server this session talks to has caught up
    /// with the leader and an applied create shows. `Ok(None)` means no task
    /// carries the token (never created, or already deleted).
    ///
    /// Lists `tasks/`: fails with [`ClientError::ListingOverLimit`] when the
    /// listing is over the client's reply limit, and gives up with
    /// [`ClientError::ListingUnreadable`] after
    /// [`MAX_LISTING_ATTEMPTS`](super::MAX_LISTING_ATTEMPTS) attempts that
    /// each failed as a lost connection.
    pub async fn find_submission(&self, token: TaskToken) -> Result<Option<TaskId>, ClientError> {
        let mut found = self.find_submissions(&BTreeSet::from([token])).await?;
        Ok(found.remove(&token))
    }

    /// [`Client::find_submission`] for several tokens at once, with one
    /// `sync` and one listing: the task each token's create made, for the
    /// tokens that made one. Resolves the [`ClientError::SubmitInDoubt`]s of
    /// a [`Client::submit_many`] together.
    pub async fn find_submissions(
        &self,
        tokens: &BTreeSet<TaskToken>,
    ) -> Result<BTreeMap<TaskToken, TaskId>, ClientError> {
        let tasks_dir = self.layout.tasks_dir();
        until_known(|| self.zk.sync(&tasks_dir)).await?;
        let names = match self.list_tasks().await {
            Ok(names) => names,
            // No tasks directory: no task at all.
            Err(ClientError::Zk(ZkError::NoNode { .. })) => return Ok(BTreeMap::new()),
            Err(error) => return Err(error),
        };
        // Foreign names are not ours; one token is only ever created once,
        // but should a name repeat it the oldest one counts.
        let mut found: BTreeMap<TaskToken, TaskId> = BTreeMap::new();
        for task in names.iter().filter_map(|name| TaskId::parse(name).ok()) {
            let Some(token) = task.token().filter(|token| tokens.contains(token)) else {
                continue;
            };
            match found.get(&token) {
                Some(older) if *older <= task => {}
                _ => {
                    found.insert(token, task);
                }
            }
        }
        Ok(found)
    }
}

/// Gives each payload of `unsent`, whose create was never sent, the error
/// that keeps this session from sending it.
fn refuse_unsent(
    outcomes: &mut [Option<Result<TaskId, ClientError>>],
    unsent: impl IntoIterator<Item = usize>,
    error: &ZkError,
) {
    for index in unsent {
        outcomes[index] = Some(Err(error.clone().into()));
    }
}
