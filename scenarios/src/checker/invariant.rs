//! What the checker reports: the rules a run must keep, where in a run one
//! was broken, and the violation with the trace leading to it.

use std::fmt::{self, Write as _};

/// The rules a run must keep. See the module documentation for the exact
/// meaning of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    TaskAssignedTwice,
    WorkerAssignedTwice,
    AssignedToUnregistered,
    FifoOrder,
    DeposedMasterWrite,
    SubmittedOnce,
    FinishedExactlyOnce,
    ZombieWrite,
    Liveness,
    InlinePayload,
    ResultMatchesTask,
    MasterViewMatches,
    ActorFailed,
    RanPastExpiry,
}

impl Invariant {
    pub const ALL: [Invariant; 14] = [
        Invariant::TaskAssignedTwice,
        Invariant::WorkerAssignedTwice,
        Invariant::AssignedToUnregistered,
        Invariant::FifoOrder,
        Invariant::DeposedMasterWrite,
        Invariant::SubmittedOnce,
        Invariant::FinishedExactlyOnce,
        Invariant::ZombieWrite,
        Invariant::Liveness,
        Invariant::InlinePayload,
        Invariant::ResultMatchesTask,
        Invariant::MasterViewMatches,
        Invariant::ActorFailed,
        Invariant::RanPastExpiry,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::TaskAssignedTwice => "task-assigned-twice",
            Invariant::WorkerAssignedTwice => "worker-assigned-twice",
            Invariant::AssignedToUnregistered => "assigned-to-unregistered",
            Invariant::FifoOrder => "fifo-order",
            Invariant::DeposedMasterWrite => "deposed-master-write",
            Invariant::SubmittedOnce => "submitted-once",
            Invariant::FinishedExactlyOnce => "finished-exactly-once",
            Invariant::ZombieWrite => "zombie-write",
            Invariant::Liveness => "liveness",
            Invariant::InlinePayload => "inline-payload",
            Invariant::ResultMatchesTask => "result-matches-task",
            Invariant::MasterViewMatches => "master-view-matches",
            Invariant::ActorFailed => "actor-failed",
            Invariant::RanPastExpiry => "ran-past-expiry",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where in a run a violation was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Right after the transaction with this zxid; `line` is its trace line.
    Transaction { zxid: i64, line: String },
    /// On a decision of `actor` (the session's name), noted in the trace as
    /// `decide <actor>: <text>`.
    Decision { actor: String, text: String },
    /// When the run ended.
    EndOfRun,
}

impl Step {
    /// The trace line this step left, without its timestamp (`None` at the
    /// end of the run, which leaves none).
    fn trace_message(&self) -> Option<String> {
        match self {
            Step::Transaction { line, .. } => Some(crate::trace::message(line).to_owned()),
            Step::Decision { actor, text } => Some(decision_line(actor, text)),
            Step::EndOfRun => None,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Transaction { zxid, .. } => write!(f, "zxid 0x{zxid:x}"),
            Step::Decision { actor, .. } => write!(f, "a decision of {actor}"),
            Step::EndOfRun => f.write_str("the end of the run"),
        }
    }
}

/// Bytes reserved for a decision line: the longest common ones take about
/// 90 ("decide m1: round 12 [new-task] task-e9fd6049d65af21e-0000000001->
/// worker-0000000002"); a round assigning several tasks grows it.
const DECISION_LINE_BYTES: usize = 128;

/// How the harness notes an actor's decision in the trace.
pub(crate) fn decision_line(actor: &str, text: impl fmt::Display) -> String {
    // Sized for the longest common line (a round assigning a task), so that
    // the line is written without growing its buffer piece by piece.
    let mut line = String::with_capacity(DECISION_LINE_BYTES);
    // The fixed words are pushed as they are: the formatting machinery
    // pads even a plain `str` argument, and every decision is noted.
    line.push_str("decide ");
    line.push_str(actor);
    line.push_str(": ");
    write!(line, "{text}").expect("writing to a String cannot fail");
    line
}

/// A broken invariant: what, where, and the trace leading to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub detail: String,
    pub step: Step,
    /// The step's line in the run's trace, 1-based (the last line at the
    /// end of a run). Filled in by [`Violation::locate`].
    pub trace_line: Option<usize>,
    /// The last trace lines up to the step.
    pub excerpt: Vec<String>,
}

impl Violation {
    /// Finds the step's line in the run's trace and takes the excerpt. A
    /// decision's line is looked for from the end: the run stops right
    /// after the decision that broke a rule.
    pub fn locate(&mut self, trace: &[String]) {
        let index = match self.step.trace_message() {
            None => trace.len().checked_sub(1),
            Some(wanted) => trace
                .iter()
                .rposition(|line| crate::trace::message(line) == wanted),
        };
        if let Some(index) = index {
            self.trace_line = Some(index + 1);
            self.excerpt = crate::trace::excerpt(trace, index);
        }
    }

    /// `finished-exactly-once at zxid 0x1f (trace line 231): ...`
    pub fn summary(&self) -> String {
        let line = self
            .trace_line
            .map_or_else(String::new, |line| format!(" (trace line {line})"));
        format!("{} at {}{line}: {}", self.invariant, self.step, self.detail)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "violation: {}", self.summary())?;
        for line in &self.excerpt {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}
