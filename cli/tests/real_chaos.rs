//! Chaos on a real 3-node ensemble: 1,000 tasks through two `zkdist master`
//! processes (one leads, one stands by) and four `zkdist worker` processes,
//! while a fault script kills the ZooKeeper leader, kills and restarts a
//! follower, SIGKILLs the active master, SIGKILLs a worker, and SIGSTOPs a
//! worker past its session timeout before resuming it. SIGKILLed roles are
//! restarted as new processes (a master killed comes back as a standby, a
//! worker killed as a new worker); the paused worker is the same process,
//! resumed, and must re-join by itself under a new id.
//!
//! At the end every submitted task has exactly one result, written once and
//! never overwritten, holding that task's own answer; no task exists that
//! was not submitted (a retried submission never made a second one); no
//! worker wrote a task's result twice, and the paused worker (a zombie once
//! resumed) wrote nothing for the task it held. The output names each fault
//! as it happens and ends with the fault count and the task count.
//!
//! Needs `ZKDIST_TEST_ZK` (the ensemble's connect string) and
//! `ZKDIST_TEST_ENSEMBLE_DIR` (its `scripts/zk ensemble` directory, to kill
//! and restart its nodes); without them the test is reported as ignored.
//! The ensemble is left with its three nodes serving.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Trial};
use zkdist_coord::zk::testing;
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{
    Client, ClientError, Coordinator, Layout, SessionId, Stat, TaskId, TaskResult, WorkerId,
};
use zkdist_worker::{CompletionReadBack, WorkerDecision};

use common::{Observer, Role, Scratch};

/// Tasks submitted over the run.
const TASKS: usize = 1_000;
/// Samples of the first task's `pi` payload; task `i` asks for `BASE + i`,
/// so a result's `samples` names the task it answers. A million samples
/// keep a worker busy for some tens of milliseconds, so that the workers
/// the faults hit are likely to hold a task.
const BASE_SAMPLES: u64 = 1_000_000;
/// The roles' session timeout: the paused worker must outlive it, and the
/// killed roles' sessions expire after it.
const ROLE_SESSION_TIMEOUT_MS: u64 = 4_000;
/// Submissions go out in batches this far apart, so that tasks keep coming
/// while the faults happen (1,000 tasks over about 25 s).
const BATCH_SIZE: usize = 20;
const BATCH_INTERVAL: Duration = Duration::from_millis(500);
/// The pause between two faults, for the system to get going again.
const BETWEEN_FAULTS: Duration = Duration::from_secs(2);
/// The longest the test waits for anything that must happen (a takeover,
/// an expiry, the last result): a hang guard, not a speed check.
const PATIENCE: Duration = Duration::from_secs(90);
/// How long a worker fault waits for a worker that holds a task before it
/// takes an idle one.
const BUSY_PATIENCE: Duration = Duration::from_secs(3);
/// How many workers the pause fault stops, one after the other, to find
/// one that holds a task.
const PAUSE_ATTEMPTS: usize = 5;

const MASTERS: usize = 2;
const WORKERS: usize = 4;

/// The fault script, in order.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL the ZooKeeper node that leads; once the other two serve
    /// again, start it again.
    KillZkLeader,
    /// SIGKILL a ZooKeeper follower and start it again a second later.
    KillAndRestartZkFollower,
    /// SIGKILL the master process that leads: the standby takes over once
    /// its session expires. The killed one restarts as a standby.
    KillActiveMaster,
    /// SIGKILL a worker process (a busy one if any): its task goes back to
    /// the queue once its session expires. A new worker process replaces it.
    KillWorker,
    /// SIGSTOP a worker process (a busy one if any) until the ensemble has
    /// expired its session, then SIGCONT it: it must write nothing for the
    /// task it held and re-join under a new id.
    PauseWorkerPastSessionTimeout,
}

