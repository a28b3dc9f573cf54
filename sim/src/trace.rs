//! The trace: one stable, human-readable line per applied operation, per
//! delivery and per fault or control action, stamped with the simulated
//! time since start. The same seed gives the same lines, byte for byte.

use std::fmt::{self, Write as _};

/// How many bytes of lines one chunk holds before the next line starts a
/// new one. Big enough that a chunk's allocation is rare, small enough that
/// no growth ever copies much: one growing buffer for a whole run was
/// reallocated a dozen times on its way to megabytes, and those copies
/// were a twentieth of a zero-latency run's instructions.
const CHUNK_BYTES: usize = 64 * 1024;

/// Room a chunk keeps for the line being written: a line that does not
/// fit grows its chunk (copying at most one chunk), so this only needs to
/// cover the usual line.
const LINE_ROOM_BYTES: usize = 512;

/// The lines, kept end to end in chunks of about [`CHUNK_BYTES`]: a run
/// records thousands of lines, and one allocation per line (and one free
/// per line when the simulation ends) cost more than writing them. A line
/// never spans two chunks.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    /// Every chunk; the last is the one being written.
    chunks: Vec<String>,
    /// Where each line is: its chunk, and its start and end in it.
    spans: Vec<LineSpan>,
    /// The last timestamp written, and for which time: lines come in
    /// bursts at one instant (every line of a zero-latency run is at
    /// 0.000ms), and copying a stamp costs a fraction of writing it.
    stamp: String,
    stamp_us: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct LineSpan {
    chunk: u32,
    start: u32,
    end: u32,
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
        // Pushed byte by byte: checking that they are UTF-8 first (to push
        // them as one `str`) took longer than pushing them.
        line.extend(digits[start..].iter().map(|&byte| char::from(byte)));
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
        self.record_with(elapsed_us, |line| {
            write!(line, "{text}").expect("writing to a String cannot fail");
        });
        self.line(self.spans.len() - 1)
    }

    /// Appends a line whose text `write` appends after the timestamp: the
    /// busiest lines push their pieces with `push_str` rather than through
    /// the formatting machinery, which costs more than the copying.
    pub(crate) fn record_with(&mut self, elapsed_us: u64, write: impl FnOnce(&mut String)) {
        let chunk = self.chunk_with_room();
        let text = &mut self.chunks[chunk];
        let start = text.len();
        if self.stamp_us != Some(elapsed_us) {
            self.stamp.clear();
            Timestamp(elapsed_us).write_to(&mut self.stamp);
            self.stamp_us = Some(elapsed_us);
        }
        text.push_str(&self.stamp);
        text.push(' ');
        write(text);
        let span = LineSpan {
            chunk: u32::try_from(chunk).expect("fewer than 2^32 chunks"),
            start: u32::try_from(start).expect("a chunk is far under 4 GiB"),
            end: u32::try_from(text.len()).expect("a chunk is far under 4 GiB"),
        };
        assert!(span.start < span.end, "a line holds at least its timestamp");
        self.spans.push(span);
    }

    /// The index of the chunk the next line goes to, starting a new one
    /// when the current one is short of room.
    fn chunk_with_room(&mut self) -> usize {
        match self.chunks.last() {
            Some(text) if text.len() + LINE_ROOM_BYTES <= CHUNK_BYTES => {}
            _ => self.chunks.push(String::with_capacity(CHUNK_BYTES)),
        }
        self.chunks.len() - 1
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Line number `index` (0-based).
    pub(crate) fn line(&self, index: usize) -> &str {
        let span = self.spans[index];
        &self.chunks[span.chunk as usize][span.start as usize..span.end as usize]
    }

    /// The lines from number `start` (0-based) on.
    pub(crate) fn lines_from(&self, start: usize) -> impl Iterator<Item = &str> {
        (start..self.spans.len()).map(|index| self.line(index))
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

    #[test]
    fn lines_keep_their_text_across_chunks() {
        let mut trace = Trace::default();
        let mut expected = Vec::new();
        // Short lines past several chunks, a line longer than the room a
        // chunk keeps, and one longer than a whole chunk.
        for n in 0..10_000u64 {
            let text = match n {
                4_321 => "x".repeat(LINE_ROOM_BYTES * 3),
                7_000 => "y".repeat(CHUNK_BYTES * 2),
                _ => format!("line {n}"),
            };
            trace.record_with(n, |line| line.push_str(&text));
            expected.push(format!("{} {text}", timestamp(n)));
        }
        assert!(trace.chunks.len() > 3, "the lines filled several chunks");
        assert_eq!(trace.len(), expected.len());
        assert_eq!(trace.to_lines(), expected);
        assert_eq!(trace.line(7_000), expected[7_000]);
        assert_eq!(
            trace.lines_from(9_998).collect::<Vec<_>>(),
            expected[9_998..]
        );
        // A chunk grows past its size only for a line that did not fit its
        // room: the whole-chunk line's did, and no chunk of short lines.
        let long_lines = [trace.spans[4_321].chunk, trace.spans[7_000].chunk];
        assert!(trace.chunks[long_lines[1] as usize].len() > CHUNK_BYTES);
        for (index, chunk) in trace.chunks.iter().enumerate() {
            if !long_lines.contains(&(index as u32)) {
                assert!(chunk.len() <= CHUNK_BYTES, "chunk {index} grew");
            }
        }
    }
}
