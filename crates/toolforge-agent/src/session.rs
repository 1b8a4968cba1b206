//! Session recency: the executed calls of each `session_id`, oldest first, for the selector's
//! `session-recency` rule. In memory by default; in Redis (`REDIS_URL`) so several replicas
//! share it. Dry-run calls are never recorded.
//!
//! A Redis failure never fails a request: the history reads as empty (the selector then falls
//! through to its later rules) and the error is logged.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use toolforge_select::ToolId;

/// Calls kept per session (older ones are forgotten).
pub const MAX_HISTORY: usize = 100;
/// Sessions kept in memory (the oldest are forgotten first).
pub const MAX_SESSIONS: usize = 10_000;
/// Bytes of history kept in memory (session ids and calls, counted with their bookkeeping;
/// the oldest sessions are forgotten first).
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// Bookkeeping counted per session besides its id (map and queue entries).
const SESSION_OVERHEAD: usize = 96;
/// Bookkeeping counted per call besides its names.
const CALL_OVERHEAD: usize = 48;
/// How long Redis keeps an idle session.
pub const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);

/// Where session history lives.
pub trait SessionStore: Send + Sync {
    /// `memory` or `redis`.
    fn backend(&self) -> &'static str;
    /// Executed calls of `session`, oldest first.
    fn history<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Vec<ToolId>>;
    /// Records an executed call.
    fn push<'a>(&'a self, session: &'a str, call: ToolId) -> BoxFuture<'a, ()>;
}

/// In-process sessions, bounded by count ([`MAX_SESSIONS`]) and by bytes.
#[derive(Debug)]
pub struct MemorySessions {
    inner: Mutex<Sessions>,
    max_bytes: usize,
}

impl Default for MemorySessions {
    fn default() -> Self {
        Self::with_max_bytes(MAX_BYTES)
    }
}

impl MemorySessions {
    /// Sessions kept within `max_bytes` (and [`MAX_SESSIONS`]).
    #[must_use]
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        Self {
            inner: Mutex::default(),
            max_bytes,
        }
    }

    /// Bytes held now, as counted against the bound.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

#[derive(Debug, Default)]
struct Sessions {
    history: HashMap<String, VecDeque<ToolId>>,
    /// Session ids, oldest first (the first to be forgotten).
    order: VecDeque<String>,
    /// What `history` and `order` hold, counted as [`session_bytes`] and [`call_bytes`].
    bytes: usize,
}

fn session_bytes(id: &str) -> usize {
    2 * id.len() + SESSION_OVERHEAD
}

fn call_bytes(call: &ToolId) -> usize {
    call.server.len() + call.name.len() + CALL_OVERHEAD
}

impl SessionStore for MemorySessions {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn history<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Vec<ToolId>> {
        let out = self
            .inner
            .lock()
            .history
            .get(session)
            .map(|h| h.iter().cloned().collect())
            .unwrap_or_default();
        Box::pin(async move { out })
    }

    fn push<'a>(&'a self, session: &'a str, call: ToolId) -> BoxFuture<'a, ()> {
        {
            let mut guard = self.inner.lock();
            let Sessions {
                history: map,
                order,
                bytes,
            } = &mut *guard;
            if !map.contains_key(session) {
                order.push_back(session.to_owned());
                *bytes += session_bytes(session);
            }
            let h = map.entry(session.to_owned()).or_default();
            *bytes += call_bytes(&call);
            h.push_back(call);
            while h.len() > MAX_HISTORY {
                if let Some(old) = h.pop_front() {
                    *bytes -= call_bytes(&old);
                }
            }
            // Forget the oldest sessions (never the one just written) until both bounds hold.
            while (map.len() > MAX_SESSIONS || *bytes > self.max_bytes) && order.len() > 1 {
                let Some(old) = order.pop_front() else { break };
                if old == session {
                    order.push_back(old);
                    continue;
                }
                if let Some(calls) = map.remove(&old) {
                    *bytes -= session_bytes(&old);
                    *bytes -= calls.iter().map(call_bytes).sum::<usize>();
                }
            }
        }
        Box::pin(async {})
    }
}

/// Sessions in Redis: one list per session under `toolforge:session:<id>`.
pub struct RedisSessions {
    conn: redis::aio::MultiplexedConnection,
}

impl std::fmt::Debug for RedisSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisSessions")
    }
}

fn key(session: &str) -> String {
    format!("toolforge:session:{session}")
}

impl RedisSessions {
    /// Connects to `url` (`redis://host:port/db`).
    ///
    /// # Errors
    /// The URL is invalid or the server does not answer.
    pub async fn connect(url: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let conn = client.get_multiplexed_async_connection().await?;
        Ok(Self { conn })
    }
}

impl SessionStore for RedisSessions {
    fn backend(&self) -> &'static str {
        "redis"
    }

    fn history<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Vec<ToolId>> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let got: Result<Vec<String>, _> = redis::cmd("LRANGE")
                .arg(key(session))
                .arg(0)
                .arg(-1)
                .query_async(&mut conn)
                .await;
            match got {
                Ok(items) => items.iter().filter_map(|s| ToolId::parse(s)).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "session history unavailable (Redis); treating it as empty");
                    Vec::new()
                }
            }
        })
    }

    fn push<'a>(&'a self, session: &'a str, call: ToolId) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let k = key(session);
            let done: Result<(), _> = redis::pipe()
                .atomic()
                .cmd("RPUSH")
                .arg(&k)
                .arg(call.to_string())
                .ignore()
                .cmd("LTRIM")
                .arg(&k)
                .arg(-(MAX_HISTORY as i64))
                .arg(-1)
                .ignore()
                .cmd("EXPIRE")
                .arg(&k)
                .arg(SESSION_TTL.as_secs())
                .ignore()
                .query_async(&mut conn)
                .await;
            if let Err(e) = done {
                tracing::warn!(error = %e, "could not record session history in Redis");
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_keeps_order_and_bounds() {
        let s = MemorySessions::default();
        for i in 0..(MAX_HISTORY + 5) {
            s.push("a", ToolId::new("srv", format!("t{i}"))).await;
        }
        let h = s.history("a").await;
        assert_eq!(h.len(), MAX_HISTORY);
        assert_eq!(h[0], ToolId::new("srv", "t5"));
        assert!(s.history("b").await.is_empty());
    }

    #[tokio::test]
    async fn memory_is_bounded_by_bytes() {
        let limit = 64 * 1024;
        let s = MemorySessions::with_max_bytes(limit);
        // Long session ids: 200 of 1 KB each would be 400 KB held twice.
        for i in 0..200 {
            let id = format!("{i:04}{}", "x".repeat(1000));
            s.push(&id, ToolId::new("srv", "tool")).await;
            assert!(s.bytes() <= limit, "{} bytes held after {i}", s.bytes());
        }
        // The newest is kept, the oldest forgotten.
        assert_eq!(
            s.history(&format!("0199{}", "x".repeat(1000))).await.len(),
            1
        );
        assert!(
            s.history(&format!("0000{}", "x".repeat(1000)))
                .await
                .is_empty()
        );
        // A forgotten session gives its bytes back: the count matches what is held.
        let held = s.inner.lock();
        let counted: usize = held
            .history
            .iter()
            .map(|(id, calls)| session_bytes(id) + calls.iter().map(call_bytes).sum::<usize>())
            .sum();
        assert_eq!(held.bytes, counted);
    }
}
