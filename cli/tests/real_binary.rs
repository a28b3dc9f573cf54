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

mod common;
// The loopback proxy the library's real-server tests cut links with.
#[allow(dead_code)]
#[path = "../../coord/tests/common/proxy.rs"]
mod proxy;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use zkdist_coord::zk::testing::{self, KazooOp, server_trial};
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{Coordinator, Layout, MAX_DATA_BYTES, TaskId, Watch};

use common::{Finished, Role, Scratch, eventually, run, run_with_stdin, terminate_all};

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
            three_run_processes_serve_submit_wait_and_status_then_exit_cleanly,
        ),
        server_trial(
            "a_deployment_under_a_chroot_runs_its_tasks",
            a_deployment_under_a_chroot_runs_its_tasks,
        ),
        server_trial(
            "a_root_inside_a_deployment_is_refused_and_a_stray_registration_named",
            a_root_inside_a_deployment_is_refused_and_a_stray_registration_named,
        ),
        server_trial(
            "a_master_node_made_by_hand_is_named_and_a_master_elected_once_it_goes",
            a_master_node_made_by_hand_is_named_and_a_master_elected_once_it_goes,
        ),
        server_trial(
            "a_role_whose_output_nobody_reads_serves_and_stops_cleanly",
            a_role_whose_output_nobody_reads_serves_and_stops_cleanly,
        ),
        server_trial(
            "exec_runs_with_allow_exec_and_a_stopped_worker_finishes_its_task",
            exec_runs_with_allow_exec_and_a_stopped_worker_finishes_its_task,
        ),
        server_trial(
            "with_auth_outsiders_read_everything_and_change_nothing",
            with_auth_outsiders_read_everything_and_change_nothing,
        ),
        server_trial(
            "an_exec_command_does_not_see_the_credentials_its_worker_was_given",
            an_exec_command_does_not_see_the_credentials_its_worker_was_given,
        ),
        server_trial(
            "a_task_whose_acl_refuses_the_workers_is_left_and_they_go_on",
            a_task_whose_acl_refuses_the_workers_is_left_and_they_go_on,
        ),
        server_trial(
            "a_wait_outlives_its_session_and_still_cleans_up",
            a_wait_outlives_its_session_and_still_cleans_up,
        ),
        server_trial(
            "a_wait_outlives_a_restart_of_its_server",
            a_wait_outlives_a_restart_of_its_server,
        ),
        server_trial(
            "an_interrupted_submit_names_its_token_and_settles_its_create",
            an_interrupted_submit_names_its_token_and_settles_its_create,
        ),
        server_trial(
            "bad_submissions_are_refused_and_create_nothing",
            bad_submissions_are_refused_and_create_nothing,
        ),
        server_trial(
            "submit_lines_queues_every_line_in_order_or_refuses_them_all",
            submit_lines_queues_every_line_in_order_or_refuses_them_all,
        ),
        server_trial(
            "a_master_starts_on_a_queue_past_a_java_clients_listing_limit",
            a_master_starts_on_a_queue_past_a_java_clients_listing_limit,
        ),
        server_trial(
            "an_interrupted_bench_deletes_its_root_unless_interrupted_twice",
            an_interrupted_bench_deletes_its_root_unless_interrupted_twice,
        ),
        server_trial(
            "bench_reports_every_phase_ends_with_the_efficiency_and_deletes_its_root",
            bench_reports_every_phase_ends_with_the_efficiency_and_deletes_its_root,
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
    /// root yet.
    fn try_status(&self) -> Option<Value> {
        let status = self.run(&["status", "--json"]);
        if status.status.code() == Some(1) && status.stderr.contains("no zkdist layout at") {
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

// ---------------------------------------------------------------------------
// Roles as processes.

/// A role whose standard output and error are gone (its ssh session
/// dropped, the reader of its log pipe died) loses its log lines and
/// nothing else: it runs its tasks, hears SIGTERM, and exits cleanly
/// (before, the first log line it could not write panicked, and the role
/// died in the middle of its task or ran on deaf to its signals).
fn a_role_whose_output_nobody_reads_serves_and_stops_cleanly(connect: String) {
    let scratch = Scratch::new("unheard");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let command = common::zkdist(&target.args(&["run", "--log", "debug"]));
    let mut role = Role::spawn_unheard("run", command, &scratch);
    for _ in 0..3 {
        let finished = target.run(&["submit", "--wait", PI_20K]);
        finished.expect_code(0);
        check_pi(finished.stdout_lines()[1], 20_000);
    }
    assert!(role.is_running(), "the role died with its output gone");
    terminate_all(&mut [role]);
    let status = target.status();
    assert_eq!(
        (&status["master_present"], workers_in(&status)),
        (&Value::from(false), 0),
        "the role left its nodes behind: {status}"
    );
    target.delete_root();
}

fn three_run_processes_serve_submit_wait_and_status_then_exit_cleanly(connect: String) {
    let scratch = Scratch::new("run");
    // A root nobody created: the three processes lay it out concurrently.
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let layout = Layout::new(&target.root).unwrap();
    let mut roles: Vec<Role> = (1..=3)
        .map(|i| target.spawn(&format!("run-{i}"), &["run"], &scratch))
        .collect();

    // Each is a worker and a master candidate: exactly one leads, the
    // others stand by.
    eventually("one master and three workers", || {
        let status = target.try_status()?;
        let ready = status["master_present"] == true
            && workers_in(&status) == 3
            && roles.iter().any(elected)
            && roles
                .iter()
                .filter(|r| r.log().contains("standing-by"))
                .count()
                == 2;
        ready.then_some(())
    });
    let masters: Vec<&str> = roles
        .iter()
        .filter(|r| elected(r))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(masters.len(), 1, "leaders: {masters:?}");
    let workers = roles
        .iter()
        .filter(|r| r.log().contains(" registered"))
        .count();
    assert_eq!(workers, 3);

    // A task from a fourth process, waited for.
    let submit = target.run(&["submit", "--wait", r#"{"kind":"pi","samples":100000}"#]);
    submit.expect_code(0);
    let lines = submit.stdout_lines();
    assert_eq!(lines.len(), 2, "{}", submit.stdout);
    let mut tasks = vec![task_id(&submit)];
    check_pi(lines[1], 100_000);

    // Several tasks, submitted from an argument, stdin and a file, then
    // waited for one by one.
    let mut samples = Vec::new();
    for seed in 1..=3u64 {
        let payload = format!(
            r#"{{"kind":"pi","samples":{},"seed":{seed}}}"#,
            20_000 * seed
        );
        let submit = target.run(&["submit", &payload]);
        submit.expect_code(0);
        assert_eq!(submit.stdout_lines().len(), 1, "{}", submit.stdout);
        tasks.push(task_id(&submit));
        samples.push(20_000 * seed);
    }
    let from_stdin = run_with_stdin(
        &target.args(&["submit", "-"]),
        Some(br#"{"kind":"pi","samples":80000,"seed":4}"#),
    );
    from_stdin.expect_code(0);
    tasks.push(task_id(&from_stdin));
    samples.push(80_000);
    let file = scratch.path("task.json");
    std::fs::write(&file, r#"{"kind":"pi","samples":100000,"seed":5}"#).unwrap();
    let from_file = target.run(&["submit", "--file", file.to_str().unwrap()]);
    from_file.expect_code(0);
    tasks.push(task_id(&from_file));
    samples.push(100_000);
    for (task, samples) in tasks[1..].iter().zip(&samples) {
        let wait = target.run(&["wait", task]);
        wait.expect_code(0);
        check_pi(wait.stdout.trim_end(), *samples);
    }
    let ids: Vec<TaskId> = tasks.iter().map(|t| TaskId::parse(t).unwrap()).collect();
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "task ids increase with submission: {tasks:?}"
    );

    // Bad tasks that reach the workers: each gets a failure result (exit
    // code 2) and no worker dies of it.
    target
        .run(&["submit", "--no-check", "--wait", r#"{"kind":"sort"}"#])
        .expect_code(2)
        .expect_stderr(&["failed", "unknown task kind \"sort\""]);
    let witness = scratch.path("exec-ran");
    let exec = serde_json::json!({"kind": "exec", "argv": ["touch", witness]}).to_string();
    target
        .run(&["submit", "--wait", &exec])
        .expect_code(2)
        .expect_stderr(&["failed", "not started with --allow-exec"]);
    assert!(
        !witness.exists(),
        "a worker without --allow-exec ran a command"
    );
    let after = target.run(&["submit", "--wait", r#"{"kind":"pi","samples":20000}"#]);
    after.expect_code(0);
    check_pi(after.stdout_lines()[1], 20_000);
    let finished_tasks = tasks.len() + 3;
    for role in roles.iter_mut() {
        assert!(role.is_running(), "{} died:\n{}", role.name, role.log());
    }

    // Status shows the workers, idle, and the finished count.
    let status = eventually("every worker idle", || {
        let status = target.status();
        (status["assigned_tasks"] == 0).then_some(status)
    });
    assert_eq!(status["master_present"], true);
    assert_eq!(workers_in(&status), 3);
    assert_eq!(status["pending_tasks"], 0);
    assert_eq!(status["finished_tasks"], finished_tasks);
    assert_eq!(status["root"], target.root.as_str());
    let text = target.run(&["status"]);
    text.expect_code(0);
    assert!(text.stdout.contains("master present"), "{}", text.stdout);
    assert!(text.stdout.contains("workers 3\n"), "{}", text.stdout);
    assert_eq!(text.stdout.matches(" idle\n").count(), 3, "{}", text.stdout);
    assert!(
        text.stdout.contains(&format!(
            "tasks pending 0 assigned 0 finished {finished_tasks}"
        )),
        "{}",
        text.stdout
    );

    // SIGTERM: every role exits with status 0, and its ephemeral nodes go
    // with it; the results stay.
    terminate_all(&mut roles);
    let status = target.status();
    assert_eq!(status["master_present"], false);
    assert_eq!(workers_in(&status), 0);
    assert_eq!(status["finished_tasks"], finished_tasks);
    assert!(!target.exists(&layout.master()));
    assert_eq!(target.children(&layout.workers_dir()), Vec::<String>::new());
    assert_eq!(target.children(&layout.ids_dir()), Vec::<String>::new());
    target.delete_root();
}

/// A root under another deployment's `workers/` is refused, naming that
/// deployment (and `ZKDIST_ROOT` when the root came from it), and nothing
/// is laid out there; a stray persistent node under
/// `workers/` is named by `status` as no live worker's. A deployment nested
/// under `workers/` through a chroot, where the refusal cannot see, lays
/// out nodes the outer master takes for workers that joined: it drops them,
/// as it drops the stray, and the outer deployment's tasks run.
fn a_root_inside_a_deployment_is_refused_and_a_stray_registration_named(connect: String) {
    let scratch = Scratch::new("nested");
    let target = Target {
        connect: connect.clone(),
        root: testing::unique_root(ROOT_PREFIX),
    };
    // The first submit lays the deployment out.
    target
        .run(&["submit", r#"{"kind":"pi","samples":10}"#])
        .expect_code(0);
    let workers_dir = format!("{}/workers", target.root);
    let nested = Target {
        connect: connect.clone(),
        root: workers_dir.clone(),
    };
    let refused = nested.run(&["submit", r#"{"kind":"pi","samples":10}"#]);
    refused.expect_code(1);
    assert!(
        refused
            .stderr
            .contains(&format!("zkdist deployment at {}", target.root)),
        "{}",
        refused.stderr
    );
    assert_eq!(target.children(&workers_dir), Vec::<String>::new());
    // The same root from the environment: only the ensemble can tell it is
    // inside a deployment, and the refusal names the variable, for a user
    // who never typed `--root`.
    let from_env = common::zkdist(&["submit", "--zk", &connect, r#"{"kind":"pi","samples":10}"#])
        .env("ZKDIST_ROOT", &workers_dir)
        .output()
        .expect("run zkdist");
    let stderr = String::from_utf8_lossy(&from_env.stderr);
    assert_eq!(from_env.status.code(), Some(1), "{stderr}");
    for needle in [
        format!("ZKDIST_ROOT {workers_dir:?} (the environment variable behind --root)"),
        format!("zkdist deployment at {}", target.root),
    ] {
        assert!(stderr.contains(&needle), "{needle:?} not in {stderr}");
    }
    assert_eq!(stderr.matches("ZKDIST_ROOT").count(), 1, "{stderr}");
    assert_eq!(target.children(&workers_dir), Vec::<String>::new());

    target.read(async |zk| {
        zk.create(
            &format!("{workers_dir}/x"),
            b"",
            zkdist_coord::CreateMode::Persistent,
        )
        .await
        .expect("the stray node is made");
    });
    let status = target.run(&["status"]);
    status.expect_code(0);
    assert!(
        status
            .stdout
            .contains("  x idle: not ephemeral, so no live worker's registration"),
        "{}",
        status.stdout
    );
    assert_eq!(target.status()["not_ephemeral"], serde_json::json!(["x"]));

    // Through a chroot at the outer root, `/workers` looks like any root.
    let through_chroot = Target {
        connect: format!("{connect}{}", target.root),
        root: "/workers".to_owned(),
    };
    through_chroot
        .run(&["submit", r#"{"kind":"pi","samples":10}"#])
        .expect_code(0);
    let nested_nodes = target.children(&workers_dir);
    assert!(
        nested_nodes.len() > 1 && nested_nodes.contains(&"tasks".to_owned()),
        "the nested deployment is laid out among the registrations: {nested_nodes:?}"
    );
    let mut roles = vec![
        target.spawn("master", &["master"], &scratch),
        target.spawn("worker", &["worker"], &scratch),
    ];
    let submit = target.run(&["submit", "--wait", r#"{"kind":"pi","samples":1000}"#]);
    submit.expect_code(0);
    check_pi(submit.stdout_lines()[1], 1000);
    eventually("the master names every stray registration", || {
        let log = roles[0].log();
        nested_nodes
            .iter()
            .all(|node| {
                log.contains(&format!(
                    "ignored-node workers/{node}: not an ephemeral node"
                ))
            })
            .then_some(())
    });
    terminate_all(&mut roles);
    target.delete_root();
}

/// A `master` node no session holds (made by hand, or left by a tree laid
/// out there) keeps every candidate waiting, as nothing will delete it: the
/// candidate says so in its log, naming the node, and wins the election
/// once an operator deletes it; the queued task then runs.
fn a_master_node_made_by_hand_is_named_and_a_master_elected_once_it_goes(connect: String) {
    let scratch = Scratch::new("hand-made-master");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let submit = target.run(&["submit", r#"{"kind":"pi","samples":1000}"#]);
    submit.expect_code(0);
    let task = task_id(&submit);
    let master_node = Layout::new(&target.root).unwrap().master();
    target.read(async |zk| {
        zk.create(
            &master_node,
            b"by hand",
            zkdist_coord::CreateMode::Persistent,
        )
        .await
        .expect("the node is made");
    });
    let mut roles = vec![
        target.spawn("master", &["master"], &scratch),
        target.spawn("worker", &["worker"], &scratch),
    ];
    eventually("the candidate names the node that keeps it waiting", || {
        roles[0]
            .log()
            .lines()
            .any(|line| {
                line.contains("the master node is not ephemeral")
                    && line.contains(&master_node)
                    && line.contains("`deleteall` in zkCli.sh")
            })
            .then_some(())
    });
    assert!(!elected(&roles[0]), "{}", roles[0].log());
    assert!(
        !target.exists(&format!("{}/tasks/{task}/result", target.root)),
        "no master, no assignment"
    );

    target.delete(&master_node);
    eventually("the candidate is elected once the node is gone", || {
        elected(&roles[0]).then_some(())
    });
    let wait = target.run(&["wait", &task]);
    wait.expect_code(0);
    check_pi(wait.stdout.trim_end(), 1000);
    terminate_all(&mut roles);
    target.delete_root();
}

/// A connect string with a chroot (`host:port/chroot`) puts the whole
/// deployment under it: the master hears of tasks through its recursive
/// watch, whose event paths the client gives relative to the chroot, and
/// the tree lands under the chroot on the server.
fn a_deployment_under_a_chroot_runs_its_tasks(connect: String) {
    let scratch = Scratch::new("chroot");
    let chroot = testing::unique_root(ROOT_PREFIX);
    let outside = Target {
        connect: connect.clone(),
        root: chroot.clone(),
    };
    outside.read(async |zk| {
        zk.create(&chroot, b"", zkdist_coord::CreateMode::Persistent)
            .await
            .expect("the chroot is made");
    });
    let target = Target {
        connect: format!("{connect}{chroot}"),
        root: "/zkdist".to_owned(),
    };
    let mut roles = vec![
        target.spawn("chroot-master", &["master"], &scratch),
        target.spawn("chroot-worker", &["worker"], &scratch),
    ];
    eventually("a master and a worker", || {
        let status = target.try_status()?;
        (status["master_present"] == true && workers_in(&status) == 1).then_some(())
    });
    for seed in 1..=3u64 {
        let payload = format!(r#"{{"kind":"pi","samples":10000,"seed":{seed}}}"#);
        let submit = target.run(&["submit", "--wait", &payload]);
        submit.expect_code(0);
        let lines = submit.stdout_lines();
        assert_eq!(lines.len(), 2, "{}", submit.stdout);
        check_pi(lines[1], 10_000);
        let task = task_id(&submit);
        assert!(
            outside.exists(&format!("{chroot}/zkdist/tasks/{task}/result")),
            "{task}'s result is under the chroot"
        );
    }
    // A root with no layout is named as the server saw it, under the
    // chroot, and by the variable it came from.
    let absent = Target {
        connect: target.connect.clone(),
        root: "/absent".to_owned(),
    };
    absent
        .run(&["status"])
        .expect_code(1)
        .expect_stderr(&[&format!(
            "--root \"/absent\" is inside the chroot of --zk \"{}\": the server looked at \
         {chroot}/absent: cannot read the status: no zkdist layout at /absent",
            target.connect
        )]);
    let from_env = common::zkdist(&["status", "--zk", &target.connect])
        .env("ZKDIST_ROOT", "/absent")
        .output()
        .expect("run zkdist");
    let stderr = String::from_utf8_lossy(&from_env.stderr);
    assert_eq!(from_env.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ZKDIST_ROOT \"/absent\" is inside the chroot"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("ZKDIST_ROOT").count(), 1, "{stderr}");
    // Without a chroot, the variable is named all the same.
    let from_env = common::zkdist(&["status", "--zk", &connect])
        .env("ZKDIST_ROOT", format!("{chroot}-absent"))
        .output()
        .expect("run zkdist");
    let stderr = String::from_utf8_lossy(&from_env.stderr);
    assert_eq!(from_env.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "ZKDIST_ROOT \"{chroot}-absent\" (the environment variable behind --root): \
             cannot read the status: no zkdist layout at {chroot}-absent"
        )),
        "{stderr}"
    );
    terminate_all(&mut roles);
    outside.delete_root();
}

fn exec_runs_with_allow_exec_and_a_stopped_worker_finishes_its_task(connect: String) {
    let scratch = Scratch::new("exec");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let layout = Layout::new(&target.root).unwrap();
    let mut master = target.spawn("master", &["master"], &scratch);
    eventually("the master leads", || {
        (target.exists(&layout.master()) && elected(&master)).then_some(())
    });
    // A second master stands by.
    let mut standby = target.spawn("standby", &["master"], &scratch);
    eventually("the second master stands by", || {
        standby.log().contains("standing-by").then_some(())
    });
    assert!(master.is_running() && !elected(&standby));

    let mut worker = target.spawn("worker", &["worker", "--allow-exec"], &scratch);
    eventually("the worker registers", || {
        (workers_in(&target.status()) == 1).then_some(())
    });

    // exec runs, and its exit status and output are the result. The task
    // succeeded, but its command exited with 3: the result is printed, and
    // the wait ends as for a failed task (2), saying why.
    let submit = target.run(&[
        "submit",
        "--wait",
        r#"{"kind":"exec","argv":["sh","-c","echo out; echo err >&2; exit 3"]}"#,
    ]);
    submit
        .expect_code(2)
        .expect_stderr(&["ran, but its command exited with 3"]);
    let task = submit.stdout_lines()[0].to_owned();
    let result: Value = serde_json::from_str(submit.stdout_lines()[1]).unwrap();
    assert_eq!(result["exit_code"], 3, "{result}");
    assert_eq!(result["signal"], Value::Null, "{result}");
    assert_eq!(result["stdout"], "out\n");
    assert_eq!(result["stderr"], "err\n");
    assert_eq!(result["timed_out"], false);
    assert_eq!(result["truncated"], false);
    // A later wait tells the same.
    target
        .run(&["wait", &task])
        .expect_code(2)
        .expect_stderr(&[&format!("task {task} ran, but its command exited with 3")]);
    // Killed by a signal (the OOM killer's, say), or past its timeout.
    let killed = target.run(&[
        "submit",
        "--wait",
        r#"{"kind":"exec","argv":["sh","-c","kill -9 $$"]}"#,
    ]);
    killed
        .expect_code(2)
        .expect_stderr(&["its command was killed by signal 9"]);
    let result: Value = serde_json::from_str(killed.stdout_lines()[1]).unwrap();
    assert_eq!(
        (&result["exit_code"], &result["signal"]),
        (&Value::Null, &Value::from(9))
    );
    target
        .run(&[
            "submit",
            "--wait",
            r#"{"kind":"exec","argv":["sleep","30"],"timeout_ms":200}"#,
        ])
        .expect_code(2)
        .expect_stderr(&["its command ran past its timeout_ms and was killed"]);

    // SIGTERM while a task runs: the worker finishes the task, writes its
    // result, then exits cleanly. The task waits for a file the test
    // creates only once the worker has seen the signal.
    let gate = scratch.path("gate");
    let task = submit_gated_task(&target, &gate, "echo released");
    // A task queued behind it, which no other worker can take. The worker
    // deletes its registration with its result, so the master, which may
    // pick it for this task on hearing the release, has its create
    // refused: nothing is given to the stopping worker and taken back.
    let queued_submit = target.run(&["submit", r#"{"kind":"pi","samples":1000}"#]);
    queued_submit.expect_code(0);
    let queued = task_id(&queued_submit);
    worker.terminate();
    eventually("the worker notes the stop request", || {
        worker.log().contains("stop requested").then_some(())
    });
    assert!(worker.is_running(), "the worker finishes its task first");
    std::fs::write(&gate, b"").unwrap();
    let status = worker.wait_exit();
    assert!(status.success(), "worker: {status}\n{}", worker.log());
    let log = worker.log();
    let stop = log.find("stop requested").unwrap();
    let wrote = log
        .find(&format!("wrote {task} result success"))
        .unwrap_or_else(|| panic!("the worker wrote no result for {task}:\n{log}"));
    assert!(stop < wrote, "{log}");
    let deregistered = log
        .find("deregistered")
        .unwrap_or_else(|| panic!("the worker did not deregister:\n{log}"));
    assert!(wrote < deregistered, "{log}");
    assert!(!log.contains(&format!("started {queued}")), "{log}");
    let status = target.status();
    assert_eq!(status["pending_tasks"], 1, "{status}");
    assert_eq!(status["assignments"], serde_json::json!({}), "{status}");
    let master_log = master.log();
    assert!(
        !master_log.contains("assignment-reclaimed")
            && !master_log.contains(&format!("assignment-created {queued}")),
        "{master_log}"
    );
    let wait = target.run(&["wait", &task]);
    wait.expect_code(0);
    let result: Value = serde_json::from_str(wait.stdout.trim_end()).unwrap();
    assert_eq!(result["stdout"], "released\n", "{result}");
    assert_eq!(result["exit_code"], 0);

    let status = target.status();
    assert_eq!(workers_in(&status), 0);
    assert_eq!(status["master_present"], true);
    assert_eq!(target.children(&layout.ids_dir()), Vec::<String>::new());

    // A hangup, as when the ssh session a worker was started in drops,
    // stops it as SIGTERM does; the second hangup such a drop delivers (the
    // shell passes one on, the kernel sends another as the shell exits) is
    // not taken as a second signal: the worker still finishes its task.
    let mut hung_up = target.spawn("hung-up worker", &["worker", "--allow-exec"], &scratch);
    let gate = scratch.path("gate-hangup");
    let task = submit_gated_task(&target, &gate, "echo after the hangup");
    hung_up.signal("HUP");
    eventually("the hung-up worker notes the stop request", || {
        hung_up.log().contains("stop requested").then_some(())
    });
    hung_up.signal("HUP");
    assert!(hung_up.is_running(), "{}", hung_up.log());
    std::fs::write(&gate, b"").unwrap();
    let status = hung_up.wait_exit();
    assert!(
        status.success(),
        "hung-up worker: {status}\n{}",
        hung_up.log()
    );
    assert!(
        hung_up
            .log()
            .contains(&format!("wrote {task} result success")),
        "{}",
        hung_up.log()
    );

    // One stop delivered twice, back to back, as GNU `timeout` does (to the
    // process, then to its group), is one request: the worker still
    // finishes its task.
    let mut timed_out = target.spawn("timed-out worker", &["worker", "--allow-exec"], &scratch);
    let gate = scratch.path("gate-timeout");
    let task = submit_gated_task(&target, &gate, "echo after the timeout");
    // Two signals sent at once may reach the process as one; the second
    // goes as soon as the first was taken (the handler logs it at once),
    // as it can with `timeout`, well within the window.
    timed_out.terminate();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !timed_out.log().contains("SIGTERM: shutting down") {
        assert!(
            std::time::Instant::now() < deadline,
            "the timed-out worker takes the signal: {}",
            timed_out.log()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    timed_out.terminate();
    eventually("the timed-out worker hears the repeated signal", || {
        timed_out
            .log()
            .contains("the same request delivered twice")
            .then_some(())
    });
    assert!(timed_out.is_running(), "{}", timed_out.log());
    std::fs::write(&gate, b"").unwrap();
    let status = timed_out.wait_exit();
    assert!(
        status.success(),
        "timed-out worker: {status}\n{}",
        timed_out.log()
    );
    assert!(
        timed_out
            .log()
            .contains(&format!("wrote {task} result success")),
        "{}",
        timed_out.log()
    );

    // A second signal while the worker finishes its task ends the process
    // at once, the task unfinished: the way out when finishing cannot end
    // (an ensemble out of reach, a task that hangs). It comes later than
    // a repeat of the first would.
    let mut hasty = target.spawn("hasty worker", &["worker", "--allow-exec"], &scratch);
    let never = scratch.path("never");
    let unfinished = submit_gated_task(&target, &never, "true");
    hasty.terminate();
    eventually("the hasty worker notes the stop request", || {
        hasty.log().contains("stop requested").then_some(())
    });
    std::thread::sleep(REPEATED_SIGNAL_WINDOW + Duration::from_millis(100));
    hasty.terminate();
    let status = hasty.wait_exit();
    // Its task's program was killed with it; were it not, this would let
    // it end.
    std::fs::write(&never, b"").unwrap();
    assert_eq!(
        status.signal(),
        Some(SIGTERM),
        "ended by the first SIGTERM: {status}\n{}",
        hasty.log()
    );
    assert!(
        hasty.log().contains("a second signal: exiting at once"),
        "{}",
        hasty.log()
    );
    assert!(
        !target.exists(&layout.result(&TaskId::parse(&unfinished).unwrap())),
        "the task was left unfinished"
    );

    // A worker killed outright (SIGKILL, the OOM killer) runs no cleanup of
    // its own: the kernel kills its task's program with it. Were the
    // program left running, the task, given to another worker once the
    // killed one's session expires, would run twice at once.
    let mut killed = target.spawn("killed worker", &["worker", "--allow-exec"], &scratch);
    let never_written = scratch.path("never-written");
    let (_, command) =
        submit_waiting_command(&target, &scratch.path("command-pid"), &never_written);
    assert!(is_alive(command), "the command runs until the worker dies");
    killed.signal("KILL");
    let status = killed.wait_exit();
    assert_eq!(status.signal(), Some(SIGKILL), "{status}");
    eventually("the killed worker's command dies with it", || {
        (!is_alive(command)).then_some(())
    });

    // A worker with a time limit stops a task that runs past it: the
    // command is killed and the task fails, its result naming the limit.
    let mut limited = target.spawn(
        "time-limited worker",
        &["worker", "--allow-exec", "--task-time-limit-ms", "1000"],
        &scratch,
    );
    let (too_long, command) = submit_waiting_command(
        &target,
        &scratch.path("limited-command-pid"),
        &never_written,
    );
    target
        .run(&["wait", &too_long])
        .expect_code(2)
        .expect_stderr(&[
            &format!("task {too_long} failed"),
            "the task ran past the worker's time limit of 1000 ms and was stopped",
        ]);
    eventually("the command of a task stopped at the limit dies", || {
        (!is_alive(command)).then_some(())
    });
    terminate_all(std::slice::from_mut(&mut limited));

    // A worker whose registration is deleted while it runs a task (by
    // hand: `status` lists registrations by name) is one the master takes
    // for gone: it reclaims the task to give it to another worker. The
    // worker hears the deletion of its registration (before the reclaim,
    // which comes later in ZooKeeper's order) and kills the command at
    // once, lest the task run twice at once, then joins again under a new
    // id.
    // Workers killed above leave registrations until their sessions
    // expire: the new worker's is the one not there before it. Their
    // tasks, queued again then, may come first: they end at once now.
    std::fs::write(&never_written, b"").unwrap();
    let registrations_before = target.children(&layout.workers_dir());
    let new_registrations = || -> Vec<String> {
        target
            .children(&layout.workers_dir())
            .into_iter()
            .filter(|id| !registrations_before.contains(id))
            .collect()
    };
    let mut deregistered =
        target.spawn("deregistered worker", &["worker", "--allow-exec"], &scratch);
    let rerun_gate = scratch.path("rerun-gate");
    let (task, command) = submit_waiting_command(
        &target,
        &scratch.path("deregistered-command-pid"),
        &rerun_gate,
    );
    let first_id = new_registrations();
    assert_eq!(first_id.len(), 1, "{first_id:?}");
    target.delete(&format!("{}/{}", layout.workers_dir(), first_id[0]));
    eventually("the reclaimed task's command is killed", || {
        (!is_alive(command)).then_some(())
    });
    let second_id = eventually("the worker joins again under a new id", || {
        let ids = new_registrations();
        (ids.len() == 1 && ids != first_id).then_some(ids)
    });
    assert!(deregistered.is_running(), "{}", deregistered.log());
    assert!(
        deregistered
            .log()
            .contains("the registration was deleted before the task's result was written"),
        "{}",
        deregistered.log()
    );
    // The task runs again, on the worker's new registration, and finishes.
    eventually("the task is given to the worker's new registration", || {
        let status = target.status();
        (status["assignments"][second_id[0].as_str()] == task.as_str()).then_some(())
    });
    std::fs::write(&rerun_gate, b"").unwrap();
    target.run(&["wait", &task]).expect_code(0);
    assert_eq!(new_registrations(), second_id);
    // Idle now, the worker loses its registration again: it would wait for
    // ever for work the master never sends to an id it saw leave, so it
    // joins again under a new id here too.
    target.delete(&format!("{}/{}", layout.workers_dir(), second_id[0]));
    let third_id = eventually("the idle worker joins again under a new id", || {
        let ids = new_registrations();
        (ids.len() == 1 && ids != second_id).then_some(ids)
    });
    assert_ne!(third_id, first_id);
    assert!(deregistered.is_running(), "{}", deregistered.log());
    let idle_loss = format!("{} lost its registration", second_id[0]);
    assert!(
        deregistered
            .log()
            .lines()
            .any(|line| line.contains(&idle_loss) && !line.contains("stopped")),
        "{}",
        deregistered.log()
    );
    terminate_all(std::slice::from_mut(&mut deregistered));

    // The master stops: the standby takes over at once (the node goes with
    // the closed session), then stops too.
    terminate_all(std::slice::from_mut(&mut master));
    eventually("the standby takes over", || {
        (elected(&standby) && target.status()["master_present"] == true).then_some(())
    });
    terminate_all(std::slice::from_mut(&mut standby));
    assert_eq!(target.status()["master_present"], false);
    target.delete_root();
}

// ---------------------------------------------------------------------------
// Access control.

/// The credentials the roles of the access-control test run with.
const OWNER_AUTH: &str = "zkdist-ops:correct horse";

/// Results are readable by everyone, so a command that prints its
/// environment must not find the deployment's password in it.
fn an_exec_command_does_not_see_the_credentials_its_worker_was_given(connect: String) {
    let scratch = Scratch::new("exec-env");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let mut role = common::zkdist(&target.args(&["run", "--allow-exec"]));
    role.env("ZKDIST_AUTH", OWNER_AUTH)
        .env("ZKDIST_TEST_PROBE", "inherited");
    let mut role = Role::spawn_with("run", role, &scratch);
    eventually("a master and a worker", || {
        let status = target.try_status()?;
        (status["master_present"] == true && workers_in(&status) == 1).then_some(())
    });
    // The probe shows the command does get the worker's environment, so
    // that `absent` means the password was taken out, not that nothing
    // came through.
    let script = r#"echo "${ZKDIST_TEST_PROBE-absent}"; echo "${ZKDIST_AUTH-absent}""#;
    let task = serde_json::json!({"kind": "exec", "argv": ["sh", "-c", script]}).to_string();
    let submit = target.run(&["submit", "--wait", "--auth", OWNER_AUTH, &task]);
    submit.expect_code(0);
    let result: Value = serde_json::from_str(submit.stdout_lines()[1]).unwrap();
    assert_eq!(result["stdout"], "inherited\nabsent\n", "{result}");
    assert_eq!(result["exit_code"], 0, "{result}");
    role.terminate();
    let status = role.wait_exit();
    assert!(status.success(), "run: {status}\n{}", role.log());
    // The nodes carry the credentials' ACL: only they may delete them.
    target.delete_root_as_owner();
}

/// Roles and clients with `--auth` lay out and run the system; outsiders
/// (kazoo without credentials and with a wrong password, and zkdist
/// commands without `--auth`) read every node, and `zkdist status` works
/// for them, but every write they try is refused with an auth error: no
/// submission, no assignment, no completion, no registration, no deletion.
/// Nothing they tried changed anything, and the roles carry on.
fn with_auth_outsiders_read_everything_and_change_nothing(connect: String) {
    let scratch = Scratch::new("auth");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let layout = Layout::new(&target.root).unwrap();
    let auth = ["--auth", OWNER_AUTH];
    let mut roles = vec![
        target.spawn("master", &["master", auth[0], auth[1]], &scratch),
        target.spawn(
            "worker",
            &["worker", "--allow-exec", auth[0], auth[1]],
            &scratch,
        ),
    ];
    // Status without credentials: reading needs none.
    let status = eventually("a master and a worker, seen without credentials", || {
        let status = target.try_status()?;
        (status["master_present"] == true && workers_in(&status) == 1).then_some(status)
    });
    let worker = status["workers"][0].as_str().unwrap().to_owned();

    // A finished task, and a running one that waits for the test's go.
    let finished = target.run(&["submit", "--wait", auth[0], auth[1], PI_20K]);
    finished.expect_code(0);
    let finished_task = task_id(&finished);
    check_pi(finished.stdout_lines()[1], 20_000);
    let gate = scratch.path("gate");
    let script = format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display());
    let gated = serde_json::json!({"kind": "exec", "argv": ["sh", "-c", script]}).to_string();
    let running = target.run(&["submit", auth[0], auth[1], &gated]);
    running.expect_code(0);
    let running_task = task_id(&running);
    eventually("the worker starts the gated task", || {
        let status = target.status();
        (status["assignments"][&worker] == running_task.as_str()).then_some(())
    });

    let task_path = |task: &str| format!("{}/{task}", layout.tasks_dir());
    let finished_path = task_path(&finished_task);
    let finished_result = format!("{finished_path}/result");
    let running_path = task_path(&running_task);
    let assignment = format!("{}/{worker}", layout.assignments_dir());
    let worker_node = format!("{}/{worker}", layout.workers_dir());
    let stranger = "worker-0000099999";
    let reads = [
        KazooOp::Get(layout.master()),
        KazooOp::Children(layout.workers_dir()),
        KazooOp::Children(layout.tasks_dir()),
        KazooOp::Get(running_path.clone()),
        KazooOp::Get(finished_result.clone()),
        KazooOp::Get(assignment.clone()),
    ];
    let writes = [
        // submit
        KazooOp::CreateSequential(layout.task_prefix()),
        // assign
        KazooOp::Create(format!("{}/{stranger}", layout.assignments_dir())),
        KazooOp::Set(assignment.clone()),
        // complete
        KazooOp::Create(format!("{running_path}/result")),
        KazooOp::Delete(assignment.clone()),
        // register
        KazooOp::CreateEphemeral(format!("{}/{stranger}", layout.workers_dir())),
        KazooOp::CreateSequential(layout.worker_id_prefix()),
        // delete and overwrite
        KazooOp::Delete(worker_node.clone()),
        KazooOp::Delete(layout.master()),
        KazooOp::Set(running_path.clone()),
        KazooOp::Set(finished_result.clone()),
        KazooOp::Delete(finished_result.clone()),
        KazooOp::Delete(finished_path.clone()),
        KazooOp::Delete(layout.tasks_dir()),
    ];
    let ops: Vec<KazooOp> = reads.iter().chain(&writes).cloned().collect();
    let wrong_password = "zkdist-ops:wrong horse";
    for outsider in [None, Some(wrong_password)] {
        let answers = testing::run_kazoo(&target.connect, outsider, &ops);
        let (read_answers, write_answers) = answers.split_at(reads.len());
        for answer in read_answers {
            assert_eq!(answer.outcome, "ok", "kazoo {outsider:?}: {answer:?}");
        }
        let value = |i: usize| read_answers[i].value.clone();
        assert!(
            value(0).as_str().unwrap().starts_with("0x"),
            "{:?}",
            value(0)
        );
        assert_eq!(value(1), serde_json::json!([worker]));
        let mut tasks = vec![finished_task.clone(), running_task.clone()];
        tasks.sort();
        assert_eq!(value(2), serde_json::json!(tasks));
        assert_eq!(value(3), gated.as_str());
        assert!(
            value(4).as_str().unwrap().contains("estimate"),
            "{:?}",
            value(4)
        );
        assert_eq!(value(5), running_task.as_str());
        for answer in write_answers {
            assert_eq!(
                answer.outcome, "NoAuthError",
                "kazoo {outsider:?} was not refused: {answer:?}"
            );
        }
    }

    // zkdist itself, without credentials or with wrong ones: clear errors
    // naming the path refused and what to pass.
    // Submissions create `tasks/task-<token>-NNNNNNNNNN`.
    let tasks_prefix = format!("{}/task-", layout.tasks_dir());
    target
        .run(&["submit", PI_20K])
        .expect_code(1)
        .expect_stderr(&[
            &format!("not allowed to change {tasks_prefix}"),
            "without the credentials that own",
            "--auth USER:PASSWORD",
            &format!("not authorised for {tasks_prefix}"),
        ]);
    target
        .run(&["submit", "--auth", wrong_password, PI_20K])
        .expect_code(1)
        .expect_stderr(&[
            &format!("--auth user \"zkdist-ops\" may not change {tasks_prefix}"),
            "or the password is wrong",
        ]);
    let cleanup = target.run(&["wait", "--cleanup", &finished_task]);
    cleanup.expect_code(1).expect_stderr(&[
        &format!("not allowed to change {finished_result}"),
        &format!("cannot clean up {finished_task}"),
    ]);
    assert!(
        cleanup.stdout.contains("estimate"),
        "the result is read: {}",
        cleanup.stdout
    );
    target.run(&["worker"]).expect_code(1).expect_stderr(&[
        &format!("not allowed to change {}", layout.worker_id_prefix()),
        "--auth USER:PASSWORD",
    ]);
    target.run(&["master"]).expect_code(1).expect_stderr(&[
        &format!("not allowed to change {}", layout.master()),
        "--auth USER:PASSWORD",
    ]);

    // Nothing changed: the same two tasks, one worker still busy with the
    // gated task, the finished one's result in place.
    let status = target.status();
    assert_eq!(status["master_present"], true);
    assert_eq!(status["workers"], serde_json::json!([worker]));
    assert_eq!(status["assignments"][&worker], running_task.as_str());
    assert_eq!(status["finished_tasks"], 1);
    assert_eq!(status["assigned_tasks"], 1);
    assert_eq!(status["pending_tasks"], 0);
    assert_eq!(
        target.children(&layout.assignments_dir()),
        vec![worker.clone()]
    );

    // The owner's roles carry on: the gated task finishes, and the owner
    // cleans up.
    std::fs::write(&gate, b"").unwrap();
    let waited = target.run(&["wait", "--cleanup", auth[0], auth[1], &running_task]);
    waited.expect_code(0);
    assert!(
        waited.stdout.contains("\"exit_code\":0"),
        "{}",
        waited.stdout
    );
    assert!(!target.exists(&running_path), "the owner cleans up");
    for role in roles.iter_mut() {
        assert!(role.is_running(), "{} died:\n{}", role.name, role.log());
    }
    terminate_all(&mut roles);
    target.delete_root_as_owner();
}

/// Roles run without credentials, and a client submits with some: its task
/// is readable by everyone but writable only by those credentials, so the
/// worker given it cannot write its result (`NoAuth`). That worker leaves
/// the task as it is, says why, and goes on; the master gives the task to
/// nobody else, so it costs one worker one try, not every worker its life;
/// a batch of them costs a try each. (docs/operations.md asks for one set of
/// credentials per deployment; this is what a mistake there costs.)
fn a_task_whose_acl_refuses_the_workers_is_left_and_they_go_on(connect: String) {
    let scratch = Scratch::new("mixed-auth");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let layout = Layout::new(&target.root).unwrap();
    let mut roles = [
        target.spawn("master", &["master"], &scratch),
        target.spawn("worker-1", &["worker"], &scratch),
        target.spawn("worker-2", &["worker"], &scratch),
    ];
    eventually("a master and two workers", || {
        let status = target.try_status()?;
        (status["master_present"] == true && workers_in(&status) == 2).then_some(())
    });

    // How many times the workers' logs report `task`'s refusal.
    let refusals_of = |roles: &[Role], task: &str| -> usize {
        let line = format!("{task}'s result cannot be written: not authorised for");
        roles
            .iter()
            .map(|role| role.log().matches(line.as_str()).count())
            .sum()
    };
    let submit_refused = || {
        let refused = target.run(&["submit", "--auth", OWNER_AUTH, PI_20K]);
        refused.expect_code(0);
        // A master and workers run: a plain submit says nothing more.
        assert!(
            !refused.stderr.contains("is queued, but"),
            "{}",
            refused.stderr
        );
        task_id(&refused)
    };
    let refused_task = submit_refused();
    eventually("a worker reports that the task refused its result", || {
        (refusals_of(&roles, &refused_task) > 0).then_some(())
    });
    // No assignment left: every worker is idle.
    let no_assignments = || {
        let status = target.status();
        (status["assignments"]
            .as_object()
            .is_some_and(|a| a.is_empty()))
        .then_some(())
    };
    eventually("the refused task's assignment is released", no_assignments);

    // Both workers are still there, and between them they finish the
    // next tasks.
    for _ in 0..4 {
        let finished = target.run(&["submit", "--wait", PI_20K]);
        finished.expect_code(0);
        check_pi(finished.stdout_lines()[1], 20_000);
    }
    let refused_path = format!("{}/{refused_task}", layout.tasks_dir());
    assert!(target.exists(&refused_path), "the refused task is left");
    assert!(
        !target.exists(&format!("{refused_path}/result")),
        "the refused task has no result"
    );
    // Marked refused: a wait says why, and status counts it.
    let refused_id = TaskId::parse(&refused_task).unwrap();
    let mark = layout.refused(&refused_id);
    target
        .run(&["wait", &refused_task])
        .expect_code(1)
        .expect_stderr(&[
            &format!("{refused_task} will have no result"),
            "not authorised",
            &mark,
        ]);
    let status = target.status();
    assert_eq!(
        (&status["refused_tasks"], &status["pending_tasks"]),
        (&Value::from(1), &Value::from(0))
    );

    // A batch of them, as one client with the wrong credentials sends:
    // each is tried once, and the workers go on.
    let batch: Vec<String> = (0..6).map(|_| submit_refused()).collect();
    eventually("every task of the batch is refused", || {
        batch
            .iter()
            .all(|task| refusals_of(&roles, task) > 0)
            .then_some(())
    });
    let finished = target.run(&["submit", "--wait", PI_20K]);
    finished.expect_code(0);
    for task in batch.iter().chain([&refused_task]) {
        assert_eq!(
            refusals_of(&roles, task),
            1,
            "{task} is tried once, by one worker"
        );
    }
    for role in roles.iter_mut() {
        assert!(role.is_running(), "{} died:\n{}", role.name, role.log());
    }
    assert_eq!(target.status()["refused_tasks"], batch.len() + 1);

    // A task only its owner may read, made by another client. The
    // master's persistent watch does not hear of it (the server sends a
    // watch event only to sessions that may read the node), so the new
    // master below finds it in its listing.
    let created = testing::run_kazoo(
        &target.connect,
        Some(OWNER_AUTH),
        &[KazooOp::CreateOwnedSequential(layout.task_prefix())],
    );
    assert_eq!(created[0].outcome, "ok", "{created:?}");
    let unreadable_path = created[0].value.as_str().expect("the path created");
    let unreadable_task = unreadable_path.rsplit('/').next().unwrap().to_owned();
    let unreadable_lines = |roles: &[Role]| -> usize {
        let line = format!("{unreadable_task}'s payload cannot be read: not authorised for");
        roles
            .iter()
            .map(|role| role.log().matches(line.as_str()).count())
            .sum()
    };

    // A new master finds the refused tasks marked and queues none of them
    // again (before the marks, it tried each once more).
    let [master, worker_1, worker_2] = roles;
    terminate_all(&mut [master]);
    // A task queued while no master runs, whose result another client
    // wrote readable by its owner alone. The new master's start-up check
    // is refused that result (`NoAuth`), which the server answers only for
    // a node it found: the task is finished, and must not run again.
    // A plain submit says that nothing runs it yet.
    let settled_task = task_id(
        target
            .run(&["submit", PI_20K])
            .expect_code(0)
            .expect_stderr(&[&format!(
                "is queued, but no master runs under {}; it runs once they start",
                target.root
            )]),
    );
    let settled_result = format!("{}/{settled_task}/result", layout.tasks_dir());
    let created = testing::run_kazoo(
        &target.connect,
        Some(OWNER_AUTH),
        &[
            KazooOp::CreateOwned(settled_result.clone()),
            KazooOp::Get(settled_result.clone()),
        ],
    );
    let outcomes: Vec<&str> = created.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, ["ok", "ok"], "{created:?}");
    let outsider = testing::run_kazoo(&target.connect, None, &[KazooOp::Get(settled_result)]);
    assert_eq!(outsider[0].outcome, "NoAuthError", "{outsider:?}");
    let mut roles = [
        target.spawn("master-2", &["master"], &scratch),
        worker_1,
        worker_2,
    ];
    let finished = target.run(&["submit", "--wait", PI_20K]);
    finished.expect_code(0);
    // Queued before that task, it would have been queued and assigned
    // before it (the master logs the tasks it finds settled at start-up
    // at debug level only, as a backlog holds many).
    for role in &roles {
        assert!(
            !role.log().contains(&settled_task),
            "{} never hears of {settled_task}:\n{}",
            role.name,
            role.log()
        );
    }
    // Queued before that task, any of them run again would have been
    // assigned before it; once the workers are idle, they are all done.
    eventually("the workers are idle", no_assignments);
    for task in batch.iter().chain([&refused_task]) {
        assert_eq!(
            refusals_of(&roles, task),
            1,
            "{task} is not tried again under a new master"
        );
    }
    // The worker given the unreadable task marks it refused and goes on
    // (before, it stopped, and so did each worker the task went to next).
    eventually("a worker reports that it cannot read the task", || {
        (unreadable_lines(&roles) > 0).then_some(())
    });
    eventually(
        "the unreadable task's assignment is released",
        no_assignments,
    );
    let finished = target.run(&["submit", "--wait", PI_20K]);
    finished.expect_code(0);
    for role in roles.iter_mut() {
        assert!(role.is_running(), "{} died:\n{}", role.name, role.log());
    }
    assert_eq!(
        unreadable_lines(&roles),
        1,
        "{unreadable_task} is tried once, by one worker"
    );
    // Its waiters need its owner's credentials to see it, and are then
    // told why it will have no result.
    target
        .run(&["wait", &unreadable_task])
        .expect_code(1)
        .expect_stderr(&[&format!("not authorised for {unreadable_path}")]);
    target
        .run(&["wait", "--auth", OWNER_AUTH, &unreadable_task])
        .expect_code(1)
        .expect_stderr(&[
            &format!("{unreadable_task} will have no result"),
            "payload cannot be read: not authorised",
        ]);
    assert_eq!(target.status()["refused_tasks"], batch.len() + 2);

    terminate_all(&mut roles);
    target.delete_root();
}

/// `wait --cleanup` on a task nobody runs yet, stopped past its session
/// timeout (as an outage would): its session expires, and it waits on a
/// new one instead of giving up. Once a worker comes, it prints the result
/// and cleans the task up.
fn a_wait_outlives_its_session_and_still_cleans_up(connect: String) {
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

/// SIGINT while a plain submit's create is in flight (held back by a proxy
/// between the process and the server). The process names the
/// submission's token at once, then closes its session, which waits for
/// the server: once closed, the create is applied or never will be. It
/// ends by the signal, telling to look the token up, and the lookup then finds
/// the task, queued once.
fn an_interrupted_submit_names_its_token_and_settles_its_create(connect: String) {
    let scratch = Scratch::new("submit-interrupted");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    // Laid out directly: through the proxy, the submission then sends its
    // create and nothing else.
    target.run(&["submit", PI_20K]).expect_code(0);
    // One proxy per server of the connect string (a standalone server or
    // an ensemble).
    let proxy = proxy::ProxiedEnsemble::start(&target.connect);
    proxy.hold_requests();
    let through_proxy = Target {
        connect: proxy.connect.clone(),
        root: target.root.clone(),
    };
    // A client that hears nothing gives up on its connection after 2/5 of
    // its session timeout, and what the proxy held for it is lost: a long
    // timeout keeps the connection while the test holds its create.
    let mut submitting = through_proxy.spawn(
        "submit",
        &["submit", "--session-timeout-ms", "60000", PI_20K],
        &scratch,
    );
    // The create carries the payload: more than a ping or anything else
    // the client could send first.
    eventually("the create is sent and held", || {
        (proxy.held_bytes() > PI_20K.len()).then_some(())
    });
    submitting.signal("INT");
    let named = "interrupted by SIGINT (Ctrl-C): submission ";
    let token = eventually("the token is named", || {
        let log = submitting.log();
        assert!(submitting.is_running(), "the signal ended it:\n{log}");
        let (_, after) = log.split_once(named)?;
        let (token, rest) = after.split_once(' ')?;
        rest.starts_with(
            "may or may not have been queued; closing its session \
             (a second SIGINT (Ctrl-C) or SIGTERM exits at once)",
        )
        .then(|| token.to_owned())
    });
    assert_eq!(token.len(), 16, "a token: {token}");
    assert!(
        submitting.is_running(),
        "the close waits for the server:\n{}",
        submitting.log()
    );

    proxy.release();
    let status = submitting.wait_exit();
    let log = submitting.log();
    assert_eq!(
        status.signal(),
        Some(SIGINT),
        "ended by SIGINT: {status}\n{log}"
    );
    // The command to run next names the deployment: a `find` without it
    // would look under the default root and answer `none`.
    let find = format!(
        "`zkdist find {token} --zk {} --root {}`",
        through_proxy.connect, through_proxy.root
    );
    assert!(
        log.contains(&format!("{find} tells, before you submit it again")),
        "told to look it up at once, with {find}:\n{log}"
    );
    let find_words: Vec<&str> = find.trim_matches('`').split(' ').skip(1).collect();
    let found = run(&find_words);
    found.expect_code(0);
    let lines = found.stdout_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!("{token} task-{token}-")),
        "the held create was applied when released: {lines:?}"
    );
    assert_eq!(
        target.status()["pending_tasks"],
        2,
        "the task laid out first and the interrupted one, once"
    );

    // Stopped while it waits (no master runs), by SIGTERM this time: it
    // names the signal, says how to wait again, and ends by the signal. A
    // node under `workers/` that is no worker's name is not a worker.
    let layout = Layout::new(&target.root).unwrap();
    target.read(async |zk| {
        zk.create(
            &format!("{}/not-a-worker", layout.workers_dir()),
            b"",
            zkdist_coord::CreateMode::Persistent,
        )
        .await
        .expect("the stray node is made");
    });
    let mut waiting = target.spawn("submit-wait", &["submit", "--wait", PI_20K], &scratch);
    let task = eventually("the task id is printed", || {
        let log = waiting.log();
        log.lines()
            .find(|line| line.starts_with("task-"))
            .map(str::to_owned)
    });
    // The layout is there, but no role: the wait says so once, rather
    // than wait in silence.
    let nobody = format!(
        "still waiting for {task}: no master runs and no worker is registered under {}",
        target.root
    );
    eventually("the wait says nobody runs the task", || {
        waiting.log().contains(&nobody).then_some(())
    });
    waiting.signal("TERM");
    let status = waiting.wait_exit();
    let log = waiting.log();
    assert_eq!(
        status.signal(),
        Some(SIGTERM),
        "ended by SIGTERM: {status}\n{log}"
    );
    assert!(
        log.contains("interrupted by SIGTERM; closing the session"),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "interrupted while waiting for {task}: `zkdist wait {task} --zk {} --root {}` \
             waits again",
            target.connect, target.root
        )),
        "{log}"
    );
    // With `--cleanup`, the command it names cleans up too: following it
    // leaves nothing behind.
    let mut waiting = target.spawn(
        "submit-wait-cleanup",
        &["submit", "--wait", "--cleanup", PI_20K],
        &scratch,
    );
    let task = eventually("the task id is printed", || {
        let log = waiting.log();
        log.lines()
            .find(|line| line.starts_with("task-"))
            .map(str::to_owned)
    });
    eventually("the wait says nobody runs the task", || {
        waiting.log().contains("still waiting for").then_some(())
    });
    waiting.signal("TERM");
    let status = waiting.wait_exit();
    let log = waiting.log();
    assert_eq!(status.signal(), Some(SIGTERM), "{status}\n{log}");
    assert!(
        log.contains(&format!(
            "interrupted while waiting for {task}: `zkdist wait {task} --cleanup --zk {} \
             --root {}` waits again",
            target.connect, target.root
        )),
        "{log}"
    );
    // A plain wait only reads: it ends by the signal, as any command does,
    // so that a script's loop of waits stops with it.
    // The client library's session lines show when it is open.
    let mut waiting = target.spawn("wait", &["wait", "--log", "info", &task], &scratch);
    eventually("the wait's session is open", || {
        waiting
            .log()
            .contains("new session established")
            .then_some(())
    });
    waiting.signal("INT");
    let status = waiting.wait_exit();
    assert_eq!(
        status.signal(),
        Some(SIGINT),
        "ended by SIGINT: {status}\n{}",
        waiting.log()
    );

    // Stopped once its task is queued and its id printed: it still ends
    // by the signal, and says the task was queued, so that whoever sees
    // the signal does not submit it again. The signal races the process's
    // end, so it tries a few times; every try the signal caught must say
    // so.
    let mut caught = 0;
    for _ in 0..10 {
        let mut child = common::zkdist(&target.args(&["submit", PI_20K]))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start zkdist");
        let mut first_line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout is piped")),
            &mut first_line,
        )
        .expect("read the id");
        let task = first_line.trim().to_owned();
        assert!(TaskId::parse(&task).is_ok(), "an id: {task:?}");
        let killed = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("run kill");
        let output = child.wait_with_output().expect("wait for zkdist");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if killed.success() && output.status.signal() == Some(SIGINT) {
            caught += 1;
            assert!(
                stderr.contains(&format!(
                    "{task} was queued before the signal came (its id is printed)"
                )),
                "{stderr}"
            );
        } else {
            assert!(output.status.success(), "{}\n{stderr}", output.status);
        }
    }
    assert!(caught > 0, "the signal never came before the process ended");
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
fn a_wait_outlives_a_restart_of_its_server(_shared_server: String) {
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

const PI_20K: &str = r#"{"kind":"pi","samples":20000}"#;

// ---------------------------------------------------------------------------
// Bad input.

fn bad_submissions_are_refused_and_create_nothing(connect: String) {
    let scratch = Scratch::new("bad-input");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let nothing_created = |what: &str| {
        assert!(
            !target.exists(&target.root),
            "{what} created {}",
            target.root
        );
    };

    target
        .run(&["submit", r#"{"kind":"sort"}"#])
        .expect_code(1)
        .expect_stderr(&["unknown task kind \"sort\""]);
    nothing_created("an unknown kind");

    let big = scratch.path("big.json");
    let padding = "x".repeat(MAX_DATA_BYTES);
    std::fs::write(
        &big,
        format!(r#"{{"kind":"exec","argv":["echo","{padding}"]}}"#),
    )
    .unwrap();
    target
        .run(&["submit", "--wait", "--file", big.to_str().unwrap()])
        .expect_code(1)
        .expect_stderr(&[&format!("over the {MAX_DATA_BYTES}-byte limit")]);
    nothing_created("an oversized payload");

    target
        .run(&["submit", r#"{"kind":"pi","samples":0}"#])
        .expect_code(1)
        .expect_stderr(&["invalid pi payload"]);
    nothing_created("an invalid pi payload");

    // Reading a root nobody used: clear errors, and still nothing created.
    let absent = target.run(&["status"]);
    absent
        .expect_code(1)
        .expect_stderr(&[&format!("no zkdist layout at {}", target.root)]);
    target
        .run(&["wait", "task-0000000007"])
        .expect_code(1)
        .expect_stderr(&[
            "cannot wait for task-0000000007",
            &format!("no zkdist layout at {}", target.root),
        ]);
    nothing_created("status and wait");
}

// ---------------------------------------------------------------------------
// Many tasks at once.

fn submit_lines_queues_every_line_in_order_or_refuses_them_all(connect: String) {
    let scratch = Scratch::new("lines");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };

    // One bad line refuses the batch, naming every bad line: nothing is
    // sent, not even the layout.
    let bad = scratch.path("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"kind\":\"pi\",\"samples\":10}\nnot json\n\n{\"kind\":\"sort\"}\n",
    )
    .unwrap();
    target
        .run(&["submit", "--lines", "--file", bad.to_str().unwrap()])
        .expect_code(1)
        .expect_stderr(&[
            "2 of 3 payload lines refused, so none was submitted",
            "line 2: task payload is not a JSON object",
            "line 4: unknown task kind \"sort\"",
        ]);
    assert!(
        !target.exists(&target.root),
        "a refused batch created the root"
    );

    // --no-check lets any kind through, but not a payload without one.
    let unchecked = scratch.path("unchecked.jsonl");
    std::fs::write(&unchecked, "{\"kind\":\"sort\"}\n{\"kind\":\"\"}\n").unwrap();
    target
        .run(&[
            "submit",
            "--lines",
            "--no-check",
            "--file",
            unchecked.to_str().unwrap(),
        ])
        .expect_code(1)
        .expect_stderr(&["1 of 2 payload lines refused", "line 2: "]);
    assert!(
        !target.exists(&target.root),
        "a refused batch created the root"
    );

    // Payloads on stdin, with a blank line and a Windows line end: one id
    // per payload, in order, and the queue holds exactly them.
    let payloads: Vec<String> = (1..=300)
        .map(|n| format!(r#"{{"kind":"pi","samples":{n}}}"#))
        .collect();
    let mut input = payloads.join("\n");
    input.insert_str(payloads[0].len(), "\r\n");
    input.push_str("\n\n");
    let submitted = run_with_stdin(
        &target.args(&["submit", "--lines", "-"]),
        Some(input.as_bytes()),
    );
    // Nothing runs under the fresh root, and the submit says so.
    submitted.expect_code(0).expect_stderr(&[&format!(
        "no master runs and no worker is registered under {}; the tasks queued there run \
         once they start",
        target.root
    )]);
    let printed: Vec<TaskId> = submitted
        .stdout_lines()
        .iter()
        .map(|line| TaskId::parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    assert_eq!(printed.len(), payloads.len(), "{}", submitted.stdout);
    assert!(
        printed.windows(2).all(|pair| pair[0] < pair[1]),
        "queued in the lines' order: {printed:?}"
    );
    let layout = Layout::new(&target.root).unwrap();
    let mut names: Vec<String> = printed
        .iter()
        .map(|task| task.as_str().to_owned())
        .collect();
    names.sort();
    assert_eq!(target.children(&layout.tasks_dir()), names);
    // `find` looks submissions up by token: two of these, and one that
    // made nothing.
    let (first, last) = (&printed[0], &printed[printed.len() - 1]);
    let token = |task: &TaskId| {
        task.token()
            .expect("a submitted task has a token")
            .to_string()
    };
    let unknown = "0123456789abcdef";
    let found = target.run(&[
        "find",
        &token(last),
        &first.token().unwrap().name_prefix(),
        unknown,
    ]);
    found.expect_code(0);
    assert_eq!(
        found.stdout_lines(),
        [
            format!("{} {last}", token(last)),
            format!("{} {first}", token(first)),
            format!("{unknown} none"),
        ]
    );
    target
        .run(&["find", "12345"])
        .expect_code(1)
        .expect_stderr(&["invalid task token", "16 lowercase hex digits"]);
    // A task's whole id names its token too.
    let by_id = target.run(&["find", last.as_str()]);
    by_id.expect_code(0);
    assert_eq!(by_id.stdout_lines(), [format!("{} {last}", token(last))]);
    // Under a root with no tasks at all (a mistyped --root), a `none`
    // would wrongly say the submission may be sent again.
    let elsewhere = Target {
        connect: target.connect.clone(),
        root: format!("{}-mistyped", target.root),
    };
    elsewhere
        .run(&["find", unknown])
        .expect_code(1)
        .expect_stderr(&[&format!("no zkdist layout at {}", elsewhere.root)]);
    // A root inside this deployment is refused once, before anything is
    // sent or looked for under it: every line is `-`.
    let nested = Target {
        connect: target.connect.clone(),
        root: format!("{}/tasks", target.root),
    };
    let refused = run_with_stdin(
        &nested.args(&["submit", "--lines", "-"]),
        Some(payloads[..3].join("\n").as_bytes()),
    );
    refused
        .expect_code(1)
        .expect_stderr(&["none of the 3 tasks was submitted (printed as -)"]);
    assert_eq!(refused.stdout_lines(), ["-", "-", "-"]);
    assert_eq!(
        refused
            .stderr
            .matches("not usable as the zkdist root")
            .count(),
        1,
        "{}",
        refused.stderr
    );
    assert!(
        !refused.stderr.contains("no master runs"),
        "{}",
        refused.stderr
    );
    for (task, payload) in printed.iter().zip(&payloads).step_by(37) {
        assert_eq!(
            String::from_utf8(target.data(&layout.task(task))).unwrap(),
            *payload,
            "{task}"
        );
    }
    target.delete_root();

    // The session expires midway (the process is stopped past its
    // timeout): the rest goes on a new session, and every line makes
    // exactly one task.
    let lines = 20_000;
    let input: String = (1..=lines)
        .map(|n| format!("{{\"kind\":\"pi\",\"samples\":{n}}}\n"))
        .collect();
    let file = scratch.path("many.jsonl");
    std::fs::write(&file, input).unwrap();
    let mut submitting = target.spawn(
        "submit-lines",
        &[
            "submit",
            "--lines",
            "--file",
            file.to_str().unwrap(),
            "--session-timeout-ms",
            &SHORT_SESSION_TIMEOUT_MS.to_string(),
        ],
        &scratch,
    );
    eventually("the first tasks are queued", || {
        (target.exists(&layout.tasks_dir()) && !target.children(&layout.tasks_dir()).is_empty())
            .then_some(())
    });
    submitting.signal("STOP");
    // Nothing to poll for: the server expires the session after its
    // timeout, on its own clock.
    std::thread::sleep(Duration::from_millis(3 * SHORT_SESSION_TIMEOUT_MS));
    submitting.signal("CONT");
    assert!(submitting.wait_exit().success(), "{}", submitting.log());
    let log = submitting.log();
    assert!(
        log.contains("the session ended while submitting"),
        "the session outlived the stop: {log}"
    );
    let printed: Vec<TaskId> = log
        .lines()
        .filter_map(|line| TaskId::parse(line).ok())
        .collect();
    assert_eq!(printed.len(), lines as usize, "one id per line: {log}");
    assert!(
        printed.windows(2).all(|pair| pair[0] < pair[1]),
        "queued in the lines' order, none twice"
    );
    let mut names: Vec<String> = printed
        .iter()
        .map(|task| task.as_str().to_owned())
        .collect();
    names.sort();
    assert_eq!(
        target.children(&layout.tasks_dir()),
        names,
        "exactly the printed tasks"
    );
    target.delete_root();

    // Standard output fails (a full disk) at the first batch's ids: the
    // sending stops there, and the error names each task queued with its
    // line, since standard output has none of them.
    let lines = 12_000;
    let input: String = (1..=lines)
        .map(|n| format!("{{\"kind\":\"pi\",\"samples\":{n}}}\n"))
        .collect();
    std::fs::write(&file, input).unwrap();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let output =
        common::zkdist(&target.args(&["submit", "--lines", "--file", file.to_str().unwrap()]))
            .stdout(full)
            .output()
            .expect("run zkdist");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("standard output failed") && stderr.contains("No space left on device"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "2000 of 12000 tasks were not sent: the sending stopped when standard output failed"
        ),
        "{stderr}"
    );
    let mut named: Vec<String> = stderr
        .lines()
        .filter_map(|line| line.split_once(": queued as "))
        .map(|(_, task)| task.to_owned())
        .collect();
    assert_eq!(named.len(), 10_000, "{stderr}");
    named.sort();
    assert_eq!(
        target.children(&layout.tasks_dir()),
        named,
        "every task queued is named, and no other was queued"
    );
    target.delete_root();
}

/// A master taking over a queue longer than a Java client's listing limit
/// (1 MiB: some 29,000 task names). With that limit it cannot read
/// `tasks/` and never assigns a task; with the binary's default it starts
/// and runs them, and no task is lost or run twice.
fn a_master_starts_on_a_queue_past_a_java_clients_listing_limit(connect: String) {
    /// A task's name (32 bytes) and its length prefix in a listing reply.
    const LISTED_BYTES_PER_TASK: usize = 36;
    let tasks = zkdist_coord::MAX_REPLY_BYTES / LISTED_BYTES_PER_TASK + 1_000;
    let scratch = Scratch::new("long-queue");
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let layout = Layout::new(&target.root).unwrap();
    let input: String = (0..tasks)
        .map(|_| "{\"kind\":\"pi\",\"samples\":1}\n")
        .collect();
    let file = scratch.path("queue.jsonl");
    std::fs::write(&file, input).unwrap();
    let submitted = target.run(&["submit", "--lines", "--file", file.to_str().unwrap()]);
    submitted.expect_code(0);
    let mut queued: Vec<TaskId> = submitted
        .stdout_lines()
        .iter()
        .map(|line| TaskId::parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    assert_eq!(queued.len(), tasks, "one id per payload");

    let java_limit = zkdist_coord::MAX_REPLY_BYTES.to_string();
    let mut limited = target.spawn(
        "master-java-limit",
        &["run", "--max-reply-bytes", &java_limit],
        &scratch,
    );
    eventually("the master names the listing limit it hit", || {
        limited
            .log()
            .contains(&format!("over the client's {java_limit}-byte limit"))
            .then_some(())
    });
    let status = target.status();
    assert_eq!(
        status["finished_tasks"].as_u64(),
        Some(0),
        "nothing ran: {status}"
    );
    assert_eq!(
        status["pending_tasks"].as_u64(),
        Some(tasks as u64),
        "{status}"
    );
    limited.terminate();
    limited.wait_exit();

    let mut defaults = target.spawn("run-default-limit", &["run"], &scratch);
    eventually("tasks finish under the default limit", || {
        let finished = target.status()["finished_tasks"].as_u64()?;
        (finished >= 100).then_some(())
    });
    assert!(elected(&defaults), "{}", defaults.log());
    terminate_all(std::slice::from_mut(&mut defaults));

    // Every task queued is still there, none was added, and the tasks
    // with a result are exactly as many as status counts finished.
    let mut listed: Vec<TaskId> = target
        .children(&layout.tasks_dir())
        .iter()
        .map(|name| TaskId::parse(name).unwrap_or_else(|e| panic!("{name:?}: {e}")))
        .collect();
    listed.sort();
    queued.sort();
    assert!(listed == queued, "tasks/ holds exactly the queued tasks");
    let with_result = target.read(async |zk| {
        let paths: Vec<String> = queued.iter().map(|task| layout.result(task)).collect();
        let results =
            futures::future::join_all(paths.iter().map(|path| zk.exists(path, Watch::No))).await;
        results
            .into_iter()
            .filter(|result| result.as_ref().expect("exists").is_some())
            .count()
    });
    let status = target.status();
    assert!(with_result >= 100, "{with_result} tasks have a result");
    assert_eq!(
        status["finished_tasks"].as_u64(),
        Some(with_result as u64),
        "{status}"
    );
    target.delete_root();
}

/// A session timeout the test servers grant (they allow 1 s to 10 s: twice
/// to twenty times their 500 ms tick) and a test can outwait.
const SHORT_SESSION_TIMEOUT_MS: u64 = 4_000;

// ---------------------------------------------------------------------------
// bench

/// SIGINT while a backlog is being queued stops the bench, which deletes
/// its root (tasks whose names it had not learned included) and ends by the signal; a
/// second SIGINT during that clean-up exits at once, naming the root it
/// leaves.
fn an_interrupted_bench_deletes_its_root_unless_interrupted_twice(connect: String) {
    let scratch = Scratch::new("bench-interrupted");
    for twice in [false, true] {
        let target = Target {
            connect: connect.clone(),
            root: testing::unique_root(ROOT_PREFIX),
        };
        let tasks_dir = Layout::new(&target.root).expect("a valid root").tasks_dir();
        let mut bench = target.spawn(
            if twice { "bench-twice" } else { "bench-once" },
            &[
                "bench",
                "--tasks",
                "10",
                "--workers",
                "2",
                "--backlog",
                "1000000",
            ],
            &scratch,
        );
        // Interrupted while the backlog is being queued, with thousands of
        // tasks already there: enough, the second time, that the clean-up
        // takes seconds, well past when the second signal comes.
        let enough = if twice { 20_000 } else { 2_000 };
        eventually("the backlog's queueing is under way", || {
            let queued = target.read(async |zk| {
                zk.exists(&tasks_dir, Watch::No)
                    .await
                    .expect("exists")
                    .map_or(0, |stat| stat.num_children)
            });
            (queued >= enough).then_some(())
        });
        bench.signal("INT");
        eventually("the bench says it is stopping", || {
            bench
                .log()
                .contains("interrupt again to exit at once")
                .then_some(())
        });
        if twice {
            bench.signal("INT");
        }
        let status = bench.wait_exit();
        let log = bench.log();
        assert_eq!(
            status.signal(),
            Some(SIGINT),
            "ended by SIGINT: {status}\n{log}"
        );
        if twice {
            assert!(
                log.contains(&format!("exited without deleting {}", target.root)),
                "{log}"
            );
            assert!(target.exists(&target.root), "the root is left");
            target.delete_root();
        } else {
            assert!(log.contains("interrupted before the run finished"), "{log}");
            assert!(!target.exists(&target.root), "the bench deleted its root");
        }
    }
}

fn bench_reports_every_phase_ends_with_the_efficiency_and_deletes_its_root(connect: String) {
    let target = Target {
        connect,
        root: testing::unique_root(ROOT_PREFIX),
    };
    let bench = target.run(&[
        "bench",
        "--tasks",
        "200",
        "--workers",
        "3",
        "--backlog",
        "100",
        "--warmup-tasks",
        "50",
        "--raw-nodes",
        "500",
    ]);
    bench.expect_code(0);
    let lines = bench.stdout_lines();
    for prefix in [
        "zkdist bench on ",
        "raw ceiling: 500 creates at ",
        "watch events: the same writes under a second session's watch",
        "multi-reads: the same 500 reads, 16 nodes to a request, at ",
        "backlog: 100 tasks drained in ",
        "tasks: 200 in ",
        "latency (submit to result written): p50 ",
        // The submission is a create; the assignment (with the master's
        // epoch check) and the completion (the result and the
        // assignment's deletion) are a multi each.
        "writes per task: 3.00 (creates 1.00, deletes 0.00, set_data 0.00, multi 2.00)",
        "efficiency counting reads too: ",
        "efficiency counting node writes: ",
    ] {
        assert!(
            lines.iter().any(|line| line.starts_with(prefix)),
            "no line starting {prefix:?} in:\n{}",
            bench.stdout
        );
    }
    // The drain's writes are the assignments and completions (2 a task,
    // and the workers' ids and registrations: 6 in all); the submissions
    // are counted apart, as what queueing cost before the clock started.
    let drained = lines
        .iter()
        .find(|line| line.starts_with("backlog: "))
        .expect("a backlog line");
    assert!(
        drained.contains("; 2.06 writes and ")
            && drained.ends_with(" (queueing them took 1.00 writes per task before)"),
        "{drained}"
    );
    // The new master checks the 100 queued tasks, 32 to a request, two
    // nodes each: four multi-reads of 200 nodes (its few `exists` look at
    // the layout, whatever the backlog).
    let takeover = lines
        .iter()
        .find(|line| line.starts_with("takeover: "))
        .expect("a takeover line");
    assert!(
        takeover
            .starts_with("takeover: a new master over the 100 queued tasks was ready to assign ")
            && takeover.contains(" reads (4 multi-reads of 200 nodes, ")
            && takeover.contains(" exists, 3 listings of 100 names) and "),
        "{takeover}"
    );
    let last = lines.last().copied().unwrap_or_default();
    let percent: f64 = last
        .strip_prefix("efficiency ")
        .and_then(|rest| rest.strip_suffix('%'))
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("the last line is not the efficiency: {last:?}"));
    assert!(percent > 0.0, "{last}");
    assert!(
        !target.exists(&target.root),
        "the bench deletes {}",
        target.root
    );

    // The same figures as JSON, as docs/performance.md describes them; under a
    // root whose parents do not exist either, which the bench deletes too.
    let nested_root = format!("{}/nested/bench", target.root);
    let bench = run(&[
        "bench",
        "--zk",
        &target.connect,
        "--root",
        &nested_root,
        "--json",
        "--tasks",
        "50",
        "--workers",
        "2",
        "--backlog",
        "20",
        "--warmup-tasks",
        "10",
        "--raw-nodes",
        "200",
    ]);
    bench.expect_code(0);
    let report: Value = serde_json::from_str(&bench.stdout)
        .unwrap_or_else(|e| panic!("bench --json printed {:?}: {e}", bench.stdout));
    let number = |value: &Value| {
        value
            .as_f64()
            .unwrap_or_else(|| panic!("not a number: {value} in {report}"))
    };
    assert_eq!(report["workers"], 2, "{report}");
    assert_eq!(report["discovery"], "watch", "{report}");
    assert_eq!(report["raw_before"]["nodes"], 200, "{report}");
    let raw_best = number(&report["raw_before"]["writes_per_s"])
        .max(number(&report["raw_after"]["writes_per_s"]));
    assert_eq!(number(&report["raw"]["writes_per_s"]), raw_best);
    // The drain: an assignment and a completion (a multi each) per task;
    // queueing it: one create per task, before the drain's clock started.
    let backlog = &report["backlog"];
    assert_eq!(backlog["tasks"], 20, "{report}");
    assert_eq!(backlog["ops"]["multis"], 40, "{report}");
    assert_eq!(backlog["queueing_ops"]["creates"], 20, "{report}");
    assert_eq!(backlog["queueing_ops"]["multis"], 0, "{report}");
    let takeover = &backlog["takeover"];
    assert!(number(&takeover["ready_s"]) > 0.0, "{report}");
    assert_eq!(takeover["ops"]["multi_reads"], 1, "{report}");
    assert_eq!(takeover["ops"]["multi_read_nodes"], 40, "{report}");
    let tasks = &report["tasks"];
    assert_eq!(tasks["tasks"], 50, "{report}");
    assert_eq!(number(&tasks["writes_per_task"]), 3.0, "{report}");
    assert!(
        number(&tasks["latency_p50_ms"]) <= number(&tasks["latency_p99_ms"]),
        "{report}"
    );
    let efficiency = number(&tasks["tasks_per_s"]) * 3.0 / raw_best;
    assert!(
        (number(&report["efficiency"]) - efficiency).abs() < 1e-9,
        "{report}"
    );
    // Counting node writes: the submission's create, the assignment's
    // create (its epoch check writes nothing), and the completion's result
    // and deletion: four.
    let by_nodes = number(&tasks["tasks_per_s"]) * 4.0 / raw_best;
    assert!(
        (number(&report["node_write_efficiency"]) - by_nodes).abs() < 1e-9,
        "{report}"
    );
    // Counting reads too, at the faster raw read rate: the worker's read of
    // its assignment and the master's read ahead of the payload, at least,
    // as nodes, and at most one more, the worker's read of a task assigned
    // by name before its read-ahead answered (and now and then a look);
    // as requests, fewer when the read-ahead batched some into a
    // multi-read, which counts once.
    let raw = &report["raw"];
    let reads = number(&tasks["reads_per_task"]);
    let node_reads = number(&tasks["node_reads_per_task"]);
    assert!((2.0..3.2).contains(&node_reads), "{report}");
    assert!((1.0..=node_reads).contains(&reads), "{report}");
    let ops = &tasks["ops"];
    let read_requests = ["exists", "get_datas", "get_childrens", "multi_reads"]
        .iter()
        .map(|kind| number(&ops[*kind]))
        .sum::<f64>();
    assert!((read_requests - reads * 50.0).abs() < 1e-6, "{report}");
    let raw_reads_best = number(&report["raw_before"]["reads_per_s"])
        .max(number(&report["raw_after"]["reads_per_s"]));
    assert_eq!(number(&report["raw_reads_per_s"]), raw_reads_best);
    let by_requests = number(&tasks["tasks_per_s"]) * (3.0 / raw_best + reads / raw_reads_best);
    assert!(
        (number(&report["request_efficiency"]) - by_requests).abs() < 1e-9,
        "{report}"
    );
    // The multi-read step read every node too; its price in single reads
    // is its definition: 16 reads' time at the single rate over a batch's.
    let multi_cost = 16.0 * number(&raw["reads_per_s"]) / number(&raw["multi_read_nodes_per_s"]);
    assert!(
        (number(&raw["multi_read_cost_in_reads"]) - multi_cost).abs() < 1e-9,
        "{report}"
    );
    assert!(number(&raw["multi_read_nodes_per_s"]) > 0.0, "{report}");
    let event_cost = raw_best / number(&raw["watched_writes_per_s"]) - 1.0;
    assert!(
        (number(&raw["event_cost_in_writes"]) - event_cost).abs() < 1e-9,
        "{report}"
    );
    // The run's price of an event: the mean of the two measurements'.
    let mean_cost = (number(&report["raw_before"]["event_cost_in_writes"])
        + number(&report["raw_after"]["event_cost_in_writes"]))
        / 2.0;
    assert!(
        (number(&report["event_cost_in_writes"]) - mean_cost).abs() < 1e-9,
        "{report}"
    );
    assert!(
        !target.exists(&target.root),
        "the JSON run deletes its root and the parents it made"
    );

    // A root that exists is refused, and left as it was.
    let status_before = {
        target
            .run(&["submit", r#"{"kind":"pi","samples":10}"#])
            .expect_code(0);
        target.status()
    };
    target
        .run(&["bench", "--tasks", "10"])
        .expect_code(1)
        .expect_stderr(&[&format!("{} already exists", target.root)]);
    assert_eq!(target.status(), status_before);
    target.delete_root();
}
