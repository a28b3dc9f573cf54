//! A stop does not wait for an ensemble out of reach.
//!
//! A worker told to stop finishes what it is doing: the task in hand runs
//! to its end, and its result is written. The requests that remain may
//! then meet an ensemble that is gone: a lost connection's requests are
//! sent again until their outcome is known (`until_known`), and ZooKeeper
//! reports a session's end only once the link is back, so without a bound
//! a stop asked during an outage would wait for the outage to end. Each
//! stretch of requests made once the stop was asked for (reading an
//! assignment, writing a result, deleting the registration) therefore gets
//! [`STOP_TIMEOUT_MS`]; past it the worker gives its session up, as after
//! a crash: the registration goes with the session (closed by the role, or
//! expired by the ensemble) and the master gives the task in hand, whose
//! result may be unwritten, to another worker. The handler itself is not
//! bounded: a task runs as long as it takes, and is cut off only by the
//! session's grace (see `Worker::run_until`).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Duration;

use tokio::time::{Instant, Sleep, sleep_until};

/// How long a worker told to stop keeps waiting on the ensemble for one
/// stretch of requests: ZooKeeper's default session timeout, and zkdist's.
/// By then an ensemble that lost the worker has expired its session
/// anyway.
pub const STOP_TIMEOUT_MS: u64 = 10_000;

/// What became of a stretch of requests run under a [`StopTimeout`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Bounded<T> {
    /// It ended, well or not.
    Ended(T),
    /// A stop was asked for, and the stretch outlasted its timeout: its
    /// future was dropped.
    TimedOut,
}

/// Listens for the stop while the worker waits on requests, and once it
/// was asked for, gives the waiting a deadline [`STOP_TIMEOUT_MS`] after
/// the later of the stop and the clock's start. One clock covers the
/// stretches of one phase (the reads before a task, the writes after it),
/// so a phase of several stretches waits no longer than one.
#[derive(Debug)]
pub(crate) struct StopTimeout {
    /// Whether the shutdown future completed: it is polled until it does,
    /// once, never after.
    stop_heard: bool,
    /// When the waiting is given up; set once the stop was heard.
    give_up_at: Option<Instant>,
}

impl StopTimeout {
    /// A clock for a phase starting now; `stop_heard` says whether the
    /// stop was heard already (its deadline then starts now).
    pub(crate) fn starting(stop_heard: bool) -> StopTimeout {
        StopTimeout {
            stop_heard,
            give_up_at: stop_heard.then(deadline_from_now),
        }
    }

    /// Whether the stop was heard, before this clock or by it.
    pub(crate) fn stop_heard(&self) -> bool {
        self.stop_heard
    }

    /// Runs `requests` to their end, polling `shutdown` meanwhile unless
    /// it completed already; once it has, gives them until the deadline.
    /// `on_heard` is called when `shutdown` completes here, at once (the
    /// stop is noted when it comes, not when the requests end).
    pub(crate) async fn run<T, S: Future<Output = ()>>(
        &mut self,
        requests: impl Future<Output = T>,
        shutdown: &mut Pin<&mut S>,
        on_heard: impl FnOnce(),
    ) -> Bounded<T> {
        let mut requests = pin!(requests);
        let mut on_heard = Some(on_heard);
        // Made once the stop is heard, so the usual stretch (no stop) costs
        // one poll of the stop's future per wake-up, and no timer.
        let mut give_up: Option<Pin<Box<Sleep>>> =
            self.give_up_at.map(|at| Box::pin(sleep_until(at)));
        poll_fn(|cx| {
            if let Poll::Ready(ended) = requests.as_mut().poll(cx) {
                return Poll::Ready(Bounded::Ended(ended));
            }
            if !self.stop_heard && shutdown.as_mut().poll(cx).is_ready() {
                let at = deadline_from_now();
                self.stop_heard = true;
                self.give_up_at = Some(at);
                give_up = Some(Box::pin(sleep_until(at)));
                if let Some(on_heard) = on_heard.take() {
                    on_heard();
                }
            }
            debug_assert_eq!(
                self.stop_heard,
                give_up.is_some(),
                "a deadline is set exactly when the stop was heard"
            );
            let timed_out = give_up
                .as_mut()
                .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready());
            if timed_out {
                Poll::Ready(Bounded::TimedOut)
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

fn deadline_from_now() -> Instant {
    Instant::now() + Duration::from_millis(STOP_TIMEOUT_MS)
}

/// Sleeps until `at`; `None` never comes (the caller disables the branch).
pub(crate) async fn sleep_until_set(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that would wait `wait_ms`, and a stop asked at `stop_ms`
    /// (never if `None`): what the clock made of them, and when.
    async fn run_with(
        wait_ms: u64,
        stop_ms: Option<u64>,
        heard_before: bool,
    ) -> (Bounded<()>, u64, bool) {
        let start = Instant::now();
        let mut shutdown = pin!(async {
            match stop_ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                None => std::future::pending().await,
            }
        });
        let mut clock = StopTimeout::starting(heard_before);
        let requests = tokio::time::sleep(Duration::from_millis(wait_ms));
        let mut heard_at_ms = None;
        let bounded = clock
            .run(requests, &mut shutdown, || {
                heard_at_ms = Some(u64::try_from(start.elapsed().as_millis()).unwrap());
            })
            .await;
        // Heard here, it is announced as it comes.
        assert_eq!(
            heard_at_ms,
            stop_ms.filter(|_| !heard_before).filter(|&ms| ms < wait_ms)
        );
        let elapsed_ms = u64::try_from(start.elapsed().as_millis()).unwrap();
        (bounded, elapsed_ms, clock.stop_heard())
    }

    #[tokio::test(start_paused = true)]
    async fn requests_without_a_stop_wait_as_long_as_they_take() {
        assert_eq!(
            run_with(3_600_000, None, false).await,
            (Bounded::Ended(()), 3_600_000, false)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_during_the_requests_gives_them_the_timeout_from_the_stop() {
        assert_eq!(
            run_with(3_600_000, Some(500), false).await,
            (Bounded::TimedOut, 500 + STOP_TIMEOUT_MS, true)
        );
        // Ending within the timeout, they end as they would have.
        assert_eq!(
            run_with(2_000, Some(500), false).await,
            (Bounded::Ended(()), 2_000, true)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_heard_before_gives_the_timeout_from_the_start() {
        assert_eq!(
            run_with(3_600_000, Some(0), true).await,
            (Bounded::TimedOut, STOP_TIMEOUT_MS, true)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_clock_covers_every_stretch_of_a_phase() {
        let start = Instant::now();
        let mut shutdown = pin!(std::future::ready(()));
        let mut clock = StopTimeout::starting(false);
        let first = clock
            .run(
                tokio::time::sleep(Duration::from_millis(STOP_TIMEOUT_MS / 2)),
                &mut shutdown,
                || {},
            )
            .await;
        assert_eq!(first, Bounded::Ended(()));
        let second = clock
            .run(
                tokio::time::sleep(Duration::from_millis(STOP_TIMEOUT_MS)),
                &mut shutdown,
                || panic!("the stop is heard once"),
            )
            .await;
        assert_eq!(second, Bounded::TimedOut);
        // In whole milliseconds: madsim's clock moves a little at every poll.
        assert_eq!(start.elapsed().as_millis(), u128::from(STOP_TIMEOUT_MS));
    }
}
