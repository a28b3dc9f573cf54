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

use zkdist_coord::{
    AddWatchMode, Coordinator, CreateMode, Layout, Op, OpResult, SessionId, Stat, Watch, WorkerId,
    ZkResult, path,
};

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

    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        // The old build's registration names no format.
        let data = if self.old && self.is_own_registration(path) {
            &[]
        } else {
            data
        };
        let created = self.inner.create(path, data, mode).await?;
        if self.old && path == self.layout.worker_id_prefix() {
            let worker = WorkerId::parse(path::name(&created)).ok();
            *self.worker.lock().unwrap_or_else(PoisonError::into_inner) = worker;
        }
        Ok(created)
    }

    fn delete(
        &self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.delete(path, version)
    }

    fn exists(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<Option<Stat>>> + Send {
        self.inner.exists(path, watch)
    }

    async fn get_data(&self, path: &str, watch: Watch) -> ZkResult<(Vec<u8>, Stat)> {
        let (mut data, stat) = self.inner.get_data(path, watch).await?;
        if self.old && self.is_own_assignment(path) {
            // The old build took everything for the name: a newline and a
            // payload make a name no task has (a NUL, which no name holds,
            // stands for the difference).
            for byte in &mut data {
                if *byte == b'\n' {
                    *byte = 0;
                }
            }
        }
        Ok((data, stat))
    }

    fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> impl Future<Output = ZkResult<Stat>> + Send {
        self.inner.set_data(path, data, version)
    }

    fn get_children(
        &self,
        path: &str,
        watch: Watch,
    ) -> impl Future<Output = ZkResult<(Vec<String>, Stat)>> + Send {
        self.inner.get_children(path, watch)
    }

    fn count_descendants(&self, path: &str) -> impl Future<Output = ZkResult<usize>> + Send {
        self.inner.count_descendants(path)
    }

    fn multi(&self, ops: Vec<Op>) -> impl Future<Output = ZkResult<Vec<OpResult>>> + Send {
        self.inner.multi(ops)
    }

    fn add_watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.add_watch(path, mode)
    }

    fn sync(&self, path: &str) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.sync(path)
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.close()
    }
}
