//! A loss of quorum on a real 3-node ensemble costs the roles nothing: two
//! `zkdist master` processes and two `zkdist worker --allow-exec` processes
//! run exec tasks, and two of the three ZooKeeper nodes are killed for 2.5
//! session timeouts. Without a majority the servers expire nothing, and the
//! new leader gives every session a fresh timeout, so a role that waits the
//! outage out on the session it has loses nothing by it. At the end the
//! same session still holds the `master` node (no failover), the same
//! workers are registered (nobody re-joined), and every task's command ran
//! exactly once. Each role's log tells of the outage in a few lines, not
//! one a second.
//!
//! Needs `ZKDIST_TEST_ZK` (the ensemble's connect string) and
//! `ZKDIST_TEST_ENSEMBLE_DIR` (its `scripts/zk ensemble` directory, to kill
//! and restart its nodes); without them the test is reported as ignored.
//! The ensemble is left with its three nodes serving.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use libtest_mimic::Arguments;
use zkdist_coord::zk::testing;
use zkdist_coord::{Layout, TaskId};

use common::{Observer, Role, Scratch};

/// The roles' session timeout. The client library, left to itself, gives
/// a session up after hearing nothing for 1.4 of it.
const ROLE_SESSION_TIMEOUT_MS: u64 = 4_000;
/// How long the ensemble has no majority: well past that give-up.
const QUORUM_LOSS: Duration = Duration::from_millis(5 * ROLE_SESSION_TIMEOUT_MS / 2);
/// The most WARN lines the client library may log of failed reconnection
/// attempts for a role's one session through the outage: its first server
/// that granted no session, a summary at 10 s (and at 30 s, should the
/// nodes be slow to serve again), and one more should the session drop
/// once more while the nodes settle. It used to log one a second: 11 over
/// this outage.
const MAX_OUTAGE_WARNINGS: usize = 4;
/// Exec tasks submitted just before the outage.
const TASKS: usize = 20;
/// How long each task's command sleeps after it noted its run. Short
/// against the workers' disconnection grace (a quarter of the session
/// timeout, 1 s), so that a command running when the outage begins
/// finishes within it, and the worker waits for the link with its result
/// instead of stopping the command (which would run the task again, on
/// purpose: see docs/operations.md).
const COMMAND_SLEEP: &str = "0.05";

fn main() {
    let args = Arguments::from_args();
    let trial = common::ensemble_trial(
        "a_loss_of_quorum_costs_no_failover_no_rejoin_and_no_second_run",
        |connect, dir| a_loss_of_quorum_costs_the_roles_nothing(&connect, &dir),
    );
    libtest_mimic::run(&args, vec![trial]).exit()
}

