//! `"isolation": "session"`: a connection of its own (a child process for a stdio server) per
//! client session, for stateful servers and per-user credentials. Such a server's requests
//! during a call then always belong to that one session, so they are never refused as
//! ambiguous. The shared connection still lists the server's tools for everyone.
//!
//! Bounded: at most [`MAX_PER_SERVER`] isolated connections per server at once (a session past
//! it gets a clear error); one is stopped when its client session ends or after [`IDLE`]
//! without a call. Only handshake-era sessions are isolated: a 2026-07-28 client has no session
//! to bind a connection to, and its calls use the shared one.

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
/// An isolated connection without a call for this long is stopped.
pub const IDLE: Duration = Duration::from_secs(300);

struct Entry {
    up: Arc<Upstream>,
    stop: CancellationToken,
    session: Peer<RoleServer>,
    last_used: Instant,
}

/// The isolated connections of one pool.
pub(crate) struct Isolated {
    entries: Mutex<HashMap<(String, u64), Entry>>,
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
        let key = (shared.cfg.name.clone(), caller.session);
        let mut entries = self.entries.lock();
        reap(&mut entries);
        if let Some(entry) = entries.get_mut(&key) {
            entry.last_used = Instant::now();
            return Ok(entry.up.clone());
        }
        let open = entries.keys().filter(|(s, _)| *s == key.0).count();
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
        let up = Arc::new(Upstream::new(shared.cfg.clone(), relay, None));
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
                session: caller.peer.clone(),
                last_used: Instant::now(),
            },
        );
        Ok(up)
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
            .filter(|(s, _)| s == server)
            .count()
    }
}

fn reap(entries: &mut HashMap<(String, u64), Entry>) {
    entries.retain(|_, e| {
        let keep = !e.session.is_transport_closed() && e.last_used.elapsed() < IDLE;
        if !keep {
            e.stop.cancel();
        }
        keep
    });
}
