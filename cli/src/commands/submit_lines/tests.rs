use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use zkdist_coord::{
    Client, ClientError, Coordinator, Layout, SessionId, TaskId, TaskPayload, TaskToken, Watch,
};
use zkdist_sim::{Latency, SimConfig, SimZk};

use super::printer::printed_as;
use super::queue::Queued;
use super::*;
use crate::commands::submit::is_session_end;

/// What the report names as the command that looks a token up.
const FIND: &str = "`zkdist find TOKEN`";

/// A simulation whose submitter's link can be cut midway: 1 ms links
/// and a 2 s session timeout.
fn cut_midway_sim() -> SimZk {
    SimZk::start(SimConfig {
        seed: 11,
        latency: Latency::Fixed { ms: 1 },
        session_timeout_ms: 2_000,
        ..SimConfig::default()
    })
}

/// `count` payloads of the `echo` kind, numbered.
fn echo_payloads(count: u64) -> Vec<Vec<u8>> {
    (0..count)
        .map(|n| TaskPayload::new("echo").with("n", n).encode().unwrap())
        .collect()
}

/// Asserts that `tasks/` holds the `queued` tasks and at most the
/// `in_doubt` ones besides: every task made is reported, as queued or
/// in doubt.
async fn assert_every_task_made_is_reported(
    sim: &SimZk,
    layout: &Layout,
    queued: usize,
    in_doubt: usize,
) {
    let (reader, _events) = sim.connect("reader").await.unwrap();
    let (names, _) = reader
        .get_children(&layout.tasks_dir(), Watch::No)
        .await
        .unwrap();
    assert!(
        (queued..=queued + in_doubt).contains(&names.len()),
        "{} tasks for {queued} queued and {in_doubt} in doubt",
        names.len()
    );
}

/// Cuts `session`'s link some 30 round trips in (a few thousand creates
/// queued), for longer than its timeout. The flag is set once it is cut.
fn cut_midway(sim: &SimZk, session: SessionId) -> (tokio::task::JoinHandle<()>, Arc<AtomicBool>) {
    let cut = Arc::new(AtomicBool::new(false));
    let cutting = {
        let (sim, cut) = (sim.clone(), Arc::clone(&cut));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(61)).await;
            sim.cut(session, Duration::from_secs(3)).await;
            cut.store(true, Ordering::SeqCst);
        })
    };
    (cutting, cut)
}

/// The session's link is cut in the middle of the batch for longer than
/// its timeout: a seeded prefix of the creates in flight was applied and
/// never answered, the rest never arrived, and the batches after were
/// never sent. On the new session every payload ends up queued exactly
/// once, in order.
#[test]
fn a_session_ending_midway_loses_no_payload_and_queues_none_twice() {
    zkdist_sim::runtime::block_on(11, async {
        let sim = cut_midway_sim();
        let layout = Layout::default();
        let (zk, events) = sim.connect("submitter").await.unwrap();
        let session = zk.session_id();
        let client = Client::new(zk, events, layout.clone());
        let payloads = echo_payloads(BATCH_TASKS as u64 + 2_000);
        let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let (cutting, _) = cut_midway(&sim, session);
        let reconnect = |ended: zkdist_sim::SimSession| {
            let (sim, layout) = (&sim, &layout);
            async move {
                assert_eq!(ended.session_id(), session, "given the ended session");
                let (zk, events) = sim.connect("resumer").await?;
                Ok(Client::new(zk, events, layout.clone()))
            }
        };
        let mut printer = Printer::default();
        let mut released: Vec<String> = Vec::new();
        let queue = queue_all(
            client,
            &payloads,
            reconnect,
            &|| false,
            &|| false,
            &ProgressBar::hidden(),
            &mut |queued| released.push(printer.newly_settled(queued)),
        )
        .await;
        cutting.await.unwrap();
        // What the cut batch settled was released before the new
        // session, up to the first create left unanswered; the rest as
        // the new session settled it, none left for the report.
        let before_new_session = released[0].lines().count();
        assert!(
            before_new_session > 0 && before_new_session < payloads.len(),
            "{before_new_session} of {} lines released before the new session",
            payloads.len()
        );
        assert_eq!(printer.newly_settled(&queue.queued), "");
        let streamed: Vec<&str> = released.iter().flat_map(|text| text.lines()).collect();
        assert_eq!(streamed.len(), payloads.len());

        assert!(
            queue.found_after_end > 0,
            "no create was applied unanswered ({} sent again)",
            queue.sent_again
        );
        assert!(
            queue.sent_again >= payloads.len() - BATCH_TASKS,
            "the batch never started went on the new session: {}",
            queue.sent_again
        );
        let tasks: Vec<TaskId> = queue
            .queued
            .iter()
            .map(|queued| match queued {
                Queued::Task(task) => task.clone(),
                other => panic!("not queued: {other:?}"),
            })
            .collect();
        assert!(
            tasks.windows(2).all(|pair| pair[0] < pair[1]),
            "queued in the payloads' order"
        );
        for (line, task) in streamed.iter().zip(&tasks) {
            assert_eq!(*line, task.as_str(), "a released line is final");
        }
        let (reader, _events) = sim.connect("reader").await.unwrap();
        let (mut names, _) = reader
            .get_children(&layout.tasks_dir(), Watch::No)
            .await
            .unwrap();
        names.sort();
        let mut expected: Vec<String> = tasks.iter().map(|t| t.as_str().to_owned()).collect();
        expected.sort();
        assert_eq!(names, expected, "exactly one task per payload");
        for (task, payload) in tasks.iter().zip(&payloads) {
            let (data, _) = reader
                .get_data(&layout.task(task), Watch::No)
                .await
                .unwrap();
            assert_eq!(data, *payload, "{task}");
        }
    });
}

