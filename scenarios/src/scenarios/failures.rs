//! Processes that fail: a master killed in the middle of a round, a master
//! cut off while a standby takes over, a master's and a worker's session
//! expiring, a worker killed in the middle of its task, a worker cut off
//! in the middle of a long task (its link failing, or going silent), and a
//! worker that completes its task after its session expired (a zombie).
//!
//! What must hold in each: no rule breaks (the checker runs throughout:
//! no task held twice, no write from a deposed master or a zombie), every
//! task finishes exactly once, and the role that failed comes back (a
//! crashed process when restarted, an expired one on a new session).

use std::time::Duration;

use zkdist_coord::{SessionId, TaskId, WorkerId};

use super::script::{
    FINISH_LIMIT, assignment_exists, contains, find, run, settle, step_until, until,
};
use crate::harness::RunReport;

/// Far more than any task of these scenarios takes.
/// Past the harness's session timeout (2 s).
const PAST_TIMEOUT: Duration = Duration::from_millis(3_000);

/// Two master candidates (`m1` leads, `m2` stands by) and `workers`
/// registered workers.
async fn cluster(h: &crate::Harness, workers: usize) {
    h.start_master().await;
    h.start_master().await;
    for n in 1..=workers {
        h.start_worker().await;
        h.registered(n).await;
    }
    settle().await;
}

/// Two candidates and two workers, two tasks submitted; the leader `m1` is
/// killed between the two assignment creates of its round: the first is
/// applied, the second is in flight (the seed decides whether it reached
/// the server). Returns the killed actor's name, for a restart.
async fn kill_leader_mid_round(h: &crate::Harness) -> String {
    cluster(h, 2).await;
    let m1 = h.master_session(1);
    h.submit(20_000).await;
    h.submit(20_000).await;
    h.note("pause, and step until the first assignment is applied");
    h.sim().pause().await;
    step_until(h, "create /zkdist/assignments/").await;
    h.note("the round's first assignment is applied: kill the master");
    let killed = h.crash(m1).await.expect("m1's process");
    h.sim().resume().await;
    killed
}

/// The leader is killed mid-round ([`kill_leader_mid_round`]). The standby
/// takes over once the dead leader's session expires, rebuilds from the
/// tree and finishes the job; the dead candidate restarts then, and stands
/// by.
pub fn master_killed_mid_round(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let killed = kill_leader_mid_round(h).await;
        let m2 = h.master_session(2);
        let master = h.layout().master();
        until(h, "m2 takes over", move |tree| {
            tree.stat(&master)
                .is_some_and(|stat| SessionId(stat.ephemeral_owner) == m2)
        })
        .await;
        h.restart(&killed);
        assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
        let report = h.finish().await;

        let trace = &report.trace;
        let crashed = find(trace, 0, "control crash m1");
        let expired = find(trace, crashed, "m1 expire");
        find(trace, expired, "decide m2: elected");
        let restarted = find(trace, expired, "harness: restart m1");
        find(trace, restarted, "decide m1: standing-by");
        report
    })
}

/// The leader is killed mid-round ([`kill_leader_mid_round`]) and restarts
/// at once, while its old session still holds the master node: it stands
/// by beside the standby, and when the old session expires both race for
/// the node. Whichever wins (the seed and, under madsim, the scheduler
/// decide) rebuilds from the tree and finishes the job; the other stands
/// by; no rule breaks.
pub fn restarted_master_races_the_standby(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let killed = kill_leader_mid_round(h).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        h.restart(&killed);
        assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
        let report = h.finish().await;

        let trace = &report.trace;
        let crashed = find(trace, 0, "control crash m1");
        let restarted = find(trace, crashed, "harness: restart m1");
        let expired = find(trace, restarted, "m1 expire");
        find(trace, restarted, "decide m1: standing-by");
        let elected: Vec<&str> = trace[expired..]
            .iter()
            .filter(|line| line.contains(": elected"))
            .map(String::as_str)
            .collect();
        assert_eq!(elected.len(), 1, "one candidate wins the race: {elected:?}");
        let loser = if elected[0].contains("decide m2:") {
            "decide m1: standing-by"
        } else {
            "decide m2: standing-by"
        };
        find(trace, expired, loser);
        report
    })
}

