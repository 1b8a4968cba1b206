//! The `/mcp` sessions: rmcp's local session manager under a cap, with the gateway's own idle
//! clock and its calls answered without the session's worker.
//!
//! - No session is created past `max_sessions` (the `/mcp` guard answers such an `initialize`
//!   with a clear error first, this is the hard bound behind it).
//! - A session with no request and no open stream for `idle_timeout` ends, its worker stopped
//!   and its memory given back (`crate::session_idle`; rmcp's own idle limit is off).
//! - A session's plain `tools/call` is answered without its worker (`crate::direct_calls`):
//!   `create_stream` hands it to the session's handler, which registered itself on
//!   `notifications/initialized` with the [`DirectSlot`] this manager put in that
//!   notification's extensions.
//!
//! Each session belongs to whoever opened it (its principal; with identity off, its peer's
//! address): another principal that learned its id gets "session not found", for every request
//! and for `DELETE`. When the cap is reached, a newcomer still gets in while some owner holds
//! more sessions than the newcomer plus one: that owner's oldest session is closed for it. So
//! one client cannot take every place and lock everyone else out until its sessions idle out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::Either;
use futures::{Stream, StreamExt as _};
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, GetExtensions as _, ServerJsonRpcMessage,
};
use rmcp::service::Service;
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

use crate::direct_calls::DirectSessions;
pub use crate::direct_calls::DirectSlot;
use crate::session_idle::IdleClock;

/// What a client with an unknown `Mcp-Session-Id` is told.
pub const SESSION_GONE_MESSAGE: &str = "session not found or expired (the replica that held it \
     may have restarted): start a new session by sending initialize without Mcp-Session-Id";

/// Session limits of `/mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions open at once.
    pub max_sessions: usize,
    /// A session with no request (and no open stream) for this long ends.
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

/// The owner of each open session, in the order they were opened, and the fair share of the
/// cap (also kept by the legacy SSE sessions, `crate::legacy_sse`).
#[derive(Debug, Default)]
pub(crate) struct Owners {
    by_session: std::collections::HashMap<String, SessionOwner>,
    opened: std::collections::VecDeque<String>,
}

/// Whether a newcomer gets a place.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Below the cap.
    Room,
    /// At the cap: this session (the oldest of the owner holding the most) makes room.
    Evict(String),
    /// At the cap, and no owner holds more than the newcomer plus one.
    Full,
}

impl Owners {
    /// Forgets the sessions `open` says are gone.
    pub(crate) fn retain(&mut self, open: impl Fn(&str) -> bool) {
        self.by_session.retain(|id, _| open(id));
        let by_session = &self.by_session;
        self.opened.retain(|id| by_session.contains_key(id));
    }

    /// Whether `owner` gets a place with `open` sessions open of `max`: when the cap is
    /// reached, an owner holding more than `owner` plus one gives up its oldest session (it is
    /// forgotten here; the caller closes it).
    pub(crate) fn admit(&mut self, owner: &SessionOwner, open: usize, max: usize) -> Admission {
        if open < max {
            return Admission::Room;
        }
        let mut held: std::collections::HashMap<&SessionOwner, usize> =
            std::collections::HashMap::new();
        for o in self.by_session.values() {
            *held.entry(o).or_default() += 1;
        }
        let mine = held.get(owner).copied().unwrap_or(0);
        let Some((heaviest, most)) = held.iter().max_by_key(|(_, n)| **n) else {
            return Admission::Full;
        };
        if *most <= mine + 1 {
            return Admission::Full;
        }
        let heaviest = (*heaviest).clone();
        let oldest = self
            .opened
            .iter()
            .find(|id| self.by_session.get(*id) == Some(&heaviest))
            .cloned();
        match oldest {
            Some(id) => {
                self.by_session.remove(&id);
                Admission::Evict(id)
            }
            None => Admission::Full,
        }
    }

    /// Records that `owner` opened the session `id`.
    pub(crate) fn bind(&mut self, id: &str, owner: SessionOwner) {
        if self.by_session.insert(id.to_owned(), owner).is_none() {
            self.opened.push_back(id.to_owned());
        }
    }

    /// Whether `owner` may use the session `id`: its owner, or a session with none recorded.
    pub(crate) fn may_use(&self, id: &str, owner: &SessionOwner) -> bool {
        self.by_session.get(id).is_none_or(|o| o == owner)
    }

    /// Forgets the session `id`.
    pub(crate) fn remove(&mut self, id: &str) {
        if self.by_session.remove(id).is_some() {
            self.opened.retain(|o| o != id);
        }
    }
}

/// rmcp's [`LocalSessionManager`] with a cap on open sessions, an owner per session, an idle
/// limit, and the calls of sessions whose handler (`S`) registered itself answered without the
/// worker.
#[derive(Debug)]
pub struct CappedSessions<S = crate::mcp::Gateway> {
    shared: Arc<Sessions<S>>,
}

#[derive(Debug)]
struct Sessions<S> {
    inner: LocalSessionManager,
    max_sessions: usize,
    /// Serializes creation, so two `initialize`s cannot both take the last place.
    creating: tokio::sync::Mutex<()>,
    owners: parking_lot::Mutex<Owners>,
    idle: Arc<IdleClock>,
    direct: Arc<DirectSessions<S>>,
    /// Whether the task that ends idle sessions runs (it starts with the first session).
    reaping: AtomicBool,
}

