//! The `zkdist` binary on a real ZooKeeper, as separate OS processes: three
//! `zkdist run` processes elect one master and become two workers; `submit`,
//! `wait` and `status` from other processes drive and watch them; SIGTERM
//! ends every role cleanly and takes its ephemeral nodes with it. Then
//! `exec` tasks (refused unless a worker allows them), a worker stopped in
//! the middle of a task, a second master, and bad submissions that must
//! create nothing.
//!
//! `ZKDIST_TEST_ZK` names the server (a connect string). Without it every
//! test is reported as ignored, never as passed.

#[path = "../common/mod.rs"]
mod common;
// The loopback proxy the library's real-server tests cut links with.
#[allow(dead_code)]
#[path = "../../../coord/tests/common/proxy.rs"]
mod proxy;

mod auth;
mod bench;
mod exec;
mod roles;
mod submit;
mod wait;

use std::time::Duration;

use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use zkdist_coord::zk::testing::{self, server_trial};
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{Coordinator, TaskId, Watch};

use common::{Finished, Role, Scratch, eventually, run};

/// The prefix of every root these tests use.
const ROOT_PREFIX: &str = "zkdist-binary";
/// The signal numbers the tests send (Linux's).
const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;
/// How soon after the first stop signal a second one is the first
/// delivered again (the binary's `shutdown::REPEATED_SIGNAL_WINDOW`).
const REPEATED_SIGNAL_WINDOW: Duration = Duration::from_millis(500);

fn main() {
    let mut args = Arguments::from_args();
    // Each test runs several processes against one server; on a small
    // machine they are clearer one at a time.
    args.test_threads = Some(1);
    let trials: Vec<Trial> = vec![
        server_trial(
            "three_run_processes_serve_submit_wait_and_status_then_exit_cleanly",
            roles::three_run_processes_serve_submit_wait_and_status_then_exit_cleanly,
        ),
        server_trial(
            "a_deployment_under_a_chroot_runs_its_tasks",
            roles::a_deployment_under_a_chroot_runs_its_tasks,
        ),
        server_trial(
            "a_root_inside_a_deployment_is_refused_and_a_stray_registration_named",
            roles::a_root_inside_a_deployment_is_refused_and_a_stray_registration_named,
        ),
        server_trial(
            "a_master_node_made_by_hand_is_named_and_a_master_elected_once_it_goes",
            roles::a_master_node_made_by_hand_is_named_and_a_master_elected_once_it_goes,
        ),
        server_trial(
            "a_role_whose_output_nobody_reads_serves_and_stops_cleanly",
            roles::a_role_whose_output_nobody_reads_serves_and_stops_cleanly,
        ),
        server_trial(
            "exec_runs_with_allow_exec_and_a_stopped_worker_finishes_its_task",
            exec::exec_runs_with_allow_exec_and_a_stopped_worker_finishes_its_task,
        ),
        server_trial(
            "with_auth_outsiders_read_everything_and_change_nothing",
            auth::with_auth_outsiders_read_everything_and_change_nothing,
        ),
        server_trial(
            "an_exec_command_does_not_see_the_credentials_its_worker_was_given",
            auth::an_exec_command_does_not_see_the_credentials_its_worker_was_given,
        ),
        server_trial(
            "a_task_whose_acl_refuses_the_workers_is_left_and_they_go_on",
            auth::a_task_whose_acl_refuses_the_workers_is_left_and_they_go_on,
        ),
        server_trial(
            "a_wait_outlives_its_session_and_still_cleans_up",
            wait::a_wait_outlives_its_session_and_still_cleans_up,
        ),
        server_trial(
            "a_wait_outlives_a_restart_of_its_server",
            wait::a_wait_outlives_a_restart_of_its_server,
        ),
        server_trial(
            "an_interrupted_submit_names_its_token_and_settles_its_create",
            submit::an_interrupted_submit_names_its_token_and_settles_its_create,
        ),
        server_trial(
            "bad_submissions_are_refused_and_create_nothing",
            submit::bad_submissions_are_refused_and_create_nothing,
        ),
        server_trial(
            "submit_lines_queues_every_line_in_order_or_refuses_them_all",
            submit::submit_lines_queues_every_line_in_order_or_refuses_them_all,
        ),
        server_trial(
            "a_master_starts_on_a_queue_past_a_java_clients_listing_limit",
            roles::a_master_starts_on_a_queue_past_a_java_clients_listing_limit,
        ),
        server_trial(
            "an_interrupted_bench_deletes_its_root_unless_interrupted_twice",
            bench::an_interrupted_bench_deletes_its_root_unless_interrupted_twice,
        ),
        server_trial(
            "bench_reports_every_phase_ends_with_the_efficiency_and_deletes_its_root",
            bench::bench_reports_every_phase_ends_with_the_efficiency_and_deletes_its_root,
        ),
    ];
    testing::note_if_ignored();
    libtest_mimic::run(&args, trials).exit()
}

