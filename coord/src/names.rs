//! The names of tasks and workers: the last segment of their nodes.
//!
//! A task is named by the server when the client creates it: the client
//! picks the prefix and the server appends the sequence counter (`%010d`),
//! so a task's number is its place in submission order. zkdist's client
//! creates *protected* names, `task-<token>-NNNNNNNNNN`, where the token is
//! 16 lowercase hex digits it chose for that one submission: after a
//! connection loss it can look for its token under `tasks/` and tell
//! whether its create was applied, as Curator's protected mode does. Plain
//! `task-NNNNNNNNNN` names (older clients, tests) are tasks too.
//!
//! A worker is named after its node in the id scratch directory
//! (`worker-` + counter), which is unique for the life of the ensemble:
//! a sequence counter never goes back (short of 2^32 registrations, where
//! ZooKeeper's 32-bit counter would come round).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::types::SessionId;

/// The name prefix of task nodes under `tasks/`.
pub const TASK_PREFIX: &str = "task-";
/// The name prefix of id nodes under `ids/`, and so of worker ids.
pub const WORKER_PREFIX: &str = "worker-";

/// A name that is not a valid task or worker name, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {name:?}: {reason}")]
pub struct InvalidName {
    pub what: &'static str,
    pub name: String,
    pub reason: String,
}

fn invalid(what: &'static str, name: &str, reason: impl Into<String>) -> InvalidName {
    InvalidName {
        what,
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// Checks that `name` can be one path segment.
fn validate_segment(what: &'static str, name: &str) -> Result<(), InvalidName> {
    // The common case without building a path: printable ASCII, no '/',
    // not relative. Anything else takes the full check, which names the
    // broken rule (or accepts a name with other characters).
    let plain = !matches!(name, "" | "." | "..")
        && name.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'/');
    if plain {
        return Ok(());
    }
    if name.is_empty() {
        return Err(invalid(what, name, "it is empty"));
    }
    if name.contains('/') {
        return Err(invalid(what, name, "it contains '/'"));
    }
    crate::path::validate_path(&format!("/{name}"))
        .map_err(|error| invalid(what, name, error.to_string()))
}

/// The number of hex digits of a protected task name's token.
pub const TASK_TOKEN_DIGITS: usize = 16;

/// The client-chosen part of a protected task name, `task-<token>-`: one
/// submission's identity, known to the client before the server names the
/// node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskToken(pub u64);

impl TaskToken {
    /// The token of a client's `submission`-th submit on `session`: both
    /// mixed by SplitMix64's finalizer, so tokens look unrelated across
    /// sessions and are distinct within one (each step is a bijection of
    /// the counter). Deterministic: the same session and count give the same
    /// token, which keeps simulations reproducible.
    pub fn for_submission(session: SessionId, submission: u64) -> TaskToken {
        // The session id's bits, reinterpreted: only their identity matters.
        let session_bits = session.0 as u64;
        TaskToken(splitmix64(session_bits ^ splitmix64(submission)))
    }

    /// The name prefix a persistent-sequential create turns into a task
    /// carrying this token: `task-<16 hex digits>-`.
    pub fn name_prefix(self) -> String {
        format!("{TASK_PREFIX}{self}-")
    }
}

impl TaskToken {
    /// Reads a token as [`ClientError::SubmitInDoubt`](crate::ClientError)
    /// and the task names show it: 16 hex digits, alone or in the name
    /// prefix `task-<token>-`.
    pub fn parse(text: &str) -> Result<TaskToken, InvalidName> {
        let digits = text
            .strip_prefix(TASK_PREFIX)
            .and_then(|rest| rest.strip_suffix('-'))
            .unwrap_or(text);
        token_from_digits(digits).ok_or_else(|| {
            invalid(
                "task token",
                text,
                format!(
                    "a token is {TASK_TOKEN_DIGITS} lowercase hex digits, alone or as task-<token>-"
                ),
            )
        })
    }
}

impl FromStr for TaskToken {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<TaskToken, InvalidName> {
        TaskToken::parse(s)
    }
}

impl fmt::Display for TaskToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:0width$x}", self.0, width = TASK_TOKEN_DIGITS)
    }
}

