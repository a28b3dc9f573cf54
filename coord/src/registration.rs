//! What a worker writes into its registration node (`workers/<worker>`):
//! the assignment formats it reads, so that a master puts a payload inline
//! (see [`crate::assignment`]) only for a worker that can read it.
//!
//! Workers older than the inline format register with empty data, and read
//! an assignment's whole data as a task name: given `task-...` newline
//! payload they find no such task and free themselves, and the task would
//! never run. During a rolling upgrade both kinds serve one master, so the
//! master asks each worker what it reads instead of assuming.
//!
//! The data is a list of feature names separated by ASCII whitespace;
//! unknown names are ignored, so later features can be added without
//! breaking older masters.

/// The feature of a worker that reads inline payloads.
pub const INLINE_PAYLOAD_FEATURE: &str = "inline-payload";

/// The registration data this build's workers write.
pub fn registration_data() -> &'static [u8] {
    INLINE_PAYLOAD_FEATURE.as_bytes()
}

/// Whether a worker whose registration node holds `data` reads inline
/// payloads. Empty data (a worker older than the format) does not.
pub fn reads_inline_payloads(data: &[u8]) -> bool {
    data.split(u8::is_ascii_whitespace)
        .any(|feature| feature == INLINE_PAYLOAD_FEATURE.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_are_read_by_name() {
        assert!(reads_inline_payloads(registration_data()));
        assert!(reads_inline_payloads(b"future-thing inline-payload\n"));
        assert!(!reads_inline_payloads(b""));
        assert!(!reads_inline_payloads(b"inline-payloads"));
        assert!(!reads_inline_payloads(b"inline"));
        assert!(!reads_inline_payloads(b"\xff\xfe"));
    }
}
