//! SIGINT, SIGTERM and SIGHUP end a role cleanly: a worker finishes the task in hand,
//! a master stops assigning, both close their sessions. A one-shot command
//! (`submit`, `bench`) settles what it sent, then ends by the signal it
//! received ([`end_by_received_signal`]), as a command without a handler
//! would: a shell loop of them stops at the first Ctrl-C.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

use crate::stdout::errln;

/// The process's shutdown signals. Installed before anything else, so that a
/// signal that arrives while the role is still connecting or claiming ends
/// the process through the same clean path instead of killing it with a
/// session (and its ephemerals) left for the ensemble to time out.
///
/// SIGHUP (the terminal or the ssh session that started the process went
/// away) is taken as SIGTERM is: a worker started by hand over ssh finishes
/// its task and leaves cleanly, and `submit --lines > ids` stops between two
/// batches and still writes every id, where the default action would kill
/// the process on the spot. A process started with SIGHUP ignored
/// (`nohup`) keeps ignoring it. A hangup is often delivered twice (the
/// shell passes it on to its jobs, and the kernel sends it again to the
/// terminal's foreground job as the shell exits), so only SIGINT and
/// SIGTERM count as the second signal that ends a role at once.
pub struct Shutdown {
    terminate: Signal,
    interrupt: Signal,
    /// `None` when SIGHUP was ignored at start.
    hangup: Option<Signal>,
}

impl Shutdown {
    pub fn install() -> anyhow::Result<Shutdown> {
        let hangup = if hangup_ignored() {
            None
        } else {
            Some(signal(SignalKind::hangup()).context("cannot install the SIGHUP handler")?)
        };
        Ok(Shutdown {
            terminate: signal(SignalKind::terminate())
                .context("cannot install the SIGTERM handler")?,
            interrupt: signal(SignalKind::interrupt())
                .context("cannot install the SIGINT handler")?,
            hangup,
        })
    }

    /// Completes on the first SIGINT, SIGTERM or SIGHUP, and records it for
    /// [`end_by_received_signal`].
    pub async fn requested(&mut self) {
        let hangup = async {
            match &mut self.hangup {
                Some(hangup) => hangup.recv().await,
                None => std::future::pending().await,
            }
        };
        let (received, name) = tokio::select! {
            biased;
            _ = self.terminate.recv() => (SignalKind::terminate(), "SIGTERM"),
            _ = self.interrupt.recv() => (SignalKind::interrupt(), "SIGINT"),
            _ = hangup => (SignalKind::hangup(), "SIGHUP"),
        };
        tracing::info!("{name}: shutting down");
        // The first signal is the one to end by: a later one of the other
        // kind does not replace it.
        let _ = RECEIVED.set(received.as_raw_value());
    }