impl<S> CappedSessions<S>
where
    S: Service<RoleServer> + Clone + Send + Sync + 'static,
{
    #[must_use]
    pub fn new(limits: SessionLimits) -> Self {
        let mut inner = LocalSessionManager::default();
        let mut config = SessionConfig::default();
        // The idle limit is this manager's: rmcp's counts only what passes the worker.
        config.keep_alive = None;
        inner.session_config = config;
        Self {
            shared: Arc::new(Sessions {
                inner,
                max_sessions: limits.max_sessions,
                creating: tokio::sync::Mutex::new(()),
                owners: parking_lot::Mutex::default(),
                idle: Arc::new(IdleClock::new(limits.idle_timeout)),
                direct: Arc::default(),
                reaping: AtomicBool::new(false),
            }),
        }
    }

    /// Sessions open now.
    pub async fn open(&self) -> usize {
        self.shared.inner.sessions.read().await.len()
    }

    /// Whether no new session may open.
    pub async fn is_full(&self) -> bool {
        self.open().await >= self.shared.max_sessions
    }

    #[must_use]
    pub fn max_sessions(&self) -> usize {
        self.shared.max_sessions
    }

    /// The `tools/call`s answered without a session's worker so far.
    #[must_use]
    pub fn direct_calls(&self) -> u64 {
        self.shared.direct.served()
    }

    /// Makes room for a session of `owner`: `true` when there is a place (closing the oldest
    /// session of an owner that holds more than `owner` plus one, when the cap is reached).
    pub async fn admit(&self, owner: &SessionOwner) -> bool {
        let open: std::collections::HashSet<String> = self
            .shared
            .inner
            .sessions
            .read()
            .await
            .keys()
            .map(ToString::to_string)
            .collect();
        let admission = {
            let mut owners = self.shared.owners.lock();
            owners.retain(|id| open.contains(id));
            owners.admit(owner, open.len(), self.shared.max_sessions)
        };
        let id = match admission {
            Admission::Room => return true,
            Admission::Full => return false,
            Admission::Evict(id) => id,
        };
        tracing::info!(
            "the session cap is reached: closing the oldest session of the owner holding the most"
        );
        let _ = self.shared.close(&SessionId::from(id.as_str())).await;
        true
    }

    /// Records that `owner` opened the session `id`.
    pub fn bind(&self, id: &str, owner: SessionOwner) {
        self.shared.owners.lock().bind(id, owner);
    }

    /// Whether `owner` may use the session `id`: its owner, or a session with none recorded.
    #[must_use]
    pub fn may_use(&self, id: &str, owner: &SessionOwner) -> bool {
        self.shared.owners.lock().may_use(id, owner)
    }

    /// Starts the task that ends idle sessions, once; it ends with this manager.
    fn start_reaper(&self) {
        if self.shared.reaping.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(reap(
            Arc::downgrade(&self.shared),
            self.shared.idle.period(),
        ));
    }
}

impl<S> Sessions<S>
where
    S: Service<RoleServer> + Clone + Send + Sync + 'static,
{
    async fn close(&self, id: &SessionId) -> Result<(), SessionsError> {
        self.direct.close(id);
        self.idle.forget(id);
        self.owners.lock().by_session.remove(&**id);
        Ok(self.inner.close_session(id).await?)
    }

    /// `stream`, with the session `id` in use until it ends.
    fn held<T: Stream<Item = ServerSseMessage> + Send + Sync + 'static>(
        &self,
        id: &SessionId,
        stream: T,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        let held = self.idle.hold(id);
        stream.map(move |message| {
            let _in_use = &held;
            message
        })
    }
}

/// Ends the sessions idle past their limit, every `period`, while the manager lives.
async fn reap<S>(sessions: Weak<Sessions<S>>, period: Duration)
where
    S: Service<RoleServer> + Clone + Send + Sync + 'static,
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        for id in sessions.idle.expired(tokio::time::Instant::now()) {
            tracing::debug!(session = %id, "MCP session idle past its limit; closing it");
            if let Err(error) = sessions.close(&id).await {
                tracing::warn!(session = %id, %error, "closing an idle MCP session failed");
            }
        }
    }
}

impl<S> SessionManager for CappedSessions<S>
where
    S: Service<RoleServer> + Clone + Send + Sync + 'static,
{
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.shared.creating.lock().await;
        if self.is_full().await {
            return Err(SessionsError::Full(self.shared.max_sessions));
        }
        let (id, transport) = self.shared.inner.create_session().await?;
        self.shared.idle.start(&id, tokio::time::Instant::now());
        self.start_reaper();
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.shared.idle.touch(id, tokio::time::Instant::now());
        Ok(self.shared.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.shared.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.shared.close(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = match self.shared.direct.serve(id, message) {
            Ok(answer) => Either::Left(answer),
            Err(message) => Either::Right(self.shared.inner.create_stream(id, message).await?),
        };
        Ok(self.shared.held(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        mut message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.shared.idle.touch(id, tokio::time::Instant::now());
        if let ClientJsonRpcMessage::Notification(notification) = &mut message {
            let notification = &mut notification.notification;
            if let ClientNotification::CancelledNotification(cancelled) = notification {
                // The service loop cancels the requests it runs; these are not among them.
                if let Some(request) = &cancelled.params.request_id {
                    self.shared.direct.cancel(id, request);
                }
            } else if matches!(notification, ClientNotification::InitializedNotification(_)) {
                let slot = self.shared.direct.slot(id);
                notification.extensions_mut().insert(slot);
            }
        }
        Ok(self.shared.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.shared.inner.create_standalone_stream(id).await?;
        Ok(self.shared.held(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.shared.inner.resume(id, last_event_id).await?;
        Ok(self.shared.held(id, stream))
    }
}
