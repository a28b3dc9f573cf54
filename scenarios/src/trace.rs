//! Reading the simulator's trace: a line's message without its timestamp,
//! how many steps a run took, a digest to compare runs, and the excerpt a
//! violation report shows.

/// How many trace lines a violation report shows, ending at the step where
/// the violation was found.
pub const EXCERPT_LINES: usize = 20;

/// A line's text after its `[   12.345ms] ` timestamp.
pub fn message(line: &str) -> &str {
    if !line.starts_with('[') {
        return line;
    }
    // A byte scan for each `]`: the stamp is short, and `str::find` sets up
    // a substring search on every call, for every line of every run.
    let bytes = line.as_bytes();
    let mut from = 1;
    while let Some(offset) = bytes[from..].iter().position(|&byte| byte == b']') {
        let end = from + offset;
        if bytes.get(end + 1) == Some(&b' ') {
            return &line[end + 2..];
        }
        from = end + 1;
    }
    line
}

/// Whether a line records one step of the simulation: a request applied by
/// the server (a transaction, `zxid=...`, or a read) or a message delivered
/// to a client.
pub fn is_step(line: &str) -> bool {
    let text = message(line);
    text.starts_with("zxid=") || text.starts_with("read ") || text.starts_with("deliver ")
}

/// The number of steps in a trace (see [`is_step`]).
pub fn count_steps(trace: &[String]) -> u64 {
    trace.iter().filter(|line| is_step(line)).count() as u64
}

/// What a trace comes to without its text: its length, its steps and its
/// digest, read in one pass (the explorer keeps no more of most runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceSummary {
    pub lines: usize,
    /// See [`count_steps`].
    pub steps: u64,
    /// See [`digest`].
    pub digest: u64,
}

impl TraceSummary {
    pub fn of<'a>(trace: impl IntoIterator<Item = &'a str>) -> TraceSummary {
        let mut summary = TraceSummary {
            lines: 0,
            steps: 0,
            digest: DIGEST_SEED,
        };
        for line in trace {
            summary.lines += 1;
            summary.steps += u64::from(is_step(line));
            summary.digest = fold_line(summary.digest, line);
        }
        summary.digest = fold(summary.digest, summary.lines as u64);
        summary
    }
}

/// A stable fingerprint of a whole trace, the same on every platform and
/// toolchain: each line's length, then its bytes eight at a time
/// (little-endian, the last word padded with zeros), each word folded into
/// the state by a 64-by-64-bit multiply whose two halves are xored (the
/// mixing step of wyhash and foldhash), and the line count last. The
/// length prefix keeps line breaks significant. A word at a time matters:
/// the explorer digests every trace it runs, and a byte-at-a-time hash
/// (FNV-1a, which this replaced) took a tenth of its time.
pub fn digest(trace: &[String]) -> u64 {
    let state = trace
        .iter()
        .fold(DIGEST_SEED, |state, line| fold_line(state, line));
    fold(state, trace.len() as u64)
}

/// Folds one line, its length first, into [`digest`]'s state.
fn fold_line(mut state: u64, line: &str) -> u64 {
    state = fold(state, line.len() as u64);
    let mut words = line.as_bytes().chunks_exact(8);
    for word in &mut words {
        let word: [u8; 8] = word.try_into().expect("chunks of eight bytes");
        state = fold(state, u64::from_le_bytes(word));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut word = [0_u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        state = fold(state, u64::from_le_bytes(word));
    }
    state
}

/// The digest's starting state and multiplier: odd 64-bit constants with
/// well-spread bits (the fractional digits of pi and of the golden ratio).
const DIGEST_SEED: u64 = 0x243f_6a88_85a3_08d3;
const DIGEST_MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// One mixing step of [`digest`]. The constant added before the multiply
/// keeps a word equal to the state from zeroing it.
fn fold(state: u64, word: u64) -> u64 {
    let product =
        u128::from((state ^ word).wrapping_add(DIGEST_SEED)) * u128::from(DIGEST_MULTIPLIER);
    (product as u64) ^ ((product >> 64) as u64)
}

/// The last [`EXCERPT_LINES`] lines up to and including line `index`
/// (0-based).
pub fn excerpt(trace: &[String], index: usize) -> Vec<String> {
    let end = (index + 1).min(trace.len());
    trace[end.saturating_sub(EXCERPT_LINES)..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_steps_and_digests() {
        let trace: Vec<String> = [
            "[      0.000ms] connect master as session 0x1",
            "[      1.000ms] zxid=0x1 master create_session -> ok",
            "[      1.000ms] read master exists /zkdist -> none",
            "[      2.000ms] deliver master session Connected",
            "[      2.000ms] decide master: task-queued task-0000000001",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            message(&trace[4]),
            "decide master: task-queued task-0000000001"
        );
        assert_eq!(message("no stamp"), "no stamp");
        assert_eq!(message("[unclosed stamp"), "[unclosed stamp");
        assert_eq!(message("[a]b] c] d"), "c] d");
        assert_eq!(message("x] y"), "x] y");
        assert_eq!(message("[] "), "");
        assert_eq!(count_steps(&trace), 3);
        assert_eq!(digest(&trace), digest(&trace.clone()));
        assert_ne!(digest(&trace), digest(&trace[1..]));
        // Lines are separated: moving a character across a line break
        // changes the digest.
        assert_ne!(
            digest(&["ab".to_owned(), "c".to_owned()]),
            digest(&["a".to_owned(), "bc".to_owned()])
        );
        // Every byte counts, wherever it falls in a word.
        for position in 0..17 {
            let line: String = "x".repeat(17);
            let mut changed = line.clone().into_bytes();
            changed[position] = b'y';
            let changed = String::from_utf8(changed).expect("ASCII");
            assert_ne!(digest(&[line]), digest(&[changed]), "byte {position}");
        }
        // A trailing empty line is a line.
        assert_ne!(
            digest(&trace),
            digest(&[trace.clone(), vec![String::new()]].concat())
        );
        assert_eq!(excerpt(&trace, 1), trace[..2].to_vec());
        let long: Vec<String> = (0..50).map(|i| i.to_string()).collect();
        let tail = excerpt(&long, 40);
        assert_eq!(tail.len(), EXCERPT_LINES);
        assert_eq!(tail.last().map(String::as_str), Some("40"));
    }

    #[test]
    fn a_summary_reads_what_the_separate_functions_do() {
        let trace: Vec<String> = [
            "[      0.000ms] connect master as session 0x1",
            "[      1.000ms] zxid=0x1 master create_session -> ok",
            "[      2.000ms] deliver master session Connected",
            "",
            "[      2.000ms] read master exists /zkdist -> none, and some more words",
        ]
        .map(String::from)
        .to_vec();
        for end in 0..=trace.len() {
            let lines = &trace[..end];
            assert_eq!(
                TraceSummary::of(lines.iter().map(String::as_str)),
                TraceSummary {
                    lines: end,
                    steps: count_steps(lines),
                    digest: digest(lines),
                },
                "the first {end} lines"
            );
        }
    }
}
