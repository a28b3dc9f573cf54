//! `zkdist explore` and `zkdist replay` as a user runs them: one summary
//! line at the end, a replay command per violation, and that command
//! reproducing the violation at the same step.

use std::process::Command;

/// Runs the binary; returns its exit code, stdout and stderr.
fn zkdist(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_zkdist"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        output.status.code().expect("an exit code"),
        String::from_utf8(output.stdout).expect("utf-8 stdout"),
        String::from_utf8(output.stderr).expect("utf-8 stderr"),
    )
}

#[test]
fn explore_reports_violations_that_replay_reproduces() {
    let (code, out, err) = zkdist(&["explore", "--seeds", "30", "--faults", "all"]);
    assert_eq!(code, 3, "violations found: exit code 3\n{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    let summary = lines.last().expect("a summary line");
    assert!(
        summary.starts_with("explored 30 seeds, ") && summary.ends_with(" steps/s"),
        "{summary}"
    );
    let violations: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("seed "))
        .collect();
    assert!(
        summary.contains(&format!(", {} violations, ", violations.len())),
        "{summary}"
    );
    assert!(!violations.is_empty(), "faults break the founding design");
    let first = lines.iter().position(|l| l.starts_with("seed ")).unwrap();
    let (seed, found) = lines[first]
        .strip_prefix("seed ")
        .and_then(|rest| rest.split_once(": "))
        .expect("seed S: violation");
    let replay = lines[first + 1]
        .strip_prefix("  replay: zkdist ")
        .expect("a replay command follows");
    assert_eq!(
        replay,
        format!("replay --seed {seed} --workers 3 --tasks 20 --faults all")
    );

    let args: Vec<&str> = replay.split(' ').collect();
    let (code, out, _) = zkdist(&args);
    assert_eq!(code, 3);
    assert!(
        out.lines()
            .any(|line| line == format!("violation: {found}")),
        "the replay shows the same violation at the same step:\n{found}\n{out}"
    );
    let (_, quiet, _) = zkdist(&[args.as_slice(), &["--quiet"]].concat());
    assert!(quiet.lines().count() < 30, "--quiet leaves the trace out");
    assert!(out.ends_with(&quiet[quiet.find("violation:").unwrap()..]));
}

#[test]
fn explore_with_latency_finds_nothing_and_json_says_so() {
    let (code, out, _) = zkdist(&["explore", "--seeds", "40", "--faults", "latency"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("explored 40 seeds, 0 violations, "),
        "{out}"
    );
    assert_eq!(out.lines().count(), 1, "{out}");

    let (code, out, _) = zkdist(&["explore", "--seeds", "10", "--from", "5", "--json"]);
    assert_eq!(code, 0);
    let summary: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(summary["seeds"], 10);
    assert_eq!(summary["from"], 5);
    assert_eq!(summary["faults"], "none");
    assert_eq!(summary["violation_count"], 0);
    assert!(summary["steps"].as_u64().unwrap() > 0);
}

#[test]
fn bad_flags_are_refused_naming_them() {
    let (code, _, err) = zkdist(&["explore", "--seeds", "1", "--faults", "some"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown fault mode \"some\""), "{err}");
    let (code, _, err) = zkdist(&["explore", "--seeds", "1", "--workers", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("--workers must be between 1"), "{err}");
    let (code, _, err) = zkdist(&["explore", "--seeds", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("--seeds must be at least 1"), "{err}");
}
