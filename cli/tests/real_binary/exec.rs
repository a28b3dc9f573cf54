//! `exec` tasks: refused unless a worker allows them, their commands'
//! process groups, timeouts and output, and a worker stopped in the middle
//! of one.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::Value;
use zkdist_coord::zk::testing;
use zkdist_coord::{Layout, TaskId};

use crate::common::{Scratch, eventually, terminate_all};
use crate::{
    REPEATED_SIGNAL_WINDOW, ROOT_PREFIX, SIGKILL, SIGTERM, Target, elected, is_alive,
    submit_gated_task, submit_waiting_command, task_id, workers_in,
};

pub(crate) fn exec_runs_with_allow_exec_and_a_stopped_worker_finishes_its_task(connect: String) {
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
    // Output that is not UTF-8 reaches the waiter exactly, in base64
    // beside its text; a stream that is UTF-8 has no such field.
    let binary = target.run(&[
        "submit",
        "--wait",
        r#"{"kind":"exec","argv":["printf","ok\\377"]}"#,
    ]);
    binary.expect_code(0);
    let result: Value = serde_json::from_str(binary.stdout_lines()[1]).unwrap();
    assert_eq!(result["stdout"], "ok\u{fffd}", "{result}");
    assert_eq!(result["stdout_base64"], "b2v/", "{result}");
    assert!(result.get("stderr_base64").is_none(), "{result}");
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
