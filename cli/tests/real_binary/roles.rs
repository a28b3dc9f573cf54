//! The roles as processes: `run` serving submit, wait and status; roots,
//! chroots and a `master` node made by hand; a master over a queue past a
//! Java client's listing limit; a role whose output nobody reads.

use serde_json::Value;
use zkdist_coord::zk::testing;
use zkdist_coord::{Coordinator, Layout, TaskId, Watch};

use crate::common::{self, Role, Scratch, eventually, run_with_stdin, terminate_all};
use crate::{PI_20K, ROOT_PREFIX, Target, check_pi, elected, task_id, workers_in};

/// A role whose standard output and error are gone (its ssh session
/// dropped, the reader of its log pipe died) loses its log lines and
/// nothing else: it runs its tasks, hears SIGTERM, and exits cleanly
/// (before, the first log line it could not write panicked, and the role
/// died in the middle of its task or ran on deaf to its signals).
pub(crate) fn a_role_whose_output_nobody_reads_serves_and_stops_cleanly(connect: String) {
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

pub(crate) fn three_run_processes_serve_submit_wait_and_status_then_exit_cleanly(connect: String) {
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
pub(crate) fn a_root_inside_a_deployment_is_refused_and_a_stray_registration_named(
    connect: String,
) {
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
pub(crate) fn a_master_node_made_by_hand_is_named_and_a_master_elected_once_it_goes(
    connect: String,
) {
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
pub(crate) fn a_deployment_under_a_chroot_runs_its_tasks(connect: String) {
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

/// A master taking over a queue longer than a Java client's listing limit
/// (1 MiB: some 29,000 task names). With that limit it cannot read
/// `tasks/` and never assigns a task; with the binary's default it starts
/// and runs them, and no task is lost or run twice.
pub(crate) fn a_master_starts_on_a_queue_past_a_java_clients_listing_limit(connect: String) {
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
