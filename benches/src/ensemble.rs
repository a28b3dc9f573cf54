//! What `zkdist bench` measures on a real ensemble, written against the
//! coordination trait (so the simulator runs it too, in the tests):
//!
//! 1. the raw ceiling ([`crate::raw`]): one session creates `raw_nodes`
//!    nodes, reads them and deletes them, with many requests in flight,
//!    which is as fast as the server takes writes (and reads) from one
//!    client; and writes as many again under a second session's watch,
//!    which prices a watch event;
//! 2. with `backlog > 0`, a backlog: the master runs, the tasks are queued
//!    and the master has queued them all, then the workers start and drain
//!    them (the founding listing loop stops there once `tasks/` is over
//!    the client's reply limit, which the run reports as the master's
//!    error);
//! 3. the task stream: a client keeps `in_flight` tasks unfinished until
//!    `tasks` are done, for tasks/s and submit-to-result latencies;
//!
//! 4. the raw ceiling again, on the same session, now that the server has
//!    served the whole run (its JIT compiler warm, its tree as big as the
//!    tasks left it), its watched writes first this time, so that the
//!    mean of the two prices of an event leaves the server's drift out;
//!
//! every session (client, master, workers) counted, so that the report
//! says how many writes a task costs. The efficiency is the share of the
//! raw ceiling that zkdist's own writes use: tasks/s x writes per task /
//! raw writes/s, with the better of the two raw measurements (a server
//! measured cold, before anything ran, would make the ceiling look lower
//! than what the task stream ran against).
//!
//! The run owns its root: it refuses one that exists, and deletes it at the
//! end, whatever happened.

use std::future::Future;
use std::sync::Arc;

use futures::stream::{StreamExt, TryStreamExt};
use tokio::time::Instant;
use zkdist_coord::{
    Client, Coordinator, EventStream, Layout, TaskId, Watch, ZkError, ZkResult, path,
};

use zkdist_master::TaskDiscovery;

use crate::counting::{Counted, OpCounter, OpCounts};
use crate::raw::{RawCeiling, RawError, StepOrder, Watcher, raw_ceiling};
use crate::system::{System, SystemError};
use crate::workload::{
    PhaseReport, Progress, RenamedPhase, WorkloadError, drain, stream_tasks, submit_backlog,
};

/// The child of the root the raw ceiling writes under.
const RAW_DIR: &str = "raw-ceiling";
/// The children of the root the raw ceiling's watched writes go under,
/// before and after the tasks: each measurement's watch stays.
const RAW_WATCHED_DIRS: [&str; 2] = ["raw-watched-before", "raw-watched-after"];
/// Workers one run may start.
pub const MAX_WORKERS: usize = 1_024;

/// Tasks the stream keeps unfinished per worker unless told otherwise.
/// Every worker holds one task, and a freed worker should find the next
/// one already queued: a submission takes a round trip and the master's
/// event another, so with only one spare task per worker the workers
/// often wait on the client (on a 2-core machine, 8 workers with 16 tasks
/// in flight ran at half the rate of 32). Deeper queues add latency, not
/// throughput.
pub const DEFAULT_IN_FLIGHT_PER_WORKER: u64 = 4;

/// Tasks streamed before the measured stream, and not measured. A freshly
/// started ZooKeeper runs interpreted Java until its JIT has compiled the
/// request path: on a new server three 5,000-task streams in a row ran at
/// 1,409, 2,273 and 2,773 tasks/s, and a long-running one at about 4,000.
/// What the stream measures is zkdist on a server in its steady state, as
/// the raw ceiling measured after the tasks already is.
pub const DEFAULT_WARMUP_TASKS: u64 = 10_000;