/// SplitMix64's output function: a bijection on u64 that spreads every
/// input bit over the output.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A task's node name, `task-NNNNNNNNNN` or `task-<token>-NNNNNNNNNN`.
/// Ordered by sequence number, which is submission order, read as an
/// unsigned 32-bit number: ZooKeeper's counter is a 32-bit `int`, so the
/// create after the one named 2147483647 is named -2147483648, and read
/// unsigned that one still follows it. The order breaks only when the counter comes
/// back to 0, after 2^32 creates (an order by name breaks at the first
/// wrap). The name breaks ties, which only names from different parents
/// can need.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskId {
    /// Shared, not owned: a task's id is copied into every decision, event
    /// and table that names it, and a copy is then a count, not a string.
    name: Arc<str>,
    token: Option<TaskToken>,
    sequence: i32,
}

impl TaskId {
    /// Parses a task node's name, e.g. `task-0000000042` or
    /// `task-00c0ffee00c0ffee-0000000042`.
    pub fn parse(name: &str) -> Result<TaskId, InvalidName> {
        if let Some((token, sequence)) = parse_canonical(name) {
            return Ok(TaskId {
                name: name.into(),
                token,
                sequence,
            });
        }
        TaskId::parse_in_full(name)
    }

    /// Every rule, one at a time, naming the first one broken.
    fn parse_in_full(name: &str) -> Result<TaskId, InvalidName> {
        const WHAT: &str = "task id";
        validate_segment(WHAT, name)?;
        let Some(rest) = name.strip_prefix(TASK_PREFIX) else {
            return Err(invalid(
                WHAT,
                name,
                format!("it does not start with {TASK_PREFIX:?}"),
            ));
        };
        // A token is hex digits only, so the first '-' after the prefix
        // ends it; a plain name's digits hold no '-' but a wrapped
        // counter's leading minus, which is at the very start.
        let (token, digits) = match rest.char_indices().skip(1).find(|(_, c)| *c == '-') {
            Some((dash, _)) => (Some(parse_token(name, &rest[..dash])?), &rest[dash + 1..]),
            None => (None, rest),
        };
        let sequence: i32 = digits.parse().map_err(|_| {
            invalid(
                WHAT,
                name,
                "it does not end with a 32-bit sequence number (task-NNNNNNNNNN or task-<token>-NNNNNNNNNN)",
            )
        })?;
        // The server renders the counter with `%010d`; any other spelling of
        // the same number would be a different node. Ten plain digits that
        // parse are that spelling; only a sign needs the comparison.
        let canonical = (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit()))
            || format!("{sequence:010}") == digits;
        if !canonical {
            return Err(invalid(
                WHAT,
                name,
                "its sequence number is not written with 10 digits (task-NNNNNNNNNN)",
            ));
        }
        Ok(TaskId {
            name: name.into(),
            token,
            sequence,
        })
    }

    /// The task made by the `sequence`-th create under `tasks/`, with a
    /// plain (unprotected) name.
    pub fn from_sequence(sequence: i32) -> TaskId {
        TaskId {
            name: format!("{TASK_PREFIX}{sequence:010}").into(),
            token: None,
            sequence,
        }
    }

    /// The task made by the `sequence`-th create under `tasks/`, created
    /// with `token`'s protected prefix.
    pub fn from_token_and_sequence(token: TaskToken, sequence: i32) -> TaskId {
        TaskId {
            name: format!("{}{sequence:010}", token.name_prefix()).into(),
            token: Some(token),
            sequence,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.name
    }

    pub fn sequence(&self) -> i32 {
        self.sequence
    }

    /// The token of a protected name; `None` for a plain one.
    pub fn token(&self) -> Option<TaskToken> {
        self.token
    }
}

