//! Submitting: a signal while a create is in flight, bad submissions that
//! create nothing, and `submit --lines`.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use zkdist_coord::zk::testing;
use zkdist_coord::{Coordinator, Layout, MAX_DATA_BYTES, TaskId};

use crate::common::{self, Scratch, eventually, run, run_with_stdin};
use crate::proxy;
use crate::{PI_20K, ROOT_PREFIX, SHORT_SESSION_TIMEOUT_MS, SIGINT, SIGTERM, Target};

/// SIGINT while a plain submit's create is in flight (held back by a proxy
/// between the process and the server). The process names the
/// submission's token at once, then closes its session, which waits for
/// the server: once closed, the create is applied or never will be. It
/// ends by the signal, telling to look the token up, and the lookup then finds
/// the task, queued once.
pub(crate) fn an_interrupted_submit_names_its_token_and_settles_its_create(connect: String) {
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

// ---------------------------------------------------------------------------
// Bad input.

pub(crate) fn bad_submissions_are_refused_and_create_nothing(connect: String) {
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

pub(crate) fn submit_lines_queues_every_line_in_order_or_refuses_them_all(connect: String) {
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