/// The leader's link is cut past its session timeout while tasks run: its
/// session expires, the standby is elected and carries on, new tasks go
/// out meanwhile; when the link heals the old leader learns its session
/// expired, writes nothing, and stands by on a new session.
pub fn master_partitioned_standby_takes_over(seed: u64) -> RunReport {
    run(seed, async move |h| {
        cluster(h, 2).await;
        let m1 = h.master_session(1);
        let worker = h.registered(1).await;
        h.submit(1_000_000).await;
        until(
            h,
            "the first task is assigned",
            assignment_exists(h, &worker),
        )
        .await;
        h.note("cut the leader off past its session timeout");
        h.cut(m1, PAST_TIMEOUT + Duration::from_millis(500)).await;
        let later = h.submit(5_000).await;
        let _ = later;
        assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
        let report = h.finish().await;

        let trace = &report.trace;
        let cut = find(trace, 0, "control cut m1");
        let expired = find(trace, cut, "m1 expire");
        let elected = find(trace, expired, "decide m2: elected");
        let healed = find(trace, elected, "heal m1: the session expired");
        find(trace, healed, "connect m1.2");
        find(trace, healed, "decide m1: standing-by");
        report
    })
}

/// The leader's session expires (the server ends it): the standby is
/// elected; the old leader's process notices, opens a new session and
/// stands by.
pub fn master_session_expires(seed: u64) -> RunReport {
    run(seed, async move |h| {
        cluster(h, 2).await;
        let m1 = h.master_session(1);
        h.submit(30_000).await;
        h.submit(30_000).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        h.note("expire the leader's session");
        h.expire(m1).await;
        h.submit(1_000).await;
        assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
        let report = h.finish().await;

        let trace = &report.trace;
        let expired = find(trace, 0, "control expire m1");
        find(trace, expired, "decide m2: elected");
        find(trace, expired, "connect m1.2");
        find(trace, expired, "decide m1: standing-by");
        report
    })
}

/// A worker's process is killed while it runs its task: its session
/// expires after the timeout, the master reclaims the assignment and puts
/// the task back in the queue, and the other worker runs it. The killed
/// worker restarts and registers under a new id.
pub fn worker_killed_mid_task(seed: u64) -> RunReport {
    run(seed, async move |h| {
        h.start_master().await;
        let doomed = h.start_worker().await;
        let worker = h.registered(1).await;
        h.start_worker().await;
        let survivor = h.registered(2).await;
        settle().await;

        let task = h.submit(50_000).await;
        until(h, "the task is assigned", assignment_exists(h, &worker)).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        h.note("kill the first worker's process while it runs the task");
        let killed = h.crash(doomed).await.expect("w1's process");
        tokio::time::sleep(PAST_TIMEOUT).await;
        h.restart(&killed);
        assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
        let report = h.finish().await;

        let trace = &report.trace;
        let crashed = find(trace, 0, "control crash w1");
        let expired = find(trace, crashed, "w1 expire");
        let reclaimed = find(
            trace,
            expired,
            &format!("decide m1: assignment-reclaimed {task} from {worker}"),
        );
        let requeued = find(
            trace,
            reclaimed,
            &format!("decide m1: task-requeued {task}"),
        );
        find(trace, requeued, &format!("{task}->{survivor}"));
        find(trace, crashed, "connect w1.2");
        report
    })
}

/// A worker's link is cut past its session timeout while it runs a task
/// that ends within the session's grace (a quarter of the timeout): the
/// worker finishes it while cut off, and its result waits for the link
/// and for a look at the assignment after the reconnection (what changed
/// meanwhile comes without events), so no completion is even queued. The
/// server expires the session, the master reclaims and re-queues the
/// task, and the other worker runs it. When the link comes back the
/// worker (a zombie by then) learns that its session expired: it writes
/// nothing, and it joins again under a new id.
pub fn zombie_worker_completes_late(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let (worker, survivor, task) = cut_first_worker_mid_task(
            h,
            300_000,
            "cut the first worker off until after its session expired",
            Outage::Cut,
        )
        .await;
        let report = h.finish().await;

        let trace = &report.trace;
        let cut = find(trace, 0, "control cut w1");
        let expired = find(trace, cut, "w1 expire");
        find(trace, expired, &format!("decide m1: task-requeued {task}"));
        let rerun = find(trace, expired, &format!("{survivor} started {task}"));
        let healed = find(trace, rerun, "heal w1: the session expired");
        find(
            trace,
            healed,
            &format!("decide w1: {worker} abandoned {task}"),
        );
        find(trace, healed, "connect w1.2");
        let completion = format!("w1 multi [create /zkdist/tasks/{task}/result");
        assert!(
            !contains(trace, cut, &completion),
            "the zombie's completion was never queued nor sent"
        );
        report
    })
}

/// How the first worker loses its link in [`cut_first_worker_mid_task`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outage {
    /// The connection fails: the client hears of it at once.
    Cut,
    /// The link goes silent (`SimZk::partition`) after the worker has been
    /// quiet for half a second, past the client's ping interval: the
    /// client notices late, and the server may expire the session 0.35 of
    /// the timeout after it does.
    SilentPartition,
}