/// The names zkdist's servers hand out, read in one pass over their bytes:
/// `task-` then, for a protected name, 16 lowercase hex digits and `-`, then
/// 10 decimal digits of a non-negative 32-bit counter. `None` for anything
/// else (a wrapped counter, a malformed name), which [`TaskId::parse`]
/// checks rule by rule.
fn parse_canonical(name: &str) -> Option<(Option<TaskToken>, i32)> {
    const PROTECTED_LEN: usize = TASK_PREFIX.len() + TASK_TOKEN_DIGITS + 1 + 10;
    const PLAIN_LEN: usize = TASK_PREFIX.len() + 10;
    let bytes = name.as_bytes();
    let rest = bytes.strip_prefix(TASK_PREFIX.as_bytes())?;
    let (token, digits) = match bytes.len() {
        PROTECTED_LEN => {
            let (hex, dash_digits) = rest.split_at(TASK_TOKEN_DIGITS);
            let digits = dash_digits.strip_prefix(b"-")?;
            let mut token = 0u64;
            for &b in hex {
                let nibble = match b {
                    b'0'..=b'9' => b - b'0',
                    b'a'..=b'f' => b - b'a' + 10,
                    _ => return None,
                };
                token = token << 4 | u64::from(nibble);
            }
            (Some(TaskToken(token)), digits)
        }
        PLAIN_LEN => (None, rest),
        _ => return None,
    };
    let mut sequence = 0i64;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        sequence = sequence * 10 + i64::from(b - b'0');
    }
    Some((token, i32::try_from(sequence).ok()?))
}

/// Reads a protected name's token: exactly [`TASK_TOKEN_DIGITS`] lowercase
/// hex digits, so that each token has one spelling.
fn parse_token(name: &str, digits: &str) -> Result<TaskToken, InvalidName> {
    token_from_digits(digits).ok_or_else(|| {
        invalid(
            "task id",
            name,
            format!(
                "its token {digits:?} is not {TASK_TOKEN_DIGITS} lowercase hex digits (task-<token>-NNNNNNNNNN)"
            ),
        )
    })
}

/// The token spelt by `digits`, if they are exactly [`TASK_TOKEN_DIGITS`]
/// lowercase hex digits: the one spelling each token has, in a task's name
/// and on its own.
fn token_from_digits(digits: &str) -> Option<TaskToken> {
    let well_formed = digits.len() == TASK_TOKEN_DIGITS
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then(|| {
        TaskToken(u64::from_str_radix(digits, 16).expect("checked: 16 hex digits fit a u64"))
    })
}

impl Ord for TaskId {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.sequence as u32, &self.name).cmp(&(other.sequence as u32, &other.name))
    }
}

impl PartialOrd for TaskId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl FromStr for TaskId {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<TaskId, InvalidName> {
        TaskId::parse(s)
    }
}

/// A worker's name, as registered under `workers/`. zkdist's workers use
/// `worker-NNNNNNNNNN` from the id scratch directory, but any valid node name
/// is accepted so that a foreign registration is handled, not a crash.
///
/// Shared like a task's id: copies of it are counts, not strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(Arc<str>);

