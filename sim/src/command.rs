//! What the handles (`SimZk`, `SimSession`) ask of the driver. Requests and
//! control commands share one channel, so their order is kept.

use tokio::sync::oneshot;
use zkdist_coord::{SessionId, ZkResult};

use crate::applied::AppliedOp;
use crate::client::ConnectReply;
use crate::request::{Request, Response};
use crate::tree::Tree;

pub(crate) type Done = oneshot::Sender<()>;
pub(crate) type Predicate = Box<dyn FnMut(&Tree) -> bool + Send>;
pub(crate) type ApplyHook = Box<dyn FnMut(&AppliedOp, &Tree) + Send>;
/// Reads the trace's lines, in place.
pub(crate) type TraceReader = Box<dyn FnOnce(&mut dyn Iterator<Item = &str>) + Send>;

pub(crate) enum Command {
    Connect {
        name: String,
        reply: ConnectReply,
    },
    Request {
        session: SessionId,
        request: Request,
        reply: oneshot::Sender<ZkResult<Response>>,
    },
    /// The session's last `SimSession` handle was dropped.
    HandleDropped {
        session: SessionId,
    },
    Expire {
        session: SessionId,
        done: Done,
    },
    Cut {
        session: SessionId,
        duration_us: u64,
        done: Done,
    },
    Partition {
        session: SessionId,
        duration_us: u64,
        done: Done,
    },
    Stall {
        session: SessionId,
        duration_us: u64,
        done: Done,
    },
    Crash {
        session: SessionId,
        done: Done,
    },
    Hold {
        session: SessionId,
        done: Done,
    },
    Release {
        session: SessionId,
        done: Done,
    },
    Pause {
        done: Done,
    },
    Resume {
        done: Done,
    },
    Step {
        reply: oneshot::Sender<Option<String>>,
    },
    RunUntil {
        predicate: Predicate,
        done: Done,
    },
    Inspect {
        view: Box<dyn FnOnce(&Tree) + Send>,
    },
    Trace {
        reply: oneshot::Sender<Vec<String>>,
    },
    ReadTrace {
        read: TraceReader,
    },
    SetSequenceCounter {
        parent: String,
        value: i32,
        reply: oneshot::Sender<ZkResult<()>>,
    },
    OnApply {
        hook: ApplyHook,
        done: Done,
    },
    Note {
        text: String,
    },
}
