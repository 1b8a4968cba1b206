//! `"isolation": "session"`: a connection of its own (a child process for a stdio server) per
//! client session, for stateful servers and per-user credentials. Such a server's requests
//! during a call then always belong to that one session, so they are never refused as
//! ambiguous. The shared connection still lists the server's tools for everyone.
//!
//! Bounded: at most [`MAX_PER_SERVER`] isolated connections per server at once (a session past
//! it gets a clear error); one is stopped when its client session ends or after [`IDLE`]
//! without a call. Only handshake-era sessions are isolated: a 2026-07-28 client has no session
//! to bind a connection to, and its calls use the shared one.
//!
//! A server with per-principal `"auth"` (`"oauth"`, `"token-exchange"`) has a connection per
//! principal instead, whatever the era, carrying that principal's token and no one else's: at
//! most [`MAX_PRINCIPALS_PER_SERVER`] at once, one stopped after [`IDLE`] without a call.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::{Peer, RoleServer};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Isolation;
use crate::options::PoolOptions;
use crate::relay::{Caller, PoolEvent, Relay};
use crate::supervise;
use crate::upstream::Upstream;

/// Most isolated connections one server may have at once.
pub const MAX_PER_SERVER: usize = 32;
/// Most principals' connections one server may have at once.
pub const MAX_PRINCIPALS_PER_SERVER: usize = 256;
/// An isolated connection without a call for this long is stopped.
pub const IDLE: Duration = Duration::from_secs(300);

struct Entry {
    up: Arc<Upstream>,
    stop: CancellationToken,
    /// The client session it serves (none: a principal's connection).
    session: Option<Peer<RoleServer>>,
    last_used: Instant,
}

/// Whom an isolated connection serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Owner {
    Session(u64),
    Principal(String),
}

/// The isolated connections of one pool.
pub(crate) struct Isolated {
    entries: Mutex<HashMap<(String, Owner), Entry>>,
    relay_tx: mpsc::UnboundedSender<PoolEvent>,
    options: PoolOptions,
    events: broadcast::Sender<PoolEvent>,
    cancel: CancellationToken,
}