/// A master and two workers; the first worker is given a task of
/// `work_us` and, once its handler runs, loses its link for 4 s (twice the
/// session timeout) by `outage`. Returns when every task has finished and
/// the first worker has joined again: its first id, the other worker's,
/// and the task.
async fn cut_first_worker_mid_task(
    h: &crate::Harness,
    work_us: u64,
    note: &str,
    outage: Outage,
) -> (WorkerId, WorkerId, TaskId) {
    h.start_master().await;
    let first = h.start_worker().await;
    let worker = h.registered(1).await;
    h.start_worker().await;
    let survivor = h.registered(2).await;
    settle().await;

    let task = h.submit(work_us).await;
    until(h, "the task is assigned", assignment_exists(h, &worker)).await;
    // Long enough for the worker to read its assignment and the task and
    // to start the handler, which the cut must find running.
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.note(note);
    match outage {
        Outage::Cut => h.cut(first, Duration::from_millis(4_000)).await,
        Outage::SilentPartition => {
            tokio::time::sleep(Duration::from_millis(500)).await;
            h.partition(first, Duration::from_millis(4_000)).await;
        }
    }
    assert!(h.all_finished(FINISH_LIMIT).await, "every task finishes");
    h.registered_again(1, &worker).await;
    (worker, survivor, task)
}

/// A worker's link is cut for longer than its session timeout while it
/// runs a task longer than that. What must hold: the worker stops the task
/// once the session's grace (a quarter of the timeout) has passed without
/// a reconnection, before the server can expire the session; the master
/// gives the task to the other worker only after the expiry, so the two
/// never run it at once. The cut-off worker joins again under a new id
/// and the task finishes exactly once.
pub fn worker_cut_off_mid_task(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let (worker, survivor, task) = cut_first_worker_mid_task(
            h,
            2_500_000,
            "cut the first worker off for twice its session timeout",
            Outage::Cut,
        )
        .await;
        let report = h.finish().await;

        let trace = &report.trace;
        let cut = find(trace, 0, "control cut w1");
        let stopped = find(trace, cut, &format!("decide w1: {worker} abandoned {task}"));
        let expired = find(trace, stopped, "w1 expire");
        find(trace, expired, &format!("decide m1: task-requeued {task}"));
        find(trace, expired, &format!("{survivor} started {task}"));
        report
    })
}

/// As [`worker_cut_off_mid_task`], but the worker's link goes silent
/// instead of failing, after the worker has been quiet past its ping
/// interval, on a seed that draws the worst case: the server last heard the
/// worker 4 ticks (0.2 of the timeout) before the partition, and the
/// worker's client notices 9 ticks after it last heard the server, so the
/// server expires the session 7 ticks (0.35 of the timeout, 700 ms) after
/// the worker's `Disconnected`. What must hold: the worker stops the task
/// a grace (500 ms) after its notice, before that expiry, and the master
/// gives the task to the other worker only after it.
pub fn worker_partitioned_mid_task(seed: u64) -> RunReport {
    run(seed, async move |h| {
        let (worker, survivor, task) = cut_first_worker_mid_task(
            h,
            2_500_000,
            "partition the first worker silently, after a quiet half second",
            Outage::SilentPartition,
        )
        .await;
        let report = h.finish().await;

        let trace = &report.trace;
        let partitioned = find(trace, 0, "control partition w1 for 4000.000ms");
        let noticed = find(trace, partitioned, "notice w1: heard nothing");
        let stopped = find(
            trace,
            noticed,
            &format!("decide w1: {worker} abandoned {task}"),
        );
        let expired = find(trace, stopped, "w1 expire (session timeout)");
        find(trace, expired, &format!("decide m1: task-requeued {task}"));
        find(trace, expired, &format!("{survivor} started {task}"));
        let us_at = |line: usize| trace_us(&trace[line]);
        assert_eq!(
            us_at(expired) - us_at(noticed),
            700_001,
            "the seed draws the worst case: the expiry 0.35 of the timeout after the notice"
        );
        report
    })
}

/// The simulated time a trace line is stamped with, in whole
/// microseconds: the stamp's three decimals, read without floating point
/// so that differences between stamps are exact.
fn trace_us(line: &str) -> u64 {
    let stamp = line
        .strip_prefix('[')
        .and_then(|rest| rest.split_once("ms]"))
        .map(|(stamp, _)| stamp.trim())
        .unwrap_or_else(|| panic!("a stamped trace line: {line}"));
    let (whole_ms, fraction) = stamp
        .split_once('.')
        .unwrap_or_else(|| panic!("a time in ms with three decimals: {line}"));
    assert_eq!(
        fraction.len(),
        3,
        "a time in ms with three decimals: {line}"
    );
    let parse = |digits: &str| -> u64 {
        digits
            .parse()
            .unwrap_or_else(|_| panic!("a time in ms: {line}"))
    };
    parse(whole_ms) * 1_000 + parse(fraction)
}