const FAULT_SCRIPT: [Fault; 5] = [
    Fault::KillZkLeader,
    Fault::KillAndRestartZkFollower,
    Fault::KillActiveMaster,
    Fault::KillWorker,
    Fault::PauseWorkerPastSessionTimeout,
];

fn main() {
    let args = Arguments::from_args();
    let trial = common::ensemble_trial(
        "chaos_1000_tasks_2_masters_4_workers_through_ensemble_and_process_faults",
        chaos,
    );
    // Needs no server: the checks read the workers' logs, and must read
    // the lines the workers really write.
    let patterns = Trial::test("the_log_readers_find_the_lines_workers_write", || {
        the_log_readers_find_the_lines_workers_write();
        Ok(())
    });
    libtest_mimic::run(&args, vec![trial, patterns]).exit()
}

fn the_log_readers_find_the_lines_workers_write() {
    let worker = WorkerId::parse("worker-0000000007").unwrap();
    let task = TaskId::parse("task-00000000000000ab-0000000042").unwrap();
    let decision = |decision: WorkerDecision| format!("2026-01-01T00:00:00Z INFO {decision}");
    let log = [
        decision(WorkerDecision::ResultWritten {
            worker: worker.clone(),
            task: task.clone(),
            success: true,
        }),
        decision(WorkerDecision::CompletionRecovered {
            worker: worker.clone(),
            task: task.clone(),
            found: CompletionReadBack::ResultPresent,
        }),
        decision(WorkerDecision::CompletionRecovered {
            worker: worker.clone(),
            task: task.clone(),
            found: CompletionReadBack::NotApplied,
        }),
    ]
    .join("\n");
    let expected = vec![(worker.to_string(), task.to_string())];
    assert_eq!(result_writes(&log), expected, "{log}");
    assert_eq!(results_found_present(&log), expected, "{log}");
    assert_eq!(
        registrations(&decision(WorkerDecision::Registered {
            worker: worker.clone()
        })),
        vec![worker.to_string()]
    );
}

// ---------------------------------------------------------------------------
// The test.

fn chaos(connect: String, ensemble_dir: PathBuf) {
    let mut chaos = Chaos::start(connect, ensemble_dir);
    chaos.wait_for_roles();
    let submitter = chaos.start_submitter();
    std::thread::sleep(BETWEEN_FAULTS);
    for (index, fault) in FAULT_SCRIPT.iter().enumerate() {
        chaos.inject(index + 1, *fault);
        std::thread::sleep(BETWEEN_FAULTS);
    }
    let submitted = submitter.join().expect("the submitter panicked");
    chaos.note(&format!(
        "submitter done: {} tasks submitted",
        submitted.len()
    ));
    chaos.check_outcome(&submitted);
    chaos.stop_roles();
    chaos.note(&format!(
        "chaos: {} faults injected, {} tasks submitted, {} results, each task finished exactly once",
        FAULT_SCRIPT.len(),
        submitted.len(),
        submitted.len()
    ));
    chaos.delete_root();
}

/// One role process of the run, with what the fault script did to it.
struct Process {
    role: Role,
    kind: Kind,
    /// SIGKILLed (and reaped) by the fault script.
    killed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Master,
    Worker,
}

struct Chaos {
    connect: String,
    ensemble_dir: PathBuf,
    layout: Layout,
    scratch: Scratch,
    /// Every role process started, killed ones included (their logs count).
    processes: Vec<Process>,
    observer: Observer,
    started: Instant,
    /// Tasks whose worker was paused past its session timeout, with that
    /// worker's id and process: the zombie must never write their results.
    zombie_tasks: Vec<(String, String, usize)>,
    /// Tasks whose worker was SIGKILLed, with that worker's id: someone
    /// else must finish them.
    orphaned_tasks: Vec<(String, String)>,
    /// The worker processes SIGKILLed or SIGSTOPped: each may have been
    /// stopped between a completion the server applied and the log line
    /// that says so.
    stopped_workers: Vec<usize>,
}

