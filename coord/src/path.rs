//! ZooKeeper path rules, checked on the client before anything is sent
//! (ZooKeeper's `PathUtils.validatePath`), and small helpers to build paths.

use crate::error::{ZkError, ZkResult};

fn invalid(path: &str, reason: impl Into<String>) -> ZkError {
    ZkError::InvalidPath {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

// Surrogates (U+D800..U+DFFF) cannot occur in a Rust string, so the range
// ZooKeeper forbids from U+D800 starts here at the private-use area.
fn is_forbidden_char(c: char) -> bool {
    matches!(c,
        '\u{0000}'..='\u{001f}'
        | '\u{007f}'..='\u{009f}'
        | '\u{e000}'..='\u{f8ff}'
        | '\u{fff0}'..='\u{ffff}')
}

/// Validates an absolute node path: starts with `/`, no trailing `/` (except
/// the root), no empty segment, no `.` or `..` segment, no control or
/// reserved characters.
pub fn validate_path(path: &str) -> ZkResult<()> {
    validate(path, false)
}

/// Validates the path given to a sequential create. The server appends the
/// counter, so a trailing `/` is allowed here (`/queue/` makes
/// `/queue/0000000003`).
pub fn validate_sequential_prefix(path: &str) -> ZkResult<()> {
    validate(path, true)
}

fn validate(path: &str, sequential: bool) -> ZkResult<()> {
    if path.is_empty() {
        return Err(invalid(path, "path is empty"));
    }
    if !path.starts_with('/') {
        return Err(invalid(path, "path must start with '/'"));
    }
    if path == "/" {
        // A sequential create of "/" makes "/0000000007", which is valid.
        return Ok(());
    }
    if path.ends_with('/') && !sequential {
        return Err(invalid(path, "path must not end with '/'"));
    }
    let body = if sequential {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    };
    for (index, segment) in body[1..].split('/').enumerate() {
        if segment.is_empty() {
            return Err(invalid(path, format!("segment {index} is empty")));
        }
        if segment == "." || segment == ".." {
            return Err(invalid(
                path,
                format!("segment {index} is a relative segment {segment:?}"),
            ));
        }
        if let Some(c) = segment.chars().find(|&c| is_forbidden_char(c)) {
            return Err(invalid(
                path,
                format!("forbidden character U+{:04X}", c as u32),
            ));
        }
    }
    Ok(())
}

/// The parent of a valid non-root path (`/a/b` -> `/a`, `/a` -> `/`).
pub fn parent(path: &str) -> &str {
    debug_assert!(path != "/" && path.starts_with('/'), "parent of {path:?}");
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last segment of a valid non-root path (`/a/b` -> `b`).
pub fn name(path: &str) -> &str {
    debug_assert!(path != "/" && path.starts_with('/'), "name of {path:?}");
    &path[path.rfind('/').map_or(0, |i| i + 1)..]
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, child: &str) -> String {
    debug_assert!(!child.contains('/'), "child name {child:?} contains '/'");
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
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
        assert!(validate_sequential_prefix("/a//").is_err());
    }

    #[test]
    fn parent_name_join() {
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/a/b/c"), "/a/b");
        assert_eq!(name("/a/b/c"), "c");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }
}
