//! The raw ceiling: how fast the server takes one client's requests when
//! nothing else runs, the yardstick `zkdist bench` holds the task stream
//! against. One session creates nodes, reads them back and deletes them,
//! with many requests in flight (and reads them again sixteen to a
//! multi-read, which prices a batch of reads); and it creates and deletes
//! as many again
//! under a second session's persistent recursive watch, so that each write
//! also sends a watch event, which prices an event in writes (see
//! [`StepOrder`] for which half goes first).

use std::future::Future;
use std::time::Duration;

use futures::stream::{StreamExt, TryStreamExt};
use tokio::time::Instant;
use zkdist_coord::{
    AddWatchMode, Coordinator, CreateMode, Event, EventStream, Watch, ZkError, path,
};

use crate::workload::payload;

/// How long the watching session may take, after the last watched write
/// was answered, to hear the last event: events go out as the writes
/// apply, so they are all on their way by then.
const EVENTS_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How many nodes the ceiling's multi-read step reads in each request: the
/// master's largest batch of payload reads.
pub const MULTI_READ_NODES: usize = 16;

/// What one measurement of the ceiling timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawCeiling {
    /// Nodes written (and read) in each step.
    pub nodes: u64,
    pub in_flight: usize,
    pub create_elapsed: Duration,
    pub read_elapsed: Duration,
    /// The same reads again, [`MULTI_READ_NODES`] nodes to a multi-read.
    pub multi_read_elapsed: Duration,
    pub delete_elapsed: Duration,
    /// The same creates and deletes again, each sending an event to the
    /// watching session.
    pub watched_create_elapsed: Duration,
    pub watched_delete_elapsed: Duration,
}

fn per_s(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}

impl RawCeiling {
    pub fn creates_per_s(&self) -> f64 {
        per_s(self.nodes, self.create_elapsed)
    }

    pub fn reads_per_s(&self) -> f64 {
        per_s(self.nodes, self.read_elapsed)
    }

    /// Nodes read per second, [`MULTI_READ_NODES`] to a multi-read.
    pub fn multi_read_nodes_per_s(&self) -> f64 {
        per_s(self.nodes, self.multi_read_elapsed)
    }

    /// What one multi-read of [`MULTI_READ_NODES`] nodes costs the server,
    /// in single reads: the server's cost follows requests more than
    /// nodes, which is why the master reads payloads ahead in batches.
    pub fn multi_read_cost_in_reads(&self) -> f64 {
        MULTI_READ_NODES as f64 * self.reads_per_s() / self.multi_read_nodes_per_s()
    }

    pub fn deletes_per_s(&self) -> f64 {
        per_s(self.nodes, self.delete_elapsed)
    }

    /// Creates and deletes together, over the time both took.
    pub fn writes_per_s(&self) -> f64 {
        per_s(2 * self.nodes, self.create_elapsed + self.delete_elapsed)
    }

    /// [`RawCeiling::writes_per_s`] with every write watched.
    pub fn watched_writes_per_s(&self) -> f64 {
        per_s(
            2 * self.nodes,
            self.watched_create_elapsed + self.watched_delete_elapsed,
        )
    }

    /// What one watch event costs the server, in writes: the time a
    /// watched write took beyond an unwatched one, over the time an
    /// unwatched one took. Measured, so noise can make it slightly
    /// negative.
    pub fn event_cost_in_writes(&self) -> f64 {
        self.writes_per_s() / self.watched_writes_per_s() - 1.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RawError {
    #[error("{what} failed: {error}")]
    Zk { what: String, error: ZkError },
    #[error("reading {path} back gave {got_bytes} bytes, not the {written_bytes} written")]
    ReadBackDiffers {
        path: String,
        written_bytes: usize,
        got_bytes: usize,
    },
    #[error(
        "the watching session heard {heard} of the {expected} changes under {dir} \
         within {}s of the last one",
        EVENTS_DRAIN_TIMEOUT.as_secs()
    )]
    EventsMissing {
        dir: String,
        heard: u64,
        expected: u64,
    },
}

