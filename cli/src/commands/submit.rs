//! `submit` and `wait`.

use std::io::Read;

use anyhow::Context;
use zkdist_coord::{Client, Coordinator, TaskId, validate_data};

use super::{Outcome, print_result};
use crate::args::{SubmitArgs, WaitArgs};
use crate::{connect, handlers};

pub async fn submit(args: &SubmitArgs) -> anyhow::Result<Outcome> {
    let payload = read_payload(args)?;
    let layout = connect::layout(&args.connect)?;
    // The size first, and before connecting: an oversized payload is
    // refused naming the limit, whatever else is wrong with it, and even
    // when the ensemble is out of reach.
    validate_data(&layout.task_prefix(), &payload).context("task refused")?;
    if !args.no_check {
        handlers::validate(&payload)
            .context("task refused (pass --no-check to submit kinds this binary does not know)")?;
    }
    let (zk, events) = connect::session(&args.connect).await?;
    let mut client = Client::new(zk.clone(), events, layout);
    let task = client
        .submit(&payload)
        .await
        .context("cannot submit the task")?;
    println!("{task}");
    let outcome = if args.wait {
        wait_and_print(&mut client, &task, args.cleanup).await?
    } else {
        Outcome::Done
    };
    zk.close().await.ok();
    Ok(outcome)
}

pub async fn wait(args: &WaitArgs) -> anyhow::Result<Outcome> {
    let task = TaskId::parse(&args.task).context("invalid task id")?;
    let layout = connect::layout(&args.connect)?;
    let (zk, events) = connect::session(&args.connect).await?;
    let mut client = Client::new(zk.clone(), events, layout);
    let outcome = wait_and_print(&mut client, &task, args.cleanup).await?;
    zk.close().await.ok();
    Ok(outcome)
}

async fn wait_and_print<C: Coordinator>(
    client: &mut Client<C>,
    task: &TaskId,
    cleanup: bool,
) -> anyhow::Result<Outcome> {
    let result = client
        .wait(task)
        .await
        .with_context(|| format!("cannot wait for {task}"))?;
    let outcome = print_result(task, &result)?;
    if cleanup {
        client
            .cleanup(task)
            .await
            .with_context(|| format!("cannot clean up {task}"))?;
    }
    Ok(outcome)
}

fn read_payload(args: &SubmitArgs) -> anyhow::Result<Vec<u8>> {
    match (&args.payload, &args.file) {
        (Some(text), None) if text != "-" => Ok(text.as_bytes().to_vec()),
        (_, Some(file)) => std::fs::read(file)
            .with_context(|| format!("cannot read the payload file {}", file.display())),
        _ => {
            let mut payload = Vec::new();
            std::io::stdin()
                .read_to_end(&mut payload)
                .context("cannot read the payload from stdin")?;
            Ok(payload)
        }
    }
}
