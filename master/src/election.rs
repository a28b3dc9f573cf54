//! Who leads: the session that holds the ephemeral `master` node.

use zkdist_coord::{Coordinator, CreateMode, Layout, ZkError, ZkResult};

/// Tries to become the master by creating the ephemeral `master` node (its
/// data is the session id). Returns false when another session holds it.
/// Creates the layout first if it is missing.
pub async fn claim_master<C: Coordinator>(zk: &C, layout: &Layout) -> ZkResult<bool> {
    let data = zk.session_id().to_string();
    for attempt in 0..2 {
        match zk
            .create(&layout.master(), data.as_bytes(), CreateMode::Ephemeral)
            .await
        {
            Ok(_) => return Ok(true),
            Err(ZkError::NodeExists { .. }) => return Ok(false),
            Err(ZkError::NoNode { .. }) if attempt == 0 => layout.ensure_layout(zk).await?,
            Err(error) => return Err(error),
        }
    }
    unreachable!("the second attempt returns")
}
