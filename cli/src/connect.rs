//! Turning the connection flags into a live session.

use std::time::Duration;

use anyhow::{Context, bail};
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{ClientError, Coordinator, EventStream, Layout, MAX_ROOT_BYTES, ZkError};
use zkdist_master::MasterError;
use zkdist_worker::WorkerError;

use crate::args::ConnectArgs;

/// The layout under `--root`, or a clear error naming the root. The
/// server sees the root under the connect string's chroot, if any, so the
/// two are held together to what a root alone is: not in ZooKeeper's own
/// `/zookeeper` tree, and within [`MAX_ROOT_BYTES`], the room a worker's
/// completion keeps for its paths (past it, a result near its limit would
/// make a request no frame can carry, and the worker would stop on it).
pub fn layout(args: &ConnectArgs) -> anyhow::Result<Layout> {
    let layout = Layout::new(&args.root)
        .with_context(|| format!("invalid {} {:?}", args.root_name(), args.root))?;
    let chroot = config(args)?
        .chroot()
        .with_context(|| format!("invalid {} {:?}", args.zk_name(), args.zk))?
        .unwrap_or_default();
    if chroot == "/zookeeper" || chroot.starts_with("/zookeeper/") {
        bail!(
            "invalid {} {:?}: its chroot {chroot} is in `/zookeeper`, which is reserved by \
             ZooKeeper (zkdist's nodes would land there)",
            args.zk_name(),
            args.zk
        );
    }
    let together_bytes = chroot.len() + args.root.len();
    if together_bytes > MAX_ROOT_BYTES {
        bail!(
            "invalid {} {:?} with {} {:?}: the server sees the root under the chroot, \
             {together_bytes} bytes together, over the {MAX_ROOT_BYTES}-byte limit of a root",
            args.zk_name(),
            args.zk,
            args.root_name(),
            args.root
        );
    }
    Ok(layout)
}

pub fn config(args: &ConnectArgs) -> anyhow::Result<ZkConfig> {
    let mut config = ZkConfig::new(args.zk.clone())
        .with_session_timeout_ms(args.session_timeout_ms)
        .with_connect_timeout_ms(args.connect_timeout_ms)
        .with_max_reply_bytes(args.max_reply_bytes);
    if let Some(auth) = &args.auth {
        let Some((user, password)) = auth.split_once(':') else {
            bail!("{} must be USER:PASSWORD", args.auth_name());
        };
        config = config.with_digest_auth(user, password);
    }
    Ok(config)
}

/// Opens a session on the ensemble named by `--zk`.
pub async fn session(args: &ConnectArgs) -> anyhow::Result<(ZkSession, EventStream)> {
    session_with(&config(args)?, args).await
}

/// Opens a session with `config`, made from `args` (the error names the
/// ensemble as the user gave it).
pub async fn session_with(
    config: &ZkConfig,
    args: &ConnectArgs,
) -> anyhow::Result<(ZkSession, EventStream)> {
    ZkSession::connect(config)
        .await
        .with_context(|| format!("cannot open a ZooKeeper session on {}", args.zk_shown()))
}

/// How long a command whose work is done waits for the ensemble to
/// confirm its session's close. A close normally takes one round trip; an
/// ensemble that went away meanwhile would hold it until the client gives
/// the session up, up to some 1.4 session timeouts, in silence.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How [`close_when_done`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// The ensemble confirmed the close, or the session had ended already.
    Closed,
    /// No answer within the wait: the ensemble ends the session at its
    /// timeout.
    LeftToExpire,
}

/// Closes the session of a command whose work is done and said (its task
/// queued, its result or lookup printed), waiting at most `wait`. Past it,
/// the session is left for the ensemble to expire, which loses nothing:
/// no request of the command's is in flight, and it holds no ephemeral
/// node. Not for a close that settles a create in doubt: that one must be
/// waited for.
pub async fn close_when_done<C: Coordinator>(session: &C, wait: Duration) -> Closing {
    match tokio::time::timeout(wait, session.close()).await {
        Ok(_) => Closing::Closed,
        Err(_) => {
            tracing::warn!(
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "the ensemble has not confirmed the session's close; leaving the session \
                 to expire at its timeout (the command's work is done)"
            );
            Closing::LeftToExpire
        }
    }
}