impl WorkerId {
    pub fn parse(name: &str) -> Result<WorkerId, InvalidName> {
        validate_segment("worker id", name)?;
        Ok(WorkerId(name.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for WorkerId {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<WorkerId, InvalidName> {
        WorkerId::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reads_back_from_how_it_is_shown() {
        for value in [0, 1, 0x08b4_fda8_c892_b50e, u64::MAX] {
            let token = TaskToken(value);
            assert_eq!(TaskToken::parse(&token.to_string()), Ok(token));
            assert_eq!(TaskToken::parse(&token.name_prefix()), Ok(token));
        }
        for bad in [
            "",
            "08b4fda8c892b50",
            "08b4fda8c892b50e0",
            "08B4FDA8C892B50E",
            "+8b4fda8c892b50e",
            "task-08b4fda8c892b50e",
            "task-08b4fda8c892b50e-0000000001",
        ] {
            let error = TaskToken::parse(bad).unwrap_err();
            assert!(
                error.to_string().contains("16 lowercase hex digits"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn task_ids_parse_and_order_by_sequence() {
        let a = TaskId::parse("task-0000000009").unwrap();
        let b = TaskId::parse("task-0000000010").unwrap();
        assert_eq!(a.sequence(), 9);
        assert!(a < b);
        assert_eq!(TaskId::from_sequence(10), b);
        assert_eq!(b.to_string(), "task-0000000010");
        // The wrapped counter is rendered negative and parses.
        let wrapped = TaskId::parse("task--2147483648").unwrap();
        assert_eq!(wrapped.sequence(), i32::MIN);
        assert_eq!(TaskId::from_sequence(i32::MIN), wrapped);
        // It follows the last positive number, as the create after it.
        let last_positive = TaskId::from_sequence(i32::MAX);
        assert!(last_positive < wrapped);
        assert!(wrapped < TaskId::from_sequence(i32::MIN + 1));
        assert!(TaskId::from_sequence(-1) > wrapped);
        assert!(TaskId::from_sequence(0) < last_positive);
    }

    #[test]
    fn bad_task_ids_are_named_with_the_reason() {
        for (name, reason) in [
            ("", "empty"),
            ("job-0000000001", "does not start"),
            ("task-12", "10 digits"),
            ("task-00000000x1", "sequence number"),
            ("task-99999999999", "sequence number"),
            ("a/b", "'/'"),
        ] {
            let error = TaskId::parse(name).unwrap_err();
            assert_eq!(error.name, name);
            assert!(
                error.to_string().contains(reason),
                "{name:?}: {error} lacks {reason:?}"
            );
        }
    }

    #[test]
    fn protected_task_ids_carry_their_token_and_order_by_sequence() {
        let token = TaskToken(0x00c0_ffee_0000_0001);
        assert_eq!(token.to_string(), "00c0ffee00000001");
        assert_eq!(token.name_prefix(), "task-00c0ffee00000001-");
        let protected = TaskId::parse("task-00c0ffee00000001-0000000007").unwrap();
        assert_eq!(protected.token(), Some(token));
        assert_eq!(protected.sequence(), 7);
        assert_eq!(TaskId::from_token_and_sequence(token, 7), protected);
        assert_eq!(protected.to_string(), "task-00c0ffee00000001-0000000007");
        assert_eq!(TaskId::from_sequence(7).token(), None);

        // FIFO is the server's counter, whatever the tokens say: a later
        // task with a smaller token still comes after.
        let later = TaskId::parse("task-0000000000000000-0000000008").unwrap();
        let plain = TaskId::parse("task-0000000006").unwrap();
        let mut ids = [later.clone(), protected.clone(), plain.clone()];
        ids.sort();
        assert_eq!(ids, [plain, protected, later]);

        let wrapped = TaskId::parse("task-ffffffffffffffff--2147483648").unwrap();
        assert_eq!(wrapped.sequence(), i32::MIN);
        assert_eq!(wrapped.token(), Some(TaskToken(u64::MAX)));
        assert_eq!(
            TaskId::from_token_and_sequence(TaskToken(u64::MAX), i32::MIN),
            wrapped
        );
    }

    #[test]
    fn submission_tokens_are_distinct_per_submission_and_per_session() {
        let mut seen = std::collections::BTreeSet::new();
        for session in [1, 2, 3, 0x0100_0000_0000_0001, -1] {
            for submission in 0..1000 {
                let token = TaskToken::for_submission(SessionId(session), submission);
                assert!(
                    seen.insert(token),
                    "session {session} submission {submission} repeats {token}"
                );
            }
        }
        // Deterministic: the same inputs give the same token.
        assert_eq!(
            TaskToken::for_submission(SessionId(7), 3),
            TaskToken::for_submission(SessionId(7), 3)
        );
        // Every token makes a name that parses back to it.
        let token = TaskToken::for_submission(SessionId(7), 3);
        let name = format!("{}0000000001", token.name_prefix());
        assert_eq!(TaskId::parse(&name).unwrap().token(), Some(token));
    }

    #[test]
    fn bad_protected_task_ids_name_the_token() {
        for (name, reason) in [
            ("task-00C0FFEE00000001-0000000007", "lowercase hex"),
            ("task-c0ffee-0000000007", "16 lowercase hex digits"),
            (
                "task-00c0ffee000000011-0000000007",
                "16 lowercase hex digits",
            ),
            ("task-zzzzzzzzzzzzzzzz-0000000007", "\"zzzzzzzzzzzzzzzz\""),
            ("task--0000000007", "10 digits"),
            ("task-00c0ffee00000001-7", "10 digits"),
            ("task-00c0ffee00000001-", "sequence number"),
        ] {
            let error = TaskId::parse(name).unwrap_err();
            assert_eq!(error.name, name);
            assert!(
                error.to_string().contains(reason),
                "{name:?}: {error} lacks {reason:?}"
            );
        }
    }

    /// The one-pass reading agrees with the rule-by-rule one on every name
    /// it accepts, and leaves the rest to it.
    #[test]
    fn the_quick_reading_agrees_with_the_full_one() {
        let accepted = [
            "task-0000000000",
            "task-0000000042",
            "task-2147483647",
            "task-00c0ffee00000001-0000000007",
            "task-ffffffffffffffff-2147483647",
            "task-0123456789abcdef-0000000001",
        ];
        for name in accepted {
            let quick = parse_canonical(name).expect(name);
            let full = TaskId::parse_in_full(name).unwrap();
            assert_eq!(quick, (full.token(), full.sequence()), "{name}");
            assert_eq!(TaskId::parse(name).unwrap(), full);
        }
        let left_to_the_full_check = [
            "task--2147483648",
            "task-2147483648",
            "task-9999999999",
            "task-000000000x",
            "task-00C0FFEE00000001-0000000007",
            "task-00c0ffee00000001+0000000007",
            "task-00c0ffee00000001-000000000/",
            "task-00c0ffee0000000g-0000000007",
            "task-00c0ffee00000001-2147483648",
            "task-00c0ffee00000001--000000001",
            "job-00000000001",
            "task-000000001",
            "",
        ];
        for name in left_to_the_full_check {
            assert_eq!(parse_canonical(name), None, "{name}");
            assert_eq!(TaskId::parse(name), TaskId::parse_in_full(name), "{name}");
        }
    }

    #[test]
    fn sequence_numbers_have_one_spelling() {
        for (name, sequence) in [
            ("task-0000000000", 0),
            ("task-2147483647", i32::MAX),
            ("task--000000001", -1),
            ("task--2147483648", i32::MIN),
        ] {
            assert_eq!(TaskId::parse(name).unwrap().sequence(), sequence, "{name}");
        }
        for name in [
            "task-+000000001",
            "task-+00000001",
            "task--00000001",
            "task--1",
            "task-00000000001",
            "task-2147483648",
        ] {
            assert!(TaskId::parse(name).is_err(), "{name} parsed");
        }
    }

    #[test]
    fn segments_are_checked_as_paths_are() {
        for name in ["a", "worker-0000000001", ".a", "a..", "a b", "~", "\u{e9}"] {
            assert!(WorkerId::parse(name).is_ok(), "{name:?}");
        }
        for name in ["", ".", "..", "a/b", "/", "a\u{7f}", "a\u{1f}", "\u{e000}"] {
            assert!(WorkerId::parse(name).is_err(), "{name:?}");
        }
    }

    #[test]
    fn worker_ids_are_any_valid_segment() {
        assert_eq!(
            WorkerId::parse("worker-0000000001").unwrap().as_str(),
            "worker-0000000001"
        );
        assert!(WorkerId::parse("host-a").is_ok());
        for bad in ["", "a/b", "..", "x\u{1}"] {
            let error = WorkerId::parse(bad).unwrap_err();
            assert!(error.to_string().contains("invalid worker id"), "{error}");
        }
    }
}
