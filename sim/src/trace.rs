//! The trace: one stable, human-readable line per applied operation, per
//! delivery and per fault or control action, stamped with the simulated
//! time since start. The same seed gives the same lines, byte for byte.

use std::fmt::{self, Write as _};

/// The lines, kept end to end in one buffer: a run records thousands of
/// lines, and one allocation per line (and one free per line when the
/// simulation ends) cost more than writing them.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    text: String,
    /// Where each line ends in `text`.
    ends: Vec<usize>,
    /// The last timestamp written, and for which time: lines come in
    /// bursts at one instant (every line of a zero-latency run is at
    /// 0.000ms), and copying a stamp costs a fraction of writing it.
    stamp: String,
    stamp_us: Option<u64>,
}

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
    /// buffer, after the timestamp: callers pass `format_args!` rather than
    /// a string formatted for the occasion.
    pub(crate) fn record(&mut self, elapsed_us: u64, text: impl fmt::Display) -> &str {
        let start = self.text.len();
        self.write_stamp(elapsed_us);
        write!(self.text, " {text}").expect("writing to a String cannot fail");
        self.ends.push(self.text.len());
        &self.text[start..]
    }

    /// Appends a line whose text `write` appends after the timestamp: the
    /// busiest lines push their pieces with `push_str` rather than through
    /// the formatting machinery, which costs more than the copying.
    pub(crate) fn record_with(&mut self, elapsed_us: u64, write: impl FnOnce(&mut String)) {
        self.write_stamp(elapsed_us);
        self.text.push(' ');
        write(&mut self.text);
        self.ends.push(self.text.len());
    }

    /// Appends the timestamp of `elapsed_us`, written again only when the
    /// time moved since the last line.
    fn write_stamp(&mut self, elapsed_us: u64) {
        if self.stamp_us != Some(elapsed_us) {
            self.stamp.clear();
            Timestamp(elapsed_us).write_to(&mut self.stamp);
            self.stamp_us = Some(elapsed_us);
        }
        self.text.push_str(&self.stamp);
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Line number `index` (0-based).
    pub(crate) fn line(&self, index: usize) -> &str {
        let start = match index {
            0 => 0,
            n => self.ends[n - 1],
        };
        &self.text[start..self.ends[index]]
    }

    /// The lines from number `start` (0-based) on.
    pub(crate) fn lines_from(&self, start: usize) -> impl Iterator<Item = &str> {
        let first = match start {
            0 => 0,
            n => self.ends[n - 1],
        };
        self.ends[start..].iter().scan(first, |from, &end| {
            let line = &self.text[*from..end];
            *from = end;
            Some(line)
        })
    }

    /// Every line, as the handles receive them.
    pub(crate) fn to_lines(&self) -> Vec<String> {
        self.lines_from(0).map(str::to_owned).collect()
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
        trace.record_with(2_000, |line| {
            line.push_str("deliver b reply ");
            line.push('7');
        });
        assert_eq!(
            trace.to_lines(),
            [
                "[      1.001ms] deliver a event NodeCreated /x",
                "[      2.000ms] deliver b reply 7"
            ]
        );
        assert_eq!(trace.len(), 2);
        assert_eq!(
            trace.lines_from(1).collect::<Vec<_>>(),
            ["[      2.000ms] deliver b reply 7"]
        );
        assert_eq!(trace.lines_from(2).count(), 0);
        assert_eq!(
            trace.line(0),
            "[      1.001ms] deliver a event NodeCreated /x"
        );
        assert_eq!(trace.line(1), "[      2.000ms] deliver b reply 7");
        assert_eq!(
            trace.record(3_000, "empty line next"),
            "[      3.000ms] empty line next"
        );
        trace.record(3_000, "");
        assert_eq!(
            trace.lines_from(2).collect::<Vec<_>>(),
            ["[      3.000ms] empty line next", "[      3.000ms] "]
        );
        // The stamp written last is reused only for the same time.
        trace.record(3_001, "a");
        trace.record_with(3_001, |line| line.push('b'));
        trace.record(3_000, "c");
        assert_eq!(
            trace.lines_from(4).collect::<Vec<_>>(),
            [
                "[      3.001ms] a",
                "[      3.001ms] b",
                "[      3.000ms] c"
            ]
        );
    }
}