/// Adds to an error that a node's ACL refused (`NoAuth`) what to do about
/// it: the nodes of a tree laid out with `--auth` are everyone's to read
/// and only that identity's to change.
pub fn explain_no_auth(error: anyhow::Error, args: &ConnectArgs) -> anyhow::Error {
    let Some(path) = refused_path(&error) else {
        return error;
    };
    let hint = match args.auth.as_deref().and_then(|auth| auth.split_once(':')) {
        None => format!(
            "not allowed to change {path} without the credentials that own {} \
             (pass them with --auth USER:PASSWORD; reading, as status does, needs none, \
             except what another client made readable to its own credentials alone)",
            args.root
        ),
        Some((user, _)) => format!(
            "the credentials of {} user {user:?} may not change {path}: the nodes \
             under {} belong to another identity, or the password is wrong",
            args.auth_name(),
            args.root
        ),
    };
    error.context(hint)
}

/// What a one-shot command's error adds where it says a session expired.
const SESSION_EXPIRED_HINT: &str = "a session ends as expired when a server expired it, or when \
    this client heard from no server for 1.4 session timeouts and gave it up: the ensemble out \
    of reach, or without a quorum";

/// Says, in an error that ends on a session's expiry, what that can mean:
/// the one-shot commands leave the client library to give a session up on
/// its own clock (see `ZkConfig::keep_session_through_outages`), which it
/// reports as the server's verdict, and the operator would otherwise look
/// for a cause on the servers while the ensemble was out of reach. The
/// text is what the user reads, so the text is what is looked at: a
/// `submit --lines` report carries its lines' causes as text.
pub fn explain_session_expired(error: anyhow::Error) -> anyhow::Error {
    let text = format!("{error:#}");
    if text.contains("session expired") {
        anyhow::anyhow!("{text} ({SESSION_EXPIRED_HINT})")
    } else {
        error
    }
}

/// Names where the root came from in an error about it. `ZKDIST_ROOT`,
/// when the root came from that variable, in an error that refuses the
/// root (a root nested in another deployment, say, which only the ensemble
/// can tell) or finds no layout there: the user may never have typed
/// `--root`. And the chroot, when the connect string has one, in an error
/// that finds no layout: the root the server looked at is under it.
pub fn explain_environment_root(error: anyhow::Error, args: &ConnectArgs) -> anyhow::Error {
    let no_layout = error
        .chain()
        .any(|cause| matches!(cause.downcast_ref(), Some(ClientError::NoLayout { .. })));
    let chroot = config(args)
        .ok()
        .and_then(|config| config.chroot().ok().flatten());
    let error = match chroot {
        Some(chroot) if no_layout => error.context(format!(
            "{} {:?} is inside the chroot of {} {:?}: the server looked at {chroot}{}",
            args.root_name(),
            args.root,
            args.zk_name(),
            args.zk,
            args.root
        )),
        _ => error,
    };
    if !args.from_env.root {
        return error;
    }
    let refuses_the_root = zk_errors(&error)
        .any(|zk| matches!(zk, ZkError::InvalidPath { path, .. } if *path == args.root));
    // The checks made before connecting name it already.
    if !(refuses_the_root || no_layout) || format!("{error:#}").contains("ZKDIST_ROOT") {
        return error;
    }
    error.context(format!(
        "ZKDIST_ROOT {:?} (the environment variable behind --root)",
        args.root
    ))
}

/// The path of the first `NoAuth` refusal in the error's chain, if any.
fn refused_path(error: &anyhow::Error) -> Option<String> {
    zk_errors(error).find_map(no_auth_path)
}

/// The ZooKeeper errors in the error's chain, whatever wraps them.
fn zk_errors(error: &anyhow::Error) -> impl Iterator<Item = &ZkError> {
    error.chain().filter_map(|cause| {
        if let Some(zk) = cause.downcast_ref::<ZkError>() {
            Some(zk)
        } else if let Some(ClientError::Zk(zk)) = cause.downcast_ref::<ClientError>() {
            Some(zk)
        } else if let Some(MasterError::Layout { error, .. } | MasterError::Request { error, .. }) =
            cause.downcast_ref::<MasterError>()
        {
            Some(error)
        } else if let Some(WorkerError::Layout { error, .. } | WorkerError::Request { error, .. }) =
            cause.downcast_ref::<WorkerError>()
        {
            Some(error)
        } else {
            None
        }
    })
}