/// What one `zkdist bench` run does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchConfig {
    pub tasks: u64,
    pub workers: usize,
    /// Tasks queued before the workers start (0: none).
    pub backlog: u64,
    /// How the master discovers tasks.
    pub discovery: TaskDiscovery,
    /// Tasks the client keeps submitted but unfinished (see
    /// [`DEFAULT_IN_FLIGHT_PER_WORKER`]).
    pub in_flight: u64,
    /// Tasks streamed, unmeasured, before the measured stream (see
    /// [`DEFAULT_WARMUP_TASKS`]).
    pub warmup_tasks: u64,
    /// Nodes the raw ceiling creates, then deletes.
    pub raw_nodes: u64,
    /// Requests in flight while measuring the raw ceiling, queueing the
    /// backlog and cleaning up.
    pub raw_in_flight: usize,
}

impl BenchConfig {
    /// Refuses a run that could not measure anything, naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.tasks == 0 {
            return Err("--tasks must be at least 1".into());
        }
        if self.workers == 0 {
            return Err("--workers must be at least 1".into());
        }
        if self.in_flight == 0 {
            return Err("--in-flight must be at least 1".into());
        }
        if self.raw_nodes == 0 {
            return Err("--raw-nodes must be at least 1".into());
        }
        if self.raw_in_flight == 0 {
            return Err("--raw-in-flight must be at least 1".into());
        }
        if self.workers > MAX_WORKERS {
            return Err(format!(
                "--workers is {}, more than {MAX_WORKERS} (each worker is a session of its own)",
                self.workers
            ));
        }
        // The bench starts on a root of its own: its names stay short of
        // the point where ZooKeeper's signed 32-bit counter wraps.
        let total = self
            .tasks
            .saturating_add(self.backlog)
            .saturating_add(self.warmup_tasks);
        if total > i32::MAX as u64 {
            return Err(format!(
                "--tasks plus --backlog plus --warmup-tasks is {total}, more than ZooKeeper's sequence counter ({})",
                i32::MAX
            ));
        }
        Ok(())
    }
}

/// A backlog's three stretches: queueing it, before the workers started
/// (not timed); a takeover, timed: the master that queued it stops and
/// hands its node over, and a new master builds its state from the tree
/// (every queued task checked for a result) before it may assign anything;
/// and the drain, timed from the workers' start.
#[derive(Debug, Clone, PartialEq)]
pub struct BacklogReport {
    /// What submitting the backlog's tasks sent, and the master's reads
    /// meanwhile.
    pub queueing: OpCounts,
    /// The new master's wait over the queued backlog, and its requests.
    pub takeover: TakeoverReport,
    /// The drain: its rates and its counts cover the same interval.
    pub drain: PhaseReport,
}

/// How long a new master took to be ready over the backlog, and what it
/// sent meanwhile: what a failover costs before work goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct TakeoverReport {
    /// From the new master's claim of the master node to its state built.
    pub ready: std::time::Duration,
    pub ops: OpCounts,
}

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchReport {
    /// The raw ceiling measured before anything else ran.
    pub raw_before: RawCeiling,
    /// The raw ceiling measured again once the tasks were done.
    pub raw_after: RawCeiling,
    pub backlog: Option<BacklogReport>,
    pub tasks: PhaseReport,
}

impl BenchReport {
    /// The better of the two raw measurements: the ceiling.
    pub fn raw(&self) -> &RawCeiling {
        if self.raw_after.writes_per_s() > self.raw_before.writes_per_s() {
            &self.raw_after
        } else {
            &self.raw_before
        }
    }

    /// tasks/s x writes per task / raw writes/s: the share of the raw
    /// ceiling's write rate that the task stream's writes reached. A write
    /// is a transaction (a multi counts once), as each of the raw
    /// ceiling's writes is.
    pub fn efficiency(&self) -> f64 {
        self.tasks.tasks_per_s() * self.tasks.writes_per_task() / self.raw().writes_per_s()
    }

    /// [`BenchReport::efficiency`] with a multi counted as the nodes it
    /// writes: the ceiling's writes are one node each, and nothing
    /// measures that a multi costs the server as much as one create, so
    /// the two bound the figure from both sides.
    pub fn node_write_efficiency(&self) -> f64 {
        self.tasks.tasks_per_s() * self.tasks.node_writes_per_task() / self.raw().writes_per_s()
    }

