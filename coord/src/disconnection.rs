//! How long a session may stay disconnected before its holder must act as
//! if it had expired.
//!
//! A client cut off from its ensemble hears nothing from the server, so it
//! learns that its session expired only when it reconnects; the server may
//! have expired it long before and let another process take over what the
//! session held (a worker's task, say). Work that the session's life
//! licenses must therefore stop by a deadline the client keeps by itself,
//! counted from the `Disconnected` event. Curator's "lost" state is such a
//! deadline, at a whole session timeout by default, which comes after the
//! server's expiry; this one comes before it.
//!
//! It assumes the client notices the outage: a link that fails one way
//! only, with the server's watch events still reaching the client while
//! the client's pings are lost, keeps the client connected until it learns
//! of the expiry. A worker watches only its own assignment, so it hears
//! nearly nothing unprompted and notices such a link as any other.

/// The grace of a session with a session timeout of `session_timeout_ms`:
/// from a `Disconnected` event on, the server cannot have expired the
/// session for at least this long.
///
/// The bound comes from how the real client (`zookeeper-client`, as zkdist
/// configures it: no connection timeout of its own) watches its link. It
/// ticks every twentieth of the timeout `T`, pings after 3 ticks without
/// sending, and declares the connection lost after 8 ticks without hearing
/// anything. So the `Disconnected` event comes at most 9 ticks (0.45 T)
/// after the last byte received, while the server last heard the client at
/// most one ping interval (4 ticks, 0.2 T) before that byte, plus a round
/// trip. The server expires a session `T` after it last heard it, so no
/// earlier than 0.35 T after the event, less a round trip. A quarter of
/// `T` leaves a tenth of it for the round trip and for the holder to
/// notice; an outage the client detects at once (a reset connection) only
/// leaves more.
///
/// The simulator reports a disconnection at once, which allows a whole
/// `T`; it uses the same quarter, so that a simulated worker gives up at
/// the point of an outage a real one does.
pub const fn disconnected_grace_ms(session_timeout_ms: u64) -> u64 {
    session_timeout_ms / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's own figures, in ticks of a twentieth of the timeout:
    /// the grace must end before the earliest expiry, with room to spare.
    #[test]
    fn the_grace_ends_before_the_earliest_expiry_the_client_allows() {
        for session_timeout_ms in [2_000_u64, 4_000, 10_000, 30_000, 40_000] {
            let tick_ms = session_timeout_ms / 20;
            let detection_ms = 9 * tick_ms;
            let ping_interval_ms = 4 * tick_ms;
            let earliest_expiry_after_event_ms =
                session_timeout_ms - detection_ms - ping_interval_ms;
            let grace_ms = disconnected_grace_ms(session_timeout_ms);
            assert!(grace_ms > 0, "{session_timeout_ms}");
            assert!(
                grace_ms + session_timeout_ms / 10 <= earliest_expiry_after_event_ms,
                "timeout {session_timeout_ms} ms: grace {grace_ms} ms leaves less than a tenth \
                 before the earliest expiry, {earliest_expiry_after_event_ms} ms after the event"
            );
        }
    }
}
