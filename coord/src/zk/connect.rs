//! Establishing a `zookeeper-client` session within the connect timeout,
//! and saying clearly why when it cannot be done.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client as zkc;

use super::config::{Server, Target, ZkConfig};
use super::errors::{OpContext, map_error};
use crate::error::{ZkError, ZkResult};

/// How long one TCP probe of a server may take when explaining a failure.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);
/// How long the whole explanation may take, on top of the connect timeout.
const DIAGNOSIS_TIMEOUT: Duration = Duration::from_millis(800);

/// Connects a client (re-attaching to `session` if given) and checks that
/// the chroot exists. Never takes much longer than the connect timeout.
pub(crate) async fn establish(
    config: &ZkConfig,
    target: &Target,
    session: Option<zkc::SessionInfo>,
) -> ZkResult<zkc::Client> {
    let mut connector = zkc::Client::connector().with_session_timeout(config.session_timeout());
    if let Some((user, password)) = &config.auth {
        connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
    }
    if config.keep_session_through_outages {
        connector = connector.with_server_expiry_only();
    }
    if let Some(session) = session {
        connector = connector.with_session(session);
    }
    // The client gives up on a first connection after about a session
    // timeout: while the connect timeout has time left, it tries again.
    let deadline = Instant::now().checked_add(config.connect_timeout());
    let client = loop {
        let left = deadline.map_or(Duration::MAX, |deadline| {
            deadline.saturating_duration_since(Instant::now())
        });
        match tokio::time::timeout(left, connector.clone().connect(&config.connect)).await {
            Ok(Ok(client)) => break client,
            Ok(Err(zkc::Error::Timeout)) if deadline.is_none_or(|at| Instant::now() < at) => {}
            Ok(Err(zkc::Error::Timeout)) | Err(_) => {
                return Err(unreachable_error(config, target).await);
            }
            Ok(Err(error)) => return Err(connect_error(error, config)),
        }
    };
    if let Some(chroot) = &target.chroot {
        check_chroot(&client, chroot, config).await?;
    }
    Ok(client)
}

fn connect_error(error: zkc::Error, config: &ZkConfig) -> ZkError {
    match error {
        zkc::Error::AuthFailed => ZkError::AuthFailed {
            reason: format!(
                "the server at {:?} refused the digest credentials of user {:?}",
                config.connect,
                config.auth.as_ref().map_or("", |(user, _)| user.as_str())
            ),
        },
        zkc::Error::SessionExpired => ZkError::SessionExpired,
        zkc::Error::BadArguments(what) => ZkError::BadArguments {
            reason: format!("connect string {:?}: {what}", config.connect),
        },
        other => ZkError::ConnectionLoss {
            reason: format!("could not connect to {:?}: {other}", config.connect),
        },
    }
}

async fn check_chroot(client: &zkc::Client, chroot: &str, config: &ZkConfig) -> ZkResult<()> {
    // With a chroot, "/" is the chroot node itself.
    let exists = tokio::time::timeout(config.connect_timeout(), client.check_stat("/")).await;
    match exists {
        Ok(Ok(Some(_))) => Ok(()),
        Ok(Ok(None)) => Err(ZkError::BadArguments {
            reason: format!(
                "chroot {chroot} of connect string {:?} does not exist; create it first",
                config.connect
            ),
        }),
        Ok(Err(error)) => Err(map_error(
            error,
            &OpContext::new("exists (chroot check)", chroot, None),
        )),
        Err(_) => Err(ZkError::OperationTimeout {
            reason: format!(
                "checking that chroot {chroot} exists took over {} ms",
                config.connect_timeout_ms
            ),
        }),
    }
}

/// The error for a connect that timed out, with what each server did.
async fn unreachable_error(config: &ZkConfig, target: &Target) -> ZkError {
    let servers = target.servers.clone();
    let probe = tokio::task::spawn_blocking(move || servers.iter().map(probe).collect::<Vec<_>>());
    let (findings, some_accepted) = match tokio::time::timeout(DIAGNOSIS_TIMEOUT, probe).await {
        Ok(Ok(findings)) => (
            findings
                .iter()
                .map(|(text, _)| text.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            findings.iter().any(|(_, accepted)| *accepted),
        ),
        _ => ("no server answered a TCP probe in time".to_owned(), false),
    };
    // A server that takes connections may well be healthy: a handshake
    // takes a round trip or two, and more while the server is busy.
    let too_short = if some_accepted && config.connect_timeout_ms < SHORT_CONNECT_TIMEOUT_MS {
        format!(
            "; a connect timeout of {} ms may be too short for a handshake",
            config.connect_timeout_ms
        )
    } else {
        String::new()
    };
    ZkError::ConnectionLoss {
        reason: format!(
            "no ZooKeeper session within {} ms for {:?}: {findings}{too_short}",
            config.connect_timeout_ms, config.connect
        ),
    }
}

/// Under this connect timeout, a server that accepts connections but
/// granted no session in time may just not have had the time.
const SHORT_CONNECT_TIMEOUT_MS: u64 = 1_000;

/// What a plain TCP connect to `server` shows, in words, and whether it
/// accepted the connection.
fn probe(server: &Server) -> (String, bool) {
    let addresses = match (server.host.as_str(), server.port).to_socket_addrs() {
        Ok(addresses) => addresses.collect::<Vec<_>>(),
        Err(error) => {
            return (
                format!("{server}: cannot resolve the host ({error})"),
                false,
            );
        }
    };
    let Some(address) = addresses.first() else {
        return (format!("{server}: the host resolves to no address"), false);
    };
    let connected = TcpStream::connect_timeout(address, PROBE_TIMEOUT);
    let text = match &connected {
        Ok(_) => format!(
            "{server}: accepts TCP connections but granted no session (starting, without \
             quorum, over maxClientCnxns connections from this host (60 by default), or not \
             ZooKeeper)"
        ),
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("{server}: connection refused (nothing listens there)")
        }
        Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
            format!(
                "{server}: no answer within {} ms",
                PROBE_TIMEOUT.as_millis()
            )
        }
        Err(error) => format!("{server}: {error}"),
    };
    (text, connected.is_ok())
}
