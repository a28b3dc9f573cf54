//! `submit` and `wait`.

use std::io::{IsTerminal, Read};
use std::time::Duration;

use anyhow::{Context, bail};
use zkdist_coord::zk::ZkSession;
use zkdist_coord::{
    Client, ClientError, Coordinator, SessionState, TaskId, TaskPayload, TaskToken, validate_data,
};
use zkdist_worker::SESSION_RETRY_DELAY_MS;

use super::{Outcome, print_result};
use crate::args::{ConnectArgs, FindArgs, SubmitArgs, WaitArgs};
use crate::stdout::outln;
use crate::{connect, handlers};

pub async fn submit(args: &SubmitArgs) -> anyhow::Result<Outcome> {
    let payload = read_payload(args)?;
    if args.lines {
        return super::submit_lines::submit_lines(args, &payload).await;
    }
    let layout = connect::layout(&args.connect)?;
    // The size first, and before connecting: an oversized payload is
    // refused naming the limit, whatever else is wrong with it, and even
    // when the ensemble is out of reach.
    validate_data(&layout.task_prefix(), &payload).context("task refused")?;
    if args.no_check {
        // Any kind, but still a task: JSON with a "kind".
        TaskPayload::decode(&payload).context("task refused")?;
    } else {
        handlers::validate(&payload)
            .context("task refused (pass --no-check to submit kinds this binary does not know)")?;
    }
    let (zk, events) = connect::session(&args.connect).await?;
    let mut client = Client::new(zk, events, layout.clone());
    let task = match client.submit(&payload).await {
        Ok(task) => task,
        // The session ended before the create's outcome was known: look
        // for its token on a new session, and submit again only if no
        // task carries it (the old session can apply nothing any more).
        Err(ClientError::SubmitInDoubt { token, cause }) if is_session_end(&cause) => {
            let in_doubt = || {
                format!(
                    "the session ended while submitting; cannot find out whether a task \
                     task-{token}-NNNNNNNNNN was created (`zkdist find {token}` tells, \
                     before you submit it again)"
                )
            };
            client.session().close().await.ok();
            let (zk, events) = connect::session(&args.connect)
                .await
                .with_context(in_doubt)?;
            client = Client::new(zk, events, layout);
            let found = client.find_submission(token).await.with_context(in_doubt)?;
            match found {
                Some(task) => task,
                None => client
                    .submit(&payload)
                    .await
                    .context("cannot submit the task")?,
            }
        }
        Err(error) => return Err(error).context("cannot submit the task"),
    };
    outln!("{task}")?;
    let outcome = if args.wait {
        wait_and_print(&args.connect, &mut client, &task, args.cleanup).await?
    } else {
        Outcome::Done
    };
    client.session().close().await.ok();
    Ok(outcome)
}

/// Prints, for each token in the order given, the task its submission
/// made or `none`. One lookup for all of them (a `sync` and a listing of
/// `tasks/`).
pub async fn find(args: &FindArgs) -> anyhow::Result<()> {
    let tokens: Vec<TaskToken> = args
        .tokens
        .iter()
        .map(|text| TaskToken::parse(text))
        .collect::<Result<_, _>>()
        .context("invalid token")?;
    let layout = connect::layout(&args.connect)?;
    let (zk, events) = connect::session(&args.connect).await?;
    let client = Client::new(zk.clone(), events, layout);
    let found = client
        .find_submissions(&tokens.iter().copied().collect())
        .await
        .context("cannot look the submissions up")?;
    zk.close().await.ok();
    for token in &tokens {
        match found.get(token) {
            Some(task) => outln!("{token} {task}")?,
            None => outln!("{token} none")?,
        }
    }
    Ok(())
}

pub async fn wait(args: &WaitArgs) -> anyhow::Result<Outcome> {
    let task = TaskId::parse(&args.task).context("invalid task id")?;
    let layout = connect::layout(&args.connect)?;
    let (zk, events) = connect::session(&args.connect).await?;
    let mut client = Client::new(zk, events, layout);
    let outcome = wait_and_print(&args.connect, &mut client, &task, args.cleanup).await?;
    client.session().close().await.ok();
    Ok(outcome)
}

/// Waits for `task`'s result, prints it, and cleans the task up if asked.
/// Reading a result and cleaning up are safe to repeat, so a session that
/// ends meanwhile (an outage longer than the session timeout, while a long
/// task runs) does not end the command: it goes on on a new session,
/// which replaces `client`'s. Only a new session that cannot be opened
/// ends it.
async fn wait_and_print(
    connect_args: &ConnectArgs,
    client: &mut Client<ZkSession>,
    task: &TaskId,
    cleanup: bool,
) -> anyhow::Result<Outcome> {
    let result = loop {
        match client.wait(task).await {
            Ok(result) => break result,
            Err(error) if a_new_session_may_go_on(&error) => {
                renew_session(connect_args, client, &format!("wait for {task}"), &error).await?;
            }
            Err(error) => return Err(error).with_context(|| format!("cannot wait for {task}")),
        }
    };
    let outcome = print_result(task, &result)?;
    if cleanup {
        let mut renewed = false;
        loop {
            match client.cleanup(task).await {
                Ok(()) => break,
                // The ended session's cleanup was applied after all (or
                // somebody else cleaned up): the task is gone either way.
                Err(ClientError::NoSuchTask { .. }) if renewed => break,
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
    Ok(outcome)
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
                        "cannot {doing}: {ended}, and a new session on {:?} was refused",
                        connect_args.zk
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

fn read_payload(args: &SubmitArgs) -> anyhow::Result<Vec<u8>> {
    match (&args.payload, &args.file) {
        (Some(text), None) if text != "-" => Ok(text.as_bytes().to_vec()),
        (_, Some(file)) => std::fs::read(file)
            .with_context(|| format!("cannot read the payload file {}", file.display())),
        (payload, None) => {
            // Without a payload, a terminal would wait for one with no
            // prompt; `-` asks for it on purpose.
            if payload.is_none() && std::io::stdin().is_terminal() {
                bail!(
                    "no payload: give it as an argument, with --file, or on standard input \
                     (`-` reads it from the terminal)"
                );
            }
            let mut payload = Vec::new();
            std::io::stdin()
                .read_to_end(&mut payload)
                .context("cannot read the payload from stdin")?;
            Ok(payload)
        }
    }
}