impl Chaos {
    fn start(connect: String, ensemble_dir: PathBuf) -> Chaos {
        let root = testing::unique_root("zkdist-chaos");
        let layout = Layout::new(&root).unwrap();
        let observer = Observer::connect(&connect);
        let mut chaos = Chaos {
            connect,
            ensemble_dir,
            layout,
            scratch: Scratch::new("chaos"),
            processes: Vec::new(),
            observer,
            started: Instant::now(),
            zombie_tasks: Vec::new(),
            orphaned_tasks: Vec::new(),
            stopped_workers: Vec::new(),
        };
        chaos.note(&format!(
            "chaos on {} under {}: {MASTERS} masters, {WORKERS} workers, {TASKS} tasks, \
             role session timeout {ROLE_SESSION_TIMEOUT_MS} ms",
            chaos.connect, root
        ));
        for _ in 0..MASTERS {
            chaos.spawn(Kind::Master);
        }
        for _ in 0..WORKERS {
            chaos.spawn(Kind::Worker);
        }
        chaos
    }

    /// Prints one line of the run's log, with the time since the start.
    fn note(&self, line: &str) {
        println!("[{:7.2}s] {line}", self.started.elapsed().as_secs_f64());
    }

    fn spawn(&mut self, kind: Kind) -> usize {
        let index = self.processes.len();
        let count = self.processes.iter().filter(|p| p.kind == kind).count();
        let (name, command) = match kind {
            Kind::Master => (format!("master-{}", count + 1), "master"),
            Kind::Worker => (format!("worker-process-{}", count + 1), "worker"),
        };
        let timeout = ROLE_SESSION_TIMEOUT_MS.to_string();
        let args = [
            command,
            "--zk",
            &self.connect,
            "--root",
            self.layout.root(),
            "--session-timeout-ms",
            &timeout,
        ];
        let role = Role::spawn(&name, &args, &self.scratch);
        self.note(&format!("started {name} (pid {})", role.pid()));
        self.processes.push(Process {
            role,
            kind,
            killed: false,
        });
        index
    }

    /// Waits until one master leads and every worker has registered.
    fn wait_for_roles(&mut self) {
        let layout = self.layout.clone();
        let (holder, workers) = self.eventually("a master and every worker", |chaos| {
            let holder = chaos.observer.stat(&layout.master())?;
            let workers = chaos.observer.children(&layout.workers_dir())?;
            (workers.len() == WORKERS).then_some((holder, workers))
        });
        let leader = self.process_of_session(SessionId(holder.ephemeral_owner));
        self.note(&format!(
            "{} leads (session {}); workers registered: {}",
            self.name(leader),
            SessionId(holder.ephemeral_owner),
            workers.join(" ")
        ));
    }

