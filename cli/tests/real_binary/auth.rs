//! Access control: credentials kept from commands, outsiders who read
//! and cannot write, and a task whose ACL refuses the workers.

use serde_json::Value;
use zkdist_coord::zk::testing::{self, KazooOp};
use zkdist_coord::{Layout, TaskId};

use crate::common::{self, Role, Scratch, eventually, terminate_all};
use crate::{OWNER_AUTH, PI_20K, ROOT_PREFIX, Target, check_pi, task_id, workers_in};

/// Results are readable by everyone, so a command that prints its
/// environment must not find the deployment's password in it.
pub(crate) fn an_exec_command_does_not_see_the_credentials_its_worker_was_given(connect: String) {
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
pub(crate) fn with_auth_outsiders_read_everything_and_change_nothing(connect: String) {
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
pub(crate) fn a_task_whose_acl_refuses_the_workers_is_left_and_they_go_on(connect: String) {
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
