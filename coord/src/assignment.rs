//! What an assignment node (`assignments/<worker>`) holds: the assigned
//! task's name, as in the founding design, optionally followed by a newline
//! and the task's payload.
//!
//! The inline payload saves the worker a round trip: it learns of its
//! assignment from a watch event, which carries no data, and must read the
//! node to learn the task's name; with the payload inline it can run the
//! task at once instead of reading the task node too. The master adds the
//! payload only when it already holds it (read ahead while the task was
//! queued) and it is small (see [`MAX_INLINE_PAYLOAD_BYTES`]); a bare name
//! stays valid, so every reader handles both forms.

use crate::names::{InvalidName, TaskId};

/// The largest payload the master copies into an assignment. A copy is
/// written (and replicated) a second time, so it pays only while the round
/// trip it saves costs more than the bytes: small payloads, which is what
/// most task queues carry. Larger tasks are assigned by name and the worker
/// reads their payload.
pub const MAX_INLINE_PAYLOAD_BYTES: usize = 16 * 1024;

/// Between the task's name and an inline payload. Task names never hold it.
const SEPARATOR: u8 = b'\n';

/// An assignment node's data, read without copying the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignmentView<'data> {
    pub task: TaskId,
    /// The task's payload, if the master put it inline.
    pub payload: Option<&'data [u8]>,
}

impl<'data> AssignmentView<'data> {
    /// Reads an assignment node's data: the task's name, then, after a
    /// newline, the inline payload if any.
    pub fn decode(data: &'data [u8]) -> Result<AssignmentView<'data>, InvalidName> {
        let (name, payload) = match data.iter().position(|&byte| byte == SEPARATOR) {
            Some(at) => (&data[..at], Some(&data[at + 1..])),
            None => (data, None),
        };
        let name = std::str::from_utf8(name).map_err(|_| InvalidName {
            what: "assignment",
            name: String::from_utf8_lossy(name).into_owned(),
            reason: "the task name before the payload is not UTF-8".to_owned(),
        })?;
        Ok(AssignmentView {
            task: TaskId::parse(name)?,
            payload,
        })
    }
}

/// How an assignment node's data reads in logs, checks and tests: the
/// assigned task's name (an inline payload left out: what matters is who
/// runs what), or the data itself, lossily, when it names no task.
pub fn assignment_label(data: &[u8]) -> String {
    match AssignmentView::decode(data) {
        Ok(view) => view.task.as_str().to_owned(),
        Err(_) => String::from_utf8_lossy(data).into_owned(),
    }
}

/// The data of an assignment of `task`, with `payload` inline if given.
/// An inline payload must be at most [`MAX_INLINE_PAYLOAD_BYTES`].
pub fn encode_assignment(task: &TaskId, payload: Option<&[u8]>) -> Vec<u8> {
    let name = task.as_str().as_bytes();
    debug_assert!(
        !name.contains(&SEPARATOR),
        "task names never hold the separator"
    );
    match payload {
        None => name.to_vec(),
        Some(payload) => {
            assert!(
                payload.len() <= MAX_INLINE_PAYLOAD_BYTES,
                "an inline payload of {} bytes, over the {MAX_INLINE_PAYLOAD_BYTES}-byte limit",
                payload.len()
            );
            let mut data = Vec::with_capacity(name.len() + 1 + payload.len());
            data.extend_from_slice(name);
            data.push(SEPARATOR);
            data.extend_from_slice(payload);
            data
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(n: i32) -> TaskId {
        TaskId::from_sequence(n)
    }

    #[test]
    fn a_bare_name_is_the_founding_form() {
        let data = encode_assignment(&task(7), None);
        assert_eq!(data, task(7).as_str().as_bytes());
        let view = AssignmentView::decode(&data).expect("a bare name decodes");
        assert_eq!(view.task, task(7));
        assert_eq!(view.payload, None);
    }

    #[test]
    fn an_inline_payload_comes_back_byte_for_byte() {
        // Payload bytes may hold the separator themselves: only the first
        // one ends the name.
        let payload = b"{\"kind\":\"noop\"}\n\x00\xff\n";
        let data = encode_assignment(&task(42), Some(payload));
        let view = AssignmentView::decode(&data).expect("an inline assignment decodes");
        assert_eq!(view.task, task(42));
        assert_eq!(view.payload, Some(&payload[..]));
    }

    #[test]
    fn a_label_names_the_task_whichever_the_form() {
        let bare = encode_assignment(&task(5), None);
        let inline = encode_assignment(&task(5), Some(b"payload"));
        assert_eq!(assignment_label(&bare), task(5).as_str());
        assert_eq!(assignment_label(&inline), task(5).as_str());
        assert_eq!(assignment_label(b"garbage\nmore"), "garbage\nmore");
    }

    #[test]
    fn an_empty_inline_payload_is_not_a_missing_one() {
        let data = encode_assignment(&task(1), Some(b""));
        let view = AssignmentView::decode(&data).expect("decodes");
        assert_eq!(view.payload, Some(&b""[..]));
    }

    #[test]
    fn garbage_is_refused_naming_it() {
        for data in [
            &b"not-a-task"[..],
            b"",
            b"\nfoo",
            b"task-x\npayload",
            b"\xff\xfe",
        ] {
            assert!(
                AssignmentView::decode(data).is_err(),
                "{:?} decoded",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    #[should_panic(expected = "over the 16384-byte limit")]
    fn an_oversized_inline_payload_is_a_bug() {
        encode_assignment(&task(1), Some(&vec![0; MAX_INLINE_PAYLOAD_BYTES + 1]));
    }
}
