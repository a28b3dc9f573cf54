//! ZooKeeper path rules, checked on the client before anything is sent
//! (ZooKeeper's `PathUtils.validatePath`), and small helpers to build paths.

use crate::error::{ZkError, ZkResult};

fn invalid(path: &str, reason: impl Into<String>) -> ZkError {
    ZkError::InvalidPath {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

// ZooKeeper checks a path's Java `char`s, which are UTF-16 code units, and
// forbids U+D800..U+F8FF (the surrogates and the private-use area). A Rust
// string holds no lone surrogate, but every character above U+FFFF becomes
// a surrogate pair in Java, so the server refuses it (`BadArguments`): it is
// forbidden here too, so that both backends refuse it before sending.
fn is_forbidden_char(c: char) -> bool {
    matches!(c,
        '\u{0000}'..='\u{001f}'
        | '\u{007f}'..='\u{009f}'
        | '\u{e000}'..='\u{f8ff}'
        | '\u{fff0}'..='\u{ffff}')
        || u32::from(c) > 0xffff
}

/// Validates an absolute node path: starts with `/`, no trailing `/` (except
/// the root), no empty segment, no `.` or `..` segment, no control or
/// reserved characters.
pub fn validate_path(path: &str) -> ZkResult<()> {
    validate(path)
}

/// Validates the path given to a sequential create. The server appends the
/// counter, so ZooKeeper checks `path + "1"` instead (`PathUtils`): a
/// trailing `/` is allowed (`/queue/` makes `/queue/0000000003`), and so is
/// a last segment `.` or `..` (`/queue/.` makes `/queue/.0000000003`).
pub fn validate_sequential_prefix(path: &str) -> ZkResult<()> {
    if is_plainly_valid(path, Completion::Sequential) {
        return Ok(());
    }
    let completed = format!("{path}1");
    // Errors name the path as given, not the completed one.
    validate(&completed).map_err(|error| match error {
        ZkError::InvalidPath { reason, .. } => invalid(path, reason),
        other => other,
    })
}

/// Whether a path is checked as given or as a sequential create's prefix,
/// which the server completes with the counter's digits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Completion {
    AsGiven,
    Sequential,
}

/// The common case, checked without allocating: an absolute path of
/// printable ASCII whose segments are neither empty nor relative. True only
/// for paths [`validate`] accepts (with `Sequential`, for paths whose
/// completion `path + "1"` it accepts); false for anything else, which the
/// full check then refuses with its reason or accepts (non-ASCII).
fn is_plainly_valid(path: &str, completion: Completion) -> bool {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    if bytes.len() == 1 {
        // The root itself, or `/` completed to `/1`.
        return true;
    }
    // One pass over the bytes: every path a request names is checked, and
    // splitting it into segments first cost more than the check.
    let mut segment_start = 1;
    for (index, &byte) in bytes.iter().enumerate().skip(1) {
        if byte == b'/' {
            if is_empty_or_relative(&bytes[segment_start..index]) {
                return false;
            }
            segment_start = index + 1;
        } else if !(0x20..0x7f).contains(&byte) {
            // Printable ASCII: U+0020..=U+007E, none of them forbidden.
            return false;
        }
    }
    // The completion appends a digit to the last segment, which makes it
    // neither empty nor relative.
    completion == Completion::Sequential || !is_empty_or_relative(&bytes[segment_start..])
}

fn is_empty_or_relative(segment: &[u8]) -> bool {
    matches!(segment, b"" | b"." | b"..")
}

fn validate(path: &str) -> ZkResult<()> {
    if is_plainly_valid(path, Completion::AsGiven) {
        return Ok(());
    }
    validate_in_full(path)
}

/// Every rule, one at a time, naming the first one broken.
fn validate_in_full(path: &str) -> ZkResult<()> {
    if path.is_empty() {
        return Err(invalid(path, "path is empty"));
    }
    if !path.starts_with('/') {
        return Err(invalid(path, "path must start with '/'"));
    }
    if path == "/" {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(invalid(path, "path must not end with '/'"));
    }
    // Segments are counted from 1, as a reader counts them.
    for (number, segment) in (1..).zip(path[1..].split('/')) {
        if segment.is_empty() {
            return Err(invalid(path, format!("segment {number} is empty")));
        }
        if segment == "." || segment == ".." {
            return Err(invalid(
                path,
                format!("segment {number} is a relative segment {segment:?}"),
            ));
        }
        if let Some(c) = segment.chars().find(|&c| is_forbidden_char(c)) {
            let reason = if u32::from(c) > 0xffff {
                format!(
                    "character {c:?} (U+{:04X}) is above U+FFFF: ZooKeeper stores it as a UTF-16 surrogate pair, which it refuses",
                    u32::from(c)
                )
            } else {
                format!("forbidden character U+{:04X}", u32::from(c))
            };
            return Err(invalid(path, reason));
        }
    }
    Ok(())
}

/// Where the last `/` of `path` is. Paths end in a short name, so a plain
/// scan back from the end finds it in a few bytes; `str::rfind` goes
/// through the general `memrchr`, whose set-up cost some hundred
/// instructions a call on the simulator's paths, and every request splits
/// a path or two.
pub fn last_slash(path: &str) -> Option<usize> {
    path.bytes().rposition(|byte| byte == b'/')
}

/// The parent of a valid non-root path (`/a/b` -> `/a`, `/a` -> `/`).
pub fn parent(path: &str) -> &str {
    debug_assert!(path != "/" && path.starts_with('/'), "parent of {path:?}");
    match last_slash(path) {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last segment of a valid non-root path (`/a/b` -> `b`).
pub fn name(path: &str) -> &str {
    debug_assert!(path != "/" && path.starts_with('/'), "name of {path:?}");
    &path[last_slash(path).map_or(0, |i| i + 1)..]
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, child: &str) -> String {
    debug_assert!(!child.contains('/'), "child name {child:?} contains '/'");
    let parent = if parent == "/" { "" } else { parent };
    let mut joined = String::with_capacity(parent.len() + 1 + child.len());
    joined.push_str(parent);
    joined.push('/');
    joined.push_str(child);
    joined
}

/// Whether valid path `path` is `ancestor` itself or lies below it
/// (`/a/b` is below `/a`, `/ab` is not; everything is below `/`).
pub fn is_same_or_descendant(path: &str, ancestor: &str) -> bool {
    ancestor == "/"
        || path == ancestor
        || (path.starts_with(ancestor) && path.as_bytes().get(ancestor.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_paths() {
        for p in [
            "/",
            "/a",
            "/a/b",
            "/a-b/c_d/0000000001",
            "/zookeeper",
            "/a/.b",
            "/a/b..",
        ] {
            assert_eq!(validate_path(p), Ok(()), "{p}");
        }
        assert_eq!(validate_sequential_prefix("/queue/"), Ok(()));
        assert_eq!(validate_sequential_prefix("/queue/task-"), Ok(()));
        // ZooKeeper checks the prefix with a digit appended, so a last
        // segment `.` or `..` is a name's beginning, not a relative segment.
        assert_eq!(validate_sequential_prefix("/queue/."), Ok(()));
        assert_eq!(validate_sequential_prefix("/queue/.."), Ok(()));
        assert_eq!(validate_sequential_prefix("/"), Ok(()));
        assert_eq!(validate_sequential_prefix("/\u{fff}"), Ok(()));
    }

    #[test]
    fn rejects_invalid_paths_naming_them() {
        for p in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/a/./b",
            "/a/..",
            "/a\u{0}b",
            "/a\u{1}",
            "/\u{e000}",
        ] {
            match validate_path(p) {
                Err(ZkError::InvalidPath { path, .. }) => assert_eq!(path, p),
                other => panic!("{p:?} gave {other:?}"),
            }
        }
        for p in [
            "",
            "a",
            "/a//",
            "/./x",
            "/../x",
            "/a/./",
            "/a/../",
            "/a\u{0}",
            "/a\u{1f600}",
        ] {
            match validate_sequential_prefix(p) {
                Err(ZkError::InvalidPath { path, .. }) => assert_eq!(path, p),
                other => panic!("sequential {p:?} gave {other:?}"),
            }
        }
    }

    /// The allocation-free check never accepts what the full check
    /// refuses, and accepts the common paths.
    #[test]
    fn the_quick_check_agrees_with_the_full_one() {
        let samples = [
            "",
            "/",
            "a",
            "//",
            "/a",
            "/a/",
            "/a/b",
            "/a//b",
            "/.",
            "/..",
            "/./x",
            "/../x",
            "/a/.",
            "/a/..",
            "/a/.b",
            "/a/b..",
            "/a/./",
            "/a/../",
            "/a b",
            "/a\u{0}",
            "/a\u{1f}",
            "/a\u{7f}",
            "/a~",
            "/\u{e9}",
            "/\u{e000}",
            "/\u{1f600}",
            "/q/task-",
            "/zkdist/tasks/task-00c0ffee00000001-0000000007",
        ];
        for path in samples {
            if is_plainly_valid(path, Completion::AsGiven) {
                assert_eq!(validate_in_full(path), Ok(()), "{path:?}");
            }
            if is_plainly_valid(path, Completion::Sequential) {
                assert_eq!(validate_in_full(&format!("{path}1")), Ok(()), "{path:?}");
            }
        }
        for path in ["/", "/a", "/a/b", "/a/.b", "/a/b.."] {
            assert!(is_plainly_valid(path, Completion::AsGiven), "{path:?}");
        }
        for prefix in ["/", "/q/", "/q/task-", "/q/.", "/q/.."] {
            assert!(
                is_plainly_valid(prefix, Completion::Sequential),
                "{prefix:?}"
            );
        }
    }

    #[test]
    fn a_refused_segment_is_numbered_from_one() {
        for (path, reason) in [
            ("/a/../b", "segment 2 is a relative segment \"..\""),
            ("/./b", "segment 1 is a relative segment \".\""),
            ("/a//b", "segment 2 is empty"),
        ] {
            match validate_path(path) {
                Err(ZkError::InvalidPath { reason: said, .. }) => assert_eq!(said, reason),
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    #[test]
    fn characters_above_u_ffff_are_refused_naming_them() {
        match validate_path("/r/x\u{1f600}") {
            Err(ZkError::InvalidPath { path, reason }) => {
                assert_eq!(path, "/r/x\u{1f600}");
                assert!(reason.contains("U+1F600"), "{reason}");
                assert!(reason.contains('\u{1f600}'), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // The last character Java holds in one `char` that ZooKeeper allows.
        assert_eq!(validate_path("/\u{ffef}"), Ok(()));
        assert!(validate_path("/\u{10000}").is_err());
    }

    #[test]
    fn parent_name_join() {
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/a/b/c"), "/a/b");
        assert_eq!(name("/a/b/c"), "c");
        // Non-ASCII names: the scan is over bytes, and `/` is never part of
        // a multi-byte character.
        assert_eq!(parent("/\u{e9}t\u{e9}/\u{fc}ber"), "/\u{e9}t\u{e9}");
        assert_eq!(name("/\u{e9}t\u{e9}/\u{fc}ber"), "\u{fc}ber");
        assert_eq!(last_slash("/a/bc"), Some(2));
        assert_eq!(last_slash("abc"), None);
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }

    #[test]
    fn descendants() {
        assert!(is_same_or_descendant("/a", "/a"));
        assert!(is_same_or_descendant("/a/b/c", "/a"));
        assert!(is_same_or_descendant("/a", "/"));
        assert!(is_same_or_descendant("/", "/"));
        assert!(!is_same_or_descendant("/ab", "/a"));
        assert!(!is_same_or_descendant("/a", "/a/b"));
        assert!(!is_same_or_descendant("/", "/a"));
    }
}
