//! Processes that outlive their sessions: a master candidate and a worker,
//! each a loop that opens a session, does its job on it until the session
//! ends, and opens the next one.
//!
//! [`ActorConnector`] opens an actor's sessions on the simulation (named
//! `m1`, `m1.2`, `m1.3`... as [`SimConnector`] names them), plants the
//! actor's mutant when the tests ask for one, and tells the harness which
//! session the actor runs on now, so that faults can aim at it.
//!
//! [`master_role`] and [`worker_role`] are the loops themselves: a thin
//! adapter over [`Master`] and [`Worker`], which each run one session.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use zkdist_coord::{
    Connector, Coordinator, Event, EventStream, Layout, SessionId, SessionState, Watch, WatchKind,
    WorkerId, ZkError, ZkResult,
};
use zkdist_master::{Master, MasterDecision, MasterState, claim_master};
use zkdist_sim::{SimConnector, SimSession, SimZk};
use zkdist_worker::{Worker, WorkerDecision};

use crate::handler::WorkHandler;

/// How long a role waits before opening its next session, so that a
/// session that fails at once cannot spin the simulation.
const NEXT_SESSION_DELAY: Duration = Duration::from_millis(10);
/// How long a role waits before a retry after an unknown outcome.
const RETRY_DELAY: Duration = Duration::from_millis(50);

/// The session a role's process works on: the mutant tests wrap it so that
/// it plants their bug (with no mutant it passes every call through).
#[cfg(feature = "mutants")]
pub(crate) type RoleSession = crate::mutant::MutantSession<SimSession>;
#[cfg(not(feature = "mutants"))]
pub(crate) type RoleSession = SimSession;

/// Opens one actor's sessions. Clones share the session count (a restarted
/// process goes on with `w1.3` after `w1.2`) and the record of sessions.
#[derive(Debug, Clone)]
pub(crate) struct ActorConnector {
    inner: Arc<SimConnector>,
    /// The session opened last, and every session ever opened.
    sessions: Arc<watch::Sender<Vec<SessionId>>>,
    #[cfg(feature = "mutants")]
    mutant: Option<crate::mutant::Mutant>,
    #[cfg(feature = "mutants")]
    layout: Layout,
}

impl ActorConnector {
    pub(crate) fn new(
        sim: &SimZk,
        name: &str,
        #[cfg(feature = "mutants")] mutant: Option<crate::mutant::Mutant>,
        #[cfg(feature = "mutants")] layout: &Layout,
    ) -> ActorConnector {
        ActorConnector {
            inner: Arc::new(SimConnector::new(sim.clone(), name)),
            sessions: Arc::new(watch::channel(Vec::new()).0),
            #[cfg(feature = "mutants")]
            mutant,
            #[cfg(feature = "mutants")]
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
        #[cfg(feature = "mutants")]
        let session = crate::mutant::MutantSession::new(session, self.mutant, &self.layout);
        Ok((session, events))
    }
}

/// A master candidate: on each session it claims the `master` node or
/// stands by until the node goes, then runs the master until the session
/// ends. Returns on `shutdown`, with the master's state if it led then.
pub(crate) async fn master_role<C: Connector>(
    connector: C,
    layout: Layout,
    shutdown: impl Future<Output = ()>,
    observer: mpsc::UnboundedSender<MasterDecision>,
) -> Option<MasterState> {
    let mut shutdown = pin!(shutdown);
    loop {
        let Ok((zk, mut events)) = connector.connect().await else {
            tokio::time::sleep(NEXT_SESSION_DELAY).await;
            continue;
        };
        let leads = tokio::select! {
            biased;
            () = shutdown.as_mut() => return None,
            leads = lead_or_stand_by(&zk, &mut events, &layout) => leads,
        };
        if leads {
            let master = Master::new(zk, events, layout.clone()).with_observer(observer.clone());
            if let Ok(state) = master.run_until(shutdown.as_mut()).await {
                return Some(state);
            }
        } else {
            // The session ended while standing by: closing it is
            // harmless.
            let _ = zk.close().await;
        }
        // Dropping the last handle of a session still alive closes it, so
        // that its ephemerals (the master node) go.
        tokio::time::sleep(NEXT_SESSION_DELAY).await;
    }
}

/// Claims the master node, or waits for it to go and claims again. Returns
/// true once this session leads, false when the session ended.
async fn lead_or_stand_by<C: Coordinator>(
    zk: &C,
    events: &mut EventStream,
    layout: &Layout,
) -> bool {
    let master = layout.master();
    let mine = zk.session_id().to_string();
    loop {
        match claim_master(zk, layout).await {
            Ok(true) => return true,
            Ok(false) => {}
            Err(error) if error.is_outcome_unknown() => {
                tokio::time::sleep(RETRY_DELAY).await;
                continue;
            }
            Err(_) => return false,
        }
        // Taken: by this session (a claim whose reply was lost), or by
        // another, whose node this one watches.
        match zk.get_data(&master, Watch::No).await {
            Ok((data, _)) if data == mine.as_bytes() => return true,
            Ok(_) | Err(ZkError::NoNode { .. }) => {}
            Err(error) if error.is_outcome_unknown() => continue,
            Err(_) => return false,
        }
        match zk.exists(&master, Watch::Yes).await {
            Ok(None) => continue,
            Ok(Some(_)) => {}
            Err(error) if error.is_outcome_unknown() => continue,
            Err(_) => return false,
        }
        loop {
            match events.recv().await {
                None => return false,
                Some(Event::Watch(watch)) if watch.path == master => {
                    if watch.kind == WatchKind::NodeDeleted {
                        break;
                    }
                }
                Some(Event::Watch(_)) => {}
                // Back after a disconnection: look again.
                Some(Event::Session(SessionState::Connected)) => break,
                Some(Event::Session(SessionState::Disconnected)) => {}
                Some(Event::Session(_)) => return false,
            }
        }
    }
}

/// A worker process: on each session it runs a worker (a new id each
/// time) until the session ends. Returns on `shutdown`, with the id it had
/// then.
pub(crate) async fn worker_role<C: Connector>(
    connector: C,
    layout: Layout,
    shutdown: impl Future<Output = ()>,
    observer: mpsc::UnboundedSender<WorkerDecision>,
) -> Option<WorkerId> {
    let mut shutdown = pin!(shutdown);
    loop {
        let Ok((zk, events)) = connector.connect().await else {
            tokio::time::sleep(NEXT_SESSION_DELAY).await;
            continue;
        };
        let worker =
            Worker::new(zk, events, layout.clone(), WorkHandler).with_observer(observer.clone());
        if let Ok(id) = worker.run_until(shutdown.as_mut()).await {
            return Some(id);
        }
        tokio::time::sleep(NEXT_SESSION_DELAY).await;
    }
}

/// Holds one value behind a lock that a panic elsewhere does not poison.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
