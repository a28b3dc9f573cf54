//! A client nobody here wrote, python3-kazoo (`/usr/bin/python3`, Debian's
//! `python3-kazoo`), run as a separate process: it reads and writes what
//! zkdist's sessions created, so that the tests see the server's answers to
//! an outsider rather than our own backend's view of them.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// What the kazoo process does, in order; each request's outcome is
/// reported, whether it succeeds or fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KazooOp {
    /// `get`: the node's data (as UTF-8, lossily).
    Get(String),
    /// `get_children`, sorted.
    Children(String),
    /// `get_acls`: `[[scheme, id, permissions]...]`.
    Acl(String),
    /// `create` of a persistent node with some data.
    Create(String),
    /// `create` of a persistent sequential node.
    CreateSequential(String),
    /// `create` of a persistent sequential node that only the session's
    /// digest identity may read or change (it needs `auth`); the answer's
    /// value is the path created.
    CreateOwnedSequential(String),
    /// `create` of a persistent node that only the session's digest
    /// identity may read or change (it needs `auth`).
    CreateOwned(String),
    /// `create` of an ephemeral node.
    CreateEphemeral(String),
    /// `set` of some data, any version.
    Set(String),
    /// `delete`, any version.
    Delete(String),
}

impl KazooOp {
    fn to_json(&self) -> Value {
        let (op, path) = match self {
            KazooOp::Get(path) => ("get", path),
            KazooOp::Children(path) => ("children", path),
            KazooOp::Acl(path) => ("acl", path),
            KazooOp::Create(path) => ("create", path),
            KazooOp::CreateSequential(path) => ("create_sequential", path),
            KazooOp::CreateOwnedSequential(path) => ("create_owned_sequential", path),
            KazooOp::CreateOwned(path) => ("create_owned", path),
            KazooOp::CreateEphemeral(path) => ("create_ephemeral", path),
            KazooOp::Set(path) => ("set", path),
            KazooOp::Delete(path) => ("delete", path),
        };
        json!([op, path])
    }

    /// True for the requests that change something.
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            KazooOp::Get(_) | KazooOp::Children(_) | KazooOp::Acl(_)
        )
    }
}

/// How one request of the kazoo process ended.
#[derive(Debug, Clone, PartialEq)]
pub struct KazooAnswer {
    pub op: KazooOp,
    /// `"ok"`, or the name of the exception kazoo raised (`"NoAuthError"`,
    /// `"NoNodeError"`...).
    pub outcome: String,
    /// What a successful read returned (`null` for writes and failures).
    pub value: Value,
}

/// The ACL entries ZooKeeper reports for a node, `(scheme, id,
/// permissions)`, read from a [`KazooOp::Acl`] answer.
pub fn acl_entries(answer: &KazooAnswer) -> Vec<(String, String, i64)> {
    let entries = answer
        .value
        .as_array()
        .unwrap_or_else(|| panic!("{answer:?} holds no ACL"));
    entries
        .iter()
        .map(|entry| {
            (
                entry[0].as_str().expect("scheme").to_owned(),
                entry[1].as_str().expect("id").to_owned(),
                entry[2].as_i64().expect("permissions"),
            )
        })
        .collect()
}

/// ZooKeeper's permission bits, as kazoo reports them.
pub const PERM_READ: i64 = 1;
pub const PERM_ALL: i64 = 31;

const SCRIPT: &str = r#"
import json
import sys
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl, make_digest_acl_credential

hosts, auth, ops = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if ops == "digest":
    user, password = auth.split(":", 1)
    print(json.dumps(make_digest_acl_credential(user, password)))
    sys.exit(0)
auth_data = [("digest", auth)] if auth else None
zk = KazooClient(hosts=hosts, timeout=10.0, auth_data=auth_data)
zk.start(timeout=20)
for op, path in ops:
    value = None
    try:
        if op == "get":
            value = zk.get(path)[0].decode("utf-8", "replace")
        elif op == "children":
            value = sorted(zk.get_children(path))
        elif op == "acl":
            value = [[a.id.scheme, a.id.id, a.perms] for a in zk.get_acls(path)[0]]
        elif op == "create":
            zk.create(path, b"written by kazoo")
        elif op == "create_sequential":
            zk.create(path, b"written by kazoo", sequence=True)
        elif op in ("create_owned", "create_owned_sequential"):
            user, password = auth.split(":", 1)
            owner_only = [make_digest_acl(user, password, all=True)]
            sequence = op == "create_owned_sequential"
            value = zk.create(path, b"written by kazoo", acl=owner_only, sequence=sequence)
        elif op == "create_ephemeral":
            zk.create(path, b"written by kazoo", ephemeral=True)
        elif op == "set":
            zk.set(path, b"written by kazoo")
        elif op == "delete":
            zk.delete(path)
        else:
            raise ValueError("unknown op " + op)
        outcome = "ok"
    except Exception as error:
        outcome = type(error).__name__
    print(json.dumps({"outcome": outcome, "value": value}), flush=True)
zk.stop()
zk.close()
"#;

fn run_script(connect: &str, auth: &str, ops: &Value) -> String {
    let output = Command::new("/usr/bin/python3")
        .args(["-c", SCRIPT, connect, auth, &ops.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run /usr/bin/python3 (scripts/zk install brings python3-kazoo)");
    assert!(
        output.status.success(),
        "the kazoo script failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `ops` from one kazoo session on `connect`, authenticated with
/// digest `USER:PASSWORD` if `auth` is given, and returns one answer per
/// op, in order. Blocks (run it with `spawn_blocking` from async code).
pub fn run_kazoo(connect: &str, auth: Option<&str>, ops: &[KazooOp]) -> Vec<KazooAnswer> {
    let ops_json = Value::Array(ops.iter().map(KazooOp::to_json).collect());
    let stdout = run_script(connect, auth.unwrap_or(""), &ops_json);
    let answers: Vec<KazooAnswer> = stdout
        .lines()
        .zip(ops)
        .map(|(line, op)| {
            let parsed: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("kazoo printed {line:?}: {e}"));
            KazooAnswer {
                op: op.clone(),
                outcome: parsed["outcome"].as_str().expect("outcome").to_owned(),
                value: parsed["value"].clone(),
            }
        })
        .collect();
    assert_eq!(
        answers.len(),
        ops.len(),
        "kazoo answered {} of {} ops:\n{stdout}",
        answers.len(),
        ops.len()
    );
    answers
}

/// The digest identity `USER:base64(sha1(USER:PASSWORD))` of `auth`
/// (`USER:PASSWORD`), as kazoo computes it: what a node's ACL must name.
pub fn digest_id(auth: &str) -> String {
    let stdout = run_script("", auth, &json!("digest"));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("kazoo printed {stdout:?}: {e}"))
}