/// Without faults, each batch's ids are released as soon as it is
/// queued, not all at the end.
#[test]
fn every_line_in_doubt_is_named_with_its_token_however_many() {
    // More lines in doubt than the limit on named lines, behind more
    // lines not queued than it: each `?` line's token must reach the
    // message, for it is the only way to look its task up.
    let in_doubt = NAMED_LINES + 5;
    let not_queued = NAMED_LINES + 3;
    let payload: &[u8] = b"{}";
    let lines: Vec<Line<'_>> = (1..=not_queued + in_doubt)
        .map(|number| Line { number, payload })
        .collect();
    let ended = || ClientError::Zk(zkdist_coord::ZkError::SessionExpired);
    let tokens: Vec<TaskToken> = (0..in_doubt as u64)
        .map(|submission| TaskToken::for_submission(SessionId(7), submission))
        .collect();
    let queued: Vec<Queued> = (0..not_queued)
        .map(|_| Queued::Failed(ended()))
        .chain(tokens.iter().map(|&token| {
            Queued::Failed(ClientError::SubmitInDoubt {
                token,
                cause: Box::new(ended()),
            })
        }))
        .collect();
    let error = report(&lines, &queued, Printer::default(), false, FIND).expect_err("lines failed");
    let message = format!("{error:#}");
    for (index, token) in tokens.iter().enumerate() {
        let number = not_queued + index + 1;
        assert!(
            message.contains(&format!("line {number}: submission {token} is in doubt")),
            "line {number} (token {token}) is not named in: {message}"
        );
    }
    // The lines not queued are named up to the limit, with the lines
    // in doubt counting towards it, and the rest counted.
    assert!(message.contains("line 1: "), "{message}");
    assert!(!message.contains(&format!("line {}: ", NAMED_LINES + 1)));
    assert!(
        message.contains(&format!("and {} more", not_queued - NAMED_LINES)),
        "{message}"
    );
    // The first failure, which the chain prints last, says whose it is
    // rather than following "and N more" as if it were theirs.
    assert!(
        message.ends_with(&format!(
            "and {} more\nthe first failure, line 1: session expired",
            not_queued - NAMED_LINES
        )),
        "{message}"
    );
}

