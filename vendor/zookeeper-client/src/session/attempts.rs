//! zkdist: how a run of failed attempts to establish a session is logged.
//!
//! Upstream logs at WARN every attempt whose server accepted the connection
//! but granted no session, and at DEBUG every connection refused or timed
//! out. A session kept through an outage (`Connector::with_server_expiry_only`)
//! tries about once a second for as long as the outage lasts, so a process
//! with many sessions logged a WARN line per session per second through a
//! loss of quorum, while one cut off from every server logged nothing above
//! DEBUG however long that lasted. Here a run logs at WARN its first
//! server that granted no session, as upstream did (a refused connection
//! alone stays at DEBUG: moving on to the next server is routine), then a
//! WARN summary of every failure at 10 s, 30 s, 70 s and every minute after
//! that while the run lasts, and, when it ends in a session, how long it
//! took; every attempt is still logged at DEBUG.
//!
//! The decisions are kept apart from the logging and the clock, so that
//! they can be read (and checked) on their own.

use std::time::{Duration, Instant};

/// When a run that is still failing is first summed up.
const FIRST_SUMMARY_AFTER: Duration = Duration::from_secs(10);
/// The longest gap between two summaries of one run.
const MAX_SUMMARY_INTERVAL: Duration = Duration::from_secs(60);

/// How an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FailedAttempt {
    /// No connection to the server: refused, unreachable or timed out.
    NoConnection,
    /// The server took the connection but granted no session: one without
    /// a quorum, most often.
    NoSession,
}

/// What to log of a failed attempt, besides the DEBUG line every attempt
/// gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FailureLog {
    /// The run's first server that granted no session: a WARN line naming
    /// it.
    First,
    /// A WARN line summing the run up so far.
    Summary { failures: u32, elapsed: Duration },
    /// Nothing more.
    Quiet,
}

/// A run of attempts to establish a session, from the first attempt that
/// failed until one succeeds or the session ends.
#[derive(Debug)]
pub(super) struct FailedAttempts {
    began: Instant,
    failures: u32,
    /// Whether the run has logged at WARN.
    warned: bool,
    /// How long after `began` the next summary is due.
    next_summary_after: Duration,
    /// The gap before the summary after that one; it doubles up to
    /// [`MAX_SUMMARY_INTERVAL`].
    summary_interval: Duration,
}

impl FailedAttempts {
    /// A run whose first attempt started at `began`.
    pub(super) fn new(began: Instant) -> FailedAttempts {
        FailedAttempts {
            began,
            failures: 0,
            warned: false,
            next_summary_after: FIRST_SUMMARY_AFTER,
            summary_interval: FIRST_SUMMARY_AFTER * 2,
        }
    }

    /// Counts an attempt that failed as `attempt` at `now`, and says what
    /// to log of it.
    pub(super) fn failed(&mut self, attempt: FailedAttempt, now: Instant) -> FailureLog {
        self.failures = self.failures.saturating_add(1);
        let elapsed = now.saturating_duration_since(self.began);
        if elapsed >= self.next_summary_after {
            // A summary long overdue (a single attempt that took minutes)
            // is not followed by a burst of the ones it skipped.
            while self.next_summary_after <= elapsed {
                self.next_summary_after += self.summary_interval;
                self.summary_interval = (self.summary_interval * 2).min(MAX_SUMMARY_INTERVAL);
            }
            self.warned = true;
            return FailureLog::Summary { failures: self.failures, elapsed };
        }
        if attempt == FailedAttempt::NoSession && !self.warned {
            self.warned = true;
            return FailureLog::First;
        }
        FailureLog::Quiet
    }

    /// The failures so far, and how long the run has lasted at `now`: an
    /// attempt that succeeds after failures logs them.
    pub(super) fn so_far(&self, now: Instant) -> Option<(u32, Duration)> {
        (self.failures > 0).then(|| (self.failures, now.saturating_duration_since(self.began)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The logs of failures as `attempt` at the given seconds after the run
    /// began.
    fn logs_at(attempt: FailedAttempt, seconds: &[u64]) -> Vec<FailureLog> {
        let began = Instant::now();
        let mut run = FailedAttempts::new(began);
        seconds.iter().map(|&s| run.failed(attempt, began + Duration::from_secs(s))).collect()
    }

    /// The seconds at which `logs` summed the run up.
    fn summaries(seconds: &[u64], logs: &[FailureLog]) -> Vec<u64> {
        seconds.iter().zip(logs).filter(|(_, log)| matches!(log, FailureLog::Summary { .. })).map(|(s, _)| *s).collect()
    }

    #[test]
    fn the_first_server_without_a_session_warns_then_summaries_thin_out_to_one_a_minute() {
        let seconds: Vec<u64> = (0..=200).collect();
        let logs = logs_at(FailedAttempt::NoSession, &seconds);
        assert_eq!(logs[0], FailureLog::First);
        assert_eq!(logs[1], FailureLog::Quiet);
        assert_eq!(summaries(&seconds, &logs), [10, 30, 70, 130, 190]);
        assert_eq!(logs[30], FailureLog::Summary { failures: 31, elapsed: Duration::from_secs(30) });
    }

    #[test]
    fn refused_connections_alone_are_only_summed_up() {
        let seconds: Vec<u64> = (0..=40).collect();
        let logs = logs_at(FailedAttempt::NoConnection, &seconds);
        assert!(!logs.contains(&FailureLog::First), "{logs:?}");
        assert_eq!(summaries(&seconds, &logs), [10, 30]);
    }

    #[test]
    fn a_server_without_a_session_after_a_summary_does_not_warn_again() {
        let began = Instant::now();
        let mut run = FailedAttempts::new(began);
        let at = |s| began + Duration::from_secs(s);
        assert_eq!(run.failed(FailedAttempt::NoConnection, at(0)), FailureLog::Quiet);
        assert_eq!(run.failed(FailedAttempt::NoSession, at(1)), FailureLog::First);
        assert_eq!(run.failed(FailedAttempt::NoSession, at(2)), FailureLog::Quiet);
        let mut late = FailedAttempts::new(began);
        assert!(matches!(late.failed(FailedAttempt::NoConnection, at(12)), FailureLog::Summary { .. }));
        assert_eq!(late.failed(FailedAttempt::NoSession, at(13)), FailureLog::Quiet);
    }

    #[test]
    fn an_overdue_summary_comes_once() {
        let logs = logs_at(FailedAttempt::NoSession, &[0, 100, 101, 129, 130]);
        assert_eq!(logs[0], FailureLog::First);
        assert_eq!(logs[1], FailureLog::Summary { failures: 2, elapsed: Duration::from_secs(100) });
        assert_eq!(
            &logs[2..],
            [
                FailureLog::Quiet,
                FailureLog::Quiet,
                FailureLog::Summary { failures: 5, elapsed: Duration::from_secs(130) }
            ]
        );
    }

    #[test]
    fn a_run_without_failures_has_nothing_to_report() {
        let began = Instant::now();
        let mut run = FailedAttempts::new(began);
        assert_eq!(run.so_far(began), None);
        run.failed(FailedAttempt::NoConnection, began + Duration::from_secs(1));
        assert_eq!(run.so_far(began + Duration::from_secs(3)), Some((1, Duration::from_secs(3))));
    }
}
