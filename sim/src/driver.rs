//! The async shell: one task owns the engine, reads commands from the
//! handles, and wakes up when the next agenda item is due. Time comes from
//! `tokio::time` only, so a paused test clock makes runs instant and exact.

use std::time::Duration;

use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::time::{Instant, sleep_until};

use crate::command::Command;
use crate::engine::Engine;

fn elapsed_us(start: Instant) -> u64 {
    u64::try_from(Instant::now().duration_since(start).as_micros()).unwrap_or(u64::MAX)
}

/// Runs until every handle is dropped and nothing is left to deliver.
pub(crate) async fn run(
    mut engine: Engine,
    mut commands: mpsc::UnboundedReceiver<Command>,
    start: Instant,
) {
    let mut handles_alive = true;
    loop {
        engine.advance_clock_to(elapsed_us(start));
        // Commands already queued were issued at this instant or before:
        // they go first, in the order they were sent.
        while handles_alive {
            match commands.try_recv() {
                Ok(command) => engine.handle(command),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => handles_alive = false,
            }
        }
        let next_due_us = if engine.is_paused() {
            None
        } else {
            engine.next_due_us()
        };
        if next_due_us.is_some_and(|due_us| due_us <= engine.now_us) {
            engine.process_next();
            continue;
        }
        // A due time the clock cannot represent is never reached.
        let wake_at =
            next_due_us.and_then(|due_us| start.checked_add(Duration::from_micros(due_us)));
        if !handles_alive {
            match wake_at {
                Some(wake_at) => {
                    sleep_until(wake_at).await;
                    continue;
                }
                None => return,
            }
        }
        let command = match wake_at {
            Some(wake_at) => tokio::select! {
                biased;
                command = commands.recv() => command,
                () = sleep_until(wake_at) => continue,
            },
            None => commands.recv().await,
        };
        match command {
            Some(command) => {
                engine.advance_clock_to(elapsed_us(start));
                engine.handle(command);
            }
            None => handles_alive = false,
        }
    }
}
