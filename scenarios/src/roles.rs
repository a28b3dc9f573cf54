//! Processes that outlive their sessions: a master candidate and a worker,
//! each a loop that opens a session, does its job on it until the session
//! ends, and opens the next one.
//!
//! [`ActorConnector`] opens an actor's sessions on the simulation (named
//! `m1`, `m1.2`, `m1.3`... as [`SimConnector`] names them), makes a worker
//! one of the build older than inline payloads when the run asks for some,
//! plants the actor's mutant when the tests ask for one, and tells the
//! harness which session the actor runs on now, so that faults can aim at
//! it.
//!
//! [`master_role`] and [`worker_role`] are the loops themselves: the
//! master's and the worker's own role loops, with the testbed's handler.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use zkdist_coord::{Connector, Coordinator, EventStream, Layout, Observer, SessionId, ZkResult};
use zkdist_master::{
    MasterDecision, MasterError, MasterState, TaskDiscovery, run_master_role_for_state,
};
use zkdist_sim::{SimConnector, SimSession, SimZk};
use zkdist_worker::{WorkerDecision, WorkerError, run_worker_role};

use crate::handler::WorkHandler;
use crate::old_worker::OldWorkerSession;

/// The session a role's process works on: an old worker's, or (when not
/// old) the simulator's as it is; the mutant tests wrap it once more so that
/// it plants their bug (with no mutant it passes every call through).
#[cfg(feature = "mutants")]
pub(crate) type RoleSession = crate::mutant::MutantSession<OldWorkerSession<SimSession>>;
#[cfg(not(feature = "mutants"))]
pub(crate) type RoleSession = OldWorkerSession<SimSession>;

/// Opens one actor's sessions. Clones share the session count (a restarted
/// process goes on with `w1.3` after `w1.2`) and the record of sessions.
#[derive(Debug, Clone)]
pub(crate) struct ActorConnector {
    inner: Arc<SimConnector>,
    /// The session opened last, and every session ever opened.
    sessions: Arc<watch::Sender<Vec<SessionId>>>,
    #[cfg(feature = "mutants")]
    mutant: Option<crate::mutant::Mutant>,
    /// The actor is a worker older than inline payloads.
    old_worker: bool,
    layout: Layout,
}

impl ActorConnector {
    pub(crate) fn new(
        sim: &SimZk,
        name: &str,
        #[cfg(feature = "mutants")] mutant: Option<crate::mutant::Mutant>,
        old_worker: bool,
        layout: &Layout,
    ) -> ActorConnector {
        ActorConnector {
            inner: Arc::new(SimConnector::new(sim.clone(), name)),
            sessions: Arc::new(watch::channel(Vec::new()).0),
            #[cfg(feature = "mutants")]
            mutant,
            old_worker,
            layout: layout.clone(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.inner.name()
    }

    /// The session opened last.
    pub(crate) fn current(&self) -> Option<SessionId> {
        self.sessions.borrow().last().copied()
    }

    /// Whether `session` is one of this actor's.
    pub(crate) fn owns(&self, session: SessionId) -> bool {
        self.sessions.borrow().contains(&session)
    }

    /// Waits until the actor opened more than `opened` sessions, and
    /// returns the last one.
    pub(crate) async fn opened_after(&self, opened: usize) -> SessionId {
        let mut sessions = self.sessions.subscribe();
        let sessions = sessions
            .wait_for(|sessions| sessions.len() > opened)
            .await
            .expect("the connector keeps its sender");
        *sessions.last().expect("more than zero")
    }

    pub(crate) fn sessions_opened(&self) -> usize {
        self.sessions.borrow().len()
    }
}

impl Connector for ActorConnector {
    type Session = RoleSession;

    async fn connect(&self) -> ZkResult<(RoleSession, EventStream)> {
        let (session, events) = self.inner.connect().await?;
        self.sessions
            .send_modify(|sessions| sessions.push(session.session_id()));
        let session = OldWorkerSession::new(session, self.old_worker, &self.layout);
        #[cfg(feature = "mutants")]
        let session = crate::mutant::MutantSession::new(session, self.mutant, &self.layout);
        Ok((session, events))
    }
}

/// A master candidate: the master crate's role loop, which claims the
/// master node or stands by, session after session. Returns on `shutdown`,
/// with the master's state if this candidate led then, or the error it gave
/// up with (which the harness reports as an actor failure).
pub(crate) async fn master_role<C: Connector>(
    connector: C,
    layout: Layout,
    discovery: TaskDiscovery,
    shutdown: impl Future<Output = ()>,
    observer: Observer<MasterDecision>,
) -> Result<Option<MasterState>, MasterError> {
    run_master_role_for_state(connector, layout, discovery, shutdown, Some(observer)).await
}

/// A worker process: the worker crate's role loop, which registers and
/// works under a new id on each session. Returns on `shutdown`. `runs`
/// hears of each start and end of the handler's runs.
pub(crate) async fn worker_role<C: Connector>(
    connector: C,
    layout: Layout,
    shutdown: impl Future<Output = ()>,
    observer: Observer<WorkerDecision>,
    runs: Observer<bool>,
) -> Result<(), WorkerError>
where
    C::Session: Clone,
{
    let handler = WorkHandler::observed(runs);
    run_worker_role(connector, layout, handler, shutdown, Some(observer)).await
}

/// Holds one value behind a lock that a panic elsewhere does not poison.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
