//! A loopback TCP proxy that a test can block: the link between one client
//! and the ensemble, cut and restored at will. Blocking closes the open
//! connections and refuses new ones (accepted, then closed at once), as a
//! partition that the client notices. Silencing keeps the connections open
//! but swallows every byte both ways, as a server that hangs or a network
//! that drops packets: only the client's own timeout notices. Deafening
//! swallows only what the server sends: the server hears the client (its
//! session stays alive) while the client hears nothing. Holding requests
//! keeps back what a client sends once its connection's handshake has
//! passed, until released: requests in flight, as long as the test likes.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

struct Shared {
    upstream: String,
    blocked: AtomicBool,
    silent: AtomicBool,
    deaf: AtomicBool,
    holding: AtomicBool,
    stopped: AtomicBool,
    /// Both ends of every proxied connection, to cut them.
    connections: Mutex<Vec<TcpStream>>,
    /// What each connection's client sent while requests were held, with
    /// the stream to the server it is for.
    held: Mutex<Vec<Held>>,
}

/// Bytes a client sent that the proxy keeps back from the server.
struct Held {
    to_server: TcpStream,
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Shared {
    fn cut_all(&self) {
        let connections = std::mem::take(&mut *self.connections.lock().expect("proxy lock"));
        for stream in connections {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// A proxy from `127.0.0.1:<port>` to one upstream server.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a proxy port");
        let port = listener.local_addr().expect("proxy address").port();
        let shared = Arc::new(Shared {
            upstream: upstream.to_owned(),
            blocked: AtomicBool::new(false),
            silent: AtomicBool::new(false),
            deaf: AtomicBool::new(false),
            holding: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            connections: Mutex::new(Vec::new()),
            held: Mutex::new(Vec::new()),
        });
        let accepting = Arc::clone(&shared);
        thread::spawn(move || accept_loop(listener, accepting));
        Proxy { port, shared }
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Cuts every connection and refuses new ones until [`Proxy::unblock`].
    pub fn block(&self) {
        self.shared.blocked.store(true, Ordering::SeqCst);
        self.shared.cut_all();
    }

    pub fn unblock(&self) {
        self.shared.blocked.store(false, Ordering::SeqCst);
    }

    /// Swallows everything sent either way, keeping the connections open,
    /// until [`Proxy::unsilence`]. What was swallowed is lost.
    pub fn silence(&self) {
        self.shared.silent.store(true, Ordering::SeqCst);
    }

    pub fn unsilence(&self) {
        self.shared.silent.store(false, Ordering::SeqCst);
    }

    /// Swallows everything the server sends, keeping the connections open
    /// and passing on what the client sends. What was swallowed is lost.
    pub fn deafen(&self) {
        self.shared.deaf.store(true, Ordering::SeqCst);
    }

    pub fn undeafen(&self) {
        self.shared.deaf.store(false, Ordering::SeqCst);
    }

    /// Keeps back, until [`Proxy::release`], what clients send on
    /// connections whose handshake has passed: the server sees none of
    /// their requests, and the connections stay open. What a connection
    /// held is lost if it closes first (a client that hears nothing gives
    /// up on its connection after some 2/5 of its session timeout).
    pub fn hold_requests(&self) {
        self.shared.holding.store(true, Ordering::SeqCst);
    }

    /// How many bytes are held back now.
    pub fn held_bytes(&self) -> usize {
        let held = self.shared.held.lock().expect("proxy lock");
        held.iter()
            .map(|connection| connection.bytes.lock().expect("proxy lock").len())
            .sum()
    }

    /// Delivers what was held, in order, and holds nothing more.
    pub fn release(&self) {
        // First, so that what a client sends from now on goes out behind
        // what was held (a copying thread flushes the held bytes first).
        self.shared.holding.store(false, Ordering::SeqCst);
        let held = self.shared.held.lock().expect("proxy lock");
        for connection in held.iter() {
            // Under the connection's lock, so that nothing the client
            // sends next can overtake what was held.
            let mut bytes = connection.bytes.lock().expect("proxy lock");
            let _ = (&connection.to_server).write_all(&bytes);
            bytes.clear();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.cut_all();
        // Wake the accept loop so that it sees `stopped` and exits.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        if shared.blocked.load(Ordering::SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(server) = TcpStream::connect(&shared.upstream) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
            shared
                .connections
                .lock()
                .expect("proxy lock")
                .extend([c, s]);
        }
        pump_both_ways(client, server, &shared);
    }
}

fn pump_both_ways(client: TcpStream, server: TcpStream, shared: &Arc<Shared>) {
    let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let Ok(to_server) = server.try_clone() else {
        return;
    };
    let held = Arc::new(Mutex::new(Vec::new()));
    shared.held.lock().expect("proxy lock").push(Held {
        to_server,
        bytes: Arc::clone(&held),
    });
    let replies = Arc::new(AtomicUsize::new(0));
    let upward = Direction::Upward {
        replies: Arc::clone(&replies),
        held,
    };
    let downward = Direction::Downward { replies };
    let (up_shared, down_shared) = (Arc::clone(shared), Arc::clone(shared));
    thread::spawn(move || copy_then_close(client_reader, server, &up_shared, &upward));
    thread::spawn(move || copy_then_close(server_reader, client, &down_shared, &downward));
}

/// Which way a copying thread carries one connection's bytes.
enum Direction {
    /// Client to server. Once the handshake's replies came back, bytes go
    /// to `held` while the proxy holds requests.
    Upward {
        replies: Arc<AtomicUsize>,
        held: Arc<Mutex<Vec<u8>>>,
    },
    /// Server to client; counts in `replies` the reads it passed on.
    Downward { replies: Arc<AtomicUsize> },
}

/// The server's replies that make a connection's handshake: the connect
/// response, and the answer to the ping the client sends only once it has
/// that response (its connect completes with the ping's answer, to learn
/// early of an authentication the server refuses). Counted in reads, which
/// holds for a new session without credentials; a handshake that also
/// carries credentials or re-registers watches has more replies, which
/// may come in more reads than these, and would be held.
const HANDSHAKE_REPLIES: usize = 2;

fn copy_then_close(mut from: TcpStream, mut to: TcpStream, shared: &Shared, direction: &Direction) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if shared.silent.load(Ordering::SeqCst) {
            continue;
        }
        let written = match direction {
            Direction::Upward { replies, held } => {
                let mut held = held.lock().expect("proxy lock");
                let handshake_passed = replies.load(Ordering::SeqCst) >= HANDSHAKE_REPLIES;
                if handshake_passed && shared.holding.load(Ordering::SeqCst) {
                    held.extend_from_slice(&buffer[..read]);
                    Ok(())
                } else {
                    to.write_all(&held)
                        .and_then(|()| to.write_all(&buffer[..read]))
                        .map(|()| held.clear())
                }
            }
            Direction::Downward { replies } => {
                if shared.deaf.load(Ordering::SeqCst) {
                    continue;
                }
                // Counted before it is passed on: the client may answer
                // the handshake's last reply with a request at once.
                replies.fetch_add(1, Ordering::SeqCst);
                to.write_all(&buffer[..read])
            }
        };
        if written.is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// One proxy per server of a connect string, and the connect string that
/// goes through them (the chroot, if any, kept).
pub struct ProxiedEnsemble {
    pub proxies: Vec<Proxy>,
    pub connect: String,
}

impl ProxiedEnsemble {
    pub fn start(connect: &str) -> ProxiedEnsemble {
        let (servers, chroot) = match connect.find('/') {
            Some(i) => (&connect[..i], &connect[i..]),
            None => (connect, ""),
        };
        let proxies: Vec<Proxy> = servers.split(',').map(Proxy::start).collect();
        let addresses: Vec<String> = proxies.iter().map(Proxy::address).collect();
        ProxiedEnsemble {
            connect: format!("{}{chroot}", addresses.join(",")),
            proxies,
        }
    }

    pub fn block(&self) {
        self.proxies.iter().for_each(Proxy::block);
    }

    pub fn unblock(&self) {
        self.proxies.iter().for_each(Proxy::unblock);
    }

    pub fn silence(&self) {
        self.proxies.iter().for_each(Proxy::silence);
    }

    pub fn unsilence(&self) {
        self.proxies.iter().for_each(Proxy::unsilence);
    }

    pub fn deafen(&self) {
        self.proxies.iter().for_each(Proxy::deafen);
    }

    pub fn undeafen(&self) {
        self.proxies.iter().for_each(Proxy::undeafen);
    }

    pub fn hold_requests(&self) {
        self.proxies.iter().for_each(Proxy::hold_requests);
    }

    pub fn release(&self) {
        self.proxies.iter().for_each(Proxy::release);
    }

    pub fn held_bytes(&self) -> usize {
        self.proxies.iter().map(Proxy::held_bytes).sum()
    }
}