impl Isolated {
    pub(crate) fn new(
        relay_tx: mpsc::UnboundedSender<PoolEvent>,
        options: PoolOptions,
        events: broadcast::Sender<PoolEvent>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            relay_tx,
            options,
            events,
            cancel,
        }
    }

    /// The connection a call of `caller` to `shared`'s server goes over: `shared` itself, or
    /// the caller's session's own connection (started on first use) when the server is
    /// isolated per session.
    ///
    /// # Errors
    /// The server already has [`MAX_PER_SERVER`] isolated connections.
    pub(crate) fn upstream_for(
        &self,
        shared: &Arc<Upstream>,
        caller: Option<&Caller>,
    ) -> Result<Arc<Upstream>, String> {
        let Some(caller) = caller.filter(|c| {
            shared.cfg.isolation == Isolation::Session
                && c.peer
                    .peer_info()
                    .is_some_and(|i| i.protocol_version.has_initialize())
        }) else {
            return Ok(shared.clone());
        };
        let key = (shared.cfg.name.clone(), Owner::Session(caller.session));
        let mut entries = self.entries.lock();
        reap(&mut entries);
        if let Some(entry) = entries.get_mut(&key) {
            entry.last_used = Instant::now();
            return Ok(entry.up.clone());
        }
        let open = entries
            .keys()
            .filter(|(s, o)| *s == key.0 && matches!(o, Owner::Session(_)))
            .count();
        if open >= MAX_PER_SERVER {
            return Err(format!(
                "server \"{}\" already runs {MAX_PER_SERVER} isolated sessions; try again when \
                 one ends",
                key.0
            ));
        }
        let relay = Relay::new(
            &shared.cfg.name,
            self.relay_tx.clone(),
            self.options.elicitation_fallback,
        );
        let up = Arc::new(
            Upstream::new(shared.cfg.clone(), relay, None)
                .with_credentials(shared.credentials.clone()),
        );
        let stop = self.cancel.child_token();
        let (first, _) = tokio::sync::oneshot::channel();
        tokio::spawn(supervise::supervise(
            up.clone(),
            self.options.clone(),
            stop.clone(),
            self.events.clone(),
            first,
        ));
        entries.insert(
            key,
            Entry {
                up: up.clone(),
                stop,
                session: Some(caller.peer.clone()),
                last_used: Instant::now(),
            },
        );
        Ok(up)
    }

    /// `principal`'s own connection to `shared`'s server (started on first use, with
    /// `credentials`).
    ///
    /// # Errors
    /// The server already has [`MAX_PRINCIPALS_PER_SERVER`] principals' connections.
    pub(crate) fn upstream_for_principal(
        &self,
        shared: &Arc<Upstream>,
        principal: &str,
        credentials: impl FnOnce() -> crate::auth::token::Credentials,
    ) -> Result<Arc<Upstream>, String> {
        let key = (
            shared.cfg.name.clone(),
            Owner::Principal(principal.to_owned()),
        );
        let mut entries = self.entries.lock();
        reap(&mut entries);
        if let Some(entry) = entries.get_mut(&key) {
            // A connection refused for want of authorization is started again: the principal
            // may have consented since.
            let refused = entry.up.state() == crate::upstream::ServerState::Failed
                && entry.up.refused.lock().is_some();
            if !refused {
                entry.last_used = Instant::now();
                return Ok(entry.up.clone());
            }
            entry.stop.cancel();
            entries.remove(&key);
        }
        let open = entries
            .keys()
            .filter(|(s, o)| *s == key.0 && matches!(o, Owner::Principal(_)))
            .count();
        if open >= MAX_PRINCIPALS_PER_SERVER {
            return Err(format!(
                "server \"{}\" already has connections for {MAX_PRINCIPALS_PER_SERVER} principals; \
                 try again when one idles out",
                key.0
            ));
        }
        let relay = Relay::new(
            &shared.cfg.name,
            self.relay_tx.clone(),
            self.options.elicitation_fallback,
        );
        let mut up =
            Upstream::new(shared.cfg.clone(), relay, None).with_credentials(Some(credentials()));
        up.principal = Some(principal.to_owned());
        let up = Arc::new(up);
        let stop = self.cancel.child_token();
        let (first, _) = tokio::sync::oneshot::channel();
        tokio::spawn(supervise::supervise(
            up.clone(),
            self.options.clone(),
            stop.clone(),
            self.events.clone(),
            first,
        ));
        entries.insert(
            key,
            Entry {
                up: up.clone(),
                stop,
                session: None,
                last_used: Instant::now(),
            },
        );
        Ok(up)
    }

    /// Stops `principal`'s connection to `server` (its grant was revoked).
    pub(crate) fn forget_principal(&self, server: &str, principal: &str) {
        let key = (server.to_owned(), Owner::Principal(principal.to_owned()));
        if let Some(entry) = self.entries.lock().remove(&key) {
            entry.stop.cancel();
        }
    }

    /// Stops the connections whose session ended or that sat idle too long.
    pub(crate) fn reap(&self) {
        reap(&mut self.entries.lock());
    }

    /// How many isolated connections are open, for `server`.
    pub(crate) fn open(&self, server: &str) -> usize {
        self.entries
            .lock()
            .keys()
            .filter(|(s, o)| s == server && matches!(o, Owner::Session(_)))
            .count()
    }

    /// The principals with a connection of their own to `server`.
    pub(crate) fn principals(&self, server: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .entries
            .lock()
            .keys()
            .filter_map(|(s, o)| match o {
                Owner::Principal(p) if s == server => Some(p.clone()),
                _ => None,
            })
            .collect();
        names.sort();
        names
    }
}

fn reap(entries: &mut HashMap<(String, Owner), Entry>) {
    entries.retain(|_, e| {
        let session_open = e.session.as_ref().is_none_or(|s| !s.is_transport_closed());
        let keep = session_open && e.last_used.elapsed() < IDLE;
        if !keep {
            e.stop.cancel();
        }
        keep
    });
}