    /// Submits the tasks from a thread of its own, in paced batches, through
    /// the library's client (which recognises its own task after a
    /// connection loss instead of creating it again).
    fn start_submitter(&self) -> JoinHandle<BTreeMap<String, u64>> {
        let config = role_config(&self.connect);
        let layout = self.layout.clone();
        let started = self.started;
        std::thread::spawn(move || {
            let runtime = testing::runtime();
            runtime.block_on(async move {
                let mut client = connect_client(&config, &layout).await;
                let mut submitted = BTreeMap::new();
                for batch in 0..TASKS.div_ceil(BATCH_SIZE) {
                    for i in batch * BATCH_SIZE..((batch + 1) * BATCH_SIZE).min(TASKS) {
                        let samples = BASE_SAMPLES + i as u64;
                        let payload = format!(r#"{{"kind":"pi","samples":{samples},"seed":{i}}}"#);
                        let deadline = Instant::now() + PATIENCE;
                        let task = loop {
                            match client.submit(payload.as_bytes()).await {
                                Ok(task) => break task,
                                // The session is gone: a new one, and the
                                // submission again.
                                Err(ClientError::Zk(error)) if error.is_session_fatal() => {
                                    println!(
                                        "[{:7.2}s] submitter: {error}; new session",
                                        started.elapsed().as_secs_f64()
                                    );
                                    client = connect_client(&config, &layout).await;
                                }
                                // The session ended before the create's
                                // outcome was known: a new session looks
                                // for its token, and submits again only
                                // if no task carries it.
                                Err(error @ ClientError::SubmitInDoubt { token, .. }) => {
                                    println!(
                                        "[{:7.2}s] submitter: {error}; new session",
                                        started.elapsed().as_secs_f64()
                                    );
                                    client = connect_client(&config, &layout).await;
                                    match client.find_submission(token).await {
                                        Ok(Some(task)) => break task,
                                        Ok(None) => {}
                                        Err(error) => panic!("resolving task {i}: {error}"),
                                    }
                                }
                                Err(error) => panic!("submitting task {i}: {error}"),
                            }
                            assert!(Instant::now() < deadline, "task {i} not submitted in time");
                        };
                        let previous = submitted.insert(task.to_string(), samples);
                        assert_eq!(previous, None, "{task} returned twice");
                    }
                    tokio::time::sleep(BATCH_INTERVAL).await;
                }
                client.session().close().await.ok();
                submitted
            })
        })
    }

    fn inject(&mut self, number: usize, fault: Fault) {
        self.note(&format!(
            "--- fault {number}/{}: {fault:?}",
            FAULT_SCRIPT.len()
        ));
        match fault {
            Fault::KillZkLeader => self.kill_zk_leader(number),
            Fault::KillAndRestartZkFollower => self.kill_and_restart_zk_follower(number),
            Fault::KillActiveMaster => self.kill_active_master(number),
            Fault::KillWorker => self.kill_worker(number),
            Fault::PauseWorkerPastSessionTimeout => self.pause_worker(number),
        }
    }

    fn kill_zk_leader(&mut self, number: usize) {
        let dir = self.ensemble_dir();
        let leader = zk_leader(&dir);
        let killed = testing::KilledNode::kill(&dir, &leader);
        self.note(&format!(
            "fault {number}: SIGKILLed ZooKeeper node {leader}, the ensemble's leader"
        ));
        testing::run_scripts_zk(&["wait", &dir]);
        let new_leader = zk_leader(&dir);
        self.note(&format!(
            "the two other nodes serve again, node {new_leader} leading"
        ));
        killed.restore();
        self.note(&format!("node {leader} restarted and serving"));
    }

    fn kill_and_restart_zk_follower(&mut self, number: usize) {
        let dir = self.ensemble_dir();
        let status = testing::run_scripts_zk(&["status", &dir]);
        let follower = status
            .lines()
            .find(|line| line.ends_with("mode follower"))
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("no follower in:\n{status}"))
            .to_owned();
        let killed = testing::KilledNode::kill(&dir, &follower);
        self.note(&format!(
            "fault {number}: SIGKILLed ZooKeeper node {follower}, a follower"
        ));
        std::thread::sleep(Duration::from_secs(1));
        killed.restore();
        self.note(&format!("node {follower} restarted and serving"));
    }

    fn kill_active_master(&mut self, number: usize) {
        let master_path = self.layout.master();
        let holder = self.eventually("a master to kill", |chaos| {
            chaos.observer.stat(&master_path)
        });
        let old_session = SessionId(holder.ephemeral_owner);
        let victim = self.process_of_session(old_session);
        self.kill(victim);
        self.note(&format!(
            "fault {number}: SIGKILLed {} (pid {}), the active master (session {old_session})",
            self.name(victim),
            self.processes[victim].role.pid()
        ));
        let new_holder = self.eventually("the standby to take over", |chaos| {
            chaos
                .observer
                .stat(&master_path)
                .filter(|stat| stat.ephemeral_owner != old_session.0)
        });
        let new_session = SessionId(new_holder.ephemeral_owner);
        let successor = self.process_of_session(new_session);
        assert_ne!(successor, victim);
        self.note(&format!(
            "{} took over (session {new_session}) once session {old_session} expired",
            self.name(successor)
        ));
        let restarted = self.spawn(Kind::Master);
        self.note(&format!(
            "{} restarted as {}, a standby",
            self.name(victim),
            self.name(restarted)
        ));
    }