// ---------------------------------------------------------------------------
// Helpers.

/// The connection flags for `root` on the server under test.
struct Target {
    connect: String,
    root: String,
}

impl Target {
    /// `zkdist COMMAND... --zk CONNECT --root ROOT`.
    fn args<'a>(&'a self, command: &[&'a str]) -> Vec<&'a str> {
        let mut args = command.to_vec();
        args.extend(["--zk", &self.connect, "--root", &self.root]);
        args
    }

    fn run(&self, command: &[&str]) -> Finished {
        run(&self.args(command))
    }

    fn spawn(&self, name: &str, command: &[&str], scratch: &Scratch) -> Role {
        Role::spawn(name, &self.args(command), scratch)
    }

    /// `zkdist status --json`, parsed.
    fn status(&self) -> Value {
        self.try_status()
            .unwrap_or_else(|| panic!("no zkdist layout at {}", self.root))
    }

    /// As [`Target::status`], but `None` while nobody has laid out the
    /// root yet, or while a role is laying it out (`tasks/` made, the rest
    /// not yet).
    fn try_status(&self) -> Option<Value> {
        let status = self.run(&["status", "--json"]);
        let not_laid_out = ["no zkdist layout at", "is incomplete: its tasks/ exists"];
        if status.status.code() == Some(1)
            && not_laid_out.iter().any(|said| status.stderr.contains(said))
        {
            return None;
        }
        status.expect_code(0);
        let parsed = serde_json::from_str(&status.stdout)
            .unwrap_or_else(|e| panic!("status --json printed {:?}: {e}", status.stdout));
        Some(parsed)
    }

    /// Runs `read` on a session of the library's own, closed afterwards.
    /// On an ensemble that session's server may lag behind what the
    /// processes under test wrote: it catches up (`sync`) first.
    fn read<T>(&self, read: impl AsyncFnOnce(&ZkSession) -> T) -> T {
        testing::runtime().block_on(async {
            // Whatever the processes under test left, listings included.
            let config = testing::config(&self.connect)
                .with_max_reply_bytes(zkdist_coord::LARGE_REPLY_BYTES);
            let (zk, _events) = ZkSession::connect(&config).await.expect("connect");
            zk.sync("/").await.expect("sync");
            let value = read(&zk).await;
            zk.close().await.unwrap();
            value
        })
    }

    /// Children of a node under the root, sorted.
    fn children(&self, path: &str) -> Vec<String> {
        self.read(async |zk| {
            let (mut children, _) = zk.get_children(path, Watch::No).await.expect("list");
            children.sort();
            children
        })
    }

    fn exists(&self, path: &str) -> bool {
        self.read(async |zk| zk.exists(path, Watch::No).await.expect("exists").is_some())
    }

    /// Deletes one node, as an operator with a shell would.
    fn delete(&self, path: &str) {
        self.read(async |zk| zk.delete(path, None).await.expect("delete"));
    }

    fn data(&self, path: &str) -> Vec<u8> {
        self.read(async |zk| zk.get_data(path, Watch::No).await.expect("get_data").0)
    }

    /// Deletes the root and checks that nothing of it is left.
    fn delete_root(&self) {
        self.delete_root_with(testing::config(&self.connect));
    }

    /// [`Target::delete_root`] with [`OWNER_AUTH`]: the nodes roles made
    /// with those credentials may be deleted with them alone.
    fn delete_root_as_owner(&self) {
        let (user, password) = OWNER_AUTH.split_once(':').expect("USER:PASSWORD");
        self.delete_root_with(testing::config(&self.connect).with_digest_auth(user, password));
    }

    fn delete_root_with(&self, config: ZkConfig) {
        testing::runtime().block_on(testing::delete_tree(&config, &self.root));
        assert!(!self.exists(&self.root), "{} is cleaned up", self.root);
    }
}

fn workers_in(status: &Value) -> usize {
    status["workers"].as_array().expect("workers").len()
}

/// Submits an `exec` task that waits until the file `gate` exists, then
/// runs the shell command `then`, and waits until a worker has started it;
/// returns its id.
fn submit_gated_task(target: &Target, gate: &std::path::Path, then: &str) -> String {
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; {then}",
        gate.display()
    );
    submit_running_task(target, &script)
}

