//! The `/mcp` sessions: rmcp's local session manager under a cap. A session idle for
//! `idle_timeout` ends (its worker stops and the session leaves the map, giving its memory
//! back); no session is created past `max_sessions` (the `/mcp` guard answers such an
//! `initialize` with a clear error first, this is the hard bound behind it).
//!
//! Each session belongs to whoever opened it (its principal; with identity off, its peer's
//! address): another principal that learned its id gets "session not found", for every request
//! and for `DELETE`. When the cap is reached, a newcomer still gets in while some owner holds
//! more sessions than the newcomer plus one: that owner's oldest session is closed for it. So
//! one client cannot take every place and lock everyone else out until its sessions idle out.
//!
//! Replies are never stored for resumption here, so a session's `tools/call`s may be answered
//! on the HTTP task without its worker (`vendor/rmcp`, `direct.rs`, for the calls that cannot
//! send anything else on their stream); such a call touches the session at most every quarter
//! of `idle_timeout`, so that a session in use never reaches it.

use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

/// What a client with an unknown `Mcp-Session-Id` is told.
pub const SESSION_GONE_MESSAGE: &str = "session not found or expired (the replica that held it \
     may have restarted): start a new session by sending initialize without Mcp-Session-Id";

/// Session limits of `/mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions open at once.
    pub max_sessions: usize,
    /// A session with no request for this long ends.
    pub idle_timeout: Duration,
}

impl SessionLimits {
    pub const DEFAULT_MAX_SESSIONS: usize = 1000;
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error("the gateway already has its maximum of {0} sessions open; try again later")]
    Full(usize),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// Who opened a session: a principal, or, with identity off, a peer address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionOwner(String);

impl SessionOwner {
    /// The owner of a request: its principal when identity is on, else its peer's address.
    #[must_use]
    pub fn of(extensions: &axum::http::Extensions, identity_on: bool) -> Self {
        if identity_on {
            return Self(format!(
                "principal:{}",
                crate::identity::principal_of(extensions)
            ));
        }
        let peer = extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string());
        Self(format!("peer:{peer}"))
    }
}

/// The owner of each open session, in the order they were opened.
#[derive(Debug, Default)]
struct Owners {
    by_session: std::collections::HashMap<String, SessionOwner>,
    opened: std::collections::VecDeque<String>,
}

/// rmcp's [`LocalSessionManager`] with a cap on open sessions and an owner per session.
#[derive(Debug)]
pub struct CappedSessions {
    inner: LocalSessionManager,
    max_sessions: usize,
    /// Serializes creation, so two `initialize`s cannot both take the last place.
    creating: tokio::sync::Mutex<()>,
    owners: parking_lot::Mutex<Owners>,
}

impl CappedSessions {
    #[must_use]
    pub fn new(limits: SessionLimits) -> Self {
        let mut inner = LocalSessionManager::default();
        let mut config = SessionConfig::default();
        config.keep_alive = Some(limits.idle_timeout);
        inner.session_config = config;
        Self {
            inner,
            max_sessions: limits.max_sessions,
            creating: tokio::sync::Mutex::new(()),
            owners: parking_lot::Mutex::default(),
        }
    }

    /// Sessions open now.
    pub async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// Whether no new session may open.
    pub async fn is_full(&self) -> bool {
        self.open().await >= self.max_sessions
    }

    #[must_use]
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// Makes room for a session of `owner`: `true` when there is a place (closing the oldest
    /// session of an owner that holds more than `owner` plus one, when the cap is reached).
    pub async fn admit(&self, owner: &SessionOwner) -> bool {
        let open: std::collections::HashSet<String> = self
            .inner
            .sessions
            .read()
            .await
            .keys()
            .map(ToString::to_string)
            .collect();
        let evict = {
            let mut owners = self.owners.lock();
            owners.by_session.retain(|id, _| open.contains(id));
            let Owners { by_session, opened } = &mut *owners;
            opened.retain(|id| by_session.contains_key(id));
            if open.len() < self.max_sessions {
                return true;
            }
            let mut held: std::collections::HashMap<&SessionOwner, usize> =
                std::collections::HashMap::new();
            for o in by_session.values() {
                *held.entry(o).or_default() += 1;
            }
            let mine = held.get(owner).copied().unwrap_or(0);
            let Some((heaviest, most)) = held.iter().max_by_key(|(_, n)| **n) else {
                return false;
            };
            if *most <= mine + 1 {
                return false;
            }
            let heaviest = (*heaviest).clone();
            let oldest = opened
                .iter()
                .find(|id| by_session.get(*id) == Some(&heaviest))
                .cloned();
            if let Some(id) = &oldest {
                by_session.remove(id);
            }
            oldest
        };
        let Some(id) = evict else {
            return false;
        };
        tracing::info!(
            "the session cap is reached: closing the oldest session of the owner holding the most"
        );
        let _ = self
            .inner
            .close_session(&SessionId::from(id.as_str()))
            .await;
        true
    }

    /// Records that `owner` opened the session `id`.
    pub fn bind(&self, id: &str, owner: SessionOwner) {
        let mut owners = self.owners.lock();
        if owners.by_session.insert(id.to_owned(), owner).is_none() {
            owners.opened.push_back(id.to_owned());
        }
    }

    /// Whether `owner` may use the session `id`: its owner, or a session with none recorded.
    #[must_use]
    pub fn may_use(&self, id: &str, owner: &SessionOwner) -> bool {
        self.owners
            .lock()
            .by_session
            .get(id)
            .is_none_or(|o| o == owner)
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.creating.lock().await;
        if self.is_full().await {
            return Err(SessionsError::Full(self.max_sessions));
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    fn direct_touch_interval(&self) -> Option<Duration> {
        // A quarter of the idle limit (no limit, no need to touch).
        let keep_alive = self.inner.session_config.keep_alive;
        Some(keep_alive.map_or(Duration::MAX, |limit| limit / 4))
    }

    async fn touch_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.inner.touch_session(id).await?)
    }
}
