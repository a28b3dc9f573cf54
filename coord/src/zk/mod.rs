//! The [`Coordinator`](crate::Coordinator) on a real ZooKeeper ensemble,
//! built on the `zookeeper-client` crate (feature `real`, on by default).
//!
//! - `config`: [`ZkConfig`], the connect string and its checks;
//! - `acl`: the ACL of the nodes a session creates, with and without
//!   credentials;
//! - `connect`: establishing a session within the connect timeout, and
//!   explaining why not;
//! - `ops`: one trait request, checked and run on the client (a `sync`
//!   adds a refused write, since the 3.8 leader serves a sync as a read);
//! - `errors`: the client's errors as [`ZkError`](crate::ZkError)s naming
//!   their path;
//! - `watches`: one-shot watches turned into ZooKeeper's one event per
//!   change, node and session;
//! - `persistent`: persistent watches (`add_watch`), one event per change
//!   whatever number of watchers it fires, and the 3.8 server's one watch
//!   mode per node worked around;
//! - `pump`: the session's actor, which keeps requests, replies, watch
//!   events and session states in server order on one stream;
//! - `session`: [`ZkSession`] itself; `expire`: ending a session from a
//!   second client, for tests and fault drills;
//! - [`testing`]: what the real-server tests of every crate share.

mod acl;
mod config;
mod connect;
mod errors;
mod expire;
mod ops;
mod persistent;
mod pump;
mod session;
pub mod testing;
mod watches;

pub use config::ZkConfig;
pub use session::ZkSession;
