//! `wait` through a session's expiry and a restart of its server.

use std::time::Duration;

use zkdist_coord::Layout;
use zkdist_coord::zk::testing;

use crate::common::{Role, Scratch, eventually, terminate_all};
use crate::{PI_20K, ROOT_PREFIX, SHORT_SESSION_TIMEOUT_MS, Target, check_pi, task_id};

/// `wait --cleanup` on a task nobody runs yet, stopped past its session
/// timeout (as an outage would): its session expires, and it waits on a
/// new one instead of giving up. Once a worker comes, it prints the result
/// and cleans the task up.
pub(crate) fn a_wait_outlives_its_session_and_still_cleans_up(connect: String) {
    let scratch = Scratch::new("wait-expiry");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let layout = Layout::new(&target.root).unwrap();
    let (task, mut waiting) = submit_and_spawn_wait(&target, &scratch, &["--cleanup"]);
    waiting.signal("STOP");
    // The server expires the session on its own clock.
    std::thread::sleep(Duration::from_millis(3 * SHORT_SESSION_TIMEOUT_MS));
    waiting.signal("CONT");
    eventually("the wait goes on on a new session", || {
        waiting
            .log()
            .contains(&format!("going on to wait for {task} on a new session"))
            .then_some(())
    });
    assert!(waiting.is_running(), "the wait gave up:\n{}", waiting.log());
    run_task_and_expect_one_result(&target, &scratch, &mut waiting);
    assert!(
        !target.exists(&format!("{}/{task}", layout.tasks_dir())),
        "the wait cleaned the task up"
    );
    target.delete_root();
}

/// Submits a `pi` task nobody runs yet, and starts `zkdist wait TASK
/// EXTRA...` on it with a short session timeout; returns the task's id and
/// the wait's process once the wait's session is open.
fn submit_and_spawn_wait(target: &Target, scratch: &Scratch, extra: &[&str]) -> (String, Role) {
    let submitted = target.run(&["submit", PI_20K]);
    submitted.expect_code(0);
    let task = task_id(&submitted);
    let session_timeout_ms = SHORT_SESSION_TIMEOUT_MS.to_string();
    // The client library's session lines show when it is open.
    let mut command = vec![
        "wait",
        task.as_str(),
        "--session-timeout-ms",
        &session_timeout_ms,
        "--log",
        "info",
    ];
    command.extend(extra);
    let waiting = target.spawn("wait", &command, scratch);
    eventually("the wait's session is open", || {
        waiting
            .log()
            .contains("new session established")
            .then_some(())
    });
    (task, waiting)
}

/// Starts a master and a worker to run the task `waiting` waits for, and
/// checks that the wait then prints its result once and exits with 0.
fn run_task_and_expect_one_result(target: &Target, scratch: &Scratch, waiting: &mut Role) {
    let mut roles = [
        target.spawn("master", &["master"], scratch),
        target.spawn("worker", &["worker"], scratch),
    ];
    let status = waiting.wait_exit();
    let log = waiting.log();
    assert!(status.success(), "the wait ended with {status}:\n{log}");
    let results: Vec<&str> = log.lines().filter(|line| line.starts_with('{')).collect();
    assert_eq!(results.len(), 1, "one result printed:\n{log}");
    check_pi(results[0], 20_000);
    terminate_all(&mut roles);
}

/// A standalone server of the test's own (`scripts/zk single`), stopped
/// when dropped: a test that stops and starts its server must not do so
/// to the one the other tests share.
struct OwnServer {
    dir: std::path::PathBuf,
    connect: String,
}

impl OwnServer {
    fn start(scratch: &Scratch) -> OwnServer {
        let dir = scratch.path("zk");
        let dir_arg = dir.to_str().unwrap().to_owned();
        // The guard first: a server that started but then failed its wait
        // (which panics) is stopped all the same.
        let mut server = OwnServer {
            dir,
            connect: String::new(),
        };
        let base = testing::run_scripts_zk(&["free-base"]);
        testing::run_scripts_zk(&["single", &dir_arg, base.trim()]);
        server.connect = testing::run_scripts_zk(&["connect-string", &dir_arg])
            .trim()
            .to_owned();
        server
    }

    fn scripts_zk(&self, command: &str) {
        let dir = self.dir.to_str().unwrap();
        match command {
            "wait" => testing::run_scripts_zk(&["wait", dir]),
            other => testing::run_scripts_zk(&[other, dir, "1"]),
        };
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(testing::scripts_zk())
            .args(["stop", self.dir.to_str().unwrap()])
            .output();
    }
}

/// `wait` on a task nobody runs yet, while its server is killed for
/// longer than the session timeout and the connect timeout together, then
/// started again: the session expires, opening a new one fails for a
/// while, and the wait keeps trying (as the roles do) instead of ending.
/// Once the server is back and a worker comes, it prints the result.
pub(crate) fn a_wait_outlives_a_restart_of_its_server(_shared_server: String) {
    let scratch = Scratch::new("wait-restart");
    let server = OwnServer::start(&scratch);
    let target = Target {
        connect: server.connect.clone(),
        root: testing::unique_root(ROOT_PREFIX),
    };
    let (task, mut waiting) =
        submit_and_spawn_wait(&target, &scratch, &["--connect-timeout-ms", "1000"]);
    server.scripts_zk("kill");
    eventually("the wait tries to open a new session", || {
        waiting
            .log()
            .contains(&format!("cannot open a session to wait for {task}"))
            .then_some(())
    });
    assert!(waiting.is_running(), "the wait gave up:\n{}", waiting.log());
    server.scripts_zk("start-node");
    server.scripts_zk("wait");

    run_task_and_expect_one_result(&target, &scratch, &mut waiting);
    target.delete_root();
}
