//! The legacy SSE sessions: each with its owner, its connection (the `GET /sse` request whose
//! query scopes its visibility), its queues and the requests it has in flight; at most
//! `max_sessions` at once, with the fair share of `/mcp` (`crate::mcp_sessions::Owners`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::drain::Drain;
use crate::mcp_sessions::{Admission, Owners, SessionOwner};

/// Requests one session may have unanswered at once.
pub const MAX_PENDING_PER_SESSION: usize = 256;

/// The `GET /sse` request a session was opened with: its URI (the query scopes what the
/// session sees, as the connection URL of `/mcp` does) and its `x-mcp-*` headers (used for
/// every message whose POST does not send its own).
#[derive(Debug, Clone)]
pub(crate) struct Connection {
    pub(crate) uri: http::Uri,
    pub(crate) headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

/// Why a request was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its id is that of a request still in flight on the session.
    Duplicate,
    /// The session has [`MAX_PENDING_PER_SESSION`] requests in flight.
    TooMany,
}

/// The client's requests not answered yet (each holds the drain while it runs: its answer goes
/// out on the stream, after its POST was answered).
#[derive(Debug, Default)]
pub(crate) struct InFlight(Mutex<HashMap<String, Option<crate::drain::InFlight>>>);

fn key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl InFlight {
    /// Takes `id` for a request now in flight.
    pub(crate) fn claim(&self, id: &RequestId, drain: Option<&Arc<Drain>>) -> Result<(), Refused> {
        let mut pending = self.0.lock();
        let key = key(id);
        if pending.contains_key(&key) {
            return Err(Refused::Duplicate);
        }
        if pending.len() >= MAX_PENDING_PER_SESSION {
            return Err(Refused::TooMany);
        }
        pending.insert(key, drain.map(Drain::enter));
        Ok(())
    }

    /// The answer to `id` went out (or the request will not run).
    pub(crate) fn answered(&self, id: &RequestId) {
        self.0.lock().remove(&key(id));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.lock().is_empty()
    }
}

/// One open session.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) owner: SessionOwner,
    pub(crate) connection: Connection,
    /// Where the client's messages go (taken by the session's transport).
    pub(crate) inbox: mpsc::Sender<ClientJsonRpcMessage>,
    /// The session's event stream (for an error the gateway answers itself).
    pub(crate) outbox: mpsc::Sender<ServerJsonRpcMessage>,
    pub(crate) in_flight: Arc<InFlight>,
    /// The last POST.
    pub(crate) last_post: Mutex<Instant>,
    pub(crate) end: CancellationToken,
}

impl Session {
    /// Waits until the session has had no POST for `idle` and nothing in flight.
    pub(crate) async fn idled_out(&self, idle: Duration) {
        loop {
            let deadline = *self.last_post.lock() + idle;
            if Instant::now() >= deadline && self.in_flight.is_empty() {
                return;
            }
            // A request in flight keeps the session; look again a quarter of the limit later.
            let next = deadline.max(Instant::now() + idle / 4);
            tokio::time::sleep_until(next).await;
        }
    }
}

/// Every open session, by id.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Arc<Session>>>,
    owners: Mutex<Owners>,
}

impl Sessions {
    pub(crate) fn len(&self) -> usize {
        self.open.lock().len()
    }

    /// Opens `session` as `id` if there is room under `max`: `false` when there is none. At
    /// the cap, the oldest session of an owner holding more than this one's owner plus one
    /// ends for it.
    pub(crate) fn open(&self, id: String, session: Arc<Session>, max: usize) -> bool {
        let mut open = self.open.lock();
        let mut owners = self.owners.lock();
        owners.retain(|id| open.contains_key(id));
        match owners.admit(&session.owner, open.len(), max) {
            Admission::Room => {}
            Admission::Full => return false,
            Admission::Evict(evicted) => {
                if let Some(old) = open.remove(&evicted) {
                    tracing::info!(
                        "the legacy SSE session cap is reached: closing the oldest session of \
                         the owner holding the most"
                    );
                    old.end.cancel();
                }
            }
        }
        owners.bind(&id, session.owner.clone());
        open.insert(id, session);
        true
    }

