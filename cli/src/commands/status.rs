//! `status`.

use anyhow::Context;
use zkdist_coord::{Client, MasterNode, STATUS_MAX_LISTED_TASKS, Status};

use crate::args::StatusArgs;
use crate::connect;
use crate::stdout::outln;

pub async fn status(args: &StatusArgs) -> anyhow::Result<()> {
    let layout = connect::layout(&args.connect)?;
    let (zk, events) = connect::session(&args.connect).await?;
    let client = Client::new(zk.clone(), events, layout);
    let status = client.status().await.context("cannot read the status")?;
    // Printed before the close, which an ensemble gone just then would
    // hold up to its wait.
    let printed = print(args, &status);
    connect::close_when_done(&zk, connect::CLOSE_WAIT).await;
    printed
}

fn print(args: &StatusArgs, status: &Status) -> anyhow::Result<()> {
    if args.json {
        let assignments: serde_json::Map<String, serde_json::Value> = status
            .assignments
            .iter()
            .map(|(worker, task)| (worker.to_string(), task.to_string().into()))
            .collect();
        let json = serde_json::json!({
            "root": args.connect.root,
            "master_present": status.master == MasterNode::Held,
            "master_not_ephemeral": status.master == MasterNode::NotEphemeral,
            "workers": status.workers.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "not_ephemeral": status.not_ephemeral.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "assignments": assignments,
            "settled_assignments": status.settled_assignments.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "pending_tasks": status.pending_tasks,
            "assigned_tasks": status.assigned_tasks,
            "finished_tasks": status.finished_tasks,
            "refused_tasks": status.refused_tasks,
            "ignored_nodes": status.ignored_nodes,
            "task_names_read": status.task_names_read,
        });
        outln!("{json}")?;
        return Ok(());
    }
    outln!("root {}", args.connect.root)?;
    let master = match status.master {
        MasterNode::Held => "present",
        MasterNode::NotEphemeral => {
            "absent: the master node is not ephemeral, so no master's (made by hand, or by \
             laying a tree out under it); no master can be elected until it is deleted, with \
             whatever lies under it (`deleteall` in zkCli.sh)"
        }
        MasterNode::Absent => "absent",
    };
    outln!("master {master}")?;
    outln!("workers {}", status.workers.len())?;
    for worker in &status.workers {
        // An assignment whose task has its result already (or is gone) is
        // being released: the task is not counted as assigned, and the
        // line says so rather than contradict the counts below.
        let state = match status.assignments.get(worker) {
            Some(task) if status.settled_assignments.contains(task) => {
                format!("releasing {task} (its result is written, or the task was deleted)")
            }
            Some(task) => format!("busy with {task}"),
            None => "idle".to_owned(),
        };
        if status.not_ephemeral.contains(worker) {
            outln!(
                "  {worker} {state}: not ephemeral, so no live worker's registration; \
                 the master gives it no work, but with --discovery listing the tasks it \
                 gives it never run (delete it)"
            )?;
        } else {
            outln!("  {worker} {state}")?;
        }
    }
    outln!(
        "tasks pending {} assigned {} finished {} refused {}",
        status.pending_tasks,
        status.assigned_tasks,
        status.finished_tasks,
        status.refused_tasks
    )?;
    if !status.task_names_read {
        outln!(
            "  (tasks/ holds over {STATUS_MAX_LISTED_TASKS} nodes: counted, not listed, so a node there that is not a task counts as pending)"
        )?;
    }
    if status.ignored_nodes > 0 {
        outln!(
            "ignored {} nodes that are not zkdist's",
            status.ignored_nodes
        )?;
    }
    Ok(())
}
