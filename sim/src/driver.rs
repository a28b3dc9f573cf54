//! The async shell: one task owns the engine, reads commands from the
//! handles, and wakes up when the next agenda item is due. Time comes from
//! `tokio::time` only, so a paused test clock makes runs instant and exact.
//!
//! The runtime's timers may wake the driver late: tokio's paused clock
//! moves in whole milliseconds, and madsim never sleeps less than a
//! millisecond (and moves its clock a little after every poll). The
//! engine's clock does not follow blindly: every agenda item runs at its
//! own due time, to the microsecond, and the clock never moves past an item
//! that is due, so commands issued meanwhile are stamped no later than it.
//! After each delivery the driver yields, so that the task it woke (a
//! reply's caller, an event's reader) runs before the next delivery, as it
//! would on a real network, where two messages never land at once; what
//! that task sends in reaction is stamped with the delivery's time. (Under
//! madsim the scheduler may still run the driver first: the task then
//! reacts a little later, an interleaving a real client can show too.)

use std::time::Duration;

use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::time::{Instant, sleep_until};

use crate::command::Command;
use crate::engine::Engine;
use crate::schedule::Item;

fn elapsed_us(start: Instant) -> u64 {
    u64::try_from(Instant::now().duration_since(start).as_micros()).unwrap_or(u64::MAX)
}

/// The next item due, unless time-driven progress is paused.
fn next_due(engine: &Engine) -> Option<u64> {
    if engine.is_paused() {
        None
    } else {
        engine.next_due_us()
    }
}

/// Moves the engine's clock up to the runtime's, but not past the next
/// item due: that item runs at its own time, after the commands issued
/// before the driver looked.
fn advance_clock(engine: &mut Engine, elapsed_us: u64) {
    let until_us = next_due(engine).map_or(elapsed_us, |due_us| due_us.min(elapsed_us));
    engine.advance_clock_to(until_us);
}

/// Handles every command already sent, in order, at the engine's clock.
fn handle_queued(
    engine: &mut Engine,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    handles_alive: &mut bool,
) {
    while *handles_alive {
        match commands.try_recv() {
            Ok(command) => engine.handle(command),
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Disconnected) => *handles_alive = false,
        }
    }
}

/// Runs until every handle is dropped and nothing is left to deliver.
pub(crate) async fn run(
    mut engine: Engine,
    mut commands: mpsc::UnboundedReceiver<Command>,
    start: Instant,
) {
    let mut handles_alive = true;
    loop {
        let elapsed = elapsed_us(start);
        advance_clock(&mut engine, elapsed);
        // Commands already queued were issued since the driver last looked:
        // they go first, in the order they were sent.
        handle_queued(&mut engine, &mut commands, &mut handles_alive);
        let next_due_us = next_due(&engine);
        if next_due_us.is_some_and(|due_us| due_us <= elapsed.max(engine.now_us)) {
            if let Some(Item::Delivery(_)) = engine.process_next() {
                tokio::task::yield_now().await;
                // What the woken task did in reaction happened at the
                // delivery's instant, which the runtime's clock may have
                // passed already.
                handle_queued(&mut engine, &mut commands, &mut handles_alive);
            }
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
                advance_clock(&mut engine, elapsed_us(start));
                engine.handle(command);
            }
            None => handles_alive = false,
        }
    }
}
