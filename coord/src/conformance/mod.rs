//! The conformance suite: every client-observable line of
//! `zk-semantics.md`, written once against [`Coordinator`] and run unchanged
//! against the simulator (`cargo test -p zkdist-sim --test conformance`) and
//! a real server (`cargo test -p zkdist-coord --test conformance_zk`).
//!
//! A case gets a [`Backend`] whose [`Backend::root`] is a fresh, empty node
//! owned by that case alone, and fails by panicking. Cases never depend on a
//! backend's internals: they observe only what a ZooKeeper client can.

mod cases;
mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::{Coordinator, EventStream, ZkResult};

pub use cases::all_cases;
pub use support::*;

/// What a conformance case needs from the system under test.
pub trait Backend: Send + Sync + 'static {
    type Session: Coordinator;

    /// A node that exists, is empty, and belongs to this case alone.
    fn root(&self) -> &str;

    /// Opens a new session. The stream's first event is
    /// `Event::Session(SessionState::Connected)`.
    fn connect(&self) -> impl Future<Output = ZkResult<(Self::Session, EventStream)>>;

    /// Makes the server expire `session` as if its timeout had passed without
    /// contact: its ephemerals are deleted and its watches dropped, and the
    /// session sees `Expired` when it next talks to the server.
    fn expire(&self, session: &Self::Session) -> impl Future<Output = ()>;

    /// Cuts `session`'s link to the server now, for `duration`, after which
    /// the link comes back by itself. The session sees `Disconnected`; if
    /// `duration` is well under the session timeout, it then reconnects and
    /// sees `Connected`, with its ephemerals and watches kept. Returns once
    /// the link is cut (the session may not have noticed yet).
    fn cut(&self, session: &Self::Session, duration: Duration) -> impl Future<Output = ()>;

    /// From now until `session`'s next [`Backend::cut`], nothing the server
    /// sends reaches it: its requests are still applied, and their replies
    /// lost. The cut ends the deafness with the link.
    fn deafen(&self, session: &Self::Session) -> impl Future<Output = ()>;

    /// Whether a session may reconnect through a server that has not yet
    /// applied writes other sessions made while it was away. It then hears
    /// of some of them after all: a watch it registers again fires when
    /// that server applies them. Cases that check what a reconnected session
    /// is not told accept that on such a backend. False unless overridden:
    /// a standalone server never lags, and the ensemble lane reconnects a
    /// session to the server it was on, which has applied what other
    /// sessions wrote by the time its cut ends.
    fn servers_may_lag(&self) -> bool {
        false
    }
}

/// A case's body: takes the backend, panics on failure.
pub type CaseFuture = Pin<Box<dyn Future<Output = ()>>>;

/// One named conformance case. The name is the test's name in both runs.
pub struct Case<B> {
    pub name: &'static str,
    pub run: fn(Arc<B>) -> CaseFuture,
}

/// Runs the suite as a libtest-compatible test binary (`harness = false`).
///
/// `run_case` executes one case (it builds the runtime and the backend the
/// case needs). With `ignore_reason` set, every case is listed and reported
/// as ignored instead of run, so a missing server shows as "ignored", never
/// as "passed".
pub fn run_main<B: Backend>(
    ignore_reason: Option<&str>,
    run_case: impl Fn(&Case<B>) + Send + Sync + Clone + 'static,
) -> ! {
    run_main_then(ignore_reason, run_case, || {})
}

/// [`run_main`], then `after_all` once every case has run (whatever their
/// outcome), before the process exits: to remove what the cases shared,
/// such as a real server's run root.
pub fn run_main_then<B: Backend>(
    ignore_reason: Option<&str>,
    run_case: impl Fn(&Case<B>) + Send + Sync + Clone + 'static,
    after_all: impl FnOnce(),
) -> ! {
    let args = libtest_mimic::Arguments::from_args();
    if let Some(reason) = ignore_reason {
        eprintln!("conformance cases ignored: {reason}");
    }
    let cases = all_cases::<B>();
    let names: std::collections::BTreeSet<&str> = cases.iter().map(|case| case.name).collect();
    assert_eq!(
        names.len(),
        cases.len(),
        "two conformance cases share a name"
    );
    let trials = cases
        .into_iter()
        .map(|case| {
            let run_case = run_case.clone();
            let name = case.name;
            libtest_mimic::Trial::test(name, move || {
                run_case(&case);
                Ok(())
            })
            .with_ignored_flag(ignore_reason.is_some())
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    after_all();
    conclusion.exit()
}
