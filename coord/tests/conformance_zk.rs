//! The conformance suite against a real ZooKeeper: the same cases, under the
//! same names, as the simulator run (`cargo test -p zkdist-sim --test
//! conformance`).
//!
//! `ZKDIST_TEST_ZK` names the ensemble (a connect string, without chroot).
//! Every case works under its own fresh node
//! `/zkdist-conformance-<pid>-<nanos>/<case>`, so runs never collide. Without
//! the variable every case is reported as ignored, never as passed.
//!
//! Each session reaches the ensemble through its own loopback proxy, so
//! that `Backend::expire` can cut the session off while a second client
//! closes it on the server: the session then sees `Disconnected`, `Expired`,
//! as after a real expiry (see `zkdist_coord::zk` on why the cut matters).
//! `Backend::cut` blocks the same proxy for a while: the client loses its
//! connection, retries, and reconnects once the proxy lets it through.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::proxy::ProxiedEnsemble;
use zkdist_coord::conformance::{Backend, Case, run_main, run_main_then};
use zkdist_coord::zk::{ZkConfig, ZkSession};
use zkdist_coord::{Coordinator, EventStream, SessionId, ZkResult};

struct ZkBackend {
    /// Reaches the servers directly.
    direct: ZkConfig,
    root: String,
    links: Mutex<Vec<(SessionId, Arc<ProxiedEnsemble>)>>,
}

impl ZkBackend {
    /// The link of a session this backend opened.
    fn link(&self, session: &ZkSession) -> Arc<ProxiedEnsemble> {
        let links = self.links.lock().expect("links lock");
        let (_, link) = links
            .iter()
            .find(|(id, _)| *id == session.session_id())
            .expect("a session this backend opened");
        Arc::clone(link)
    }
}

impl Backend for ZkBackend {
    type Session = ZkSession;

    async fn deafen(&self, session: &ZkSession) {
        self.link(session).deafen();
    }

    fn root(&self) -> &str {
        &self.root
    }

    async fn connect(&self) -> ZkResult<(ZkSession, EventStream)> {
        let (session, events, link) = common::connect_proxied(&self.direct).await?;
        self.links
            .lock()
            .expect("links lock")
            .push((session.session_id(), Arc::new(link)));
        Ok((session, events))
    }

    async fn expire(&self, session: &ZkSession) {
        let link = {
            let mut links = self.links.lock().expect("links lock");
            let index = links
                .iter()
                .position(|(id, _)| *id == session.session_id())
                .expect("expire a session this backend opened");
            links.swap_remove(index).1
        };
        common::expire_through_link(session, &link, &self.direct).await;
    }

    async fn cut(&self, session: &ZkSession, duration: Duration) {
        let link = self.link(session);
        link.block();
        // The connections are gone: the ones after the cut hear again.
        link.undeafen();
        // The proxy's own threads do the I/O; a thread of its own lets the
        // link back in whatever the case does meanwhile.
        std::thread::spawn(move || {
            std::thread::sleep(duration);
            link.unblock();
        });
    }
}

fn run_case(connect: &str, case: &Case<ZkBackend>) {
    let runtime = common::runtime();
    runtime.block_on(async {
        let direct = common::config(connect);
        let root = common::fresh_case_root(&direct, "zkdist-conformance", case.name).await;
        let backend = Arc::new(ZkBackend {
            direct: direct.clone(),
            root: root.clone(),
            links: Mutex::new(Vec::new()),
        });
        (case.run)(backend).await;
        // Only a passing case cleans up: a failing one leaves its nodes for
        // a look with zkCli or kazoo.
        common::delete_tree(&direct, &root).await;
    });
}

fn main() {
    match common::test_zk() {
        Some(connect) => {
            let direct = common::config(&connect);
            run_main_then::<ZkBackend>(
                None,
                move |case| run_case(&connect, case),
                // Every passing case removed its root; a failing one left it
                // for a look, and with it the run root.
                move || common::runtime().block_on(common::delete_run_root_if_empty(&direct)),
            )
        }
        // Run anyway (`--include-ignored`), a case says why it cannot.
        None => run_main::<ZkBackend>(Some(common::NO_SERVER), |_| panic!("{}", common::NO_SERVER)),
    }
}