fn zk_failed(what: impl Into<String>) -> impl FnOnce(ZkError) -> RawError {
    let what = what.into();
    move |error| RawError::Zk { what, error }
}

/// The session whose persistent recursive watches make the watched writes
/// send events, and the stream it hears them on.
pub struct Watcher<C> {
    pub zk: C,
    pub events: EventStream,
}

/// Which of a measurement's two halves runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOrder {
    UnwatchedFirst,
    WatchedFirst,
}

/// Measures the ceiling: creates `nodes` nodes under `dir`, reads them
/// back and deletes them; and creates and deletes as many under
/// `watched_dir`, which `watcher` watches recursively; the two halves in
/// `order`. A server's speed drifts over a run (its compiler warms up,
/// its collector runs), so two measurements in opposite orders, averaged,
/// leave the drift out of what an event costs. Every step keeps up to
/// `in_flight` requests outstanding on `zk`, and is timed. Both
/// directories must not exist, and are gone again afterwards. A watch
/// stays for its session's life, so each measurement needs a `watched_dir`
/// of its own, or the next one's unwatched writes would send events too.
pub async fn raw_ceiling<C: Coordinator, W: Coordinator>(
    zk: &C,
    watcher: &mut Watcher<W>,
    dir: &str,
    watched_dir: &str,
    nodes: u64,
    in_flight: usize,
    order: StepOrder,
) -> Result<RawCeiling, RawError> {
    assert!(
        nodes >= 1 && in_flight >= 1,
        "a ceiling needs a node and a request"
    );
    assert_ne!(
        dir, watched_dir,
        "the watched writes need a directory of their own"
    );
    // The nodes hold as many bytes as a task's payload, so that a read
    // returns what a worker's read returns.
    let data = payload(nodes);

    let unwatched = async {
        make_dir(zk, dir).await?;
        let create_elapsed = create_all(zk, dir, &data, nodes, in_flight).await?;
        let read_elapsed = read_all(zk, dir, data.len(), nodes, in_flight).await?;
        let multi_read_elapsed = multi_read_all(zk, dir, data.len(), nodes, in_flight).await?;
        let delete_elapsed = delete_all(zk, dir, nodes, in_flight).await?;
        delete_dir(zk, dir).await?;
        Ok::<_, RawError>((
            create_elapsed,
            read_elapsed,
            multi_read_elapsed,
            delete_elapsed,
        ))
    };
    let watched = async {
        make_dir(zk, watched_dir).await?;
        watcher
            .zk
            .add_watch(watched_dir, AddWatchMode::PersistentRecursive)
            .await
            .map_err(zk_failed(format!("watching {watched_dir}")))?;
        let create_elapsed = create_all(zk, watched_dir, &data, nodes, in_flight).await?;
        let delete_elapsed = delete_all(zk, watched_dir, nodes, in_flight).await?;
        delete_dir(zk, watched_dir).await?;
        // Every node's creation and deletion, and the directory's
        // deletion, heard before anything else is measured.
        hear_changes(&mut watcher.events, watched_dir, 2 * nodes + 1).await?;
        Ok::<_, RawError>((create_elapsed, delete_elapsed))
    };
    let (
        (create_elapsed, read_elapsed, multi_read_elapsed, delete_elapsed),
        (watched_create_elapsed, watched_delete_elapsed),
    ) = match order {
        StepOrder::UnwatchedFirst => {
            let unwatched = unwatched.await?;
            (unwatched, watched.await?)
        }
        StepOrder::WatchedFirst => {
            let watched = watched.await?;
            (unwatched.await?, watched)
        }
    };

    Ok(RawCeiling {
        nodes,
        in_flight,
        create_elapsed,
        read_elapsed,
        multi_read_elapsed,
        delete_elapsed,
        watched_create_elapsed,
        watched_delete_elapsed,
    })
}

fn node(dir: &str, n: u64) -> String {
    path::join(dir, &format!("n-{n:010}"))
}

