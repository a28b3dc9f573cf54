//! A worker of a build older than inline payloads, emulated on the session
//! of today's worker: a fleet in the middle of a rolling upgrade.
//!
//! The old build registered with empty data (it names no assignment
//! format) and read an assignment's whole data as the task's name. Given
//! `name\npayload` it found no such task and released the assignment
//! without running anything. [`OldWorkerSession`] makes today's worker
//! behave so, through ZooKeeper alone: it empties the registration's data,
//! and turns the newline of the worker's own assignment into a byte no task
//! name holds, so that an inline payload makes a name no task has. The
//! master must therefore never put a payload inline for such a worker (the
//! checker's `inline-payload` rule), and every task must still finish.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use zkdist_coord::{Coordinator, Layout, Reply, Request, SessionId, WorkerId, ZkResult, path};

/// A session that, when `old` is set, makes its worker one of the build
/// older than inline payloads (see the module's docs); otherwise every call
/// passes through unchanged. Clones share what the session learned.
#[derive(Debug, Clone)]
pub struct OldWorkerSession<C> {
    inner: C,
    old: bool,
    layout: Layout,
    /// The worker's id, once its id node is created.
    worker: Arc<Mutex<Option<WorkerId>>>,
}

impl<C: Coordinator> OldWorkerSession<C> {
    pub fn new(inner: C, old: bool, layout: &Layout) -> OldWorkerSession<C> {
        OldWorkerSession {
            inner,
            old,
            layout: layout.clone(),
            worker: Arc::new(Mutex::new(None)),
        }
    }

    fn worker(&self) -> Option<WorkerId> {
        self.worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn is_own_registration(&self, path: &str) -> bool {
        self.worker()
            .is_some_and(|worker| path == self.layout.worker(&worker))
    }

    fn is_own_assignment(&self, path: &str) -> bool {
        self.worker()
            .is_some_and(|worker| path == self.layout.assignment(&worker))
    }
}

impl<C: Coordinator> Coordinator for OldWorkerSession<C> {
    fn session_id(&self) -> SessionId {
        self.inner.session_id()
    }

    fn disconnected_grace_ms(&self) -> u64 {
        self.inner.disconnected_grace_ms()
    }

    /// Sends the request at once, changed if it is the old build's
    /// registration, and changes the reply if it is the worker's own
    /// assignment.
    fn call(&self, mut request: Request) -> impl Future<Output = ZkResult<Reply>> + Send {
        let learns_id = match &mut request {
            Request::Create { path, data, .. } => {
                // The old build's registration names no format.
                if self.old && self.is_own_registration(path) {
                    data.clear();
                }
                self.old && *path == self.layout.worker_id_prefix()
            }
            _ => false,
        };
        let reads_own_assignment = matches!(&request,
            Request::GetData { path, .. } if self.old && self.is_own_assignment(path));
        let reply = self.inner.call(request);
        async move {
            let mut reply = reply.await?;
            match &mut reply {
                Reply::Created(created) if learns_id => {
                    let worker = WorkerId::parse(path::name(created)).ok();
                    *self.worker.lock().unwrap_or_else(PoisonError::into_inner) = worker;
                }
                // The old build took everything for the name: a newline and
                // a payload make a name no task has (a NUL, which no name
                // holds, stands for the difference).
                Reply::Data(data, _) if reads_own_assignment => {
                    for byte in data.iter_mut().filter(|byte| **byte == b'\n') {
                        *byte = 0;
                    }
                }
                _ => {}
            }
            Ok(reply)
        }
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.close()
    }
}