    /// Completes on the next SIGINT or SIGTERM (a repeated hangup is not
    /// an operator asking again; see [`Shutdown`]).
    async fn requested_again(&mut self) {
        tokio::select! {
            biased;
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// Whether this process was started with SIGHUP ignored (as `nohup` does).
fn hangup_ignored() -> bool {
    // SAFETY: with a null new action, sigaction only writes the current one
    // into `current`, a plain C struct owned here (all zeroes is a valid
    // value of it).
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// A SIGINT or SIGTERM that comes this soon after the first stop signal is
/// the same request delivered twice, not an operator asking again: tools
/// that stop a process group signal it back to back (GNU `timeout` sends
/// SIGTERM to the process, then to its group; a script may `kill` the
/// process and then its group). A person asking again takes longer.
pub const REPEATED_SIGNAL_WINDOW: Duration = Duration::from_millis(500);

/// The first shutdown signal this process received (its number).
static RECEIVED: OnceLock<i32> = OnceLock::new();

/// How the first shutdown signal is named to the user: its name, with
/// Ctrl-C beside SIGINT, which is how a person most often sends it (a
/// script or `kill -INT` sends it too, so Ctrl-C alone would mislead);
/// `None` before any.
pub fn received_signal_name() -> Option<&'static str> {
    RECEIVED.get().map(|&signal| match signal {
        libc::SIGINT => "SIGINT (Ctrl-C)",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    })
}

/// What ends a command at once after its first stop signal.
pub const SECOND_SIGNAL: &str = "a second SIGINT (Ctrl-C) or SIGTERM exits at once";

/// What a command that finished its work says if it still ends by a
/// signal (see [`say_if_ended_by_signal`]).
static DONE_BEFORE_SIGNAL: Mutex<Option<String>> = Mutex::new(None);

/// Has [`end_by_received_signal`] say `note` on stderr if it ends the
/// process: a command whose work was done when (or before) the signal
/// came still ends by it, which whoever started it would take for work
/// cut short. Kept until the process ends, not decided when set, so that
/// a signal that comes after is covered too; a later note replaces it.
pub fn say_if_ended_by_signal(note: String) {
    *DONE_BEFORE_SIGNAL
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(note);
}

/// Ends the process by the first SIGINT, SIGTERM or SIGHUP it received, if any,
/// with the signal's default action (its handler is reset first): the
/// parent sees "killed by the signal", not an exit status. A shell reads
/// that as the user's interrupt and stops a loop or a script there, where
/// an exit status of 1 would let it go on to the next command. Returns if
/// no signal was received.
pub fn end_by_received_signal() {
    let Some(&signal) = RECEIVED.get() else {
        return;
    };
    // On the main thread, once the command returned: nothing else writes.
    let _ = std::io::stdout().flush();
    let done = DONE_BEFORE_SIGNAL
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(done) = done {
        errln!("zkdist: {done}");
    }
    end_by(signal);
}

/// Takes `signal`'s default action, which ends the process. It does not
/// touch standard output: on a second signal the main task may hold it,
/// stuck writing to a full pipe, and exiting at once must not wait for
/// that (every write is flushed as it is made, see `crate::stdout`).
fn end_by(signal: i32) -> ! {
    // Destructors do not run: the processes of `exec` tasks in hand, in
    // groups of their own, are killed here, or they would run on.
    crate::handlers::exec::kill_every_task();
    // Resets the handler, unblocks the signal and raises it; aborts if the
    // process survived that, so this never returns.
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    unreachable!("the default action of SIGINT, SIGTERM and SIGHUP ends the process");
}

impl Shutdown {
    /// A [`Stop`] that completes on the first SIGINT, SIGTERM or SIGHUP, for the
    /// roles of one process to share. Needs a tokio runtime (a task waits
    /// for the signals).
    pub fn shared(self) -> Stop {
        self.share(OnSecondSignal::Ignore)
    }

    /// [`Shutdown::shared`], and a second signal, SIGINT or SIGTERM, ends
    /// the process at once, by the first signal's default action (one that
    /// comes within [`REPEATED_SIGNAL_WINDOW`] of the first is the first
    /// delivered again, and is not taken as a second). A clean
    /// stop finishes the task in hand and
    /// deletes the role's nodes, which with the ensemble out of reach can
    /// wait as long as the outage; the operator keeps a way out short of
    /// SIGKILL. The process's sessions then end at their timeout.
    pub fn shared_exiting_on_second(self) -> Stop {
        self.share(OnSecondSignal::Exit)
    }

    fn share(mut self, on_second: OnSecondSignal) -> Stop {
        let (sender, receiver) = watch::channel(false);
        let sender = Arc::new(sender);
        let on_signal = Arc::clone(&sender);
        tokio::spawn(async move {
            self.requested().await;
            let first_at = tokio::time::Instant::now();
            on_signal.send_replace(true);
            if on_second == OnSecondSignal::Exit {
                loop {
                    self.requested_again().await;
                    let after = first_at.elapsed();
                    if after >= REPEATED_SIGNAL_WINDOW {
                        break;
                    }
                    tracing::info!(
                        after_ms = after.as_millis(),
                        "a stop signal again right after the first: the same request delivered \
                         twice (as GNU timeout does); signal again to exit at once"
                    );
                }
                errln!(
                    "zkdist: a second signal: exiting at once; this process's sessions end at their timeout"
                );
                end_by(*RECEIVED.get().expect("recorded by `requested`"));
            }
        });
        Stop { sender, receiver }
    }
}

/// What a second signal does once a stop was requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnSecondSignal {
    /// Nothing: the stop in progress goes on.
    Ignore,
    /// The process ends at once, by the first signal.
    Exit,
}

/// A stop request shared by the roles of one process: a signal asks for it,
/// and so can a role that ended, so that the others end too.
#[derive(Clone)]
pub struct Stop {
    sender: Arc<watch::Sender<bool>>,
    receiver: watch::Receiver<bool>,
}

impl Stop {
    /// Completes once a stop was requested.
    pub async fn requested(&self) {
        let mut receiver = self.receiver.clone();
        // The sender lives as long as `self`: waiting cannot fail.
        let _ = receiver.wait_for(|stop| *stop).await;
    }

    pub fn request(&self) {
        self.sender.send_replace(true);
    }

    /// Whether a stop was requested.
    pub fn is_requested(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Runs `work` unless a stop is requested first (then `None`; what
    /// `work` held, such as a session, is dropped, which closes it).
    pub async fn unless_requested<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.requested() => None,
            output = work => Some(output),
        }
    }
}
