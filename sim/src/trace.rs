//! The trace: one stable, human-readable line per applied operation, per
//! delivery and per fault or control action, stamped with the simulated
//! time since start. The same seed gives the same lines, byte for byte.

use std::fmt::{self, Write as _};

#[derive(Debug, Default)]
pub(crate) struct Trace {
    lines: Vec<String>,
}

/// Room for most lines, so that writing one rarely grows its buffer.
const LINE_CAPACITY: usize = 128;

/// `[   12.345ms]`: milliseconds with microsecond precision, fixed width up
/// to about 2.7 hours of simulated time.
struct Timestamp(u64);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:>7}.{:03}ms]", self.0 / 1000, self.0 % 1000)
    }
}

#[cfg(test)]
fn timestamp(elapsed_us: u64) -> String {
    Timestamp(elapsed_us).to_string()
}

impl Trace {
    /// Appends a line and returns it. The text is written straight into the
    /// line, after the timestamp: callers pass `format_args!` rather than a
    /// string formatted for the occasion.
    pub(crate) fn record(&mut self, elapsed_us: u64, text: impl fmt::Display) -> &str {
        let mut line = String::with_capacity(LINE_CAPACITY);
        write!(line, "{} {text}", Timestamp(elapsed_us)).expect("writing to a String cannot fail");
        self.lines.push(line);
        self.lines.last().expect("just pushed")
    }

    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    pub(crate) fn lines(&self) -> &[String] {
        &self.lines
    }

    pub(crate) fn since(&self, start: usize) -> &[String] {
        &self.lines[start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_have_fixed_width() {
        assert_eq!(timestamp(0), "[      0.000ms]");
        assert_eq!(timestamp(12_345), "[     12.345ms]");
        assert_eq!(timestamp(9_999_999_999), "[9999999.999ms]");
        let mut trace = Trace::default();
        trace.record(1_001, "deliver a event NodeCreated /x");
        trace.record(2_000, format_args!("deliver {} reply {}", "b", 7));
        assert_eq!(
            trace.lines(),
            [
                "[      1.001ms] deliver a event NodeCreated /x",
                "[      2.000ms] deliver b reply 7"
            ]
        );
    }
}
