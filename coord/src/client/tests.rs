//! The client's read-backs after a lost reply, against a fake session
//! whose server lags behind the leader until a `sync`: what a reconnect
//! to a follower that has not applied the write yet looks like. The
//! simulator has one server, so it cannot show this.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use super::*;
use crate::{CreateMode, Op, OpResult, Reply, Request, SessionId, ZkResult};

/// What the test makes the session's next write do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextWrite {
    /// Applied and answered.
    Answered,
    /// Applied on the leader; the reply is lost (`ConnectionLoss`).
    ReplyLost,
}

/// One ensemble: the leader's nodes, shared by the sessions.
type Leader = Arc<Mutex<BTreeSet<String>>>;

/// A session talking to a follower. Writes go to the leader; reads show
/// the follower's copy, which catches up only on `sync`. After a lost
/// reply the session may also learn that it expired.
struct LaggingSession {
    id: i64,
    leader: Leader,
    follower: Mutex<BTreeSet<String>>,
    next_write: Mutex<NextWrite>,
    /// Every request after the first lost reply fails `SessionExpired`.
    expires_after_lost_reply: bool,
    expired: Mutex<bool>,
    /// The requests, in order: "create /p", "sync /p", "exists /p"...
    calls: Mutex<Vec<String>>,
}

impl LaggingSession {
    fn new(id: i64, leader: &Leader) -> LaggingSession {
        let follower = leader.lock().unwrap().clone();
        LaggingSession {
            id,
            leader: leader.clone(),
            follower: Mutex::new(follower),
            next_write: Mutex::new(NextWrite::Answered),
            expires_after_lost_reply: false,
            expired: Mutex::new(false),
            calls: Mutex::new(Vec::new()),
        }
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// Records the request; fails it if the session has expired.
    fn record(&self, what: &str, path: &str) -> ZkResult<()> {
        self.calls.lock().unwrap().push(format!("{what} {path}"));
        if *self.expired.lock().unwrap() {
            return Err(ZkError::SessionExpired);
        }
        Ok(())
    }

    /// Applies a write on the leader, then answers it or loses the reply.
    fn write<T>(&self, apply: impl FnOnce(&mut BTreeSet<String>) -> ZkResult<T>) -> ZkResult<T> {
        let applied = apply(&mut self.leader.lock().unwrap());
        let next = std::mem::replace(&mut *self.next_write.lock().unwrap(), NextWrite::Answered);
        match next {
            NextWrite::Answered => applied,
            NextWrite::ReplyLost => {
                if self.expires_after_lost_reply {
                    *self.expired.lock().unwrap() = true;
                }
                Err(ZkError::ConnectionLoss {
                    reason: "the reply was lost".into(),
                })
            }
        }
    }
}

impl LaggingSession {
    fn answer(&self, request: Request) -> ZkResult<Reply> {
        match request {
            Request::Create { path, mode, .. } => {
                self.record("create", &path)?;
                self.write(|nodes| {
                    assert_eq!(
                        mode,
                        CreateMode::PersistentSequential,
                        "only submits create"
                    );
                    let created = format!("{path}{:010}", nodes.len());
                    nodes.insert(created.clone());
                    Ok(Reply::Created(created))
                })
            }
            Request::Exists { path, .. } => {
                self.record("exists", &path)?;
                let follower = self.follower.lock().unwrap();
                Ok(Reply::Exists(follower.contains(&path).then(Stat::default)))
            }
            Request::GetChildren { path, .. } => {
                self.record("get_children", &path)?;
                let prefix = format!("{path}/");
                let names = self
                    .follower
                    .lock()
                    .unwrap()
                    .iter()
                    .filter_map(|node| node.strip_prefix(&prefix))
                    .filter(|name| !name.contains('/'))
                    .map(str::to_owned)
                    .collect();
                Ok(Reply::Children(names, Stat::default()))
            }
            Request::Multi { ops } => {
                self.record("multi", "")?;
                self.write(|nodes| {
                    for (index, op) in ops.iter().enumerate() {
                        let Op::Delete { path, .. } = op else {
                            unreachable!("the client's multi only deletes");
                        };
                        if !nodes.contains(path) {
                            return Err(ZkError::Multi {
                                index,
                                error: Box::new(ZkError::NoNode { path: path.clone() }),
                            });
                        }
                    }
                    for op in &ops {
                        if let Op::Delete { path, .. } = op {
                            nodes.remove(path);
                        }
                    }
                    Ok(Reply::Multi(vec![OpResult::Deleted; ops.len()]))
                })
            }
            Request::Sync { path } => {
                self.record("sync", &path)?;
                *self.follower.lock().unwrap() = self.leader.lock().unwrap().clone();
                Ok(Reply::Synced)
            }
            other => unreachable!("the read-back tests make no {} request", other.name()),
        }
    }
}

impl Coordinator for LaggingSession {
    fn session_id(&self) -> SessionId {
        SessionId(self.id)
    }