    /// The session `id`, if `owner` opened it (anyone else is told it does not exist).
    pub(crate) fn get(&self, id: &str, owner: &SessionOwner) -> Option<Arc<Session>> {
        let session = self.open.lock().get(id).cloned()?;
        (session.owner == *owner && !session.end.is_cancelled()).then_some(session)
    }

    pub(crate) fn remove(&self, id: &str) {
        self.open.lock().remove(id);
        self.owners.lock().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(name: &str) -> SessionOwner {
        let mut extensions = http::Extensions::new();
        extensions.insert(toolforge_policy::Principal::new(name));
        SessionOwner::of(&extensions, true)
    }

    fn session(of: &SessionOwner) -> Arc<Session> {
        let (inbox, _) = mpsc::channel(1);
        let (outbox, _) = mpsc::channel(1);
        Arc::new(Session {
            owner: of.clone(),
            connection: Connection {
                uri: "/sse".parse().unwrap(),
                headers: Vec::new(),
            },
            inbox,
            outbox,
            in_flight: Arc::default(),
            last_post: Mutex::new(Instant::now()),
            end: CancellationToken::new(),
        })
    }

    #[test]
    fn a_session_is_only_found_by_its_owner_and_the_cap_is_shared_fairly() {
        let sessions = Sessions::default();
        let (alice, bob) = (owner("alice"), owner("bob"));
        for i in 0..3 {
            assert!(sessions.open(format!("a{i}"), session(&alice), 3));
        }
        assert!(sessions.get("a0", &alice).is_some());
        assert!(sessions.get("a0", &bob).is_none(), "not bob's");
        // At the cap, bob gets in: alice's oldest session ends for him.
        let oldest = sessions.get("a0", &alice).unwrap();
        assert!(sessions.open("b0".into(), session(&bob), 3));
        assert!(oldest.end.is_cancelled());
        assert!(sessions.get("a0", &alice).is_none());
        assert_eq!(sessions.len(), 3);
        // Alice holds two, bob one: alice may not take bob's place, but a newcomer takes one
        // of alice's.
        assert!(!sessions.open("a3".into(), session(&alice), 3));
        let next = sessions.get("a1", &alice).unwrap();
        assert!(sessions.open("c0".into(), session(&owner("carol")), 3));
        assert!(next.end.is_cancelled());
        assert_eq!(sessions.len(), 3);
    }

    #[test]
    fn request_ids_are_claimed_once_and_bounded() {
        let in_flight = InFlight::default();
        let id = RequestId::Number(7);
        assert_eq!(in_flight.claim(&id, None), Ok(()));
        assert_eq!(in_flight.claim(&id, None), Err(Refused::Duplicate));
        in_flight.answered(&id);
        assert!(in_flight.is_empty());
        for n in 0..MAX_PENDING_PER_SESSION {
            in_flight
                .claim(&RequestId::String(n.to_string().into()), None)
                .unwrap();
        }
        assert_eq!(
            in_flight.claim(&RequestId::Number(1), None),
            Err(Refused::TooMany)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_idles_out_only_with_nothing_in_flight() {
        let alice = owner("alice");
        let s = session(&alice);
        s.in_flight.claim(&RequestId::Number(1), None).unwrap();
        let idle = Duration::from_secs(60);
        let waited = tokio::time::timeout(Duration::from_secs(600), s.idled_out(idle)).await;
        assert!(waited.is_err(), "a request in flight keeps the session");
        s.in_flight.answered(&RequestId::Number(1));
        let started = Instant::now();
        s.idled_out(idle).await;
        assert!(started.elapsed() <= idle / 4 + Duration::from_millis(1));
    }
}
