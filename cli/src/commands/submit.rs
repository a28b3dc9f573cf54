//! `submit` and `wait`.

use std::io::{IsTerminal, Read};
use std::time::Duration;

use anyhow::{Context, bail};
use zkdist_coord::retry::until_known;
use zkdist_coord::zk::ZkSession;
use zkdist_coord::{
    Client, ClientError, Coordinator, InvalidName, Layout, MAX_DATA_BYTES, SessionState, TaskId,
    TaskPayload, TaskResult, TaskToken, Watch, ZkError, validate_data,
};
use zkdist_worker::SESSION_RETRY_DELAY_MS;

use super::{Outcome, print_result};
use crate::args::{ConnectArgs, FindArgs, SubmitArgs, WaitArgs};
use crate::handlers::HandlerError;
use crate::shutdown::{self, Shutdown, Stop};
use crate::stdout::{errln, outln};
use crate::{connect, handlers};

pub async fn submit(args: &SubmitArgs) -> anyhow::Result<Outcome> {
    let layout = connect::layout(&args.connect)?;
    let payload = read_payload(args, &layout)?;
    if args.lines {
        return super::submit_lines::submit_lines(args, &payload).await;
    }
    // The size first, and before connecting: an oversized payload is
    // refused naming the limit, whatever else is wrong with it, and even
    // when the ensemble is out of reach.
    validate_data(&layout.task_prefix(), &payload).context("task refused")?;
    if payload.iter().all(u8::is_ascii_whitespace) {
        bail!("task refused: the payload is empty (expected JSON with a \"kind\")");
    }
    if args.no_check {
        // Any kind, but still a task: JSON with a "kind".
        TaskPayload::decode(&payload).context("task refused")?;
    } else if let Err(error) = handlers::validate(&payload) {
        let refused = match error {
            HandlerError::UnknownKind(_) => {
                "task refused (pass --no-check to submit kinds this binary does not know)"
            }
            _ => "task refused",
        };
        return Err(anyhow::Error::new(error).context(refused));
    }
    // SIGINT or SIGTERM does not kill the process outright: while it
    // connects, it ends with nothing sent; from the create on, the
    // submission is settled and named (below); while it waits, it says how
    // to wait again. A second signal exits at once.
    let stop = Shutdown::install()?.shared_exiting_on_second();
    let Some(connected) = stop.unless_requested(connect::session(&args.connect)).await else {
        bail!("interrupted while connecting: nothing was submitted");
    };
    let (zk, events) = connected?;
    let mut client = Client::new(zk, events, layout);
    let mut attempt = Attempt {
        token: client.next_submission_token(),
        session_may_apply: true,
    };
    let queued = stop
        .unless_requested(queue_once(
            &args.connect,
            &mut client,
            &payload,
            &mut attempt,
        ))
        .await;
    let task = match queued {
        Some(queued) => queued?,
        None => return Err(interrupted_submission(&args.connect, &client, &attempt).await),
    };
    // The task is queued: if its id cannot be printed, the error names it,
    // so that a script does not submit it again.
    outln!("{task}").with_context(|| format!("queued {task}, but cannot print its id"))?;
    if !args.wait {
        say_queued_if_ended_by_signal(&task, "its id is printed");
    }
    let outcome = if args.wait {
        wait_and_print(&args.connect, &mut client, &task, args.cleanup, &stop).await?
    } else {
        // A submit that ends here would leave a task under a mistyped root
        // (which it has just laid out), or a deployment that is down,
        // without a word: it looks once, as a wait does after a while. An
        // ensemble that went away just now is waited for 2 s at most, and
        // a stop signal ends the look at once.
        let look = missing_runners_soon(client.session(), client.layout());
        if let Some(Some(missing)) = stop.unless_requested(look).await {
            errln!(
                "zkdist: {task} is queued, but {missing} under {}; it runs once they start",
                client.layout().root()
            );
        }
        Outcome::Done
    };
    connect::close_when_done(client.session(), connect::CLOSE_WAIT).await;
    Ok(outcome)
}