    /// It never reports a disconnection: any grace would do, so the
    /// default session timeout's.
    fn disconnected_grace_ms(&self) -> u64 {
        crate::disconnected_grace_ms(10_000)
    }

    fn call(&self, request: Request) -> impl Future<Output = ZkResult<Reply>> + Send {
        std::future::ready(self.answer(request))
    }

    fn close(&self) -> impl Future<Output = ZkResult<()>> + Send {
        std::future::ready(Ok(()))
    }
}

fn client(session: LaggingSession) -> Client<LaggingSession> {
    let (_events_tx, events) = tokio::sync::mpsc::unbounded_channel();
    Client::new(session, events, Layout::default())
}

fn leader_with(nodes: &[&str]) -> Leader {
    let layout = Layout::default();
    let mut tree: BTreeSet<String> = [layout.root().to_owned(), layout.tasks_dir()]
        .into_iter()
        .collect();
    tree.extend(nodes.iter().map(|node| node.to_string()));
    Arc::new(Mutex::new(tree))
}

#[tokio::test]
async fn a_cleanup_whose_reply_was_lost_reads_back_after_a_sync() {
    let layout = Layout::default();
    let task = TaskId::from_sequence(3);
    let (task_path, result_path) = (layout.task(&task), layout.result(&task));
    let leader = leader_with(&[&task_path, &result_path]);
    let session = LaggingSession::new(1, &leader);
    *session.next_write.lock().unwrap() = NextWrite::ReplyLost;
    let client = client(session);

    // Applied on the leader; the follower still shows the task until the
    // sync. Read without one, the task would look not cleaned up, and the
    // multi sent again would fail as "not finished".
    assert_eq!(client.cleanup(&task).await, Ok(()));
    assert_eq!(
        client.session().calls(),
        [
            "multi ".to_owned(),
            format!("sync {task_path}"),
            format!("exists {task_path}")
        ]
    );
    assert!(!leader.lock().unwrap().contains(&task_path));
}

#[tokio::test]
async fn a_submit_whose_reply_was_lost_looks_for_its_token_after_a_sync() {
    let leader = leader_with(&[]);
    let session = LaggingSession::new(1, &leader);
    *session.next_write.lock().unwrap() = NextWrite::ReplyLost;
    let client = client(session);

    let task = client.submit(br#"{"kind":"echo"}"#).await.unwrap();
    let tasks_dir = Layout::default().tasks_dir();
    let calls = client.session().calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls[0].starts_with("create /zkdist/tasks/task-"),
        "{calls:?}"
    );
    assert_eq!(
        calls[1..],
        [
            format!("sync {tasks_dir}"),
            format!("get_children {tasks_dir}")
        ]
    );
    let tasks: Vec<String> = leader
        .lock()
        .unwrap()
        .iter()
        .filter(|node| node.starts_with(&format!("{tasks_dir}/")))
        .cloned()
        .collect();
    assert_eq!(tasks, [Layout::default().task(&task)], "created once");
}

#[tokio::test]
async fn a_submit_cut_off_by_the_session_s_end_is_in_doubt_and_resolved_on_a_new_session() {
    let leader = leader_with(&[]);
    let mut session = LaggingSession::new(1, &leader);
    *session.next_write.lock().unwrap() = NextWrite::ReplyLost;
    session.expires_after_lost_reply = true;
    let submitting = client(session);
    let token = TaskToken::for_submission(SessionId(1), 0);
    assert_eq!(submitting.next_submission_token(), token);

    let error = submitting.submit(br#"{"kind":"echo"}"#).await.unwrap_err();
    assert_eq!(
        error,
        ClientError::SubmitInDoubt {
            token,
            cause: Box::new(ClientError::Zk(ZkError::SessionExpired))
        }
    );
    let message = error.to_string();
    assert!(message.contains(&format!("task-{token}-")), "{message}");

    // A new session, on a follower that has not seen the create yet.
    let resolving = client(LaggingSession::new(2, &leader));
    let found = resolving.find_submission(token).await.unwrap();
    let created = found.expect("the create was applied");
    assert_eq!(created.token(), Some(token));
    assert_eq!(
        resolving.session().calls()[0],
        format!("sync {}", Layout::default().tasks_dir()),
        "sync first"
    );
    let other = TaskToken::for_submission(SessionId(2), 0);
    assert_eq!(resolving.find_submission(other).await, Ok(None));
    // The in-doubt submission counted: the next one carries another token.
    assert_eq!(
        submitting.next_submission_token(),
        TaskToken::for_submission(SessionId(1), 1)
    );
}