fn a_loss_of_quorum_costs_the_roles_nothing(connect: &str, dir: &std::path::Path) {
    let dir = dir.to_str().expect("utf-8 ensemble dir");
    let scratch = Scratch::new("quorum-loss");
    let layout = Layout::new(&testing::unique_root("zkdist-quorum-loss")).unwrap();
    let timeout = ROLE_SESSION_TIMEOUT_MS.to_string();
    let role_args = |command: &'static str| -> Vec<String> {
        [
            command,
            "--zk",
            connect,
            "--root",
            layout.root(),
            "--session-timeout-ms",
            &timeout,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let mut roles = Vec::new();
    for name in ["master-1", "master-2"] {
        let args = role_args("master");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        roles.push(Role::spawn(name, &args, &scratch));
    }
    for name in ["worker-1", "worker-2"] {
        let mut args = role_args("worker");
        args.push("--allow-exec".to_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        roles.push(Role::spawn(name, &args, &scratch));
    }
    let mut tree = Observer::connect(connect);
    let (master_before, workers_before) = common::eventually("a master and both workers", || {
        let master = tree.stat(&layout.master())?;
        let workers = tree.children(&layout.workers_dir())?;
        (workers.len() == 2).then_some((master, workers))
    });

    // Each command appends its task's number to `runs`: a second run of a
    // task shows as a second line.
    let runs = scratch.path("runs");
    let runs_path = runs.to_str().expect("utf-8 scratch path").to_owned();
    let lines: String = (0..TASKS)
        .map(|i| {
            let argv = [
                "sh".to_owned(),
                "-c".to_owned(),
                format!(r#"echo "$0" >> "$1"; sleep {COMMAND_SLEEP}"#),
                i.to_string(),
                runs_path.clone(),
            ];
            format!("{}\n", serde_json::json!({ "kind": "exec", "argv": argv }))
        })
        .collect();
    let submitted = common::run_with_stdin(
        &[
            "submit",
            "--lines",
            "--zk",
            connect,
            "--root",
            layout.root(),
        ],
        Some(lines.as_bytes()),
    );
    submitted.expect_code(0);
    let tasks: Vec<TaskId> = submitted
        .stdout_lines()
        .iter()
        .map(|id| TaskId::parse(id).unwrap_or_else(|e| panic!("a task id: {id:?}: {e}")))
        .collect();
    assert_eq!(tasks.len(), TASKS, "{}", submitted.stdout);

    // Some tasks run while the outage begins; the rest wait for its end.
    std::thread::sleep(Duration::from_millis(500));
    let leader = testing::run_scripts_zk(&["leader", dir]).trim().to_owned();
    let follower = ["1", "2", "3"]
        .into_iter()
        .find(|id| *id != leader)
        .expect("a node that does not lead");
    let killed_leader = testing::KilledNode::kill(dir, &leader);
    let killed_follower = testing::KilledNode::kill(dir, follower);
    println!("killed ZooKeeper nodes {leader} (the leader) and {follower}: no majority");
    std::thread::sleep(QUORUM_LOSS);
    killed_follower.restore();
    killed_leader.restore();
    println!("nodes {follower} and {leader} serve again");

    for task in &tasks {
        common::eventually(&format!("the result of {task}"), || {
            tree.stat(&layout.result(task))
        });
    }
    let master_after = tree.stat(&layout.master()).expect("a master leads");
    assert_eq!(
        (master_after.czxid, master_after.ephemeral_owner),
        (master_before.czxid, master_before.ephemeral_owner),
        "the master node was made anew: the master failed over"
    );
    let workers_after = tree.children(&layout.workers_dir()).unwrap_or_default();
    assert_eq!(
        workers_after, workers_before,
        "the workers registered are not those of before the outage"
    );
    let mut run_counts: BTreeMap<usize, usize> = BTreeMap::new();
    let noted = std::fs::read_to_string(&runs).expect("read the runs file");
    for line in noted.lines() {
        *run_counts
            .entry(line.parse().expect("a task number"))
            .or_default() += 1;
    }
    let expected: BTreeMap<usize, usize> = (0..TASKS).map(|i| (i, 1)).collect();
    assert_eq!(
        run_counts, expected,
        "how many times each task's command ran"
    );
    println!(
        "after {QUORUM_LOSS:?} without a majority: the same master, the same {} workers, \
         {TASKS} tasks each run once",
        workers_after.len()
    );

    common::terminate_all(&mut roles);
    for role in &roles {
        expect_outage_logged_in_brief(role);
    }
    drop(tree);
    let config = testing::config(connect);
    testing::runtime().block_on(testing::delete_tree(&config, layout.root()));
}

/// Checks that `role`'s log tells of the outage in a few lines: the client
/// library warned of its failed attempts to reconnect, but at most
/// [`MAX_OUTAGE_WARNINGS`] times, never gave the session up, and said how
/// long it took once the session was back.
fn expect_outage_logged_in_brief(role: &Role) {
    let log = role.log();
    let library_lines = || log.lines().filter(|line| line.contains("zookeeper_client"));
    let warnings: Vec<&str> = library_lines()
        .filter(|line| {
            line.contains(" WARN ")
                && [
                    "fails to establish session",
                    "fails in connecting",
                    "not reconnected after",
                ]
                .iter()
                .any(|failure| line.contains(failure))
        })
        .collect();
    assert!(
        (1..=MAX_OUTAGE_WARNINGS).contains(&warnings.len()),
        "{}: {} warnings of failed reconnection attempts over the outage, expected 1 to \
         {MAX_OUTAGE_WARNINGS}:\n{}",
        role.name,
        warnings.len(),
        warnings.join("\n")
    );
    assert!(
        !library_lines()
            .any(|line| line.contains("gives up after")
                || line.contains("fail to connect to cluster")),
        "{}: the client library gave the session up:\n{log}",
        role.name
    );
    assert!(
        library_lines().any(|line| line.contains("succeeds to establish session")
            && line.contains("failed attempts over")),
        "{}: the log does not say how long the session took to come back:\n{log}",
        role.name
    );
}