/// Says, should the process still end by a signal (see `main`), that the
/// submission was not cut short: whoever sees the signal could otherwise
/// submit the payload again, and queue it twice.
fn say_queued_if_ended_by_signal(task: &TaskId, done: &str) {
    shutdown::say_if_ended_by_signal(format!(
        "{task} was queued before the signal came ({done}); submitting the payload again would \
         queue it twice"
    ));
}

/// Where a plain submit stands: what an interruption must name.
struct Attempt {
    /// The token of the create sent last.
    token: TaskToken,
    /// Whether the client's current session sent that create, so that
    /// closing it settles the create; false while the session that sent it
    /// ended on the client's side and the server may not know yet.
    session_may_apply: bool,
}

/// Queues `payload` once: a create whose session ended unanswered is
/// looked up on a new session, once the old one is surely over, and sent
/// again (on the new session, and so on) only if no task carries its
/// token; a session that ended before the create could queue anything
/// (while the root was laid out) is replaced and the create sent again.
/// Keeps `attempt` up to date for an interruption; may replace `client`'s
/// session.
async fn queue_once(
    connect_args: &ConnectArgs,
    client: &mut Client<ZkSession>,
    payload: &[u8],
    attempt: &mut Attempt,
) -> anyhow::Result<TaskId> {
    loop {
        *attempt = Attempt {
            token: client.next_submission_token(),
            session_may_apply: true,
        };
        let (token, cause) = match client.submit(payload).await {
            Ok(task) => return Ok(task),
            Err(ClientError::SubmitInDoubt { token, cause }) if is_session_end(&cause) => {
                (token, cause)
            }
            // Not in doubt: the create was refused for want of the root,
            // and the session ended while the root was laid out. Nothing
            // was queued, and a new session sends it.
            Err(ended) if a_new_session_may_go_on(&ended) => {
                tracing::warn!(
                    "the session ended ({ended}) before the task was queued; submitting it on \
                     a new session"
                );
                // A session the client gave up on by its own clock would
                // otherwise linger on the server until its timeout.
                client.session().close().await.ok();
                let (zk, events) = connect::session(connect_args).await.with_context(|| {
                    format!(
                        "cannot submit the task: the session ended ({ended}) before it was \
                         queued, and no new one could be opened; nothing was queued"
                    )
                })?;
                *client = Client::new(zk, events, client.layout().clone());
                continue;
            }
            Err(error) => return Err(error).context("cannot submit the task"),
        };
        debug_assert_eq!(token, attempt.token, "the token named before the create");
        attempt.session_may_apply = false;
        let ended_session = client.session().session_id();
        let in_doubt = || {
            format!(
                "the session ended while submitting; cannot find out whether a task \
                 task-{token}-NNNNNNNNNN was created ({} tells, once \
                 session {ended_session} has ended, before you submit it again)",
                connect_args.command_line(&format!("find {token}"))
            )
        };
        // Said before anything else can go wrong: an interruption or a
        // failure from here on leaves the user the token to look up.
        tracing::warn!("submission {token} is in doubt ({cause}); looking it up on a new session");
        settle_ended_session(client.session())
            .await
            .with_context(in_doubt)?;
        let (zk, events) = connect::session(connect_args)
            .await
            .with_context(in_doubt)?;
        let new_client = Client::new(zk, events, client.layout().clone());
        let found = new_client
            .find_submission(token)
            .await
            .with_context(in_doubt)?;
        *client = new_client;
        if let Some(task) = found {
            return Ok(task);
        }
        // The old session can apply nothing any more: sending again on
        // the new one cannot queue the payload twice.
    }
}

