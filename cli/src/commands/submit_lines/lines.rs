//! Reading the payload lines, each checked before anything is sent, and
//! naming lines in an error.

use std::fmt::Write as _;

use anyhow::bail;
use zkdist_coord::{Layout, TaskPayload, validate_data};

use super::{Line, NAMED_LINES};
use crate::handlers;
use crate::handlers::HandlerError;

/// Every payload line of `input`, checked as a single submit checks its
/// payload (a JSON object with a `kind`, within the size limit, and, unless
/// `no_check`, valid for its built-in kind); blank lines are skipped. If
/// any line is refused, the error names each (up to [`NAMED_LINES`]) and
/// nothing is returned to send.
pub(super) fn checked_lines<'a>(
    input: &'a [u8],
    layout: &Layout,
    no_check: bool,
) -> anyhow::Result<Vec<Line<'a>>> {
    let mut lines = Vec::new();
    let mut refused = Vec::new();
    let mut unknown_kinds = false;
    for (index, text) in input.split(|&byte| byte == b'\n').enumerate() {
        let payload = text.strip_suffix(b"\r").unwrap_or(text);
        if payload.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let number = index + 1;
        match check_payload(payload, layout, no_check) {
            Ok(()) => lines.push(Line { number, payload }),
            Err(error) => {
                unknown_kinds |= matches!(
                    error.downcast_ref::<HandlerError>(),
                    Some(HandlerError::UnknownKind(_))
                );
                refused.push((number, format!("{error:#}")));
            }
        }
    }
    if !refused.is_empty() {
        let mut message = format!(
            "{} of {} payload lines refused, so none was submitted",
            refused.len(),
            refused.len() + lines.len()
        );
        if unknown_kinds {
            message.push_str(" (pass --no-check to submit kinds this binary does not know)");
        }
        message.push(':');
        name_lines(
            &mut message,
            refused
                .into_iter()
                .map(|(number, reason)| (number, reason, false)),
        );
        bail!(message);
    }
    if lines.is_empty() {
        bail!("no task to submit: the input holds no payload line");
    }
    Ok(lines)
}

/// What `Client::submit_many` would refuse, and with `no_check` unset what
/// this binary's handlers would.
pub(super) fn check_payload(payload: &[u8], layout: &Layout, no_check: bool) -> anyhow::Result<()> {
    validate_data(&layout.task_prefix(), payload)?;
    TaskPayload::decode(payload)?;
    if !no_check {
        handlers::validate(payload)?;
    }
    Ok(())
}

/// Appends `line N: reason` for each of `lines` (line number, reason, and
/// whether it must be named), in order: every line that must be named, and
/// the others up to [`NAMED_LINES`] in all; then how many were left out.
pub(super) fn name_lines(message: &mut String, lines: impl Iterator<Item = (usize, String, bool)>) {
    let mut named = 0;
    let mut left_out = 0;
    for (number, reason, must_name) in lines {
        if must_name || named < NAMED_LINES {
            named += 1;
            write!(message, "\n  line {number}: {reason}")
                .expect("writing to a String cannot fail");
        } else {
            left_out += 1;
        }
    }
    if left_out > 0 {
        write!(message, "\n  and {left_out} more").expect("writing to a String cannot fail");
    }
}