#[test]
fn lines_in_doubt_are_named_when_standard_output_failed_too() {
    let payload: &[u8] = b"{}";
    let lines: Vec<Line<'_>> = (1..=2).map(|number| Line { number, payload }).collect();
    let token = TaskToken::for_submission(SessionId(7), 1);
    let queued = vec![
        Queued::Task(TaskId::parse("task-0000000000000001-0000000000").unwrap()),
        Queued::Failed(ClientError::SubmitInDoubt {
            token,
            cause: Box::new(ClientError::Zk(zkdist_coord::ZkError::SessionExpired)),
        }),
    ];
    let broken = Printer {
        failed: Some(anyhow::anyhow!("broken pipe")),
        unprinted_from: Some(0),
        ..Printer::default()
    };
    let error = report(&lines, &queued, broken, false, FIND).expect_err("stdout failed");
    let message = format!("{error:#}");
    assert!(
        message.contains(
            "1 of 2 tasks were queued, but standard output failed (broken pipe): the ids of \
             1 of them may be missing there, each named below"
        ),
        "{message}"
    );
    assert!(
        message.contains("line 1: queued as task-0000000000000001-0000000000"),
        "{message}"
    );
    assert!(
        message.contains(&format!("line 2: submission {token} is in doubt")),
        "{message}"
    );
}

/// The write of the second batch's lines fails: the lines from that
/// batch's first on may be missing, whatever is printed after.
#[test]
fn the_lines_from_the_first_failed_write_on_count_as_unprinted() {
    let task =
        |n: u64| Queued::Task(TaskId::parse(&format!("task-0000000000000001-{n:010}")).unwrap());
    let mut queued = vec![task(0), task(1)];
    let mut printer = Printer::default();
    let mut written = String::new();
    let text = printer.newly_settled(&queued);
    printer.print_with(&text, |text| {
        written.push_str(text);
        Ok(())
    });
    queued.extend([task(2), task(3)]);
    let text = printer.newly_settled(&queued);
    printer.print_with(&text, |_| Err(anyhow::anyhow!("broken pipe")));
    queued.push(task(4));
    let text = printer.newly_settled(&queued);
    printer.print_with(&text, |_| panic!("nothing is written after a failed write"));
    assert_eq!(written.lines().count(), 2);
    assert_eq!(printer.unprinted_from, Some(2));
    assert_eq!(printer.printed, 5);

    let payload: &[u8] = b"{}";
    let lines: Vec<Line<'_>> = (1..=5).map(|number| Line { number, payload }).collect();
    let message = format!(
        "{:#}",
        report(&lines, &queued, printer, false, FIND).expect_err("stdout failed")
    );
    assert!(
        message.contains("the ids of 3 of them may be missing"),
        "{message}"
    );
    for n in 2..=4 {
        assert!(
            message.contains(&format!(
                "line {}: queued as task-0000000000000001-{n:010}",
                n + 1
            )),
            "{message}"
        );
    }
    for n in 0..2 {
        assert!(
            !message.contains(&format!("queued as task-0000000000000001-{n:010}")),
            "a printed id is not named again: {message}"
        );
    }
}

/// Standard output failed on the second line: the first id reached
/// it and is not repeated; the second is named with its line, and the
/// payload the sending then left out is counted as not sent.
#[test]
fn the_ids_standard_output_may_have_lost_are_named() {
    let payload: &[u8] = b"{}";
    let lines: Vec<Line<'_>> = (1..=3).map(|number| Line { number, payload }).collect();
    let first = TaskId::parse("task-0000000000000001-0000000000").unwrap();
    let second = TaskId::parse("task-0000000000000001-0000000001").unwrap();
    let queued = vec![
        Queued::Task(first.clone()),
        Queued::Task(second.clone()),
        Queued::Interrupted,
    ];
    let broken = Printer {
        printed: 2,
        failed: Some(anyhow::anyhow!("broken pipe")),
        unprinted_from: Some(1),
        ..Printer::default()
    };
    let error = report(&lines, &queued, broken, false, FIND).expect_err("stdout failed");
    let message = format!("{error:#}");
    assert!(
        message.contains(&format!("line 2: queued as {second}")),
        "{message}"
    );
    assert!(!message.contains(first.as_str()), "{message}");
    assert!(
        message.contains(
            "1 of 3 tasks were not sent: the sending stopped when standard output failed"
        ),
        "{message}"
    );
}