/// Makes sure the server ended `ended`, a session its client reported
/// over, before the creates it left unanswered are looked up on another
/// one. The client may declare its session expired on its own clock (no
/// server answered within the session timeout) while the server still
/// holds it; a create the server had read but not yet applied could then
/// be applied after a lookup that found nothing, and the payload sent
/// again would be queued twice. Closing the session from a second client
/// puts the close after everything the session sent: from then on each
/// of its creates is applied or never will be. A session the server
/// ended already costs one refused attach.
pub(super) async fn settle_ended_session(ended: &ZkSession) -> anyhow::Result<()> {
    ended.close().await.ok();
    ended
        .close_from_second_client(ended.config())
        .await
        .with_context(|| format!("cannot make sure session {} ended", ended.session_id()))
}

/// The error an interrupted plain submit ends with: the submission's
/// token, to look it up by once the session that may apply its create has
/// ended. On the way here that session is closed (or, if its client gave
/// up on it, closed from a second client), so that `zkdist find` tells at
/// once; when neither works, the user is told to wait out its timeout.
async fn interrupted_submission(
    connect_args: &ConnectArgs,
    client: &Client<ZkSession>,
    attempt: &Attempt,
) -> anyhow::Error {
    let token = attempt.token;
    // Said first: closing the session waits for the ensemble, and a
    // second signal exits at once.
    errln!(
        "zkdist: interrupted by {}: submission {token} may or may not have been queued; \
         closing its session ({})",
        shutdown::received_signal_name().unwrap_or("a stop request"),
        shutdown::SECOND_SIGNAL
    );
    let session = client.session();
    // A close reports success also when the client gave up on the
    // session on its own clock, which the server may not have done: only
    // `Closed` says the server confirmed it.
    let closed = attempt.session_may_apply
        && session.close().await.is_ok()
        && session.state() == SessionState::Closed;
    let settled = closed || settle_ended_session(session).await.is_ok();
    let when = if settled {
        String::new()
    } else {
        format!(
            " once session {} has ended (its session timeout, {} ms as the server granted \
             it, after the ensemble last heard from it; an ensemble that lost its quorum \
             ends no session until a majority is back)",
            session.session_id(),
            session.granted_session_timeout_ms()
        )
    };
    let find = connect_args.command_line(&format!("find {token}"));
    anyhow::anyhow!(
        "interrupted: submission {token} may or may not have been queued as \
         task-{token}-NNNNNNNNNN: {find} tells{when}, before you submit it again"
    )
}

/// Closes `client`'s session after an interruption, saying so first (the
/// close waits for the ensemble, and a second signal exits at once), and
/// returns the error the command ends with.
async fn close_after_interruption(client: &Client<ZkSession>, stopped: String) -> anyhow::Error {
    errln!(
        "zkdist: interrupted by {}; closing the session ({})",
        shutdown::received_signal_name().unwrap_or("a stop request"),
        shutdown::SECOND_SIGNAL
    );
    client.session().close().await.ok();
    anyhow::anyhow!(stopped)
}

/// Prints, for each token in the order given, the task its submission
/// made or `none`. One lookup for all of them (a `sync` and a listing of
/// `tasks/`).
pub async fn find(args: &FindArgs) -> anyhow::Result<()> {
    let tokens: Vec<TaskToken> = args
        .tokens
        .iter()
        .map(|text| token_of(text))
        .collect::<Result<_, _>>()?;
    let layout = connect::layout(&args.connect)?;
    let (zk, events) = connect::session(&args.connect).await?;
    let tasks_dir = layout.tasks_dir();
    let root = layout.root().to_owned();
    let client = Client::new(zk.clone(), events, layout);
    let found = client
        .find_submissions(&tokens.iter().copied().collect())
        .await
        .context("cannot look the submissions up")?;
    // A `none` tells that a submission may be sent again: under a root
    // with no tasks at all (a mistyped --root, most likely) it would tell
    // nothing, so that is an error. The lookup synced first: this read
    // sees what it saw.
    if found.len() < tokens.len() {
        let tasks = until_known(|| zk.exists(&tasks_dir, Watch::No))
            .await
            .context("cannot look the submissions up")?;
        if tasks.is_none() {
            connect::close_when_done(&zk, connect::CLOSE_WAIT).await;
            return Err(ClientError::NoLayout { root }).context("cannot look the submissions up");
        }
    }
    // Printed before the close, which an ensemble gone just then would
    // hold up to its wait.
    let printed = tokens.iter().try_for_each(|token| match found.get(token) {
        Some(task) => outln!("{token} {task}"),
        None => outln!("{token} none"),
    });
    connect::close_when_done(&zk, connect::CLOSE_WAIT).await;
    printed
}

