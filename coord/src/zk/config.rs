//! How to reach an ensemble: the connect string, timeouts and credentials,
//! checked before any socket is opened so that a typo fails at once with an
//! error that names it.

use std::time::Duration;

use crate::error::{ZkError, ZkResult};
use crate::path;

/// Where and how a [`super::ZkSession`] connects.
#[derive(Clone, PartialEq, Eq)]
pub struct ZkConfig {
    /// ZooKeeper's connect string: `host:port` pairs separated by commas,
    /// optionally followed by a chroot, e.g. `h1:2181,h2:2181/zkdist`. A
    /// missing port means 2181; IPv6 hosts go in brackets (`[::1]:2181`).
    pub connect: String,
    /// The session timeout to ask for; the server clamps it into its
    /// `[minSessionTimeout, maxSessionTimeout]`.
    pub session_timeout_ms: u64,
    /// How long `connect` may take before it gives up and says why.
    pub connect_timeout_ms: u64,
    /// Digest credentials `(user, password)`. With them, every node this
    /// session creates gets the ACL `[digest:USER:HASH -> ALL, world:anyone
    /// -> READ]`: sessions authenticated as the same user may change it,
    /// everyone may read it. Without them, nodes are open to everyone
    /// (`OPEN_ACL_UNSAFE`).
    pub auth: Option<(String, String)>,
    /// The largest `get_children` reply this session accepts, in bytes
    /// (see [`crate::MAX_REPLY_BYTES`], the default). The server sends
    /// larger ones; raising it lets a master list, and start on, a
    /// `tasks/` directory of more than some 29,000 tasks.
    pub max_reply_bytes: usize,
    /// Whether the client keeps an established session for as long as no
    /// server says it expired. Without it, the client declares the session
    /// expired on its own clock once it has heard nothing for some 1.4
    /// session timeouts, whatever the servers think: during a loss of
    /// quorum, which expires nothing, every session would be given up.
    /// With it, a request made while no server answers waits for the
    /// reconnection, however long: a caller that must not wait bounds it
    /// itself. The long-running roles set it; a one-shot command, which
    /// would rather fail than wait out an outage, does not.
    pub keep_session_through_outages: bool,
}

impl ZkConfig {
    /// A configuration with a 10 s session timeout, a 10 s connect timeout
    /// and no credentials.
    pub fn new(connect: impl Into<String>) -> ZkConfig {
        ZkConfig {
            connect: connect.into(),
            session_timeout_ms: 10_000,
            connect_timeout_ms: 10_000,
            auth: None,
            max_reply_bytes: crate::MAX_REPLY_BYTES,
            keep_session_through_outages: false,
        }
    }

    pub fn with_session_timeout_ms(mut self, session_timeout_ms: u64) -> ZkConfig {
        self.session_timeout_ms = session_timeout_ms;
        self
    }

    pub fn with_connect_timeout_ms(mut self, connect_timeout_ms: u64) -> ZkConfig {
        self.connect_timeout_ms = connect_timeout_ms;
        self
    }

    /// Sets [`ZkConfig::keep_session_through_outages`].
    pub fn with_session_kept_through_outages(mut self) -> ZkConfig {
        self.keep_session_through_outages = true;
        self
    }

    pub fn with_max_reply_bytes(mut self, max_reply_bytes: usize) -> ZkConfig {
        self.max_reply_bytes = max_reply_bytes;
        self
    }

