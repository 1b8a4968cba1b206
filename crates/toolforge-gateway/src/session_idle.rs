//! The `/mcp` sessions' idle clock: a session that has had no request and no open stream for
//! its idle limit ends.
//!
//! rmcp's local session manager ends a session whose worker saw no event for its `keep_alive`;
//! the gateway answers some calls without the worker (`crate::direct_calls`), so it keeps the
//! clock itself, for every request, whichever path it takes. A session is in use while any
//! stream it handed out (a request's answer, the standalone `GET` stream, a resumed stream) is
//! open: a call longer than the limit, or a client listening for notifications, does not lose
//! its session. [`IdleClock::expired`] lists the sessions to end; the session manager's reaper
//! asks it every quarter of the limit, so a session ends between one and one and a quarter
//! limits after its last use.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::SessionId;
use tokio::time::Instant;

/// When each open session was last used, and how many of its streams are open.
#[derive(Debug)]
pub(crate) struct IdleClock {
    limit: Duration,
    sessions: Mutex<HashMap<SessionId, Use>>,
}

#[derive(Debug, Clone, Copy)]
struct Use {
    last: Instant,
    open: usize,
}

/// A stream of a session counted as open until this drops (which counts as a use).
#[derive(Debug)]
pub(crate) struct Held {
    clock: Arc<IdleClock>,
    id: SessionId,
}

impl IdleClock {
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            limit,
            sessions: Mutex::default(),
        }
    }

    /// How often the reaper should look: a quarter of the limit, within a millisecond and an
    /// hour.
    pub(crate) fn period(&self) -> Duration {
        (self.limit / 4).clamp(Duration::from_millis(1), Duration::from_secs(3600))
    }

    /// A new session `id`: its clock starts.
    pub(crate) fn start(&self, id: &SessionId, now: Instant) {
        self.sessions
            .lock()
            .insert(id.clone(), Use { last: now, open: 0 });
    }

    /// The session `id` is in use now (an id this clock does not know is ignored).
    pub(crate) fn touch(&self, id: &SessionId, now: Instant) {
        if let Some(u) = self.sessions.lock().get_mut(id) {
            u.last = now;
        }
    }

    /// Counts a stream of the session `id` as open until the returned guard drops (which is
    /// a use too).
    pub(crate) fn hold(self: &Arc<Self>, id: &SessionId) -> Held {
        if let Some(u) = self.sessions.lock().get_mut(id) {
            u.last = Instant::now();
            u.open += 1;
        }
        Held {
            clock: self.clone(),
            id: id.clone(),
        }
    }

    /// The session `id` has ended.
    pub(crate) fn forget(&self, id: &SessionId) {
        self.sessions.lock().remove(id);
    }

    /// The sessions without an open stream whose last use is at least the limit before `now`.
    pub(crate) fn expired(&self, now: Instant) -> Vec<SessionId> {
        self.sessions
            .lock()
            .iter()
            .filter(|(_, u)| u.open == 0 && now.saturating_duration_since(u.last) >= self.limit)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let now = Instant::now();
        if let Some(u) = self.clock.sessions.lock().get_mut(&self.id) {
            u.open = u.open.saturating_sub(1);
            u.last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(60);

    fn id(name: &str) -> SessionId {
        SessionId::from(name)
    }

    #[test]
    fn a_session_expires_a_limit_after_its_last_use() {
        let clock = IdleClock::new(LIMIT);
        let start = Instant::now();
        clock.start(&id("a"), start);
        clock.start(&id("b"), start);
        clock.touch(&id("b"), start + LIMIT / 2);
        assert!(
            clock
                .expired(start + LIMIT - Duration::from_millis(1))
                .is_empty()
        );
        assert_eq!(clock.expired(start + LIMIT), vec![id("a")]);
        let mut both = clock.expired(start + LIMIT * 3 / 2);
        both.sort();
        assert_eq!(both, vec![id("a"), id("b")]);
        clock.forget(&id("a"));
        assert_eq!(clock.expired(start + LIMIT * 3 / 2), vec![id("b")]);
    }

    #[test]
    fn a_session_with_an_open_stream_does_not_expire() {
        let clock = Arc::new(IdleClock::new(LIMIT));
        clock.start(&id("a"), Instant::now());
        let held = clock.hold(&id("a"));
        let later = Instant::now() + LIMIT * 10;
        assert!(clock.expired(later).is_empty(), "held");
        let second = clock.hold(&id("a"));
        drop(held);
        assert!(clock.expired(later).is_empty(), "one stream still open");
        drop(second);
        // The last stream's end is its last use.
        assert!(clock.expired(Instant::now() + LIMIT / 2).is_empty());
        assert_eq!(clock.expired(Instant::now() + LIMIT * 2), vec![id("a")]);
    }

    #[test]
    fn an_unknown_session_is_not_counted() {
        let clock = Arc::new(IdleClock::new(LIMIT));
        clock.touch(&id("nobody"), Instant::now());
        drop(clock.hold(&id("nobody")));
        assert!(clock.sessions.lock().is_empty());
    }

    #[test]
    fn the_reaper_looks_four_times_per_limit() {
        assert_eq!(IdleClock::new(LIMIT).period(), LIMIT / 4);
        assert_eq!(
            IdleClock::new(Duration::ZERO).period(),
            Duration::from_millis(1)
        );
        assert_eq!(
            IdleClock::new(Duration::MAX).period(),
            Duration::from_secs(3600)
        );
    }
}
