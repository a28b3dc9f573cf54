//! Turning the connection flags into a live session.

use anyhow::{Context, bail};
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{EventStream, Layout};

use crate::args::ConnectArgs;

/// The layout under `--root`, or a clear error naming the root.
pub fn layout(args: &ConnectArgs) -> anyhow::Result<Layout> {
    Layout::new(&args.root).with_context(|| format!("invalid --root {:?}", args.root))
}

pub fn config(args: &ConnectArgs) -> anyhow::Result<ZkConfig> {
    let mut config = ZkConfig::new(args.zk.clone())
        .with_session_timeout_ms(args.session_timeout_ms)
        .with_connect_timeout_ms(args.connect_timeout_ms);
    if let Some(auth) = &args.auth {
        let Some((user, password)) = auth.split_once(':') else {
            bail!("--auth must be USER:PASSWORD");
        };
        config = config.with_digest_auth(user, password);
    }
    Ok(config)
}

/// Opens a session on the ensemble named by `--zk`.
pub async fn session(args: &ConnectArgs) -> anyhow::Result<(ZkSession, EventStream)> {
    let config = config(args)?;
    ZkSession::connect(&config)
        .await
        .with_context(|| format!("cannot open a ZooKeeper session on {:?}", args.zk))
}