/// The token `text` names: a token, the `task-<token>-` prefix, or a
/// task's whole id, as `submit` printed it.
fn token_of(text: &str) -> Result<TaskToken, InvalidName> {
    match TaskId::parse(text).ok().and_then(|task| task.token()) {
        Some(token) => Ok(token),
        None => TaskToken::parse(text),
    }
}

pub async fn wait(args: &WaitArgs) -> anyhow::Result<Outcome> {
    let task = TaskId::parse(&args.task)?;
    let layout = connect::layout(&args.connect)?;
    // No signal handler: a wait only reads, and a cleanup is safe to
    // repeat, so SIGINT ends it as it ends any command, and a script's
    // loop of waits stops with it (a process that handled the signal and
    // exited would let the loop go on).
    let (zk, events) = connect::session(&args.connect).await?;
    let mut client = Client::new(zk, events, layout);
    let result = wait_for_result(&args.connect, &mut client, &task).await?;
    let outcome = print_result(&task, &result)?;
    if args.cleanup {
        clean_up(&args.connect, &mut client, &task).await?;
    }
    connect::close_when_done(client.session(), connect::CLOSE_WAIT).await;
    Ok(outcome)
}

/// Waits for `task`'s result, prints it, and cleans the task up if asked,
/// unless `stop` is requested first: then the session is closed, and the
/// error says what was left undone (a wait to start again, or a cleanup
/// that may or may not have happened after the result was printed).
async fn wait_and_print(
    connect_args: &ConnectArgs,
    client: &mut Client<ZkSession>,
    task: &TaskId,
    cleanup: bool,
    stop: &Stop,
) -> anyhow::Result<Outcome> {
    let waited = stop
        .unless_requested(wait_for_result(connect_args, client, task))
        .await;
    // The command that takes over where this one stopped: with the
    // cleanup, if it was asked for, so that following it leaves nothing.
    let wait_again = if cleanup {
        connect_args.command_line(&format!("wait {task} --cleanup"))
    } else {
        connect_args.command_line(&format!("wait {task}"))
    };
    let Some(result) = waited else {
        let stopped = format!("interrupted while waiting for {task}: {wait_again} waits again");
        return Err(close_after_interruption(client, stopped).await);
    };
    let outcome = print_result(task, &result?)?;
    say_queued_if_ended_by_signal(task, "its id and result are printed");
    if cleanup {
        let cleaned = stop
            .unless_requested(clean_up(connect_args, client, task))
            .await;
        let Some(cleaned) = cleaned else {
            let stopped = format!(
                "interrupted while cleaning {task} up, after its result was printed: the task \
                 may or may not have been deleted; {wait_again} prints the result again and \
                 deletes the task if it is still there (or says there is no such task)"
            );
            return Err(close_after_interruption(client, stopped).await);
        };
        cleaned?;
    }
    Ok(outcome)
}

/// Waits for `task`'s result. Reading a result is safe to repeat, so a
/// session that ends meanwhile (an outage longer than the session timeout,
/// while a long task runs) does not end the wait: it goes on on a new
/// session, which replaces `client`'s. Only a new session that cannot be
/// opened ends it.
async fn wait_for_result(
    connect_args: &ConnectArgs,
    client: &mut Client<ZkSession>,
    task: &TaskId,
) -> anyhow::Result<TaskResult> {
    // Said once, on the first session: a wait is quiet otherwise.
    let mut result = {
        let session = client.session().clone();
        let layout = client.layout().clone();
        let note = async {
            tokio::time::sleep(Duration::from_millis(NOBODY_NOTE_AFTER_MS)).await;
            note_if_nobody_runs(&session, &layout, task).await;
            std::future::pending::<()>().await
        };
        tokio::select! {
            result = client.wait(task) => result,
            () = note => unreachable!("the note never completes"),
        }
    };
    loop {
        match result {
            Ok(result) => return Ok(result),
            Err(error) if a_new_session_may_go_on(&error) => {
                renew_session(connect_args, client, &format!("wait for {task}"), &error).await?;
            }
            Err(error) => return Err(error).with_context(|| format!("cannot wait for {task}")),
        }
        result = client.wait(task).await;
    }
}

