//! A session that counts the requests it sends, by kind, so that a run can
//! say how many ZooKeeper writes (and reads) one task costs. Any number of
//! sessions can share one [`OpCounter`]; a request is counted when it is
//! issued, whatever its outcome (a failed write still costs the server a
//! transaction).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::Either;
use zkdist_coord::{Coordinator, Op, Reply, Request, SessionId, ZkResult};

/// Live counters, shared by every [`Counted`] session of a run.
#[derive(Debug, Default)]
pub struct OpCounter {
    creates: AtomicU64,
    deletes: AtomicU64,
    set_datas: AtomicU64,
    multis: AtomicU64,
    multi_node_writes: AtomicU64,
    exists: AtomicU64,
    get_datas: AtomicU64,
    get_childrens: AtomicU64,
    multi_reads: AtomicU64,
    multi_read_nodes: AtomicU64,
    listed_children: AtomicU64,
}

impl OpCounter {
    pub fn new() -> Arc<OpCounter> {
        Arc::new(OpCounter::default())
    }

    /// The counts as they stand.
    pub fn snapshot(&self) -> OpCounts {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        OpCounts {
            creates: read(&self.creates),
            deletes: read(&self.deletes),
            set_datas: read(&self.set_datas),
            multis: read(&self.multis),
            multi_node_writes: read(&self.multi_node_writes),
            exists: read(&self.exists),
            get_datas: read(&self.get_datas),
            get_childrens: read(&self.get_childrens),
            multi_reads: read(&self.multi_reads),
            multi_read_nodes: read(&self.multi_read_nodes),
            listed_children: read(&self.listed_children),
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Requests issued, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCounts {
    pub creates: u64,
    pub deletes: u64,
    pub set_datas: u64,
    /// Each multi counts once: ZooKeeper applies it as one transaction.
    pub multis: u64,
    /// The node writes (creates, deletes, data changes; not checks) inside
    /// those multis.
    pub multi_node_writes: u64,
    pub exists: u64,
    pub get_datas: u64,
    pub get_childrens: u64,
    /// Multi-reads (`get_data_many`, `get_children_many`): each counts
    /// once, as one request, which is what the server's cost follows (a
    /// read of 16 nodes costs it little more than a read of one).
    pub multi_reads: u64,
    /// The nodes those multi-reads read.
    pub multi_read_nodes: u64,
    /// Names the `get_children` replies held, all together: what
    /// re-listing a directory costs grows with it.
    pub listed_children: u64,
}

impl OpCounts {
    /// Requests that are transactions on the server.
    pub fn writes(&self) -> u64 {
        self.creates + self.deletes + self.set_datas + self.multis
    }

    /// Nodes created, deleted or changed, alone or inside a multi: a multi
    /// of two writes is one transaction but changes two nodes, as two
    /// transactions of the raw ceiling do.
    pub fn node_writes(&self) -> u64 {
        self.creates + self.deletes + self.set_datas + self.multi_node_writes
    }

    /// Requests the server answers from its tree, without a transaction
    /// (a multi-read is one).
    pub fn reads(&self) -> u64 {
        self.exists + self.get_datas + self.get_childrens + self.multi_reads
    }

    /// Nodes read, alone or inside a multi-read.
    pub fn node_reads(&self) -> u64 {
        self.exists + self.get_datas + self.get_childrens + self.multi_read_nodes
    }

    /// What was issued between `earlier` and `self` (two snapshots of one
    /// counter, `earlier` taken first).
    pub fn since(&self, earlier: &OpCounts) -> OpCounts {
        let delta = |now: u64, before: u64| {
            assert!(now >= before, "counters only grow: {now} < {before}");
            now - before
        };
        OpCounts {
            creates: delta(self.creates, earlier.creates),
            deletes: delta(self.deletes, earlier.deletes),
            set_datas: delta(self.set_datas, earlier.set_datas),
            multis: delta(self.multis, earlier.multis),
            multi_node_writes: delta(self.multi_node_writes, earlier.multi_node_writes),
            exists: delta(self.exists, earlier.exists),
            get_datas: delta(self.get_datas, earlier.get_datas),
            get_childrens: delta(self.get_childrens, earlier.get_childrens),
            multi_reads: delta(self.multi_reads, earlier.multi_reads),
            multi_read_nodes: delta(self.multi_read_nodes, earlier.multi_read_nodes),
            listed_children: delta(self.listed_children, earlier.listed_children),
        }
    }
}

/// A session whose every request bumps a shared [`OpCounter`] before it
/// goes to the wrapped session (and whose listings count the names they
/// return). `sync`, `count_descendants` (which no workload sends: it
/// serves `status`) and `close` are not counted.
#[derive(Debug, Clone)]
pub struct Counted<C> {
    inner: C,
    counter: Arc<OpCounter>,
}

impl<C: Coordinator> Counted<C> {
    pub fn new(inner: C, counter: Arc<OpCounter>) -> Counted<C> {
        Counted { inner, counter }
    }

    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<C: Coordinator> Coordinator for Counted<C> {
    fn session_id(&self) -> SessionId {
        self.inner.session_id()
    }

    fn disconnected_grace_ms(&self) -> u64 {
        self.inner.disconnected_grace_ms()
    }

    /// Counts the request and sends it now, like every request; a
    /// listing's names are counted on reply.
    fn call(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send {
        let counter = &self.counter;
        match &request {
            Request::Create { .. } => bump(&counter.creates),
            Request::Delete { .. } => bump(&counter.deletes),
            Request::Exists { .. } => bump(&counter.exists),
            Request::GetData { .. } => bump(&counter.get_datas),
            Request::SetData { .. } => bump(&counter.set_datas),
            Request::GetChildren { .. } => bump(&counter.get_childrens),
            Request::GetDataMany { paths } | Request::GetChildrenMany { paths } => {
                bump(&counter.multi_reads);
                counter
                    .multi_read_nodes
                    .fetch_add(paths.len() as u64, Ordering::Relaxed);
            }
            Request::Multi { ops } => {
                bump(&counter.multis);
                let node_writes = ops
                    .iter()
                    .filter(|op| !matches!(op, Op::Check { .. }))
                    .count();
                counter
                    .multi_node_writes
                    .fetch_add(node_writes as u64, Ordering::Relaxed);
            }
            Request::CountDescendants { .. } | Request::Sync { .. } | Request::AddWatch { .. } => {}
        }
        let listing = matches!(request, Request::GetChildren { .. });
        let reply = self.inner.call(request);
        if !listing {
            // Passed through as it is: a wrapping future would cost every
            // request a poll more.
            return Either::Left(reply);
        }
        Either::Right(async move {
            let outcome = reply.await;
            if let Ok(Reply::Children(names, _)) = &outcome {
                counter
                    .listed_children
                    .fetch_add(names.len() as u64, Ordering::Relaxed);
            }
            outcome
        })
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        self.inner.close()
    }
}