async fn make_dir<C: Coordinator>(zk: &C, dir: &str) -> Result<(), RawError> {
    zk.create(dir, b"", CreateMode::Persistent)
        .await
        .map(drop)
        .map_err(zk_failed(format!("creating {dir}")))
}

async fn delete_dir<C: Coordinator>(zk: &C, dir: &str) -> Result<(), RawError> {
    zk.delete(dir, None)
        .await
        .map_err(zk_failed(format!("deleting {dir}")))
}

/// Sends one request per node (`request`, given the node's path) for the
/// `nodes` nodes under `dir`, up to `in_flight` at once, and times the
/// whole step.
async fn time_each_node<F, Fut>(
    dir: &str,
    nodes: u64,
    in_flight: usize,
    request: F,
) -> Result<Duration, RawError>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<(), RawError>>,
{
    let started = Instant::now();
    futures::stream::iter(0..nodes)
        .map(|n| request(node(dir, n)))
        .buffer_unordered(in_flight)
        .try_for_each(|()| std::future::ready(Ok(())))
        .await?;
    Ok(started.elapsed())
}

async fn create_all<C: Coordinator>(
    zk: &C,
    dir: &str,
    data: &[u8],
    nodes: u64,
    in_flight: usize,
) -> Result<Duration, RawError> {
    time_each_node(dir, nodes, in_flight, |path| async move {
        zk.create(&path, data, CreateMode::Persistent)
            .await
            .map(drop)
            .map_err(zk_failed(format!("creating {path}")))
    })
    .await
}

async fn read_all<C: Coordinator>(
    zk: &C,
    dir: &str,
    written_bytes: usize,
    nodes: u64,
    in_flight: usize,
) -> Result<Duration, RawError> {
    time_each_node(dir, nodes, in_flight, |path| async move {
        let (got, _) = zk
            .get_data(&path, Watch::No)
            .await
            .map_err(zk_failed(format!("reading {path}")))?;
        check_read_back(path, written_bytes, &got)
    })
    .await
}

/// That a node read back holds as many bytes as were written to it.
fn check_read_back(path: String, written_bytes: usize, got: &[u8]) -> Result<(), RawError> {
    if got.len() == written_bytes {
        Ok(())
    } else {
        Err(RawError::ReadBackDiffers {
            path,
            written_bytes,
            got_bytes: got.len(),
        })
    }
}

/// Reads the `nodes` nodes under `dir` again, [`MULTI_READ_NODES`] to a
/// request, with as many requests in flight as keep about `in_flight`
/// nodes outstanding, and times the step.
async fn multi_read_all<C: Coordinator>(
    zk: &C,
    dir: &str,
    written_bytes: usize,
    nodes: u64,
    in_flight: usize,
) -> Result<Duration, RawError> {
    let started = Instant::now();
    let batch_nodes = MULTI_READ_NODES as u64;
    let batches = (0..nodes.div_ceil(batch_nodes)).map(|batch| {
        let first = batch * batch_nodes;
        (first..(first + batch_nodes).min(nodes))
            .map(|n| node(dir, n))
            .collect::<Vec<_>>()
    });
    futures::stream::iter(batches)
        .map(|paths| async move {
            let what = format!("reading {} and the rest of its batch", paths[0]);
            let results = zk
                .get_data_many(paths.clone())
                .await
                .map_err(zk_failed(&what))?;
            for (path, result) in paths.into_iter().zip(results) {
                let (got, _) = result.map_err(zk_failed(format!("reading {path}")))?;
                check_read_back(path, written_bytes, &got)?;
            }
            Ok(())
        })
        .buffer_unordered((in_flight / MULTI_READ_NODES).max(1))
        .try_for_each(|()| std::future::ready(Ok(())))
        .await?;
    Ok(started.elapsed())
}

async fn delete_all<C: Coordinator>(
    zk: &C,
    dir: &str,
    nodes: u64,
    in_flight: usize,
) -> Result<Duration, RawError> {
    time_each_node(dir, nodes, in_flight, |path| async move {
        zk.delete(&path, None)
            .await
            .map_err(zk_failed(format!("deleting {path}")))
    })
    .await
}