/// How long a wait goes on before it looks whether anything could run its
/// task: long enough that a deployment at work answers first.
const NOBODY_NOTE_AFTER_MS: u64 = 2_000;

/// How long a submit (plain, or `--lines` before it sends) looks whether
/// anything could run its tasks before it goes on without saying.
const NOBODY_LOOK_TIMEOUT_MS: u64 = 2_000;

/// Says on stderr when no master runs or no worker is registered under
/// `layout`'s root, so that a wait that can only go on until one starts
/// is not silent about it.
async fn note_if_nobody_runs(session: &ZkSession, layout: &Layout, task: &TaskId) {
    if let Some(missing) = missing_runners(session, layout).await {
        errln!(
            "zkdist: still waiting for {task}: {missing} under {}; it runs once they start",
            layout.root()
        );
    }
}

/// [`missing_runners`], given [`NOBODY_LOOK_TIMEOUT_MS`] at most: an
/// ensemble that does not answer by then says nothing.
pub(super) async fn missing_runners_soon(
    session: &ZkSession,
    layout: &Layout,
) -> Option<&'static str> {
    let look = missing_runners(session, layout);
    tokio::time::timeout(Duration::from_millis(NOBODY_LOOK_TIMEOUT_MS), look)
        .await
        .ok()
        .flatten()
}

/// What is missing for a task under `layout`'s root to run, if anything:
/// a master, a registered worker, or both. Best effort: a read that fails
/// counts as finding one, so that nothing is said on a guess.
async fn missing_runners(session: &ZkSession, layout: &Layout) -> Option<&'static str> {
    let (master_path, workers_dir) = (layout.master(), layout.workers_dir());
    let (master, workers) = tokio::join!(
        session.exists(&master_path, Watch::No),
        session.get_children(&workers_dir, Watch::No),
    );
    // A node no session holds (made by hand) is no master, and no worker:
    // only an ephemeral registration is a live worker's.
    let no_master =
        matches!(master, Ok(None)) || matches!(master, Ok(Some(stat)) if stat.ephemeral_owner == 0);
    let no_workers = match workers {
        Ok((names, _)) => !any_ephemeral(session, &workers_dir, &names).await,
        // Not laid out yet: nobody ever joined there.
        Err(ZkError::NoNode { .. }) => true,
        Err(_) => false,
    };
    match (no_master, no_workers) {
        (true, true) => Some("no master runs and no worker is registered"),
        (true, false) => Some("no master runs"),
        (false, true) => Some("no worker is registered"),
        (false, false) => None,
    }
}

/// Whether one of the nodes `names` under `dir` is ephemeral. Looks them
/// up one at a time and stops at the first: usually one read. A failed
/// read counts as one, so that the note is never said on a guess.
async fn any_ephemeral(session: &ZkSession, dir: &str, names: &[String]) -> bool {
    for name in names {
        match session.exists(&format!("{dir}/{name}"), Watch::No).await {
            Ok(Some(stat)) if stat.ephemeral_owner == 0 => {}
            // Gone since the listing.
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => return true,
        }
    }
    false
}

/// Deletes `task` and its result, going on on a new session as
/// [`wait_for_result`] does: a cleanup is safe to repeat.
async fn clean_up(
    connect_args: &ConnectArgs,
    client: &mut Client<ZkSession>,
    task: &TaskId,
) -> anyhow::Result<()> {
    let mut renewed = false;
    loop {
        match client.cleanup(task).await {
            Ok(()) => return Ok(()),
            // The ended session's cleanup was applied after all (or
            // somebody else cleaned up): the task is gone either way.
            Err(ClientError::NoSuchTask { .. }) if renewed => return Ok(()),
            Err(error) if a_new_session_may_go_on(&error) => {
                let doing = format!("clean up {task}");
                renew_session(connect_args, client, &doing, &error).await?;
                renewed = true;
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot clean up {task}"));
            }
        }
    }
}

