//! `run`, `master` and `worker`: the long-running roles on a real ensemble.
//!
//! A role outlives its sessions. A master candidate leads if nobody does,
//! and otherwise stands by, watching the `master` node, until it goes; when
//! its session expires it opens a new one and runs for master again. A
//! worker whose session expires abandons the task it held (the master
//! re-queues it) and re-joins under a new id with a new session. `run` is
//! both at once, each on a session of its own.
//!
//! The first session is opened here, before the role starts, so that an
//! unreachable ensemble, a malformed connect string or a missing chroot
//! fails at once with an error that names it; later sessions are the
//! roles' business, and a role retries them for as long as the ensemble is
//! out of reach.

use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{Connector, EventStream, Layout, MAX_RESULT_OUTPUT_BYTES, ZkResult};
use zkdist_master::run_master_role;
use zkdist_worker::{TaskError, TaskHandler, TimeLimited, run_worker_role};

use crate::args::{ConnectArgs, MasterArgs, MasterOptions, RoleArgs, RunArgs};
use crate::connect;
use crate::handlers::BuiltinHandler;
use crate::shutdown::{Shutdown, Stop};

/// `zkdist run`: a master candidate and a worker in one process.
pub async fn run(args: &RunArgs) -> anyhow::Result<()> {
    let RunArgs { role: args, master } = args;
    let stop = Shutdown::install()?.shared_exiting_on_second();
    let layout = connect::layout(&args.connect)?;
    let first_sessions = async {
        let master = RoleConnector::open(&args.connect, "master").await?;
        let worker = RoleConnector::open(&args.connect, "worker").await?;
        anyhow::Ok((master, worker))
    };
    let Some(connectors) = stop.unless_requested(first_sessions).await else {
        return Ok(());
    };
    let (master_connector, worker_connector) = connectors?;
    // Whichever role fails stops the other one too: the process is then
    // done, and says why.
    let master = async {
        let outcome = lead_or_stand_by(master_connector, layout.clone(), *master, &stop).await;
        stop.request();
        outcome
    };
    let worker = async {
        let outcome = work(worker_connector, layout.clone(), args, &stop).await;
        stop.request();
        outcome
    };
    let (master, worker) = tokio::join!(master, worker);
    master.and(worker)
}

/// `zkdist master`: a master candidate.
pub async fn master(args: &MasterArgs) -> anyhow::Result<()> {
    let MasterArgs {
        connect: args,
        master,
    } = args;
    let stop = Shutdown::install()?.shared_exiting_on_second();
    let layout = connect::layout(args)?;
    let Some(connector) = stop
        .unless_requested(RoleConnector::open(args, "master"))
        .await
    else {
        return Ok(());
    };
    lead_or_stand_by(connector?, layout, *master, &stop).await
}

/// `zkdist worker`.
pub async fn worker(args: &RoleArgs) -> anyhow::Result<()> {
    let stop = Shutdown::install()?.shared_exiting_on_second();
    let layout = connect::layout(&args.connect)?;
    let Some(connector) = stop
        .unless_requested(RoleConnector::open(&args.connect, "worker"))
        .await
    else {
        return Ok(());
    };
    work(connector?, layout, args, &stop).await
}

async fn lead_or_stand_by(
    connector: RoleConnector,
    layout: Layout,
    options: MasterOptions,
    stop: &Stop,
) -> anyhow::Result<()> {
    let discovery = options.discovery;
    tracing::info!(root = layout.root(), %discovery, "running for master");
    // The role logs every decision (elected, standing by, session lost...).
    run_master_role(connector, layout, discovery, stop.requested(), None)
        .await
        .context("the master stopped")?;
    tracing::info!("master stopped");
    Ok(())
}

async fn work(
    connector: RoleConnector,
    layout: Layout,
    args: &RoleArgs,
    stop: &Stop,
) -> anyhow::Result<()> {
    let RoleArgs {
        allow_exec,
        task_time_limit_ms,
        ..
    } = *args;
    let handler = Builtin(BuiltinHandler {
        allow_exec,
        result_limit_bytes: MAX_RESULT_OUTPUT_BYTES,
    });
    tracing::info!(
        root = layout.root(),
        allow_exec,
        task_time_limit_ms = ?task_time_limit_ms,
        "starting a worker"
    );
    let outcome = match task_time_limit_ms {
        Some(limit_ms) => {
            let limited = TimeLimited::new(handler, Duration::from_millis(limit_ms));
            run_worker_role(connector, layout, limited, stop.requested(), None).await
        }
        None => run_worker_role(connector, layout, handler, stop.requested(), None).await,
    };
    outcome.context("the worker stopped")
}

/// Opens a role's sessions from the connection flags, logging each one (an
/// operator, and the chaos test, can then tell which process holds which
/// session: the `master` node's data, a worker node's owner).
struct RoleConnector {
    config: ZkConfig,
    role: &'static str,
    /// The session opened before the role started, handed out first.
    first: Mutex<Option<(ZkSession, EventStream)>>,
}

impl RoleConnector {
    /// Opens the role's first session; fails with a clear error if the
    /// ensemble cannot be reached or the flags are wrong.
    async fn open(args: &ConnectArgs, role: &'static str) -> anyhow::Result<RoleConnector> {
        // A role waits out an outage on the session it has: while no server
        // can be reached, a new session could not be opened either, and a
        // loss of quorum expires nothing. Giving the session up on the
        // client's clock would make a master fail over, and a worker drop
        // a result it holds, for nothing (see `ZkConfig`).
        let config = connect::config(args)?.with_session_kept_through_outages();
        let (zk, events) = connect::session_with(&config, args).await?;
        log_session(role, &zk);
        Ok(RoleConnector {
            config,
            role,
            first: Mutex::new(Some((zk, events))),
        })
    }
}

fn log_session(role: &str, zk: &ZkSession) {
    use zkdist_coord::Coordinator;
    tracing::info!(role, session = %zk.session_id(), "session opened");
}

impl Connector for RoleConnector {
    type Session = ZkSession;

    fn connect(&self) -> impl Future<Output = ZkResult<(ZkSession, EventStream)>> + Send {
        let first = self.first.lock().expect("not poisoned").take();
        let config = self.config.clone();
        let role = self.role;
        async move {
            if let Some(first) = first {
                return Ok(first);
            }
            let (zk, events) = ZkSession::connect(&config).await?;
            log_session(role, &zk);
            Ok((zk, events))
        }
    }
}

/// The built-in kinds as a worker's [`TaskHandler`].
struct Builtin(BuiltinHandler);

impl TaskHandler for Builtin {
    fn run(&self, task: &[u8]) -> impl Future<Output = Result<Vec<u8>, TaskError>> + Send {
        let handler = self.0.clone();
        let task = task.to_vec();
        async move {
            handler
                .run(&task)
                .await
                .map_err(|error| TaskError::from_display(&error))
        }
    }
}
