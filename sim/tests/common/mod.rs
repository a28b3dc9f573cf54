//! Helpers shared by the simulator's integration tests.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc::error::TryRecvError;
use zkdist_coord::{Event, EventStream, SessionState, WatchEvent, WatchKind};

/// Runs `body` on a fresh simulation runtime (paused tokio, or madsim under
/// `--cfg madsim`), as every simulation test does, so several runs fit in
/// one test.
pub fn run_paused<F: Future>(body: F) -> F::Output {
    run_seeded(0, body)
}

/// [`run_paused`] for a test that has a seed: madsim's scheduler is seeded
/// with it too.
pub fn run_seeded<F: Future>(seed: u64, body: F) -> F::Output {
    zkdist_sim::runtime::block_on(seed, body)
}

/// Every event already on the stream, without waiting.
pub fn drain(events: &mut EventStream) -> Vec<Event> {
    let mut drained = Vec::new();
    loop {
        match events.try_recv() {
            Ok(event) => drained.push(event),
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => return drained,
        }
    }
}

/// The next event, failing the test if none comes within a simulated
/// minute.
pub async fn next_event(events: &mut EventStream) -> Event {
    tokio::time::timeout(Duration::from_secs(60), events.recv())
        .await
        .expect("an event within a simulated minute")
        .expect("the stream is open")
}

pub fn watch(kind: WatchKind, path: &str) -> Event {
    Event::Watch(WatchEvent {
        kind,
        path: path.to_owned(),
    })
}

pub fn state(state: SessionState) -> Event {
    Event::Session(state)
}