/// Whether `error` says that the client's session ended in a way a new
/// session gets past: expired, closed, or its stream stopped. Failed
/// authentication would fail again.
fn a_new_session_may_go_on(error: &ClientError) -> bool {
    match error {
        ClientError::SessionEnded { state, .. } => *state != Some(SessionState::AuthFailed),
        ClientError::Zk(error) => matches!(
            error.session_end(),
            Some(SessionState::Expired | SessionState::Closed)
        ),
        _ => false,
    }
}

/// Replaces `client`'s ended session with a new one, to `doing` ("wait
/// for task-…"), saying so. An ensemble out of reach is waited for, as
/// the roles wait for it: the session most likely ended because it went
/// away (a restart, an outage), and the wait was already told it works.
/// What a new session cannot fix (refused credentials, a malformed
/// configuration) ends the command.
async fn renew_session(
    connect_args: &ConnectArgs,
    client: &mut Client<ZkSession>,
    doing: &str,
    ended: &ClientError,
) -> anyhow::Result<()> {
    tracing::warn!("{ended}; going on to {doing} on a new session");
    client.session().close().await.ok();
    let config = connect::config(connect_args)?;
    let (zk, events) = loop {
        match ZkSession::connect(&config).await {
            Ok(connected) => break connected,
            Err(error) if error.is_transient() => {
                tracing::warn!("cannot open a session to {doing} ({error}); trying again");
                tokio::time::sleep(Duration::from_millis(SESSION_RETRY_DELAY_MS)).await;
            }
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "cannot {doing}: {ended}, and a new session on {} was refused",
                        connect_args.zk_shown()
                    )
                });
            }
        }
    };
    *client = Client::new(zk, events, client.layout().clone());
    Ok(())
}

/// Whether a submit's doubt comes from its session's end, which a new
/// session can resolve.
pub(super) fn is_session_end(cause: &ClientError) -> bool {
    matches!(cause, ClientError::Zk(error) if error.is_session_fatal())
}

fn read_payload(args: &SubmitArgs, layout: &Layout) -> anyhow::Result<Vec<u8>> {
    // One payload is held to a node's size: reading stops just past it (a
    // mistaken `--file /dev/zero` would otherwise read until memory runs
    // out). A file of lines holds many payloads, so it is read whole, each
    // line held to that size as it is read.
    let limit_bytes = (!args.lines).then_some(MAX_DATA_BYTES);
    // `asked`: `-` names stdin on purpose (a terminal then types it).
    let from_stdin = |asked: bool| -> anyhow::Result<Vec<u8>> {
        // Without a payload, a terminal would wait for one with no
        // prompt; `-` asks for it on purpose.
        if !asked && std::io::stdin().is_terminal() {
            bail!(
                "no payload: give it as an argument, with --file, or on standard input \
                 (`-` reads it from the terminal)"
            );
        }
        read_at_most(std::io::stdin().lock(), limit_bytes, "standard input")
    };
    match (&args.payload, &args.file) {
        (Some(text), None) if text != "-" => Ok(text.as_bytes().to_vec()),
        (_, Some(file)) if file.as_os_str() == "-" => from_stdin(true),
        (_, Some(file)) => {
            let cannot_read = || format!("cannot read the payload file {}", file.display());
            let opened = std::fs::File::open(file).with_context(cannot_read)?;
            // A file's size is known before reading it: refused as the
            // payload given as an argument would be, naming its size.
            let metadata = opened.metadata().with_context(cannot_read)?;
            if let Some(limit) = limit_bytes
                && metadata.is_file()
            {
                let size_bytes = usize::try_from(metadata.len()).unwrap_or(usize::MAX);
                if size_bytes > limit {
                    return Err(ZkError::DataTooLarge {
                        path: layout.task_prefix(),
                        size_bytes,
                        limit_bytes: limit,
                    })
                    .context("task refused");
                }
            }
            read_at_most(
                opened,
                limit_bytes,
                &format!("the payload file {}", file.display()),
            )
        }
        (payload, None) => from_stdin(payload.is_some()),
    }
}

