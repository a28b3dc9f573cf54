//! The unit tests of the logic zkdist added to its vendored copy of the
//! ZooKeeper client (`vendor/zookeeper-client`, see its `PATCHES.md`). That
//! crate is built as a dependency, not tested as a member: its upstream
//! unit tests need containers this project does not use. The modules
//! zkdist wrote there depend on nothing of the crate's, so they are
//! compiled here too, tests and all. They keep the vendored crate's
//! formatting (its own `.rustfmt.toml`), so the workspace's `cargo fmt`
//! leaves them alone.

#[rustfmt::skip]
#[path = "../../vendor/zookeeper-client/src/session/attempts.rs"]
mod attempts;
