//! zkdist as a library: a master, two workers that run a kind of task of
//! the program's own, and a client that submits tasks and waits for their
//! results, all in one process. The same code runs on the simulated
//! ZooKeeper (the default: no server needed, time is simulated) and on a
//! real ensemble; only the connector differs.
//!
//! ```text
//! cargo run -p zkdist-master --example embedded
//! cargo run -p zkdist-master --example embedded -- --zk 127.0.0.1:2181
//! ```
//!
//! On a real ensemble it works under the root `/zkdist-example`, deletes
//! the tasks it submitted once their results are read, and leaves the
//! layout (the root and its directories) for the next run.

use std::process::ExitCode;

use tokio::sync::watch;
use zkdist_coord::zk::ZkConfig;
use zkdist_coord::{Client, Connector, Layout, TaskPayload, TaskResult};
use zkdist_master::{TaskDiscovery, run_master_role};
use zkdist_sim::{SimConfig, SimConnector, SimZk};
use zkdist_worker::{TaskError, TaskHandler, run_worker_role};

/// The program's own kind of task, `{"kind":"shout","text":"..."}`: its
/// result is the text in capitals.
struct Shout;

impl TaskHandler for Shout {
    async fn run(&self, task: &[u8]) -> Result<Vec<u8>, TaskError> {
        let payload = TaskPayload::decode(task).map_err(|error| TaskError::from_display(&error))?;
        if payload.kind != "shout" {
            return Err(TaskError::new(format!(
                "this worker runs shout tasks only, not {:?}",
                payload.kind
            )));
        }
        let text = payload
            .fields
            .get("text")
            .and_then(|text| text.as_str())
            .ok_or_else(|| TaskError::new("a shout task needs a string \"text\""))?;
        Ok(text.to_uppercase().into_bytes())
    }
}

const TEXTS: [&str; 4] = ["first in", "first out", "one worker each", "then done"];

/// Runs the master, two workers and the client until every task's result
/// is read, then stops the roles and returns the results in submission
/// order. `connector` makes one connector per actor, named after it.
async fn run<K>(
    connector: impl Fn(&str) -> K,
    layout: Layout,
) -> Result<Vec<String>, Box<dyn std::error::Error>>
where
    K: Connector,
    K::Session: Clone,
{
    // The roles run until this turns true: each finishes what it has in
    // hand, deregisters and closes its session.
    let (stop, stopped) = watch::channel(false);
    let stop_requested = || {
        let mut stopped = stopped.clone();
        async move {
            // An error means the sender is gone: stop then too.
            let _ = stopped.wait_for(|stop| *stop).await;
        }
    };
    let master = run_master_role(
        connector("master"),
        layout.clone(),
        TaskDiscovery::Watch,
        stop_requested(),
        None,
    );
    let worker = |name| {
        run_worker_role(
            connector(name),
            layout.clone(),
            Shout,
            stop_requested(),
            None,
        )
    };
    let roles = async {
        let (master, first, second) = tokio::join!(master, worker("worker-a"), worker("worker-b"));
        master?;
        first?;
        second?;
        Ok::<(), Box<dyn std::error::Error>>(())
    };
    let client_side = async {
        let outputs = submit_and_wait(connector("client"), &layout).await;
        // Stopped whatever the client's outcome, so that the roles return.
        stop.send_replace(true);
        outputs
    };
    let (roles, outputs) = tokio::join!(roles, client_side);
    roles?;
    outputs
}

/// Submits one task per text, then waits for each result in turn and
/// deletes the task once its result is read.
async fn submit_and_wait<K: Connector>(
    connector: K,
    layout: &Layout,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let (session, events) = connector.connect().await?;
    let mut client = Client::new(session, events, layout.clone());
    let mut tasks = Vec::new();
    for text in TEXTS {
        let payload = TaskPayload::new("shout").with("text", text).encode()?;
        tasks.push(client.submit(&payload).await?);
    }
    let mut outputs = Vec::new();
    for task in &tasks {
        let output = match client.wait(task).await? {
            TaskResult::Success { output } => String::from_utf8(output)?,
            TaskResult::Failure { message } => {
                return Err(format!("{task} failed: {message}").into());
            }
        };
        println!("{task}: {output}");
        outputs.push(output);
        client.cleanup(task).await?;
    }
    Ok(outputs)
}

/// Every text in capitals, in submission order, or what differs.
fn check(outputs: &[String]) -> Result<(), String> {
    let expected: Vec<String> = TEXTS.iter().map(|text| text.to_uppercase()).collect();
    if outputs == expected {
        Ok(())
    } else {
        Err(format!("expected {expected:?}, got {outputs:?}"))
    }
}

/// [`run`] on a simulated ZooKeeper, on a runtime whose clock is paused:
/// it takes no wall-clock time, and the seed fixes every choice.
fn on_the_simulator(seed: u64) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    zkdist_sim::runtime::block_on(seed, async {
        let sim = SimZk::start(SimConfig {
            seed,
            ..SimConfig::default()
        });
        run(
            |name| SimConnector::new(sim.clone(), name),
            Layout::default(),
        )
        .await
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outputs = match args.as_slice() {
        [] => on_the_simulator(1),
        [flag, connect] if flag == "--zk" => {
            let layout = Layout::new("/zkdist-example").expect("a valid root");
            let config = ZkConfig::new(connect.clone());
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(run(|_name| config.clone(), layout))
        }
        _ => {
            eprintln!("usage: embedded [--zk HOSTS]");
            return ExitCode::from(2);
        }
    };
    match outputs
        .map_err(|error| error.to_string())
        .and_then(|outputs| check(&outputs))
    {
        Ok(()) => {
            println!("{} tasks, each result in capitals", TEXTS.len());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("embedded: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo test` runs the example on the simulator (the manifest sets
/// `test = true` for it), so that what it shows keeps working.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_comes_back_in_capitals_on_the_simulator() {
        for seed in 0..4 {
            let outputs =
                on_the_simulator(seed).unwrap_or_else(|error| panic!("seed {seed}: {error}"));
            assert_eq!(check(&outputs), Ok(()), "seed {seed}");
        }
    }

    #[test]
    fn a_task_of_another_kind_fails_naming_it() {
        let ran = zkdist_sim::runtime::block_on(0, Shout.run(br#"{"kind":"pi"}"#));
        let error = ran.unwrap_err();
        assert!(error.message().contains("\"pi\""), "{error}");
    }
}