    fn kill_worker(&mut self, number: usize) {
        let (victim, worker_id) = self.pick_worker();
        let pid = self.processes[victim].role.pid();
        self.kill(victim);
        self.stopped_workers.push(victim);
        let held = self.assignment_of(&worker_id);
        self.note(&format!(
            "fault {number}: SIGKILLed {} (pid {pid}), registered as {worker_id}, {}",
            self.name(victim),
            holding(&held)
        ));
        if let Some(task) = &held {
            self.orphaned_tasks.push((worker_id.clone(), task.clone()));
        }
        self.wait_until_unregistered(&worker_id);
        self.note(&format!(
            "{worker_id}'s session expired{}",
            match &held {
                Some(task) => format!(": the master takes {task} back"),
                None => String::new(),
            }
        ));
        let restarted = self.spawn(Kind::Worker);
        self.note(&format!(
            "{} replaced by a new worker process, {}",
            self.name(victim),
            self.name(restarted)
        ));
    }

    fn pause_worker(&mut self, number: usize) {
        // A worker that holds a task when it stops: one that finished its
        // task between the look and the stop is resumed at once, and
        // another one tried.
        let mut attempts = 0;
        let (victim, worker_id, held) = loop {
            attempts += 1;
            let (victim, worker_id) = self.pick_worker();
            self.processes[victim].role.signal("STOP");
            // What it sent before it stopped reaches the server first.
            std::thread::sleep(Duration::from_millis(200));
            let held = self.assignment_of(&worker_id);
            if held.is_some() || attempts == PAUSE_ATTEMPTS {
                break (victim, worker_id, held);
            }
            self.processes[victim].role.signal("CONT");
            self.note(&format!(
                "{} ({worker_id}) was idle when stopped: resumed, trying again",
                self.name(victim)
            ));
        };
        self.stopped_workers.push(victim);
        let registrations_before = registrations(&self.processes[victim].role.log());
        self.note(&format!(
            "fault {number}: SIGSTOPped {} (pid {}), registered as {worker_id}, {}",
            self.name(victim),
            self.processes[victim].role.pid(),
            holding(&held)
        ));
        if let Some(task) = &held {
            self.zombie_tasks
                .push((worker_id.clone(), task.clone(), victim));
        }
        self.wait_until_unregistered(&worker_id);
        self.note(&format!(
            "the ensemble expired {worker_id}'s session while it was stopped"
        ));
        self.processes[victim].role.signal("CONT");
        self.note(&format!("SIGCONT to {}", self.name(victim)));
        let new_id = self.eventually("the resumed worker to re-join", |chaos| {
            let log = chaos.processes[victim].role.log();
            let ids = registrations(&log);
            (ids.len() > registrations_before.len()).then(|| ids.last().cloned())?
        });
        assert_ne!(new_id, worker_id, "a re-joining worker takes a new id");
        self.note(&format!(
            "{} noticed its expiry and re-joined as {new_id}",
            self.name(victim)
        ));
    }