/// Waits until `events` has brought `expected` watch events about `dir` or
/// its subtree: the proof that the watched writes did send events, so that
/// their time prices them. Other events (the session's own state) pass.
async fn hear_changes(events: &mut EventStream, dir: &str, expected: u64) -> Result<(), RawError> {
    let mut heard = 0;
    let hearing = async {
        while heard < expected {
            match events.recv().await {
                Some(Event::Watch(event)) if path::is_same_or_descendant(&event.path, dir) => {
                    heard += 1
                }
                Some(_) => {}
                None => break,
            }
        }
    };
    let _ = tokio::time::timeout(EVENTS_DRAIN_TIMEOUT, hearing).await;
    if heard == expected {
        Ok(())
    } else {
        Err(RawError::EventsMissing {
            dir: dir.to_owned(),
            heard,
            expected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceiling(watched_ms: u64) -> RawCeiling {
        RawCeiling {
            nodes: 1_000,
            in_flight: 100,
            create_elapsed: Duration::from_millis(20),
            read_elapsed: Duration::from_millis(25),
            multi_read_elapsed: Duration::from_millis(5),
            delete_elapsed: Duration::from_millis(30),
            watched_create_elapsed: Duration::from_millis(watched_ms),
            watched_delete_elapsed: Duration::from_millis(watched_ms),
        }
    }

    #[test]
    fn rates_are_counts_over_the_time_their_steps_took() {
        let raw = ceiling(50);
        assert_eq!(raw.creates_per_s(), 50_000.0);
        assert_eq!(raw.reads_per_s(), 40_000.0);
        assert_eq!(raw.multi_read_nodes_per_s(), 200_000.0);
        // 16 nodes at 200,000/s against one at 40,000/s: 3.2 reads.
        assert!((raw.multi_read_cost_in_reads() - 3.2).abs() < 1e-9);
        assert_eq!(raw.deletes_per_s(), 1_000.0 / 0.030);
        // 2,000 writes in 50 ms, and in 100 ms when watched.
        assert_eq!(raw.writes_per_s(), 40_000.0);
        assert_eq!(raw.watched_writes_per_s(), 20_000.0);
    }

    #[test]
    fn an_event_costs_what_a_watched_write_took_beyond_an_unwatched_one() {
        // Twice as long watched: the event cost as much as the write.
        assert!((ceiling(50).event_cost_in_writes() - 1.0).abs() < 1e-9);
        // A quarter longer: a quarter of a write.
        assert!((ceiling(31).event_cost_in_writes() - 0.24).abs() < 1e-9);
        // Faster when watched (noise) shows as a negative cost, not hidden.
        assert!(ceiling(20).event_cost_in_writes() < 0.0);
    }

    #[test]
    fn changes_not_heard_are_an_error_naming_how_many_were() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
        // One change under the directory, one beside it, then the session
        // ends: one of the three expected was heard.
        for path in ["/raw/n-0000000000", "/rawish", "/elsewhere"] {
            sender
                .send(Event::watch(zkdist_coord::WatchKind::NodeCreated, path))
                .expect("the stream is open");
        }
        drop(sender);
        let outcome = runtime.block_on(hear_changes(&mut events, "/raw", 3));
        let error = outcome.expect_err("two changes were never heard");
        assert_eq!(
            error,
            RawError::EventsMissing {
                dir: "/raw".to_owned(),
                heard: 1,
                expected: 3
            }
        );
        assert!(
            error
                .to_string()
                .contains("heard 1 of the 3 changes under /raw"),
            "{error}"
        );

        let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
        sender
            .send(Event::watch(zkdist_coord::WatchKind::NodeDeleted, "/raw"))
            .expect("the stream is open");
        assert_eq!(
            runtime.block_on(hear_changes(&mut events, "/raw", 1)),
            Ok(())
        );
    }
}