#[test]
fn ids_are_released_batch_by_batch() {
    zkdist_sim::runtime::block_on(13, async {
        let sim = SimZk::start(SimConfig {
            seed: 13,
            ..SimConfig::default()
        });
        let layout = Layout::default();
        let (zk, events) = sim.connect("submitter").await.unwrap();
        let client = Client::new(zk, events, layout.clone());
        let payloads = echo_payloads(2 * BATCH_TASKS as u64 + 5);
        let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let mut printer = Printer::default();
        let mut released = Vec::new();
        let queue = queue_all(
            client,
            &payloads,
            |_| async { unreachable!("the session does not end") },
            &|| false,
            &|| false,
            &ProgressBar::hidden(),
            &mut |queued| released.push(printer.newly_settled(queued)),
        )
        .await;
        let counts: Vec<usize> = released.iter().map(|text| text.lines().count()).collect();
        assert_eq!(counts, [BATCH_TASKS, BATCH_TASKS, 5]);
        assert_eq!(printer.newly_settled(&queue.queued), "", "nothing left");
        let ids: Vec<&str> = released.iter().flat_map(|text| text.lines()).collect();
        let tasks: Vec<&str> = queue
            .queued
            .iter()
            .map(|queued| printed_as(queued).expect("settled"))
            .collect();
        assert_eq!(ids, tasks);
    });
}

/// An interruption stops the sending before the next batch: the batch
/// in hand is queued whole, nothing after it is sent, and every payload
/// is accounted for.
#[test]
fn an_interruption_stops_before_the_next_batch_and_loses_track_of_nothing() {
    zkdist_sim::runtime::block_on(12, async {
        let sim = SimZk::start(SimConfig {
            seed: 12,
            ..SimConfig::default()
        });
        let layout = Layout::default();
        let (zk, events) = sim.connect("submitter").await.unwrap();
        let client = Client::new(zk, events, layout.clone());
        let payloads = echo_payloads(BATCH_TASKS as u64 + 5);
        let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        // Asked once the first batch is under way.
        let asked = std::cell::Cell::new(0);
        let interrupted = || {
            asked.set(asked.get() + 1);
            asked.get() > 1
        };
        let no_new_session = |_| async { anyhow::bail!("not needed") };
        let queue = queue_all(
            client,
            &payloads,
            no_new_session,
            &interrupted,
            &|| false,
            &ProgressBar::hidden(),
            &mut |_| {},
        )
        .await;
        let (queued, interrupted): (Vec<_>, Vec<_>) = queue
            .queued
            .iter()
            .partition(|queued| matches!(queued, Queued::Task(_)));
        assert_eq!((queued.len(), interrupted.len()), (BATCH_TASKS, 5));
        assert!(
            interrupted
                .iter()
                .all(|queued| matches!(queued, Queued::Interrupted))
        );
        assert!(
            queue.queued[..BATCH_TASKS]
                .iter()
                .all(|q| matches!(q, Queued::Task(_)))
        );
        let (reader, _events) = sim.connect("reader").await.unwrap();
        let (names, _) = reader
            .get_children(&layout.tasks_dir(), Watch::No)
            .await
            .unwrap();
        assert_eq!(names.len(), BATCH_TASKS, "nothing after the batch was sent");
        // The report (three lines of it: it prints one per payload).
        let lines: Vec<Line<'_>> = payloads[..3]
            .iter()
            .enumerate()
            .map(|(index, payload)| Line {
                number: index + 1,
                payload,
            })
            .collect();
        let first = match &queue.queued[0] {
            Queued::Task(task) => Queued::Task(task.clone()),
            other => panic!("{other:?}"),
        };
        let queued = [first, Queued::Interrupted, Queued::Interrupted];
        let error = report(&lines, &queued, Printer::default(), true, FIND).unwrap_err();
        assert_eq!(
            error.to_string(),
            "interrupted: 2 of 3 tasks were not sent (printed as -)"
        );
    });
}

