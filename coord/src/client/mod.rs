//! The client side of zkdist: submit a task, wait for its result, clean it
//! up, and read the system's status. Generic over [`Coordinator`] like the
//! master and the worker.

mod cleanup;
mod status;
mod submit;
mod wait;

pub use status::{MasterNode, STATUS_MAX_LISTED_TASKS, Status};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec::CodecError;
use crate::error::ZkError;
use crate::layout::Layout;
use crate::names::{InvalidName, TaskId, TaskToken};
use crate::retry::{listing_until_known_within, until_known};
use crate::{Coordinator, EventStream, SessionState, Stat, Watch};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("task payload refused: {0}")]
    InvalidPayload(CodecError),
    #[error("task payload refused: {0}")]
    PayloadTooLarge(ZkError),
    #[error("result of {task} is unreadable: {error}")]
    InvalidResult { task: TaskId, error: CodecError },
    #[error("no task {task} (no node {path})")]
    NoSuchTask { task: TaskId, path: String },
    #[error(
        "task {task} has no result yet: only finished tasks (or tasks marked refused) can be cleaned up"
    )]
    NotFinished { task: TaskId },
    /// The task's node refused its result (credentials the workers lack, or
    /// a node that cannot have children): a worker released it without one
    /// and marked it refused (`Layout::refused`), so it will not run again
    /// until the mark is deleted.
    #[error(
        "{task} will have no result: {reason} (it is marked refused at {mark}; once the cause is put right, delete the mark: the next master tries it again)"
    )]
    ResultRefused {
        task: TaskId,
        reason: String,
        mark: String,
    },
    #[error(
        "no zkdist layout at {root}: it is created when a master or worker starts or a task is submitted"
    )]
    NoLayout { root: String },
    /// `tasks/` exists under the root but the rest of the layout does not:
    /// a role is laying the root out at this moment, or something other
    /// than zkdist made `tasks/`, and a submit, which lays the root out
    /// only when `tasks/` is missing, queued into it.
    #[error(
        "the zkdist layout at {root} is incomplete: its tasks/ exists but not the rest (a master \
         or worker that starts there lays out what is missing, and one may be doing so now)"
    )]
    IncompleteLayout { root: String },
    #[error(
        "the session ended ({}) while waiting for {task}",
        SessionState::describe_end(*state)
    )]
    SessionEnded {
        task: TaskId,
        /// `None` when the event stream closed without saying why.
        state: Option<SessionState>,
    },
    /// A submit's create may or may not have been applied, and the client
    /// could not find out: its session ended (or the lookup failed) first.
    /// Look the token up with [`Client::find_submission`] on a new session
    /// before submitting again, or the task may be created twice.
    #[error(
        "submission {token} is in doubt ({cause}): a task named task-{token}-NNNNNNNNNN may exist; look it up before submitting again"
    )]
    SubmitInDoubt {
        token: TaskToken,
        cause: Box<ClientError>,
    },
    /// A listing kept failing as a lost connection, [`MAX_LISTING_ATTEMPTS`]
    /// times, while the session lived on: a connection that keeps
    /// dropping, most likely.
    #[error("cannot list {path}: {attempts} attempts ended in a lost connection (last: {error})")]
    ListingUnreadable {
        path: String,
        attempts: u32,
        error: ZkError,
    },
    /// A listing's reply is over the limit the client accepts
    /// (`ZkConfig::with_max_reply_bytes`; a Java client's `jute.maxbuffer`,
    /// 1 MiB by default, the library's default too: `tasks/` reaches it at
    /// some 29,000 tasks, `workers/` at some 50,000 workers). The error
    /// says by how much, and how to raise the limit. Not sent again: the
    /// same listing is refused every time.
    #[error("{reason}")]
    ListingOverLimit { path: String, reason: String },
    #[error("unexpected node name: {0}")]
    UnexpectedName(#[from] InvalidName),
    #[error(transparent)]
    Zk(#[from] ZkError),
}

/// How many times a listing (of `tasks/`, and in a status of `workers/`
/// and `assignments/`) is sent while it fails as a lost connection before
/// the client gives up ([`ClientError::ListingUnreadable`]), unless the
/// reply was over the limit, which ends the attempts at once
/// ([`ClientError::ListingOverLimit`]). With the pauses of
/// [`crate::retry`] that is some 14 s: longer than a short outage, and an
/// outage long enough to expire the session ends the attempts anyway.
pub const MAX_LISTING_ATTEMPTS: u32 = 20;

/// One client session. `wait` reads the session's event stream, so it takes
/// `&mut self`; everything else only sends requests.
///
/// Every method survives a connection loss: reads are sent again, and
/// writes are sent again only after reading whether they were applied (see
/// [`Client::submit`] and [`Client::cleanup`]). They give up when the
/// session ends.
///
/// Submissions are told apart by a token made of the session id and this
/// client's count of submissions, so use one `Client` per session for
/// submitting: two on one session would repeat each other's tokens.
pub struct Client<C: Coordinator> {
    zk: C,
    events: EventStream,
    layout: Layout,
    /// How many submissions this client has started; the next one's token
    /// is made from it.
    submissions_started: AtomicU64,
    /// Whether this session watches `refused/` (a persistent watch, left by
    /// the first wait): every wait needs it, and it lasts the session.
    watching_refused: bool,
}

impl<C: Coordinator> Client<C> {
    /// Wraps a connected session and its event stream.
    pub fn new(zk: C, events: EventStream, layout: Layout) -> Client<C> {
        Client {
            zk,
            events,
            layout,
            submissions_started: AtomicU64::new(0),
            watching_refused: false,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn session(&self) -> &C {
        &self.zk
    }

    /// The token the next [`Client::submit`] on this client will carry,
    /// unless another submission starts first: for a caller that must be
    /// able to name a submission it may be interrupted in.
    pub fn next_submission_token(&self) -> TaskToken {
        let submission = self.submissions_started.load(Ordering::Relaxed);
        TaskToken::for_submission(self.zk.session_id(), submission)
    }

    /// Gives the session and its event stream back. A `Client` built again
    /// on the same session counts its submissions from zero again, so its
    /// tokens repeat the first one's: do not submit through both. The
    /// persistent watch a wait left on `refused/` stays with the session,
    /// and its events keep coming on the stream.
    pub fn into_parts(self) -> (C, EventStream) {
        (self.zk, self.events)
    }

    /// The names under `tasks/` (see [`Client::list_children`]).
    async fn list_tasks(&self) -> Result<Vec<String>, ClientError> {
        self.list_children(&self.layout.tasks_dir()).await
    }

    /// The names under `dir`, sent again while the outcome is unknown but
    /// at most [`MAX_LISTING_ATTEMPTS`] times (see
    /// [`ClientError::ListingUnreadable`]), and not again when the reply is
    /// over the session's limit ([`ClientError::ListingOverLimit`]): that
    /// fails as a lost connection too, but every time.
    async fn list_children(&self, dir: &str) -> Result<Vec<String>, ClientError> {
        let listed = listing_until_known_within(MAX_LISTING_ATTEMPTS, || {
            self.zk.get_children(dir, Watch::No)
        })
        .await;
        match listed {
            Ok((names, _)) => Ok(names),
            Err(error) => match crate::validate::reply_over_limit(&error) {
                // The refusal's own words: "connection lost" would mislead.
                Some(reason) => Err(ClientError::ListingOverLimit {
                    path: dir.to_owned(),
                    reason: reason.to_owned(),
                }),
                None if error.is_outcome_unknown() => Err(ClientError::ListingUnreadable {
                    path: dir.to_owned(),
                    attempts: MAX_LISTING_ATTEMPTS,
                    error,
                }),
                None => Err(error.into()),
            },
        }
    }

    /// The stat of `path` after a write whose outcome is unknown. The
    /// `sync` first makes the server this session now talks to (perhaps
    /// another one, after the reconnect) catch up with the leader, so a
    /// write that was applied shows.
    async fn exists_after_loss(&self, path: &str) -> Result<Option<Stat>, ZkError> {
        until_known(|| self.zk.sync(path)).await?;
        until_known(|| self.zk.exists(path, Watch::No)).await
    }

    fn missing_layout(&self) -> ClientError {
        ClientError::NoLayout {
            root: self.layout.root().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