    pub fn with_digest_auth(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> ZkConfig {
        self.auth = Some((user.into(), password.into()));
        self
    }

    pub(crate) fn session_timeout(&self) -> Duration {
        Duration::from_millis(self.session_timeout_ms)
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// The connect string's chroot, which the server puts before every
    /// path (`None` for none, or `/`); an error names what is malformed.
    pub fn chroot(&self) -> ZkResult<Option<String>> {
        parse_connect_string(&self.connect).map(|target| target.chroot)
    }

    /// Checks every field and splits the connect string.
    pub(crate) fn validate(&self) -> ZkResult<Target> {
        if self.session_timeout_ms == 0 {
            return Err(bad(
                "session_timeout_ms is 0; ask for at least the server's minSessionTimeout".into(),
            ));
        }
        if self.session_timeout_ms > i32::MAX as u64 {
            return Err(bad(format!(
                "session_timeout_ms {} does not fit ZooKeeper's 32-bit timeout",
                self.session_timeout_ms
            )));
        }
        if self.max_reply_bytes < crate::MIN_REPLY_BYTES {
            return Err(bad(format!(
                "max_reply_bytes {} is under {}, a Java client's default: the limit may only be raised",
                self.max_reply_bytes,
                crate::MIN_REPLY_BYTES
            )));
        }
        if self.connect_timeout_ms == 0 {
            return Err(bad(
                "connect_timeout_ms is 0: connect would give up before trying".into(),
            ));
        }
        if let Some((user, _)) = &self.auth {
            if user.is_empty() {
                return Err(bad("digest auth user is empty".into()));
            }
            if user.contains(':') {
                return Err(bad(format!(
                    "digest auth user {user:?} contains ':', which separates user from password"
                )));
            }
        }
        parse_connect_string(&self.connect)
    }
}

/// The password never reaches a log.
impl std::fmt::Debug for ZkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkConfig")
            .field("connect", &self.connect)
            .field("session_timeout_ms", &self.session_timeout_ms)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("max_reply_bytes", &self.max_reply_bytes)
            .field(
                "keep_session_through_outages",
                &self.keep_session_through_outages,
            )
            .field(
                "auth",
                &self.auth.as_ref().map(|(user, _)| (user, "<redacted>")),
            )
            .finish()
    }
}

/// A connect string, split and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub servers: Vec<Server>,
    /// `None` for no chroot (or `/`).
    pub chroot: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

fn bad(reason: String) -> ZkError {
    ZkError::BadArguments { reason }
}

/// Splits `h1:p1,h2:p2/chroot` the way ZooKeeper's `ConnectStringParser`
/// does, but refuses what it would silently misread.
pub(crate) fn parse_connect_string(connect: &str) -> ZkResult<Target> {
    let malformed = |why: String| bad(format!("malformed connect string {connect:?}: {why}"));
    if connect.trim().is_empty() {
        return Err(malformed(
            "it is empty; expected host:port[,host:port...][/chroot]".into(),
        ));
    }
    if connect.chars().any(char::is_whitespace) {
        return Err(malformed("it contains whitespace".into()));
    }
    // A URL's scheme would otherwise be read as a host and a chroot
    // (`http:` and `//host:port`), and named as a bad chroot.
    if let Some((scheme, _)) = connect.split_once("://") {
        return Err(malformed(format!(
            "it starts with a URL scheme ({scheme}://); expected host:port[,host:port...][/chroot]"
        )));
    }
    let (hosts, chroot) = match connect.find('/') {
        Some(i) => (&connect[..i], Some(&connect[i..])),
        None => (connect, None),
    };
    let chroot = match chroot {
        None | Some("/") => None,
        Some(chroot) => {
            path::validate_path(chroot).map_err(|e| malformed(format!("bad chroot: {e}")))?;
            Some(chroot.to_owned())
        }
    };
    let mut servers = Vec::new();
    for (index, entry) in hosts.split(',').enumerate() {
        let server = parse_server(entry)
            .map_err(|why| malformed(format!("server {} {entry:?}: {why}", index + 1)))?;
        servers.push(server);
    }
    Ok(Target { servers, chroot })
}

