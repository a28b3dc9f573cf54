//! The trace: one stable, human-readable line per applied operation, per
//! delivery and per fault or control action, stamped with the simulated
//! time since start. The same seed gives the same lines, byte for byte.

#[derive(Debug, Default)]
pub(crate) struct Trace {
    lines: Vec<String>,
}

/// `[   12.345ms]`: milliseconds with microsecond precision, fixed width up
/// to about 2.7 hours of simulated time.
pub(crate) fn timestamp(elapsed_us: u64) -> String {
    format!("[{:>7}.{:03}ms]", elapsed_us / 1000, elapsed_us % 1000)
}

impl Trace {
    /// Appends a line and returns it.
    pub(crate) fn record(&mut self, elapsed_us: u64, text: &str) -> &str {
        self.lines.push(format!("{} {text}", timestamp(elapsed_us)));
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
        assert_eq!(
            trace.lines(),
            ["[      1.001ms] deliver a event NodeCreated /x"]
        );
    }
}
