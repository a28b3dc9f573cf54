//! How a simulation is set up.

use crate::latency::Latency;

/// The knobs of one simulation. Two runs with equal configs and the same
/// driving code produce the same trace, byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Seeds every random choice: delays, tie-breaks between messages due at
    /// the same instant, the order of `get_children` replies, and which
    /// in-flight requests reach the server when a link fails.
    pub seed: u64,
    /// One-way delay of every message between a session and the server.
    pub latency: Latency,
    /// How long the server keeps a session whose link is down before it
    /// expires it (deleting its ephemerals).
    pub session_timeout_ms: u64,
    /// The largest `get_children` reply every session accepts, in bytes
    /// (see `zkdist_coord::MAX_REPLY_BYTES`, the default): a listing over
    /// it is refused and the session's connection dropped, as a client
    /// with that `jute.maxbuffer` does.
    pub max_reply_bytes: usize,
    /// Up to how many transactions behind the newest a read may be
    /// answered, as by a follower that has not applied them yet ("reads
    /// may be stale relative to other clients' writes"). Each read is
    /// answered as of a seeded zxid between the newest one its session has
    /// already heard of (a session never sees an older state after a newer
    /// one) and the newest applied; `sync` brings the session up to date.
    /// 0 answers every read from the newest state.
    pub follower_lag_txns: u32,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 0,
            latency: Latency::Zero,
            session_timeout_ms: 10_000,
            max_reply_bytes: zkdist_coord::MAX_REPLY_BYTES,
            follower_lag_txns: 0,
        }
    }
}