fn no_auth_path(error: &ZkError) -> Option<String> {
    match error {
        ZkError::NoAuth { path } => Some(path.clone()),
        ZkError::Multi { error, .. } => no_auth_path(error),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;
    use zkdist_sim::{SimConfig, SimZk};

    use super::*;

    #[test]
    fn a_close_the_ensemble_does_not_answer_is_given_up_after_the_wait() {
        zkdist_sim::runtime::block_on(7, async {
            let sim = SimZk::start(SimConfig::default());
            let (held, _events) = sim.connect("held").await.expect("connects");
            let (answered, _events) = sim.connect("answered").await.expect("connects");
            sim.hold(held.session_id()).await;
            let wait = Duration::from_millis(1_500);
            let started = tokio::time::Instant::now();
            assert_eq!(close_when_done(&held, wait).await, Closing::LeftToExpire);
            assert_eq!(started.elapsed(), wait);
            let started = tokio::time::Instant::now();
            assert_eq!(close_when_done(&answered, wait).await, Closing::Closed);
            assert!(started.elapsed() < wait);
        });
    }

    fn args(auth: Option<&str>) -> ConnectArgs {
        ConnectArgs {
            zk: "127.0.0.1:2181".into(),
            root: "/r".into(),
            session_timeout_ms: 10_000,
            connect_timeout_ms: 10_000,
            auth: auth.map(str::to_owned),
            max_reply_bytes: zkdist_coord::MAX_REPLY_BYTES,
            from_env: crate::origin::FromEnvironment::default(),
        }
    }

    fn refused(path: &str) -> anyhow::Error {
        Err::<(), _>(ClientError::Zk(ZkError::NoAuth { path: path.into() }))
            .context("cannot submit the task")
            .unwrap_err()
    }

    #[test]
    fn a_refused_root_from_the_environment_names_the_variable() {
        let refusal = |path: &str| {
            Err::<(), _>(ClientError::Zk(ZkError::InvalidPath {
                path: path.into(),
                reason: "not usable as the zkdist root: it lies under `workers`".into(),
            }))
            .context("cannot submit the task")
            .unwrap_err()
        };
        let mut from_env = args(None);
        from_env.from_env.root = true;
        let shown = format!("{:#}", explain_environment_root(refusal("/r"), &from_env));
        assert!(
            shown.starts_with(
                "ZKDIST_ROOT \"/r\" (the environment variable behind --root): \
                 cannot submit the task: "
            ),
            "{shown}"
        );
        // Typed as --root, or about another path: left as it was.
        let typed = format!("{:#}", explain_environment_root(refusal("/r"), &args(None)));
        assert!(typed.starts_with("cannot submit the task: "), "{typed}");
        let other = format!("{:#}", explain_environment_root(refusal("/s"), &from_env));
        assert!(other.starts_with("cannot submit the task: "), "{other}");
        let worker = anyhow::Error::new(WorkerError::Layout {
            root: "/r".into(),
            error: ZkError::InvalidPath {
                path: "/r".into(),
                reason: "nested".into(),
            },
        });
        let shown = format!("{:#}", explain_environment_root(worker, &from_env));
        assert!(shown.starts_with("ZKDIST_ROOT \"/r\""), "{shown}");
        // Named once, not again.
        let named = refusal("/r").context("invalid ZKDIST_ROOT \"/r\"");
        let shown = format!("{:#}", explain_environment_root(named, &from_env));
        assert_eq!(shown.matches("ZKDIST_ROOT").count(), 1, "{shown}");
    }

    #[test]
    fn no_layout_names_the_chroot_and_the_variable_behind_the_root() {
        let no_layout = || {
            Err::<(), _>(ClientError::NoLayout { root: "/r".into() })
                .context("cannot read the status")
                .unwrap_err()
        };
        let shown =
            |error, args: &ConnectArgs| format!("{:#}", explain_environment_root(error, args));
        // Typed, no chroot: left as it was.
        assert!(shown(no_layout(), &args(None)).starts_with("cannot read the status: "));
        // Under a chroot, the path the server looked at.
        let mut chrooted = args(None);
        chrooted.zk = "127.0.0.1:2181/c".into();
        assert!(
            shown(no_layout(), &chrooted).starts_with(
                "--root \"/r\" is inside the chroot of --zk \"127.0.0.1:2181/c\": the server \
                 looked at /c/r: cannot read the status: no zkdist layout at /r"
            ),
            "{}",
            shown(no_layout(), &chrooted)
        );
        // From the environment: the variable, once.
        let mut from_env = args(None);
        from_env.from_env.root = true;
        assert!(
            shown(no_layout(), &from_env).starts_with(
                "ZKDIST_ROOT \"/r\" (the environment variable behind --root): cannot read"
            ),
            "{}",
            shown(no_layout(), &from_env)
        );
        chrooted.from_env.root = true;
        let both = shown(no_layout(), &chrooted);
        assert!(
            both.starts_with("ZKDIST_ROOT \"/r\" is inside the chroot"),
            "{both}"
        );
        assert_eq!(both.matches("ZKDIST_ROOT").count(), 1, "{both}");
        // Another error under a chroot: no word of it.
        assert!(shown(refused("/c/r"), &chrooted).starts_with("cannot submit the task: "));
    }

    #[test]
    fn a_refusal_says_which_credentials_are_missing() {
        let shown = format!(
            "{:#}",
            explain_no_auth(refused("/r/tasks/task-"), &args(None))
        );
        for needle in [
            "not allowed to change /r/tasks/task- without the credentials that own /r",
            "--auth USER:PASSWORD",
            "cannot submit the task: not authorised for /r/tasks/task-",
        ] {
            assert!(shown.contains(needle), "{needle:?} not in {shown:?}");
        }
        let multi = anyhow::Error::new(ZkError::Multi {
            index: 1,
            error: Box::new(ZkError::NoAuth {
                path: "/r/assignments/w".into(),
            }),
        });
        let shown = format!("{:#}", explain_no_auth(multi, &args(Some("bob:pw"))));
        assert!(
            shown.starts_with(
                "the credentials of --auth user \"bob\" may not change /r/assignments/w"
            ),
            "{shown}"
        );
        assert!(
            !shown.contains("pw"),
            "the password is never shown: {shown}"
        );
    }

    #[test]
    fn a_chroot_is_held_to_what_a_root_is() {
        let mut connect = args(None);
        for zk in ["h:2181/zookeeper", "h:2181/zookeeper/quota"] {
            connect.zk = zk.into();
            let shown = format!("{:#}", layout(&connect).unwrap_err());
            assert!(shown.contains("reserved by ZooKeeper"), "{shown}");
        }
        for zk in [
            "h:2181",
            "h:2181/",
            "h:2181/zookeeperish",
            "h:2181/apps/zookeeper",
        ] {
            connect.zk = zk.into();
            assert!(layout(&connect).is_ok(), "{zk}");
        }
        // Chroot and root are held together to a root's length.
        connect.zk = format!("h:2181/{}", "c".repeat(MAX_ROOT_BYTES - 3));
        assert_eq!(connect.root, "/r");
        assert!(layout(&connect).is_ok());
        connect.zk.push('c');
        let shown = format!("{:#}", layout(&connect).unwrap_err());
        assert!(
            shown.contains(&format!("over the {MAX_ROOT_BYTES}-byte limit")),
            "{shown}"
        );
    }

    #[test]
    fn other_errors_are_left_as_they_are() {
        let error = anyhow::Error::new(ZkError::NoNode { path: "/r".into() });
        let shown = format!("{:#}", explain_no_auth(error, &args(None)));
        assert_eq!(shown, "no node /r");
    }

    #[test]
    fn an_error_that_says_session_expired_says_what_it_can_mean() {
        let expired = anyhow::Error::new(ZkError::SessionExpired).context("cannot read the status");
        let explained = format!("{:#}", explain_session_expired(expired));
        assert!(
            explained.starts_with("cannot read the status: session expired ("),
            "{explained}"
        );
        assert!(explained.contains("heard from no server"), "{explained}");
        let other = anyhow::Error::new(ZkError::ConnectionLoss {
            reason: "reset".into(),
        });
        let untouched = format!("{:#}", explain_session_expired(other));
        assert!(!untouched.contains("heard from no server"), "{untouched}");
    }
}