/// Reads `source` to its end, or refuses it once it is past `limit_bytes`
/// (a stream, whose size is not known until it ends).
/// With no limit, the input is payload lines: it is read whole, but a line
/// is refused once it is past a payload's limit, before the rest is read.
fn read_at_most(
    source: impl Read,
    limit_bytes: Option<usize>,
    name: &str,
) -> anyhow::Result<Vec<u8>> {
    let Some(limit) = limit_bytes else {
        return read_lines(source, name);
    };
    let mut read = Vec::new();
    source
        .take(limit as u64 + 1)
        .read_to_end(&mut read)
        .with_context(|| format!("cannot read {name}"))?;
    if read.len() > limit {
        bail!("task refused: {name} holds more than the {limit}-byte limit of a task's payload");
    }
    Ok(read)
}

/// Reads `source` to its end, refusing it as soon as a line (its `\r\n`
/// or `\n` aside) is past a payload's limit: a stream without newlines
/// (`/dev/zero`) would otherwise be read until memory runs out.
fn read_lines(mut source: impl Read, name: &str) -> anyhow::Result<Vec<u8>> {
    let mut read = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let too_long = |line_bytes: usize, number: usize| {
        anyhow::anyhow!(
            "tasks refused: line {number} of {name} is longer than the {MAX_DATA_BYTES}-byte \
             limit of a task's payload ({line_bytes} bytes or more), so none was submitted"
        )
    };
    // Where the line being read starts, and how many lines end before it.
    let mut line_start = 0;
    let mut lines_before = 0usize;
    loop {
        let count = match source.read(&mut chunk) {
            Ok(0) => return Ok(read),
            Ok(count) => count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error).with_context(|| format!("cannot read {name}")),
        };
        let chunk_start = read.len();
        read.extend_from_slice(&chunk[..count]);
        for (offset, _) in chunk[..count]
            .iter()
            .enumerate()
            .filter(|(_, byte)| **byte == b'\n')
        {
            let end = chunk_start + offset;
            let line_bytes =
                end - line_start - usize::from(end > line_start && read[end - 1] == b'\r');
            if line_bytes > MAX_DATA_BYTES {
                return Err(too_long(line_bytes, lines_before + 1));
            }
            lines_before += 1;
            line_start = end + 1;
        }
        // The line still open: its `\r` may still come, one byte of room.
        let open_bytes = read.len() - line_start;
        if open_bytes > MAX_DATA_BYTES + 1 {
            return Err(too_long(open_bytes, lines_before + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines up to a payload's limit (and their `\r\n`) are read whole,
    /// across any chunking; the first line past it is named, and reading
    /// stops there.
    #[test]
    fn payload_lines_are_held_to_a_payloads_limit_line_by_line() {
        let longest = "x".repeat(MAX_DATA_BYTES);
        let input = format!("short\r\n{longest}\r\n{longest}\nlast");
        let read = read_lines(input.as_bytes(), "the input").expect("every line fits");
        assert!(read == input.as_bytes(), "read whole");

        let too_long = "y".repeat(MAX_DATA_BYTES + 2);
        let input = format!("short\n{longest}\n{too_long}\nnever read");
        let error = read_lines(input.as_bytes(), "the input").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("tasks refused: line 3 of the input is longer"),
            "{error}"
        );
        // An endless line is refused once past the limit.
        let Err(error) = read_lines(std::io::repeat(b'z'), "the stream") else {
            panic!("an endless line was read");
        };
        assert!(
            error.to_string().contains("line 1 of the stream"),
            "{error}"
        );
    }
}