fn parse_server(entry: &str) -> Result<Server, String> {
    if entry.is_empty() {
        return Err("empty entry (two commas in a row, or a trailing comma?)".into());
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err("'[' without ']' around an IPv6 address".into());
        };
        let host = &rest[..end];
        let after = &rest[end + 1..];
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("expected ':' after ']'")?),
        };
        (host, port)
    } else {
        match entry.rsplit_once(':') {
            Some((host, port)) => {
                if host.contains(':') {
                    return Err(
                        "an IPv6 address must be written in brackets, e.g. [::1]:2181".into(),
                    );
                }
                (host, Some(port))
            }
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if let Some(c) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':')))
    {
        return Err(format!("host {host:?} contains {c:?}"));
    }
    let port = match port {
        None => 2181,
        Some("") => return Err("':' without a port".into()),
        Some(p) => match p.parse::<u16>() {
            Ok(0) => return Err("port 0".into()),
            Ok(port) => port,
            Err(_) => return Err(format!("port {p:?} is not a number in 1..=65535")),
        },
    };
    Ok(Server {
        host: host.to_owned(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(host: &str, port: u16) -> Server {
        Server {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn parses_servers_and_chroot() {
        let target = parse_connect_string("a:1,b.example:2,[::1]:3,c/zk/root").unwrap();
        assert_eq!(
            target.servers,
            vec![
                server("a", 1),
                server("b.example", 2),
                server("::1", 3),
                server("c", 2181)
            ]
        );
        assert_eq!(target.chroot.as_deref(), Some("/zk/root"));
        assert_eq!(parse_connect_string("a:1/").unwrap().chroot, None);
        assert_eq!(server("::1", 3).to_string(), "[::1]:3");
    }

    #[test]
    fn refuses_malformed_strings_naming_the_fault() {
        for (connect, needle) in [
            ("", "empty"),
            ("a:1,,b:2", "server 2"),
            ("a:1,", "server 2"),
            ("a:x", "\"x\" is not a number"),
            ("a:0", "port 0"),
            ("a:70000", "not a number"),
            (":1", "no host"),
            ("a:", "without a port"),
            ("::1:2", "brackets"),
            ("[::1:2", "without ']'"),
            ("a:1/b/", "bad chroot"),
            ("a:1/b//c", "bad chroot"),
            ("a b:1", "whitespace"),
            ("a;b:1", "contains ';'"),
            ("http://127.0.0.1:2181", "URL scheme (http://)"),
            ("zk://a:1,b:2/app", "URL scheme (zk://)"),
        ] {
            match parse_connect_string(connect) {
                Err(ZkError::BadArguments { reason }) => {
                    assert!(reason.contains(needle), "{connect:?}: {reason}");
                    assert!(reason.contains(&format!("{connect:?}")), "{reason}");
                }
                other => panic!("{connect:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn refuses_bad_timeouts_and_users() {
        let ok = ZkConfig::new("a:1");
        assert!(ok.validate().is_ok());
        assert!(ok.clone().with_session_timeout_ms(0).validate().is_err());
        assert!(ok.clone().with_connect_timeout_ms(0).validate().is_err());
        assert!(ok.clone().with_digest_auth("", "p").validate().is_err());
        assert!(ok.clone().with_digest_auth("a:b", "p").validate().is_err());
        match ok.clone().with_max_reply_bytes(100).validate() {
            Err(ZkError::BadArguments { reason }) => {
                assert!(reason.contains("max_reply_bytes 100"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(
            ok.clone()
                .with_max_reply_bytes(crate::MIN_REPLY_BYTES - 1)
                .validate()
                .is_err()
        );
        assert!(
            ok.clone()
                .with_max_reply_bytes(64 * crate::MIN_REPLY_BYTES)
                .validate()
                .is_ok()
        );
        assert!(ok.with_digest_auth("user", "p:w").validate().is_ok());
    }

    #[test]
    fn debug_hides_the_password() {
        let config = ZkConfig::new("a:1").with_digest_auth("user", "secret");
        let shown = format!("{config:?}");
        assert!(
            shown.contains("user") && !shown.contains("secret"),
            "{shown}"
        );
    }
}