    /// The share of the server's time that a task's requests, writes and
    /// reads, take, each priced at the raw ceiling's rate for its kind:
    /// tasks/s x (writes per task / raw writes/s + reads per task / raw
    /// reads/s), each the faster of the two measurements. What it leaves
    /// under 1 is time the server spent on what the ceiling does not
    /// send (watch events) or was idle.
    pub fn request_efficiency(&self) -> f64 {
        self.tasks.tasks_per_s()
            * (self.tasks.writes_per_task() / self.raw().writes_per_s()
                + self.tasks.reads_per_task() / self.raw_reads_per_s())
    }

    /// What a watch event costs the server, in writes: the mean of the two
    /// measurements' own prices (each its watched writes against its own
    /// unwatched ones). Not the better measurement's price alone: that one
    /// is chosen for its fast unwatched writes, which would make events
    /// look dear. Negative when the watched writes ran faster: the price
    /// was lost in the run's noise.
    pub fn event_cost_in_writes(&self) -> f64 {
        (self.raw_before.event_cost_in_writes() + self.raw_after.event_cost_in_writes()) / 2.0
    }

    /// The faster of the two measurements' read rates. Each kind takes its
    /// own better run: a read burst lasts well under a second, and one
    /// that met the server's garbage collection can come out at half the
    /// rate of its neighbour, which would price the stream's reads at
    /// twice their cost.
    pub fn raw_reads_per_s(&self) -> f64 {
        self.raw_before
            .reads_per_s()
            .max(self.raw_after.reads_per_s())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BenchError {
    #[error("cannot open the {session}'s session: {error}")]
    Connect { session: String, error: ZkError },
    #[error(
        "{root} already exists: a bench run needs a root of its own, which it deletes when done; \
         pass another --root (delete {root} only if a bench run left it behind: a deployment's \
         root holds its tasks and results)"
    )]
    RootExists { root: String },
    #[error("{what} failed: {error}")]
    Zk { what: String, error: ZkError },
    #[error("measuring the raw ceiling: {0}")]
    Raw(#[from] RawError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    System(#[from] SystemError),
    #[error("interrupted before the run finished")]
    Interrupted,
    #[error("{run}; and the run's root was not deleted: {cleanup}")]
    CleanupToo {
        run: Box<BenchError>,
        cleanup: Box<BenchError>,
    },
}

fn zk_failed(what: impl Into<String>) -> impl FnOnce(ZkError) -> BenchError {
    let what = what.into();
    move |error| BenchError::Zk { what, error }
}

/// Runs the whole measurement under `layout`'s root, on sessions opened by
/// `connect` (called with the session's role: `client`, `master`, `worker
/// N`), and deletes the root afterwards. If `interrupt` completes first,
/// the measurement stops there (`Interrupted`), and the root is deleted all
/// the same. Every session is closed before this returns.
pub async fn run<C, F, Fut>(
    mut connect: F,
    layout: &Layout,
    config: &BenchConfig,
    progress: &mut dyn Progress,
    interrupt: impl Future<Output = ()>,
) -> Result<BenchReport, BenchError>
where
    C: Coordinator + Clone,
    F: FnMut(String) -> Fut,
    Fut: Future<Output = ZkResult<(C, EventStream)>>,
{
    if let Err(message) = config.validate() {
        panic!("{message}");
    }
    let mut interrupt = std::pin::pin!(interrupt);
    // Interruptible too: with the ensemble out of reach, connecting takes
    // as long as the connect timeout, and nothing was made yet.
    let connected = tokio::select! {
        biased;
        () = &mut interrupt => return Err(BenchError::Interrupted),
        connected = connect("client".to_owned()) => connected,
    };
    let (zk, events) = connected.map_err(|error| BenchError::Connect {
        session: "client".to_owned(),
        error,
    })?;
    let root = layout.root().to_owned();
    let outcome = match zk.exists(&root, Watch::No).await {
        Ok(Some(_)) => Err(BenchError::RootExists { root: root.clone() }),
        Err(error) => Err(BenchError::Zk {
            what: format!("checking {root}"),
            error,
        }),
        Ok(None) => {
            // Checked before the layout makes them: the parents the run
            // creates are the run's to delete again.
            let missing_parents = match missing_parents(&zk, &root).await {
                Ok(parents) => parents,
                Err(error) => {
                    let _ = zk.close().await;
                    return Err(error);
                }
            };
            let mut run = Run {
                counter: OpCounter::new(),
                sessions: Vec::new(),
                queued: Vec::new(),
            };
            let measuring = run.measure(&mut connect, &zk, events, layout, config, progress);
            // An interrupted measurement drops its actors' handles; closing
            // their sessions below ends them.
            let outcome = tokio::select! {
                biased;
                () = &mut interrupt => Err(BenchError::Interrupted),
                outcome = measuring => outcome,
            };
            for session in &run.sessions {
                // Closing ends the session's ephemerals at once; a session
                // that is gone already has none.
                let _ = session.close().await;
            }
            let cleanup = remove_root(&zk, layout, &run.queued, config.raw_in_flight).await;
            if cleanup.is_ok() {
                remove_empty_parents(&zk, &missing_parents).await;
            }
            match (outcome, cleanup) {
                (Ok(report), Ok(())) => Ok(report),
                (Err(run), Ok(())) => Err(run),
                (Ok(_), Err(cleanup)) => Err(cleanup),
                (Err(run), Err(cleanup)) => Err(BenchError::CleanupToo {
                    run: Box::new(run),
                    cleanup: Box::new(cleanup),
                }),
            }
        }
    };
    let _ = zk.close().await;
    outcome
}

/// What a run keeps to clean up after itself.
struct Run<C> {
    counter: Arc<OpCounter>,
    /// Every session but the client's.
    sessions: Vec<C>,
    /// Every task queued, so that cleaning up needs no listing of `tasks/`
    /// (which stops working past the client's reply limit).
    queued: Vec<TaskId>,
}

impl<C: Coordinator + Clone> Run<C> {
    async fn open<F, Fut>(
        &mut self,
        connect: &mut F,
        session: String,
    ) -> Result<(Counted<C>, EventStream), BenchError>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = ZkResult<(C, EventStream)>>,
    {
        let (zk, events) = connect(session.clone())
            .await
            .map_err(|error| BenchError::Connect { session, error })?;
        self.sessions.push(zk.clone());
        Ok((Counted::new(zk, Arc::clone(&self.counter)), events))
    }

