//! A stop does not wait for an ensemble out of reach.
//!
//! A worker told to stop finishes what it is doing: the task in hand runs
//! to its end, and its result is written. The requests around it may then
//! meet an ensemble that is gone: a lost connection's requests are sent
//! again until their outcome is known (`until_known`), and ZooKeeper
//! reports a session's end only once the link is back, so without a bound
//! a stop asked during an outage would wait for the outage to end. Once
//! the stop was asked for, the requests still to make get
//! [`STOP_TIMEOUT_MS`] in all: those before the task in hand (reading the
//! assignment and the task) from the stop, those after it (waiting for the
//! link to write the result, writing it, then deleting the registration)
//! from the later of the task's end and the stop. Past it
//! the worker gives its session up, as after a crash: the registration
//! goes with the session (closed by the role, or expired by the ensemble),
//! and the master then settles the task in hand (a result the worker could
//! not write is written by the worker the master gives the task to next).
//! The handler itself is not bounded by this: a task runs as long as it
//! takes (see `Worker::run_until` for the session's grace).

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

/// What became of a stretch of requests run under a [`StopClock`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Bounded<T> {
    /// It ended, well or not.
    Ended(T),
    /// A stop was asked for, and the stretch outlasted its timeout: its
    /// future was dropped.
    TimedOut,
}

/// Listens for the stop while the worker waits on requests and, once it
/// was asked for, gives the waiting a deadline [`STOP_TIMEOUT_MS`] after
/// the stop, or after the task in hand's end ([`StopClock::after_task`]).
/// One clock serves a worker's whole session, so the requests of one side
/// of the task (several stretches: a read, a release) wait no longer than
/// one timeout in all.
#[derive(Debug, Default)]
pub(crate) struct StopClock {
    /// When the waiting is given up: set exactly when the shutdown future
    /// completed, here or where another listener polled it (it is polled
    /// until it does, once, never after).
    give_up_at: Option<Instant>,
}

impl StopClock {
    /// Whether the stop was heard.
    pub(crate) fn stop_heard(&self) -> bool {
        self.give_up_at.is_some()
    }

    /// The stop was heard by another listener of the shutdown future (the
    /// handler's, or the idle worker's): the deadline starts now, unless
    /// it runs already.
    pub(crate) fn heard_elsewhere(&mut self) {
        self.give_up_at.get_or_insert_with(deadline_from_now);
    }

    /// The task in hand ended; `stop_deadline` is set if the stop was
    /// asked for by then ([`after_task_deadline`]): the writes that follow,
    /// and the deregistration after them, share one timeout from the later
    /// of the task's end and the stop (with the wait for the link that may
    /// have come before them), however long the task ran.
    pub(crate) fn after_task(&mut self, stop_deadline: Option<Instant>) {
        if let Some(at) = stop_deadline {
            self.give_up_at = Some(at);
        }
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
            if !self.stop_heard() && shutdown.as_mut().poll(cx).is_ready() {
                let at = deadline_from_now();
                self.give_up_at = Some(at);
                give_up = Some(Box::pin(sleep_until(at)));
                if let Some(on_heard) = on_heard.take() {
                    on_heard();
                }
            }
            debug_assert_eq!(
                self.give_up_at.is_some(),
                give_up.is_some(),
                "the timer runs exactly when the stop was heard"
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

/// When the requests after a task (waiting for the link to write its
/// result, the writes, the deregistration) must be done by, for a task
/// that ended at `ended_at` and a stop heard at `stop_heard_at`: a
/// timeout from the later of the two. A stop heard during the task counts
/// from the task's end, however long the task ran.
pub(crate) fn after_task_deadline(ended_at: Instant, stop_heard_at: Instant) -> Instant {
    ended_at.max(stop_heard_at) + Duration::from_millis(STOP_TIMEOUT_MS)
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
        let mut clock = StopClock::default();
        if heard_before {
            clock.heard_elsewhere();
        }
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
        let mut clock = StopClock::default();
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

    #[tokio::test(start_paused = true)]
    async fn the_task_s_end_starts_the_timeout_again() {
        let start = Instant::now();
        let mut shutdown = pin!(std::future::pending::<()>());
        let mut clock = StopClock::default();
        clock.heard_elsewhere();
        // The task ran past the deadline the stop set.
        tokio::time::sleep(Duration::from_millis(3 * STOP_TIMEOUT_MS)).await;
        clock.after_task(Some(after_task_deadline(Instant::now(), start)));
        let writes = clock
            .run(
                tokio::time::sleep(Duration::from_millis(STOP_TIMEOUT_MS / 2)),
                &mut shutdown,
                || panic!("the stop was heard elsewhere"),
            )
            .await;
        assert_eq!(writes, Bounded::Ended(()));
        let leaving = clock
            .run(
                tokio::time::sleep(Duration::from_millis(STOP_TIMEOUT_MS)),
                &mut shutdown,
                || panic!("the stop was heard elsewhere"),
            )
            .await;
        assert_eq!(leaving, Bounded::TimedOut);
        assert_eq!(start.elapsed().as_millis(), u128::from(4 * STOP_TIMEOUT_MS));
        // Without a stop, the task's end starts nothing.
        let mut idle = StopClock::default();
        idle.after_task(None);
        assert!(!idle.stop_heard());
    }
}