/// Submits an `exec` task running `script` with `sh -c`, and returns its
/// id once a worker has started it.
fn submit_running_task(target: &Target, script: &str) -> String {
    let payload = serde_json::json!({"kind": "exec", "argv": ["sh", "-c", script]}).to_string();
    let submit = target.run(&["submit", &payload]);
    submit.expect_code(0);
    let task = task_id(&submit);
    eventually(&format!("a worker starts {task}"), || {
        let status = target.status();
        let busy = status["assignments"]
            .as_object()
            .is_some_and(|assignments| assignments.values().any(|t| t == task.as_str()));
        busy.then_some(())
    });
    task
}

/// Submits an `exec` task whose command writes its pid to `pid_file` and
/// then waits for `never` to exist (a minute at most, so that a failure
/// leaves nothing running for long); returns the task's id and the
/// command's pid once a worker runs it.
fn submit_waiting_command(
    target: &Target,
    pid_file: &std::path::Path,
    never: &std::path::Path,
) -> (String, u32) {
    let task = submit_running_task(
        target,
        &format!(
            "echo $$ > {}; i=0; while [ ! -e {} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done",
            pid_file.display(),
            never.display()
        ),
    );
    let command = eventually("the command writes its pid", || {
        let text = std::fs::read_to_string(pid_file).ok()?;
        text.trim().parse().ok()
    });
    (task, command)
}

/// Whether process `pid` runs: it exists and is not a zombie (a process
/// that exited, whose parent has not reaped it yet).
fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "PID (COMMAND) STATE ...": the command may hold spaces and
    // parentheses, the state follows the last ')'.
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z" | "X"))
}

/// The task id a `submit` printed on its first line.
fn task_id(submit: &Finished) -> String {
    let first = submit.stdout_lines().first().copied().unwrap_or_default();
    let parsed =
        TaskId::parse(first).unwrap_or_else(|e| panic!("submit printed {:?}: {e}", submit.stdout));
    assert!(
        parsed.token().is_some(),
        "a submitted task's name carries its token: {first}"
    );
    first.to_owned()
}

/// Whether a role's log shows it was elected master.
fn elected(role: &Role) -> bool {
    role.log().contains("elected epoch=")
}

/// Checks a `pi` result as a worker prints it.
fn check_pi(json: &str, samples: u64) {
    let result: Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("pi result {json:?}: {e}"));
    assert_eq!(result["samples"].as_u64(), Some(samples), "{json}");
    let inside = result["inside"].as_u64().expect("inside");
    let estimate = result["estimate"].as_f64().expect("estimate");
    assert!(inside <= samples, "{json}");
    // serde_json reads floats to within an ulp or so, not exactly.
    let exact = 4.0 * inside as f64 / samples as f64;
    assert!((estimate - exact).abs() < 1e-12, "{json}");
    // Ten standard deviations at 20,000 samples: only a broken sampler
    // misses it.
    assert!((estimate - std::f64::consts::PI).abs() < 0.12, "{json}");
}

/// The credentials the roles of the access-control test run with.
const OWNER_AUTH: &str = "zkdist-ops:correct horse";

const PI_20K: &str = r#"{"kind":"pi","samples":20000}"#;

/// A session timeout the test servers grant (they allow 1 s to 10 s: twice
/// to twenty times their 500 ms tick) and a test can outwait.
const SHORT_SESSION_TIMEOUT_MS: u64 = 4_000;
