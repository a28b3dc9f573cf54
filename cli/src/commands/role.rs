//! `run`, `master` and `worker`: the long-running roles on a real ensemble.

use anyhow::{Context, bail};
use zkdist_coord::zk::ZkSession;
use zkdist_coord::{Coordinator, EventStream, Layout, MAX_RESULT_OUTPUT_BYTES, Watch};
use zkdist_master::{Epoch, Master, claim_master};
use zkdist_worker::{TaskError, TaskHandler, Worker};

use crate::args::{ConnectArgs, RoleArgs};
use crate::connect;
use crate::handlers::BuiltinHandler;
use crate::shutdown::Shutdown;

/// `zkdist run`: as the original design did, try to create the `master`
/// node; whoever succeeds leads and everyone else works.
pub async fn run(args: &RoleArgs) -> anyhow::Result<()> {
    let mut shutdown = Shutdown::install()?;
    let layout = connect::layout(&args.connect)?;
    let start = async {
        let (zk, events) = connect::session(&args.connect).await?;
        let leads = claim(&zk, &layout).await?;
        anyhow::Ok((zk, events, leads))
    };
    let Some(started) = shutdown.unless_requested(start).await else {
        return Ok(());
    };
    let (zk, events, leads) = started?;
    if let Some(epoch) = leads {
        lead(zk, events, layout, epoch, shutdown).await
    } else {
        tracing::info!(master = %layout.master(), "a master already leads; running as a worker");
        work(zk, events, layout, args.allow_exec, shutdown).await
    }
}

/// `zkdist master`: lead, or fail if another master already does.
pub async fn master(args: &ConnectArgs) -> anyhow::Result<()> {
    let mut shutdown = Shutdown::install()?;
    let layout = connect::layout(args)?;
    let start = async {
        let (zk, events) = connect::session(args).await?;
        let leads = claim(&zk, &layout).await?;
        anyhow::Ok((zk, events, leads))
    };
    let Some(started) = shutdown.unless_requested(start).await else {
        return Ok(());
    };
    let (zk, events, leads) = started?;
    let Some(epoch) = leads else {
        let holder = zk
            .get_data(&layout.master(), Watch::No)
            .await
            .map(|(data, _)| String::from_utf8_lossy(&data).into_owned())
            .unwrap_or_else(|error| format!("unknown ({error})"));
        zk.close().await.ok();
        bail!(
            "another master leads: {} is held by session {holder}",
            layout.master()
        );
    };
    lead(zk, events, layout, epoch, shutdown).await
}

/// `zkdist worker`.
pub async fn worker(args: &RoleArgs) -> anyhow::Result<()> {
    let mut shutdown = Shutdown::install()?;
    let layout = connect::layout(&args.connect)?;
    let Some(session) = shutdown
        .unless_requested(connect::session(&args.connect))
        .await
    else {
        return Ok(());
    };
    let (zk, events) = session?;
    work(zk, events, layout, args.allow_exec, shutdown).await
}

async fn claim(zk: &ZkSession, layout: &Layout) -> anyhow::Result<Option<Epoch>> {
    claim_master(zk, layout)
        .await
        .with_context(|| format!("cannot claim {}", layout.master()))
}

async fn lead(
    zk: ZkSession,
    events: EventStream,
    layout: Layout,
    epoch: Epoch,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    tracing::info!(session = %zk.session_id(), root = layout.root(), %epoch, "leading as master");
    let outcome = Master::new(zk.clone(), events, layout, epoch)
        .run_until(shutdown.requested())
        .await;
    // Closing deletes the master node at once, so a successor need not wait
    // for the session to time out.
    zk.close().await.ok();
    outcome.context("the master stopped")?;
    Ok(())
}

async fn work(
    zk: ZkSession,
    events: EventStream,
    layout: Layout,
    allow_exec: bool,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let handler = Builtin(BuiltinHandler {
        allow_exec,
        result_limit_bytes: MAX_RESULT_OUTPUT_BYTES,
    });
    tracing::info!(session = %zk.session_id(), root = layout.root(), allow_exec, "starting a worker");
    let outcome = Worker::new(zk.clone(), events, layout, handler)
        .run_until(shutdown.requested())
        .await;
    zk.close().await.ok();
    let worker = outcome.context("the worker stopped")?;
    tracing::info!(%worker, "worker stopped");
    Ok(())
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
