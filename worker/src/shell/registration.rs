//! The worker's registration under `workers/`: looked at when its watch
//! may have missed a deletion, deleted when the worker stops, and lost
//! when the master takes an assignment back from a worker it holds for
//! gone.

use zkdist_coord::retry::until_known;
use zkdist_coord::{Coordinator, Stat, Watch, ZkError, ZkResult};

use super::{Worker, WorkerError};
use crate::handler::TaskHandler;
use crate::state::WorkerState;

impl<C: Coordinator, H: TaskHandler> Worker<C, H> {
    /// The master took the assignment back, however the worker learned it
    /// (while the task ran, or when completing or releasing): the worker
    /// wrote nothing and is idle, and looks whether it is still a worker.
    pub(super) async fn revoked(&self, state: &mut WorkerState) -> Result<(), WorkerError> {
        self.note(state.on_assignment_revoked());
        self.check_registration(state).await
    }

    /// Reads the registration, when its watch may have missed a deletion:
    /// after the master took an assignment back (it does so only from a
    /// worker it holds for gone, whose registration was deleted with its
    /// session or while the session lived), and after a reconnection.
    /// Gone, or made anew by another session (a new worker that took this
    /// id after the root was deleted), it is lost: the worker is out of
    /// the pool for good (the master never gives work to an id it saw
    /// leave), and must join again under a new id rather than wait idle
    /// for ever. A zombie, whose session ended, hears so from this read.
    pub(super) async fn check_registration(
        &self,
        state: &mut WorkerState,
    ) -> Result<(), WorkerError> {
        let registration = self.layout.worker(state.worker());
        match self.own_registration(&registration).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(self.registration_lost(state, &registration)),
            Err(error) => Err(WorkerError::request(
                format!("reading {registration}"),
                error,
            )),
        }
    }

    /// The stat of `registration` if it is this session's node; `None` if
    /// it is gone or another session's (after the deployment's root was
    /// deleted, a new worker may have taken this id). The read follows a
    /// `sync`: it is made after a reconnection, or before a delete, and a
    /// server behind the leader would show a node deleted and made anew
    /// by another session as this one's (same name, same version).
    async fn own_registration(&self, registration: &str) -> ZkResult<Option<Stat>> {
        until_known(|| self.zk.sync(registration)).await?;
        let stat = until_known(|| self.zk.exists(registration, Watch::No)).await?;
        Ok(stat.filter(|stat| stat.ephemeral_owner == self.zk.session_id().0))
    }

    /// Deletes the registration if it is still this session's node, and
    /// only then: a node of the same name made by another session (a new
    /// worker that took this id after the root was deleted) is that
    /// worker's, and deleting it would take a live worker out of the pool.
    /// The delete names the version read, and after a reply that leaves
    /// its outcome unknown the node is looked at again rather than the
    /// delete sent again: the node may have gone with it and been made
    /// anew since.
    pub(super) async fn deregister(&self, registration: &str) -> ZkResult<()> {
        loop {
            let Some(stat) = self.own_registration(registration).await? else {
                tracing::debug!(
                    target: "zkdist::worker",
                    registration,
                    "the registration is gone or another session's already: nothing to delete"
                );
                return Ok(());
            };
            match self.zk.delete(registration, Some(stat.version)).await {
                Ok(()) | Err(ZkError::NoNode { .. }) => return Ok(()),
                // Its data changed since the look (no role of zkdist's
                // writes it; an operator may), or the delete's outcome is
                // unknown: look again. The look's own retries pause while
                // the connection is down.
                Err(ZkError::BadVersion { .. }) => {}
                Err(error) if error.is_outcome_unknown() => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// The registration is gone or another session's: notes it, and names
    /// the error that makes the role join again under a new id.
    pub(super) fn registration_lost(
        &self,
        state: &mut WorkerState,
        registration: &str,
    ) -> WorkerError {
        self.note(state.on_registration_lost());
        WorkerError::Deregistered {
            registration: registration.to_owned(),
        }
    }
}