    /// A live, running worker process and the id it is registered under:
    /// one that holds a task if one does within [`BUSY_PATIENCE`], else any.
    fn pick_worker(&mut self) -> (usize, String) {
        let layout = self.layout.clone();
        let busy_deadline = Instant::now() + BUSY_PATIENCE;
        self.eventually("a registered worker process", |chaos| {
            let registered = chaos.observer.children(&layout.workers_dir())?;
            let busy: BTreeSet<String> = chaos
                .observer
                .children(&layout.assignments_dir())?
                .into_iter()
                .collect();
            let mut candidates = Vec::new();
            for worker in registered {
                let stat = chaos
                    .observer
                    .stat(&format!("{}/{worker}", layout.workers_dir()))?;
                let process = chaos.try_process_of_session(SessionId(stat.ephemeral_owner))?;
                if chaos.processes[process].kind == Kind::Worker && !chaos.processes[process].killed
                {
                    candidates.push((busy.contains(&worker), process, worker));
                }
            }
            // Busy ones first.
            candidates.sort_by_key(|(busy, _, _)| !busy);
            let (busy, process, worker) = candidates.into_iter().next()?;
            (busy || Instant::now() >= busy_deadline).then_some((process, worker))
        })
    }

    fn assignment_of(&mut self, worker_id: &str) -> Option<String> {
        let path = format!("{}/{worker_id}", self.layout.assignments_dir());
        self.observer
            .data(&path)
            .map(|data| zkdist_coord::assignment_label(&data))
    }

    fn wait_until_unregistered(&mut self, worker_id: &str) {
        let path = format!("{}/{worker_id}", self.layout.workers_dir());
        self.eventually(&format!("{path} to go"), |chaos| {
            chaos.observer.stat(&path).is_none().then_some(())
        });
    }