/// Interrupted after its session ended midway: nothing is sent again,
/// the unanswered creates stay in doubt (`?`, each with its token), and
/// everything never sent is reported as interrupted.
#[test]
fn an_interruption_after_a_session_ended_sends_nothing_again() {
    zkdist_sim::runtime::block_on(11, async {
        let sim = cut_midway_sim();
        let layout = Layout::default();
        let (zk, events) = sim.connect("submitter").await.unwrap();
        let session = zk.session_id();
        let client = Client::new(zk, events, layout.clone());
        let payloads = echo_payloads(BATCH_TASKS as u64 + 2_000);
        let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let (cutting, cut) = cut_midway(&sim, session);
        let interrupted = || cut.load(Ordering::SeqCst);
        let reconnect = |_| async { anyhow::bail!("interrupted: no new session") };
        let queue = queue_all(
            client,
            &payloads,
            reconnect,
            &interrupted,
            &|| false,
            &ProgressBar::hidden(),
            &mut |_| {},
        )
        .await;
        cutting.await.unwrap();
        assert_eq!((queue.found_after_end, queue.sent_again), (0, 0));
        let count = |wanted: fn(&Queued) -> bool| queue.queued.iter().filter(|q| wanted(q)).count();
        let queued = count(|q| matches!(q, Queued::Task(_)));
        let in_doubt = count(|q| matches!(q, Queued::Failed(ClientError::SubmitInDoubt { .. })));
        let interrupted = count(|q| matches!(q, Queued::Interrupted));
        assert_eq!(queued + in_doubt + interrupted, payloads.len());
        assert!(in_doubt > 0, "some creates were in flight at the cut");
        assert!(interrupted >= payloads.len() - BATCH_TASKS, "{interrupted}");
        // Tasks are only those answered, and those in doubt that the
        // server applied before the cut.
        assert_every_task_made_is_reported(&sim, &layout, queued, in_doubt).await;
    });
}

/// The new session ends too, in its first batch of payloads sent
/// again: the batches after it are not sent on the ended session, so
/// they read as not queued (`-`), not as in doubt (`?`), and only the
/// creates in flight at that end are in doubt.
#[test]
fn a_second_session_end_sends_nothing_more_and_reports_no_false_doubt() {
    zkdist_sim::runtime::block_on(11, async {
        let sim = cut_midway_sim();
        let layout = Layout::default();
        let (zk, events) = sim.connect("submitter").await.unwrap();
        let session = zk.session_id();
        let client = Client::new(zk, events, layout.clone());
        let payloads = echo_payloads(3 * BATCH_TASKS as u64);
        let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let (cutting, _) = cut_midway(&sim, session);
        let resumer_cut = std::sync::Mutex::new(None);
        let reconnect = |_| {
            let (sim, layout, resumer_cut) = (&sim, &layout, &resumer_cut);
            async move {
                let (zk, events) = sim.connect("resumer").await?;
                *resumer_cut.lock().unwrap() = Some(cut_midway(sim, zk.session_id()).0);
                Ok(Client::new(zk, events, layout.clone()))
            }
        };
        let queue = queue_all(
            client,
            &payloads,
            reconnect,
            &|| false,
            &|| false,
            &ProgressBar::hidden(),
            &mut |_| {},
        )
        .await;
        cutting.await.unwrap();
        let resumer_cut = resumer_cut.lock().unwrap().take();
        resumer_cut
            .expect("a new session was opened")
            .await
            .unwrap();

        let count = |wanted: fn(&Queued) -> bool| queue.queued.iter().filter(|q| wanted(q)).count();
        let queued = count(|q| matches!(q, Queued::Task(_)));
        let in_doubt = count(|q| matches!(q, Queued::Failed(ClientError::SubmitInDoubt { .. })));
        let not_queued = count(|q| matches!(q, Queued::Failed(error) if is_session_end(error)));
        assert_eq!(queued + in_doubt + not_queued, payloads.len());
        assert!(
            (1..=CREATES_IN_FLIGHT).contains(&in_doubt),
            "{in_doubt} in doubt: only the creates in flight at the second end"
        );
        assert!(
            not_queued >= BATCH_TASKS,
            "the batches after the second end were not sent: {not_queued} not queued"
        );
        assert!(
            queue.sent_again < payloads.len() - queued - not_queued + BATCH_TASKS,
            "{} sent again",
            queue.sent_again
        );
        assert_every_task_made_is_reported(&sim, &layout, queued, in_doubt).await;
    });
}
