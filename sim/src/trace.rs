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

impl Timestamp {
    /// Appends `[{ms:>7}.{us:03}ms]` to `line`, digit by digit: the
    /// formatting machinery's padding costs more than the rest of a line.
    fn write_to(&self, line: &mut String) {
        // u64::MAX microseconds has 17 digits of milliseconds.
        let mut digits = [b' '; 20];
        let mut ms = self.0 / 1000;
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (ms % 10) as u8;
            ms /= 10;
            if ms == 0 {
                break;
            }
        }
        // Right-aligned in at least seven columns.
        let start = start.min(digits.len() - 7);
        let us = self.0 % 1000;
        line.push('[');
        line.push_str(std::str::from_utf8(&digits[start..]).expect("ASCII digits and spaces"));
        line.push('.');
        for digit in [us / 100, us / 10 % 10, us % 10] {
            line.push(char::from(b'0' + digit as u8));
        }
        line.push_str("ms]");
    }
}

#[cfg(test)]
fn timestamp(elapsed_us: u64) -> String {
    let mut text = String::new();
    Timestamp(elapsed_us).write_to(&mut text);
    text
}

impl Trace {
    /// Appends a line and returns it. The text is written straight into the
    /// line, after the timestamp: callers pass `format_args!` rather than a
    /// string formatted for the occasion.
    pub(crate) fn record(&mut self, elapsed_us: u64, text: impl fmt::Display) -> &str {
        let mut line = String::with_capacity(LINE_CAPACITY);
        Timestamp(elapsed_us).write_to(&mut line);
        write!(line, " {text}").expect("writing to a String cannot fail");
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
        // Past the width the number grows, as `{:>7}` lets it.
        assert_eq!(timestamp(12_345_678_901), "[12345678.901ms]");
        assert_eq!(timestamp(u64::MAX), "[18446744073709551.615ms]");
        for us in [
            0,
            1,
            9,
            10,
            99,
            100,
            999,
            1_000,
            1_001,
            123_456_789,
            9_999_999,
        ] {
            assert_eq!(
                timestamp(us),
                format!("[{:>7}.{:03}ms]", us / 1000, us % 1000),
                "{us}"
            );
        }
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
