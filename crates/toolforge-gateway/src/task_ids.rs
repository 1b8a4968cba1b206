//! Task ids as the gateway gives them out (Tasks extension, SEP-2663).
//!
//! A backend's `CreateTaskResult` names a task by the backend's own id. The client gets instead
//! a **sealed ticket**: the server, its tool, the backend's task id and the principal who made
//! the call, signed with the gateway's state key (as MRTR `requestState` is, `crate::mrtr`) and
//! valid for the task's TTL (at most [`MAX_TASK_TTL`]). Nothing is kept in memory, so any
//! replica with the same key serves a later `tasks/get`, `tasks/update` or `tasks/cancel`; a
//! ticket that was changed, has expired, or names another principal is an unknown task.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::mrtr::StateSeal;

/// The longest a task id the gateway gives out stays valid (a backend that keeps its tasks
/// without limit gets this one).
pub const MAX_TASK_TTL: Duration = Duration::from_secs(24 * 3600);
/// The shortest: a task the backend keeps for less is still given this long to be polled.
const MIN_TASK_TTL: Duration = Duration::from_secs(60);
/// What the seal binds a ticket to, so no other sealed token opens as one.
const CONTEXT: &str = "toolforge/task";

/// What a client's task id stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskTicket {
    /// The server that runs the task.
    #[serde(rename = "s")]
    pub server: String,
    /// The server's own name of the tool whose call became the task.
    #[serde(rename = "t")]
    pub tool: String,
    /// The server's id of the task.
    #[serde(rename = "k")]
    pub task_id: String,
    /// Who made the call (the request's principal).
    #[serde(rename = "c")]
    pub caller: String,
}

/// How long the ticket of a task the backend keeps for `ttl_ms` (`None`: without limit) is
/// valid, and the TTL the client is told.
#[must_use]
pub fn ticket_ttl(ttl_ms: Option<u64>) -> Duration {
    ttl_ms
        .map_or(MAX_TASK_TTL, Duration::from_millis)
        .clamp(MIN_TASK_TTL, MAX_TASK_TTL)
}

impl TaskTicket {
    /// The client's task id for this ticket, valid for `ttl`.
    #[must_use]
    pub fn seal(&self, seal: &StateSeal, ttl: Duration) -> String {
        seal.seal_payload(CONTEXT, self, ttl)
    }

    /// The ticket of a client's task id, if it opens and names `caller`.
    #[must_use]
    pub fn open(seal: &StateSeal, task_id: &str, caller: &str) -> Option<Self> {
        seal.open_payload::<Self>(CONTEXT, task_id)
            .filter(|ticket| ticket.caller == caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket() -> TaskTicket {
        TaskTicket {
            server: "builds".into(),
            tool: "compile".into(),
            task_id: "7f1c".into(),
            caller: "alice".into(),
        }
    }

    #[test]
    fn a_ticket_opens_for_its_caller_on_any_replica_with_the_key() {
        let key = [9u8; 32];
        let id = ticket().seal(&StateSeal::new(&key).unwrap(), MAX_TASK_TTL);
        let other_replica = StateSeal::new(&key).unwrap();
        assert_eq!(
            TaskTicket::open(&other_replica, &id, "alice"),
            Some(ticket())
        );
    }

    #[test]
    fn another_principal_a_changed_id_or_another_key_opens_nothing() {
        let seal = StateSeal::random();
        let id = ticket().seal(&seal, MAX_TASK_TTL);
        assert_eq!(TaskTicket::open(&seal, &id, "mallory"), None);
        assert_eq!(TaskTicket::open(&StateSeal::random(), &id, "alice"), None);
        let mut changed = id.into_bytes();
        let i = changed.len() / 2;
        changed[i] = if changed[i] == b'A' { b'B' } else { b'A' };
        let changed = String::from_utf8(changed).unwrap();
        assert_eq!(TaskTicket::open(&seal, &changed, "alice"), None);
    }

    #[test]
    fn a_requeststate_does_not_open_as_a_ticket() {
        let seal = StateSeal::random();
        let state = seal.seal_payload("compile", &ticket(), MAX_TASK_TTL);
        assert_eq!(TaskTicket::open(&seal, &state, "alice"), None);
    }

    #[test]
    fn the_ticket_lives_as_long_as_the_task_within_bounds() {
        assert_eq!(ticket_ttl(None), MAX_TASK_TTL);
        assert_eq!(ticket_ttl(Some(600_000)), Duration::from_secs(600));
        assert_eq!(ticket_ttl(Some(1)), MIN_TASK_TTL);
        assert_eq!(ticket_ttl(Some(u64::MAX)), MAX_TASK_TTL);
    }
}
