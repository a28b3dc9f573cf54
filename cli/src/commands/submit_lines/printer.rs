//! Printing the payloads' lines (an id, `?` or `-`) as they settle.

use std::fmt::Write as _;

use zkdist_coord::ClientError;

use super::queue::Queued;
use crate::stdout::out;

/// Prints the ids of a run's payloads in order, as they settle: each line
/// once, and none before every line above it.
#[derive(Default)]
pub(super) struct Printer {
    /// How many payloads' lines were printed (or, after a failed write,
    /// passed over).
    pub(super) printed: usize,
    /// The first payload of the lines the last call to `newly_settled`
    /// gave.
    pub(super) chunk_start: usize,
    /// The first write to standard output that failed: nothing more is
    /// printed after it.
    pub(super) failed: Option<anyhow::Error>,
    /// The first payload whose line may be missing from standard output:
    /// the first of the lines whose write failed (a failed write may have
    /// written part of them).
    pub(super) unprinted_from: Option<usize>,
}

impl Printer {
    /// The lines of the payloads settled since the last call, each up to
    /// the first still unsettled (its create unanswered, or unsent, when
    /// its session ended); marks them printed.
    pub(super) fn newly_settled(&mut self, queued: &[Queued]) -> String {
        self.chunk_start = self.printed;
        let mut text = String::new();
        for entry in &queued[self.printed..] {
            let Some(printed) = printed_as(entry) else {
                break;
            };
            writeln!(text, "{printed}").expect("writing to a String cannot fail");
            self.printed += 1;
        }
        text
    }

    pub(super) fn print(&mut self, text: &str) {
        self.print_with(text, |text| out!("{text}"));
    }

    /// [`Printer::print`], writing with `write`.
    pub(super) fn print_with(
        &mut self,
        text: &str,
        write: impl FnOnce(&str) -> anyhow::Result<()>,
    ) {
        if text.is_empty() || self.failed.is_some() {
            return;
        }
        if let Err(error) = write(text) {
            self.failed = Some(error);
            self.unprinted_from = Some(self.chunk_start);
        }
    }
}

/// What a payload's line reads once it is settled: its task id, `?` if it
/// may or may not have been queued, `-` if it was not. `None` while it
/// awaits a new session.
pub(super) fn printed_as(queued: &Queued) -> Option<&str> {
    match queued {
        Queued::Task(task) => Some(task.as_str()),
        Queued::Failed(ClientError::SubmitInDoubt { .. }) => Some("?"),
        Queued::Failed(_) | Queued::Interrupted => Some("-"),
        Queued::Unanswered { .. } | Queued::Unsent(_) => None,
    }
}