    fn kill(&mut self, index: usize) {
        let process = &mut self.processes[index];
        process.role.signal("KILL");
        let status = process.role.wait_exit();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "{} ended by SIGKILL",
            process.role.name
        );
        process.killed = true;
    }

    fn name(&self, index: usize) -> &str {
        &self.processes[index].role.name
    }

    fn ensemble_dir(&self) -> String {
        self.ensemble_dir.to_str().expect("utf-8 path").to_owned()
    }

    /// The process that opened `session` (each role logs its sessions).
    fn try_process_of_session(&self, session: SessionId) -> Option<usize> {
        let needle = format!("session={session}");
        self.processes.iter().position(|process| {
            process.role.log().lines().any(|line| {
                line.contains("session opened")
                    && line.split_whitespace().any(|word| word == needle)
            })
        })
    }

    fn process_of_session(&self, session: SessionId) -> usize {
        self.try_process_of_session(session)
            .unwrap_or_else(|| panic!("no role process logged opening session {session}"))
    }

    /// Calls `probe` until it returns `Some`, failing after [`PATIENCE`].
    fn eventually<T>(&mut self, what: &str, mut probe: impl FnMut(&mut Chaos) -> Option<T>) -> T {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(found) = probe(self) {
                return found;
            }
            if Instant::now() >= deadline {
                self.dump_logs();
                panic!("{what}: not within {PATIENCE:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until every task has its result, then checks the outcome.
    fn check_outcome(&mut self, submitted: &BTreeMap<String, u64>) {
        assert_eq!(submitted.len(), TASKS);
        let layout = self.layout.clone();
        let mut finished: BTreeMap<String, (Vec<u8>, Stat)> = BTreeMap::new();
        self.eventually("every task's result", |chaos| {
            let tasks = chaos.observer.children(&layout.tasks_dir())?;
            for task in &tasks {
                if finished.contains_key(task) {
                    continue;
                }
                let result = format!("{}/{task}/result", layout.tasks_dir());
                if let Some(found) = chaos.observer.data_and_stat(&result) {
                    finished.insert(task.clone(), found);
                }
            }
            (finished.len() == tasks.len() && tasks.len() >= submitted.len()).then_some(())
        });
        self.note(&format!(
            "every task has a result: {} results",
            finished.len()
        ));

        // No task that was not submitted, and none missing.
        let tasks: BTreeSet<&String> = finished.keys().collect();
        let expected: BTreeSet<&String> = submitted.keys().collect();
        assert_eq!(
            tasks, expected,
            "the tasks in ZooKeeper are exactly the submitted ones"
        );
        // Each result answers its own task, and was written once.
        for (task, (data, stat)) in &finished {
            let result = TaskResult::decode(data)
                .unwrap_or_else(|e| panic!("{task}'s result is unreadable: {e}"));
            let TaskResult::Success { output } = result else {
                panic!("{task} failed: {result:?}");
            };
            let output: serde_json::Value = serde_json::from_slice(&output)
                .unwrap_or_else(|e| panic!("{task}'s output is not JSON: {e}"));
            assert_eq!(
                output["samples"].as_u64(),
                Some(submitted[task]),
                "{task}'s result answers another task: {output}"
            );
            assert_eq!(stat.version, 0, "{task}'s result was overwritten");
        }
        // By the workers' own logs: no task written twice, no result for a
        // task nobody submitted, and the zombie wrote nothing it held.
        let mut writes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut found_present: BTreeSet<String> = BTreeSet::new();
        for process in self.processes.iter().filter(|p| p.kind == Kind::Worker) {
            let log = process.role.log();
            for (worker, task) in result_writes(&log) {
                writes.entry(task).or_default().push(worker);
            }
            found_present.extend(
                results_found_present(&log)
                    .into_iter()
                    .map(|(_, task)| task),
            );
        }
        // Every result is in some worker's log, so the checks below look
        // at every task. Only a worker stopped (SIGKILLed, or SIGSTOPped
        // until its session expired) between a completion the server
        // applied and the log line may leave one out, of a task its log
        // says it started, one at most each. A paused one learns nothing
        // of it when resumed: its client drops the stale connection, the
        // reply unread, and the read-back meets the expired session.
        let unlogged: Vec<&String> = finished
            .keys()
            .filter(|task| !writes.contains_key(*task) && !found_present.contains(*task))
            .collect();
        let mut excused = Vec::new();
        for task in &unlogged {
            let started = format!(" started {task}");
            let by = self.stopped_workers.iter().find(|process| {
                !excused.contains(*process)
                    && self.processes[**process].role.log().contains(&started)
            });
            let by = by.unwrap_or_else(|| {
                panic!(
                    "the result of {task} is in no worker's log, and no worker stopped by a \
                     fault (SIGKILL or SIGSTOP) with one unlogged result left started it \
                     (unlogged: {unlogged:?})"
                )
            });
            excused.push(*by);
        }
        for (task, writers) in &writes {
            assert!(
                submitted.contains_key(task),
                "a worker wrote a result for {task}, never submitted"
            );
            assert_eq!(writers.len(), 1, "{task}'s result written by {writers:?}");
        }
        for (zombie, task, process) in &self.zombie_tasks {
            let writer = writes.get(task).map(|w| w[0].as_str());
            assert_ne!(
                writer,
                Some(zombie.as_str()),
                "the paused worker {zombie} wrote {task} after its session expired"
            );
            let log = self.processes[*process].role.log();
            // What it logged about that task, and about its session.
            let said: Vec<&str> = log
                .lines()
                .filter_map(|line| line.find(zombie.as_str()).map(|at| &line[at..]))
                .filter(|said| said.contains(task.as_str()) || said.contains("session"))
                .collect();
            self.note(&format!(
                "{task}, held by the paused {zombie}, was finished by {}; the zombie said: {}",
                writer.unwrap_or("a worker whose log line was lost with it"),
                said.join(" | ")
            ));
        }
        for (dead, task) in &self.orphaned_tasks {
            let writer = writes.get(task).map(|w| w[0].as_str());
            assert_ne!(
                writer,
                Some(dead.as_str()),
                "the SIGKILLed {dead} wrote {task}"
            );
            self.note(&format!(
                "{task}, held by the SIGKILLed {dead}, was finished by {}",
                writer.unwrap_or("a worker whose log line was lost with it")
            ));
        }
        self.note(&format!(
            "checked: {} tasks, each with exactly one result (version 0) holding its own answer; \
             {} result writes in the workers' logs, none twice, and {} found present after a \
             lost reply",
            finished.len(),
            writes.len(),
            found_present.len()
        ));
        // Everyone idle at the end, and one master leading.
        self.eventually("no assignment left", |chaos| {
            chaos
                .observer
                .children(&layout.assignments_dir())?
                .is_empty()
                .then_some(())
        });
        assert!(self.observer.stat(&layout.master()).is_some());
    }

    /// SIGTERM to every live role: each exits with status 0.
    fn stop_roles(&mut self) {
        for process in self.processes.iter_mut().filter(|p| !p.killed) {
            assert!(
                process.role.is_running(),
                "{} died:\n{}",
                process.role.name,
                process.role.log()
            );
            process.role.terminate();
        }
        for process in self.processes.iter_mut().filter(|p| !p.killed) {
            let status = process.role.wait_exit();
            assert!(
                status.success(),
                "{} ended with {status} after SIGTERM:\n{}",
                process.role.name,
                process.role.log()
            );
        }
        self.note("every live role exited with status 0 on SIGTERM");
    }

    fn delete_root(&mut self) {
        let config = testing::config(&self.connect);
        testing::runtime().block_on(testing::delete_tree(&config, self.layout.root()));
    }

    fn dump_logs(&self) {
        for process in &self.processes {
            let log = process.role.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- last lines of {}:", process.role.name);
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

fn holding(task: &Option<String>) -> String {
    match task {
        Some(task) => format!("holding {task}"),
        None => "idle".to_owned(),
    }
}

/// The worker ids a worker process registered under, in order (from its
/// `<worker> registered` log lines).
fn registrations(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "registered")?;
            (at > 0 && words.len() == at + 1 && words[at - 1].starts_with("worker-"))
                .then(|| words[at - 1].to_owned())
        })
        .collect()
}

/// `(worker, task)` for every result a worker's log says it wrote:
/// `<worker> wrote <task> result ...`.
fn result_writes(log: &str) -> Vec<(String, String)> {
    worker_lines(log, "wrote", &["result"])
}

/// `(worker, task)` for every completion whose reply was lost and whose
/// read-back found the result there: `<worker> recovered <task>
/// completion: result present, ...`. Written by that worker or by another,
/// the log cannot say which.
fn results_found_present(log: &str) -> Vec<(String, String)> {
    // The words after the task, as the worker writes them.
    let line = WorkerDecision::CompletionRecovered {
        worker: WorkerId::parse("worker-0000000000").expect("a worker id"),
        task: TaskId::parse("task-0000000000000000-0000000000").expect("a task id"),
        found: CompletionReadBack::ResultPresent,
    }
    .to_string();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[1], "recovered", "{line}");
    worker_lines(log, "recovered", &words[3..])
}

/// `(worker, task)` for every log line that reads `<worker> <verb> <task>
/// <then...>`.
fn worker_lines(log: &str, verb: &str, then: &[&str]) -> Vec<(String, String)> {
    log.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == verb)?;
            let worker = words.get(at.checked_sub(1)?)?;
            let task = words.get(at + 1)?;
            let follows = words.get(at + 2..at + 2 + then.len()) == Some(then);
            (follows && worker.starts_with("worker-"))
                .then(|| (worker.to_string(), task.to_string()))
        })
        .collect()
}

/// The node of the ensemble that leads now.
fn zk_leader(dir: &str) -> String {
    testing::run_scripts_zk(&["leader", dir]).trim().to_owned()
}

fn role_config(connect: &str) -> ZkConfig {
    testing::config(connect)
}

async fn connect_client(config: &ZkConfig, layout: &Layout) -> Client<ZkSession> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match ZkSession::connect(config).await {
            Ok((zk, events)) => return Client::new(zk, events, layout.clone()),
            Err(error) if Instant::now() < deadline => {
                eprintln!("submitter: cannot connect ({error}); trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("the submitter cannot connect: {error}"),
        }
    }
}
