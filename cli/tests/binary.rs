//! The `zkdist` binary where no ZooKeeper is needed: the demo on the
//! embedded simulator, and the bad input every command must refuse with a
//! clear error (exit code 1, a message naming what is wrong) before, or
//! instead of, reaching an ensemble.

mod common;

use common::{Finished, Role, Scratch, eventually, run, run_with_stdin, zkdist};
use zkdist_coord::{MAX_DATA_BYTES, TaskId};

/// A port nothing listens on (1 is privileged and never served here).
const NOBODY: &str = "127.0.0.1:1";

// ---------------------------------------------------------------------------
// demo

#[test]
fn demo_prints_a_summary_in_which_every_task_succeeds_in_submission_order() {
    let demo = run(&["demo", "--seed", "3", "--quiet"]);
    demo.expect_code(0);
    // Quiet: the actors' decisions are the trace's, not logged again.
    assert_eq!(
        demo.stderr, "",
        "demo --quiet writes nothing but the summary"
    );
    let lines = demo.stdout_lines();
    assert_eq!(lines[0], "summary (seed 3, 4 workers, 12 tasks)");
    // One line per task, in submission order, with its pi estimate.
    for (index, line) in lines[1..=12].iter().enumerate() {
        let (task, json) = line
            .strip_prefix("  ")
            .and_then(|rest| rest.split_once(" -> "))
            .unwrap_or_else(|| panic!("line {line:?} is not \"  TASK -> RESULT\""));
        let task = TaskId::parse(task).unwrap_or_else(|e| panic!("line {line:?}: {e}"));
        assert_eq!(task.sequence(), index as i32, "{line}");
        assert!(
            task.token().is_some(),
            "a submitted task carries its token: {line}"
        );
        let result: serde_json::Value = serde_json::from_str(json).unwrap();
        let samples = result["samples"].as_u64().unwrap();
        let inside = result["inside"].as_u64().unwrap();
        let estimate = result["estimate"].as_f64().unwrap();
        assert_eq!(samples, 1_000 * (index as u64 + 1), "{line}");
        // serde_json reads floats to within an ulp or so, not exactly.
        let exact = 4.0 * inside as f64 / samples as f64;
        assert!((estimate - exact).abs() < 1e-12, "{line}");
        assert!((2.5..3.8).contains(&estimate), "{line}");
    }
    // Every worker ran some, and the counts add up to the tasks.
    let ran: u64 = lines
        .iter()
        .filter_map(|line| line.strip_prefix("  worker-"))
        .map(|rest| {
            let count = rest.split(" ran ").nth(1).expect("worker line");
            count.trim_end_matches(" tasks").parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(ran, 12);
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("12/12 tasks succeeded, assigned in submission order: yes, "),
        "{last}"
    );
    assert!(!demo.stdout.contains("FAILED"), "{}", demo.stdout);
}

/// A `RUST_LOG` that does not parse is said to be ignored, not passed over
/// in silence.
#[test]
fn an_unreadable_rust_log_is_named() {
    let finished = zkdist(&["demo", "--tasks", "1"])
        .env("RUST_LOG", "zkdist=[")
        .output()
        .expect("zkdist runs");
    let stderr = String::from_utf8_lossy(&finished.stderr);
    assert_eq!(finished.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("zkdist: RUST_LOG ignored ("), "{stderr}");
}

/// A `RUST_LOG` set but blank (`Environment=RUST_LOG=` in a unit file)
/// would filter every line out, errors included: it is taken for unset, and
/// the command logs as `--log` (or its default) says.
#[test]
fn a_blank_rust_log_is_taken_for_unset() {
    for blank in ["", " "] {
        let finished = zkdist(&["demo", "--tasks", "1", "--log", "info"])
            .env("RUST_LOG", blank)
            .output()
            .expect("zkdist runs");
        let stderr = String::from_utf8_lossy(&finished.stderr);
        assert_eq!(finished.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("INFO zkdist::master: initialised"),
            "RUST_LOG={blank:?} silenced the log:\n{stderr}"
        );
        assert!(!stderr.contains("RUST_LOG ignored"), "{stderr}");
    }
}

/// Log lines that cannot be written (standard error is a pipe whose reader
/// has gone, as after an ssh session dropped) are lost, and nothing else:
/// the command does its work and exits as it would have, not with a panic.
#[test]
fn an_unwritable_standard_error_loses_the_log_lines_only() {
    let (reader, writer) = std::io::pipe().expect("make a pipe");
    drop(reader);
    let finished = zkdist(&["demo", "--tasks", "2", "--log", "debug"])
        .stderr(writer)
        .output()
        .expect("zkdist runs");
    let stdout = String::from_utf8_lossy(&finished.stdout);
    assert_eq!(finished.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("2/2 tasks succeeded"), "{stdout}");
}

/// Standard output that cannot be written (a full disk here; a pipe whose
/// reader has gone is the same) is an error naming it, not a panic.
#[test]
fn an_unwritable_standard_output_is_an_error_not_a_panic() {
    let full = std::fs::File::create("/dev/full").expect("/dev/full exists on Linux");
    let finished = zkdist(&["demo", "--tasks", "3"])
        .stdout(full)
        .output()
        .expect("zkdist runs");
    let stderr = String::from_utf8_lossy(&finished.stderr);
    assert_eq!(finished.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn demo_prints_the_same_trace_for_the_same_seed_and_another_for_another() {
    let first = run(&["demo", "--seed", "3"]);
    let second = run(&["demo", "--seed", "3"]);
    let other = run(&["demo", "--seed", "4"]);
    for demo in [&first, &second, &other] {
        demo.expect_code(0);
    }
    assert_eq!(first.stdout, second.stdout, "seed 3 twice");
    assert_ne!(first.stdout, other.stdout, "seeds 3 and 4");
    // The trace comes first, then the summary that --quiet prints alone.
    let quiet = run(&["demo", "--seed", "3", "--quiet"]);
    quiet.expect_code(0);
    assert!(first.stdout.ends_with(&quiet.stdout));
    assert!(first.stdout.len() > quiet.stdout.len() * 2);
    assert!(first.stdout.starts_with("[      0.000ms] connect master"));
}

#[test]
fn demo_refuses_empty_pools_and_bad_latencies() {
    run(&["demo", "--workers", "0"])
        .expect_code(1)
        .expect_stderr(&["--workers must be at least 1"]);
    run(&["demo", "--tasks", "0"])
        .expect_code(1)
        .expect_stderr(&["--tasks must be at least 1"]);
    // Argument errors are clap's: the usage exit code (64, not 2, which
    // says a task failed) and the offending value.
    run(&["demo", "--latency-us", "5..1"])
        .expect_code(64)
        .expect_stderr(&["'5..1'", "MIN 5 is above MAX 1"]);
    run(&["demo", "--latency-us", "fast"])
        .expect_code(64)
        .expect_stderr(&["expected MIN..MAX"]);
    // Round trips as long as the session timeout would expire every
    // session: refused, saying how long a latency may be.
    run(&["demo", "--latency-us", "5000000..6000000"])
        .expect_code(1)
        .expect_stderr(&["--latency-us up to 6000000 µs", "keep MAX under 5000000 µs"]);
    run(&["submit", "--wait", "--cleaup", "{}"])
        .expect_code(64)
        .expect_stderr(&["--cleaup"]);
    run(&["--help"]).expect_code(0);
}

// ---------------------------------------------------------------------------
// Bad input, refused before any server is reached.

/// The connection flags of a command that must fail before connecting: if
/// it tried, the error would be about the connection instead.
fn unreachable(command: &[&str], root: &str) -> Vec<String> {
    let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    args.extend(
        [
            "--zk",
            NOBODY,
            "--connect-timeout-ms",
            "1000",
            "--root",
            root,
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    args
}

fn run_owned(args: &[String]) -> Finished {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

#[test]
fn an_invalid_root_is_refused_by_every_command_naming_it() {
    let pi = r#"{"kind":"pi","samples":10}"#;
    let too_long = format!("/{}", "r".repeat(300));
    for (root, why) in [
        ("zkdist", "start with '/'"),
        ("/zkdist/", "end with '/'"),
        ("/", "a node of its own"),
        ("/zookeeper/zkdist", "reserved"),
        (too_long.as_str(), "over the 256-byte limit"),
    ] {
        for command in [
            &["run"][..],
            &["master"],
            &["worker"],
            &["status"],
            &["submit", pi],
            &["wait", "task-0000000001"],
            &["bench"],
        ] {
            let finished = run_owned(&unreachable(command, root));
            finished
                .expect_code(1)
                .expect_stderr(&[&format!("invalid --root {root:?}"), why]);
            assert!(!finished.stderr.contains("connect"), "{}", finished.stderr);
        }
    }
}

#[test]
fn an_unreachable_ensemble_is_a_clear_error_not_a_hang() {
    let pi = r#"{"kind":"pi","samples":10}"#;
    for command in [
        &["run"][..],
        &["master"],
        &["worker", "--allow-exec"],
        &["status"],
        &["submit", "--wait", pi],
        &["wait", "task-0000000001"],
        &["bench", "--tasks", "10"],
    ] {
        // `run` fails the test if the command outlives its hang guard.
        run_owned(&unreachable(command, "/zkdist"))
            .expect_code(1)
            .expect_stderr(&[
                "cannot open a ZooKeeper session on \"127.0.0.1:1\"",
                "within 1000 ms",
                "connection refused",
            ]);
    }
}

/// Flags that keep a process connecting to nobody: long enough never to
/// give up by itself, and the client library's debug lines show that it
/// is trying, so its signal handlers are in place.
const CONNECTING_FOR_EVER: [&str; 6] = [
    "--zk",
    NOBODY,
    "--connect-timeout-ms",
    "600000",
    "--log",
    "debug",
];

fn wait_until_it_tries_to_connect(process: &Role) {
    eventually("it tries to connect", || {
        process.log().contains("fails in connecting").then_some(())
    });
}

/// A `submit` or `bench` interrupted while it connects says that nothing
/// was sent, then ends by the signal it received, not with an exit status:
/// a shell loop of them stops at the first Ctrl-C. (On a server, the real
/// binary tests interrupt them mid-create and mid-run.)
#[test]
fn an_interrupted_one_shot_command_ends_by_its_signal() {
    use std::os::unix::process::ExitStatusExt;
    let scratch = Scratch::new("interrupted-connect");
    let pi = r#"{"kind":"pi","samples":10}"#;
    let lines = scratch.path("two.jsonl");
    std::fs::write(&lines, format!("{pi}\n{pi}\n")).expect("write the lines");
    let lines = lines.to_str().expect("a UTF-8 path");
    for (command, signal, said) in [
        (
            &["submit", pi][..],
            ("INT", 2),
            "interrupted while connecting: nothing was submitted",
        ),
        // Every line accounted for on stdout, as after a stop midway.
        (
            &["submit", "--lines", "--file", lines],
            ("INT", 2),
            "-\n-\nzkdist: interrupted while connecting: none of the 2 tasks was submitted \
             (printed as -)",
        ),
        (
            &["submit", "--wait", pi],
            ("TERM", 15),
            "interrupted while connecting: nothing was submitted",
        ),
        (
            &["bench", "--tasks", "10"],
            ("INT", 2),
            "interrupted before the run finished",
        ),
        // A hangup (the ssh session went away) is taken as SIGTERM is.
        (
            &["submit", pi],
            ("HUP", 1),
            "interrupted while connecting: nothing was submitted",
        ),
    ] {
        let mut args = command.to_vec();
        args.extend(CONNECTING_FOR_EVER);
        let mut process = Role::spawn(command[0], &args, &scratch);
        wait_until_it_tries_to_connect(&process);
        process.signal(signal.0);
        let status = process.wait_exit();
        let log = process.log();
        assert_eq!(
            status.signal(),
            Some(signal.1),
            "{command:?}: {status}\n{log}"
        );
        assert!(log.contains(said), "{command:?}: {log}");
    }
}

/// A process started with SIGHUP ignored (`nohup zkdist worker &`) keeps
/// ignoring it: the handler that takes a hangup as SIGTERM is installed
/// only where the hangup was not already ignored.
#[test]
fn a_role_started_with_sighup_ignored_keeps_ignoring_it() {
    use std::os::unix::process::ExitStatusExt;
    let scratch = Scratch::new("nohup");
    let mut args = vec!["worker"];
    args.extend(CONNECTING_FOR_EVER);
    let mut process = Role::spawn_ignoring_hangup("nohup-worker", &args, &scratch);
    wait_until_it_tries_to_connect(&process);
    process.signal("HUP");
    // Had the hangup been taken, the stop would have begun by now; it is
    // the SIGTERM below that the log must name.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(process.is_running(), "{}", process.log());
    process.terminate();
    let status = process.wait_exit();
    let log = process.log();
    assert_ne!(status.signal(), Some(1), "{status}\n{log}");
    assert!(log.contains("SIGTERM: shutting down"), "{log}");
    assert!(!log.contains("SIGHUP"), "{log}");
}

/// The connect timeout is how long zkdist tries, even past the session
/// timeout (after which the client library gives up on its own).
#[test]
fn the_connect_timeout_is_honoured_past_the_session_timeout() {
    let started = std::time::Instant::now();
    run(&[
        "status",
        "--zk",
        NOBODY,
        "--connect-timeout-ms",
        "3000",
        "--session-timeout-ms",
        "1000",
    ])
    .expect_code(1)
    .expect_stderr(&["within 3000 ms", "connection refused"]);
    // A lower bound only: that zkdist did not give up early.
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(3000),
        "gave up after {:?}",
        started.elapsed()
    );
}

#[test]
fn bench_refuses_sizes_it_cannot_run_before_connecting() {
    for (flags, message) in [
        (&["--tasks", "0"][..], "--tasks must be at least 1"),
        (&["--workers", "0"], "--workers must be at least 1"),
        (&["--workers", "5000"], "--workers is 5000, more than 1024"),
        // Four times the count would not fit in 64 bits.
        (
            &["--workers", "4611686018427387904"],
            "--workers is 4611686018427387904, more than 1024",
        ),
        (&["--in-flight", "0"], "--in-flight must be at least 1"),
        (&["--raw-nodes", "0"], "--raw-nodes must be at least 1"),
        (
            &["--backlog", "3000000000"],
            "more than ZooKeeper's sequence counter",
        ),
    ] {
        let mut command = vec!["bench"];
        command.extend(flags);
        let finished = run_owned(&unreachable(&command, "/zkdist-bench"));
        finished.expect_code(1).expect_stderr(&[message]);
        assert!(!finished.stderr.contains("connect"), "{}", finished.stderr);
    }
}

/// ZKDIST_ROOT names every command's root but the bench's: the bench
/// deletes its root when done, so only `--root` may move it off its own.
#[test]
fn the_bench_root_is_not_taken_from_the_environment() {
    let with_env_root = |args: &[&str]| {
        let output = zkdist(args)
            .env("ZKDIST_ROOT", "not-a-root")
            .output()
            .expect("run zkdist");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let status = with_env_root(&["status", "--zk", NOBODY]);
    assert!(
        status.contains(r#"invalid ZKDIST_ROOT "not-a-root""#),
        "{status}"
    );
    // The bench goes on with its own root, to the check of its sizes.
    let bench = with_env_root(&["bench", "--zk", NOBODY, "--tasks", "0"]);
    assert!(bench.contains("--tasks must be at least 1"), "{bench}");
    assert!(!bench.contains("not-a-root"), "{bench}");
}

/// A setting read from the environment is named by its variable in an
/// error, whether clap or zkdist finds it wrong: the user who never typed
/// `--auth` must learn that `ZKDIST_AUTH` is at fault. The same value
/// given as a flag is named by the flag.
#[test]
fn settings_from_the_environment_are_named_by_their_variable() {
    let stderr_of = |variable: &str, value: &str, args: &[&str]| {
        let output = zkdist(args)
            .env(variable, value)
            .output()
            .expect("run zkdist");
        assert_ne!(output.status.code(), Some(0), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let cases: [(&str, &str, &[&str], &str); 5] = [
        (
            "ZKDIST_AUTH",
            "nocolon",
            &["status", "--zk", NOBODY],
            "for ZKDIST_AUTH (the environment variable behind '--auth <AUTH>'): expected USER:PASSWORD",
        ),
        (
            "ZKDIST_MAX_REPLY_BYTES",
            "lots",
            &["status", "--zk", NOBODY],
            "for ZKDIST_MAX_REPLY_BYTES (the environment variable behind '--max-reply-bytes",
        ),
        (
            "ZKDIST_ROOT",
            "relative",
            &["status", "--zk", NOBODY],
            r#"zkdist: invalid ZKDIST_ROOT "relative""#,
        ),
        (
            "ZKDIST_ZK",
            "a:1,,b:2",
            &["status"],
            r#"zkdist: invalid ZKDIST_ZK "a:1,,b:2": "#,
        ),
        (
            "ZKDIST_ZK",
            NOBODY,
            &["status", "--connect-timeout-ms", "200"],
            r#"cannot open a ZooKeeper session on "127.0.0.1:1" (from ZKDIST_ZK)"#,
        ),
    ];
    for (variable, value, args, needle) in cases {
        let stderr = stderr_of(variable, value, args);
        assert!(stderr.contains(needle), "{variable}={value}: {stderr}");
    }
    // A variable that is not UTF-8 is named, where clap names nothing.
    let not_utf8 = {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b"/r\xff").to_owned()
    };
    let output = zkdist(&["status", "--zk", NOBODY])
        .env("ZKDIST_ROOT", &not_utf8)
        .output()
        .expect("run zkdist");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("invalid UTF-8 in the environment: ZKDIST_ROOT (behind '--root')"),
        "{stderr}"
    );
    // Credentials from the environment are not echoed.
    let stderr = stderr_of("ZKDIST_AUTH", "hunter2", &["status", "--zk", NOBODY]);
    assert!(
        stderr.contains("invalid value '<hidden>' for ZKDIST_AUTH"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    // Given as a flag, the same values are named by the flag, even with the
    // variable set to something else.
    let stderr = stderr_of(
        "ZKDIST_AUTH",
        "ok:ok",
        &["status", "--zk", NOBODY, "--auth", "nocolon"],
    );
    assert!(stderr.contains("for '--auth <AUTH>'"), "{stderr}");
    assert!(!stderr.contains("ZKDIST_AUTH"), "{stderr}");
    let stderr = stderr_of(
        "ZKDIST_ROOT",
        "/fine",
        &["status", "--zk", NOBODY, "--root", "relative"],
    );
    assert!(
        stderr.contains(r#"zkdist: invalid --root "relative""#),
        "{stderr}"
    );
}

#[test]
fn malformed_connection_flags_are_named() {
    run(&["status", "--zk", "host name:2181"])
        .expect_code(1)
        .expect_stderr(&["malformed connect string", "whitespace"]);
    run(&["status", "--zk", "127.0.0.1:99999"])
        .expect_code(1)
        .expect_stderr(&["\"99999\"", "1..=65535"]);
    // Flags a session could not use are usage errors, named by flag.
    for (auth, needle) in [
        ("no-colon", "expected USER:PASSWORD"),
        (":pw", "the user (before the ':') is empty"),
        ("ops:", "the password of user \"ops\" is empty"),
    ] {
        run(&["status", "--zk", NOBODY, "--auth", auth])
            .expect_code(64)
            .expect_stderr(&["--auth", needle]);
    }
    run(&["status", "--zk", NOBODY, "--connect-timeout-ms", "0"])
        .expect_code(64)
        .expect_stderr(&["--connect-timeout-ms", "0 is not in 1.."]);
    for role in ["worker", "run"] {
        run(&[role, "--zk", NOBODY, "--task-time-limit-ms", "0"])
            .expect_code(64)
            .expect_stderr(&["--task-time-limit-ms", "0 is not in 1.."]);
    }
    for timeout in ["0", "2147483648"] {
        run(&["status", "--zk", NOBODY, "--session-timeout-ms", timeout])
            .expect_code(64)
            .expect_stderr(&["--session-timeout-ms", "1..=2147483647"]);
    }
    run(&["status", "--zk", NOBODY, "--log", "zkdist=loud"])
        .expect_code(64)
        .expect_stderr(&["invalid --log filter \"zkdist=loud\""]);
    run(&["status", "--zk", "127.0.0.1:2181/zookeeper/quota"])
        .expect_code(1)
        .expect_stderr(&["chroot /zookeeper/quota", "reserved by ZooKeeper"]);
    // The reply limit may be raised from a Java client's, never lowered.
    run(&["status", "--zk", NOBODY, "--max-reply-bytes", "100"])
        .expect_code(64)
        .expect_stderr(&["--max-reply-bytes", "100 is not in 1048576.."]);
}

#[test]
fn bad_payloads_are_refused_at_submit_before_connecting() {
    let scratch = Scratch::new("payloads");
    let submit = |payload: &str| run_owned(&unreachable(&["submit", payload], "/zkdist"));
    submit(r#"{"kind":"sort","items":[3,1,2]}"#)
        .expect_code(1)
        .expect_stderr(&["unknown task kind \"sort\"", "known kinds: exec, pi"]);
    submit("not json")
        .expect_code(1)
        .expect_stderr(&["\"kind\""]);
    submit(r#"{"kind":"pi","samples":0}"#)
        .expect_code(1)
        .expect_stderr(&["invalid pi payload", "samples must be in 1..="]);
    submit(r#"{"kind":"pi","samples":10,"colour":"red"}"#)
        .expect_code(1)
        .expect_stderr(&["invalid pi payload", "colour"]);
    submit(r#"{"kind":"exec","argv":[]}"#)
        .expect_code(1)
        .expect_stderr(&["invalid exec payload", "argv must name a program"]);
    // `--no-check` takes any kind, but still only a task.
    for (flag, payload) in [("--no-check", "not json"), ("--no-check", r#"{"kind":""}"#)] {
        run_owned(&unreachable(&["submit", flag, payload], "/zkdist"))
            .expect_code(1)
            .expect_stderr(&["task refused", "\"kind\""]);
    }

    // Over the size limit, whatever the kind and whatever else is wrong
    // with it: the message names the limit and what to do instead.
    let limit = format!(
        "over the {MAX_DATA_BYTES}-byte limit of a node (keep larger data outside ZooKeeper"
    );
    let padding = "x".repeat(MAX_DATA_BYTES);
    for (name, payload) in [
        (
            "exec",
            format!(r#"{{"kind":"exec","argv":["echo","{padding}"]}}"#),
        ),
        (
            "pi",
            format!(r#"{{"kind":"pi","samples":10,"pad":"{padding}"}}"#),
        ),
        ("unknown", format!(r#"{{"kind":"sort","pad":"{padding}"}}"#)),
    ] {
        let file = scratch.path(name);
        std::fs::write(&file, &payload).unwrap();
        let size = payload.len().to_string();
        run_owned(&unreachable(
            &["submit", "--file", file.to_str().unwrap()],
            "/zkdist",
        ))
        .expect_code(1)
        .expect_stderr(&["task refused", &limit, &size, "/zkdist/tasks/task-"]);
    }
    run(&["submit", "--file", "/nonexistent/zkdist-payload.json"])
        .expect_code(1)
        .expect_stderr(&["cannot read the payload file /nonexistent/zkdist-payload.json"]);
    // A stream is read no further than the limit.
    run_owned(&unreachable(&["submit", "--file", "/dev/zero"], "/zkdist"))
        .expect_code(1)
        .expect_stderr(&[&format!(
            "the payload file /dev/zero holds more than the {MAX_DATA_BYTES}-byte limit"
        )]);
    // So is a line of payloads, which is read whole otherwise.
    run_owned(&unreachable(
        &["submit", "--lines", "--file", "/dev/zero"],
        "/zkdist",
    ))
    .expect_code(1)
    .expect_stderr(&[&format!(
        "line 1 of the payload file /dev/zero is longer than the {MAX_DATA_BYTES}-byte limit"
    )]);
    let from_stdin = unreachable(&["submit", "--file", "-"], "/zkdist");
    let from_stdin: Vec<&str> = from_stdin.iter().map(String::as_str).collect();
    run_with_stdin(&from_stdin, Some(b"  \n"))
        .expect_code(1)
        .expect_stderr(&["the payload is empty"]);
    // The hint about --no-check only where it helps: an unknown kind.
    let not_json = run_owned(&unreachable(&["submit", "not json"], "/zkdist"));
    not_json
        .expect_code(1)
        .expect_stderr(&["task refused", "\"kind\""]);
    assert!(
        !not_json.stderr.contains("--no-check"),
        "{}",
        not_json.stderr
    );
}

#[test]
fn a_malformed_task_id_is_refused_naming_it() {
    let refused = run_owned(&unreachable(&["wait", "task-7"], "/zkdist"));
    refused
        .expect_code(1)
        .expect_stderr(&["invalid task id \"task-7\""]);
    assert_eq!(
        refused.stderr.matches("invalid").count(),
        1,
        "said once: {}",
        refused.stderr
    );
}
