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
    // A byte scan: the stamp is short, and `str::find` sets up a substring
    // search on every call, for every line of every run.
    match line.as_bytes().windows(2).position(|pair| pair == b"] ") {
        Some(end) => &line[end + 2..],
        None => line,
    }
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

/// FNV-1a over the lines and their separators: a stable fingerprint of a
/// whole trace, the same on every platform and toolchain.
pub fn digest(trace: &[String]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for line in trace {
        for byte in line.bytes().chain(std::iter::once(b'\n')) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
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
        assert_eq!(excerpt(&trace, 1), trace[..2].to_vec());
        let long: Vec<String> = (0..50).map(|i| i.to_string()).collect();
        let tail = excerpt(&long, 40);
        assert_eq!(tail.len(), EXCERPT_LINES);
        assert_eq!(tail.last().map(String::as_str), Some("40"));
    }
}