    /// Stops the master and closes its session, which hands the master
    /// node over at once (a crashed master's session would hold it until
    /// its timeout), then starts a new master on a session of its own:
    /// timed from its claim to its state built, which is when it may
    /// assign again.
    async fn take_over<F, Fut>(
        &mut self,
        connect: &mut F,
        system: &mut System,
        old_master: Counted<C>,
    ) -> Result<TakeoverReport, BenchError>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = ZkResult<(C, EventStream)>>,
    {
        system.stop_master().await?;
        old_master
            .close()
            .await
            .map_err(zk_failed("closing the first master's session"))?;
        let (zk, events) = self.open(connect, "new master".to_owned()).await?;
        let before = self.counter.snapshot();
        let started = Instant::now();
        system.start_master(zk, events).await?;
        system.wait_master_initialised().await?;
        Ok(TakeoverReport {
            ready: started.elapsed(),
            ops: self.counter.snapshot().since(&before),
        })
    }

    async fn measure<F, Fut>(
        &mut self,
        connect: &mut F,
        zk: &C,
        events: EventStream,
        layout: &Layout,
        config: &BenchConfig,
        progress: &mut dyn Progress,
    ) -> Result<BenchReport, BenchError>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = ZkResult<(C, EventStream)>>,
    {
        layout
            .ensure_layout(zk)
            .await
            .map_err(zk_failed(format!("laying out {}", layout.root())))?;
        let raw_dir = path::join(layout.root(), RAW_DIR);
        let [watched_before, watched_after] =
            RAW_WATCHED_DIRS.map(|dir| path::join(layout.root(), dir));
        // Not counted: its only request is the watch, and it is no actor.
        let (watcher_zk, watcher_events) =
            connect("watcher".to_owned())
                .await
                .map_err(|error| BenchError::Connect {
                    session: "watcher".to_owned(),
                    error,
                })?;
        self.sessions.push(watcher_zk.clone());
        let mut watcher = Watcher {
            zk: watcher_zk,
            events: watcher_events,
        };
        let raw_before = raw_ceiling(
            zk,
            &mut watcher,
            &raw_dir,
            &watched_before,
            config.raw_nodes,
            config.raw_in_flight,
            StepOrder::UnwatchedFirst,
        )
        .await?;

        let counter = Arc::clone(&self.counter);
        let client = Client::new(
            Counted::new(zk.clone(), Arc::clone(&counter)),
            events,
            layout.clone(),
        );
        // The raw ceiling's session, again after the tasks (the names below
        // are the actors' sessions).
        let raw_zk = zk;
        let mut system = System::new(layout.clone(), config.discovery);
        let outcome = async {
            let (master_zk, events) = self.open(connect, "master".to_owned()).await?;
            system.start_master(master_zk.clone(), events).await?;
            system.wait_master_initialised().await?;
            let before_queueing = counter.snapshot();
            if config.backlog > 0 {
                let queued = submit_backlog(&client, 0, config.backlog, config.raw_in_flight).await;
                self.queued.extend(queued?);
                system.wait_master_queued(config.backlog).await?;
            }
            let queueing = counter.snapshot().since(&before_queueing);
            let takeover = if config.backlog > 0 {
                Some(self.take_over(connect, &mut system, master_zk).await?)
            } else {
                None
            };

            let started = Instant::now();
            let ops_before = counter.snapshot();
            for n in 1..=config.workers {
                let (zk, events) = self.open(connect, format!("worker {n}")).await?;
                system.start_worker(zk, events);
            }
            let backlog = if config.backlog > 0 {
                let drained = drain(
                    &mut system,
                    &counter,
                    ops_before,
                    config.backlog,
                    started,
                    progress,
                )
                .await?;
                Some(BacklogReport {
                    queueing,
                    takeover: takeover.expect("a backlog is taken over"),
                    drain: drained,
                })
            } else {
                system.wait_registered().await?;
                None
            };
            system.wait_master_sees(config.workers).await?;
            if config.warmup_tasks > 0 {
                let (_, submitted) = stream_tasks(
                    &client,
                    &mut system,
                    &counter,
                    config.backlog,
                    config.warmup_tasks,
                    config.in_flight,
                    &mut RenamedPhase {
                        inner: &mut *progress,
                        phase: "warm-up",
                    },
                )
                .await?;
                self.queued.extend(submitted);
            }
            let (tasks, submitted) = stream_tasks(
                &client,
                &mut system,
                &counter,
                config.backlog + config.warmup_tasks,
                config.tasks,
                config.in_flight,
                progress,
            )
            .await?;
            self.queued.extend(submitted);
            // The master and the workers are idle now: the server serves
            // this session alone.
            let raw_after = raw_ceiling(
                raw_zk,
                &mut watcher,
                &raw_dir,
                &watched_after,
                config.raw_nodes,
                config.raw_in_flight,
                // The opposite order: the mean of the two prices of an
                // event leaves the server's drift out.
                StepOrder::WatchedFirst,
            )
            .await?;
            Ok::<_, BenchError>(BenchReport {
                raw_before,
                raw_after,
                backlog,
                tasks,
            })
        }
        .await;
        let stopped = system.stop().await;
        let report = outcome?;
        stopped?;
        Ok(report)
    }
}

/// Deletes the root and everything under it: first every queued task and
/// its result (by name, up to `in_flight` at once), then whatever is left,
/// walking the tree with up to `in_flight` subtrees of a node at once
/// (tasks whose names the run had not learned yet, when it was interrupted
/// while queueing a backlog, can be tens of thousands). The root's parents
/// stay.
pub async fn remove_root<C: Coordinator>(
    zk: &C,
    layout: &Layout,
    queued: &[TaskId],
    in_flight: usize,
) -> Result<(), BenchError> {
    // The roles' last writes went through their own sessions, perhaps to
    // other servers: catch up first, or a stale listing below could leave
    // a node behind and its parent's delete fail with `NotEmpty`.
    zk.sync(layout.root())
        .await
        .map_err(|error| BenchError::Zk {
            what: format!("syncing {}", layout.root()),
            error,
        })?;
    futures::stream::iter(queued)
        .map(|task| async move {
            // One session's requests apply in order: the result goes first.
            delete_if_there(zk, &layout.result(task)).await?;
            delete_if_there(zk, &layout.task(task)).await
        })
        .buffer_unordered(in_flight.max(1))
        .try_for_each(|()| std::future::ready(Ok(())))
        .await?;
    remove_tree(zk, layout.root().to_owned(), in_flight.max(1)).await
}

/// The parents of `root` that do not exist, deepest first.
async fn missing_parents<C: Coordinator>(zk: &C, root: &str) -> Result<Vec<String>, BenchError> {
    let mut missing = Vec::new();
    let mut parent = path::parent(root);
    while parent != "/" {
        match zk.exists(parent, Watch::No).await {
            Ok(Some(_)) => break,
            Ok(None) => missing.push(parent.to_owned()),
            Err(error) => {
                return Err(BenchError::Zk {
                    what: format!("checking {parent}"),
                    error,
                });
            }
        }
        parent = path::parent(parent);
    }
    Ok(missing)
}

/// Deletes the parents the run created (`parents`, deepest first), each
/// only while it is empty: one that somebody else used meanwhile is
/// theirs, and so are the parents above it. The run's own root is gone by
/// now, so a parent that cannot be deleted is worth a warning, not the
/// run's report.
async fn remove_empty_parents<C: Coordinator>(zk: &C, parents: &[String]) {
    for parent in parents {
        match zk.delete(parent, None).await {
            Ok(()) | Err(ZkError::NoNode { .. }) => {}
            Err(ZkError::NotEmpty { .. }) => break,
            Err(error) => {
                tracing::warn!("the bench made {parent} and cannot delete it: {error}");
                break;
            }
        }
    }
}

async fn delete_if_there<C: Coordinator>(zk: &C, path: &str) -> Result<(), BenchError> {
    match zk.delete(path, None).await {
        Ok(()) | Err(ZkError::NoNode { .. }) => Ok(()),
        Err(error) => Err(BenchError::Zk {
            what: format!("deleting {path}"),
            error,
        }),
    }
}

/// Deletes `path` and its subtree, children first, up to `in_flight`
/// children's subtrees at once.
fn remove_tree<C: Coordinator>(
    zk: &C,
    path: String,
    in_flight: usize,
) -> std::pin::Pin<Box<dyn Future<Output = Result<(), BenchError>> + Send + '_>> {
    Box::pin(async move {
        let children = match zk.get_children(&path, Watch::No).await {
            Ok((children, _)) => children,
            Err(ZkError::NoNode { .. }) => return Ok(()),
            Err(error) => {
                return Err(BenchError::Zk {
                    what: format!("listing {path}"),
                    error,
                });
            }
        };
        futures::stream::iter(children)
            .map(|child| remove_tree(zk, path::join(&path, &child), in_flight))
            .buffer_unordered(in_flight)
            .try_for_each(|()| std::future::ready(Ok(())))
            .await?;
        delete_if_there(zk, &path).await
    })
}
