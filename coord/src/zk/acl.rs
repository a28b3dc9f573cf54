//! The ACL of every node a session creates.
//!
//! Without credentials, nodes are open to everyone (ZooKeeper's
//! `OPEN_ACL_UNSAFE`). With digest credentials, they belong to that identity
//! and are readable by everyone else: `digest:USER:HASH` may do anything,
//! `world:anyone` may only read. An operator without the credentials can
//! then still watch the system (`zkdist status`, zkCli, kazoo) but cannot
//! submit, assign, complete or delete anything.
//!
//! The identity is written with ZooKeeper's `auth` scheme, which the server
//! replaces, when it creates the node, by the digest identity the session
//! authenticated as (`digest:USER:base64(sha1(USER:PASSWORD))`): the hash is
//! computed by the server that checks it, and a session whose credentials
//! the server does not hold cannot create a node at all (`InvalidAcl`).

use zookeeper_client as zkc;

/// `[auth -> ALL, world:anyone -> READ]`.
static OWNER_ALL_ANYONE_READ: [zkc::Acl; 2] = [
    zkc::Acl::new_const(zkc::Permission::ALL, "auth", ""),
    zkc::Acl::new_const(zkc::Permission::READ, "world", "anyone"),
];

/// The ACL for the nodes of a session with (`authenticated`) or without
/// credentials.
pub(crate) fn acls_for_created_nodes(authenticated: bool) -> zkc::Acls<'static> {
    if authenticated {
        zkc::Acls::new(&OWNER_ALL_ANYONE_READ)
    } else {
        zkc::Acls::anyone_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authenticated_session_owns_its_nodes_and_lets_anyone_read() {
        let acls = acls_for_created_nodes(true);
        let entries: Vec<(&str, &str, zkc::Permission)> = acls
            .iter()
            .map(|acl| (acl.scheme(), acl.id(), acl.permission()))
            .collect();
        assert_eq!(
            entries,
            vec![
                ("auth", "", zkc::Permission::ALL),
                ("world", "anyone", zkc::Permission::READ),
            ]
        );
        let open: Vec<_> = acls_for_created_nodes(false)
            .iter()
            .map(|acl| (acl.scheme().to_owned(), acl.permission()))
            .collect();
        assert_eq!(open, vec![("world".to_owned(), zkc::Permission::ALL)]);
    }
}
