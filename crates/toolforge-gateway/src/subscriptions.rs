//! Resource subscriptions of the gateway's sessions: who to tell when a backend says a resource
//! changed. Bounded: a session holds at most [`MAX_SUBSCRIPTIONS_PER_SESSION`] whose URIs
//! together take at most [`MAX_SUBSCRIBED_BYTES_PER_SESSION`] (a count alone let 128 URIs of a
//! megabyte each hold 133 MiB), a URI is kept only while some session is subscribed to it, and
//! sessions whose transport closed are dropped whenever the map is touched.

use std::collections::{BTreeMap, HashMap};

use rmcp::{Peer, RoleServer};

/// Subscriptions one session may hold.
pub const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 64;

/// The bytes of the URIs one session may be subscribed to, together.
pub const MAX_SUBSCRIBED_BYTES_PER_SESSION: usize = 64 * 1024;

/// A subscriber's way back: its peer, or a stand-in in tests.
pub(crate) trait Subscriber: Clone {
    /// The session's transport is gone.
    fn is_closed(&self) -> bool;
}

impl Subscriber for Peer<RoleServer> {
    fn is_closed(&self) -> bool {
        self.is_transport_closed()
    }
}

/// Why a subscription was refused: the session already holds its maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TooMany {
    /// [`MAX_SUBSCRIPTIONS_PER_SESSION`] subscriptions.
    Subscriptions,
    /// [`MAX_SUBSCRIBED_BYTES_PER_SESSION`] bytes of URIs.
    Bytes,
}

impl std::fmt::Display for TooMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Subscriptions => write!(
                f,
                "this session already holds {MAX_SUBSCRIPTIONS_PER_SESSION} subscriptions; unsubscribe from some first"
            ),
            Self::Bytes => write!(
                f,
                "this session's subscriptions would hold more than {MAX_SUBSCRIBED_BYTES_PER_SESSION} bytes of URIs; unsubscribe from some first"
            ),
        }
    }
}

/// What one session holds: its subscriptions and their URIs' bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    count: usize,
    bytes: usize,
}

/// uri -> sessions subscribed to it, and what each session holds.
pub(crate) struct Subscriptions<P> {
    by_uri: BTreeMap<String, Vec<(u64, P)>>,
    per_session: HashMap<u64, Held>,
}

impl<P> Default for Subscriptions<P> {
    fn default() -> Self {
        Self {
            by_uri: BTreeMap::new(),
            per_session: HashMap::new(),
        }
    }
}

impl<P: Subscriber> Subscriptions<P> {
    /// Subscribes `session` to `uri`; `Ok(true)` when it was not subscribed yet.
    pub(crate) fn subscribe(&mut self, uri: &str, session: u64, peer: P) -> Result<bool, TooMany> {
        self.prune();
        if self
            .by_uri
            .get(uri)
            .is_some_and(|list| list.iter().any(|(id, _)| *id == session))
        {
            return Ok(false);
        }
        let held = self.per_session.entry(session).or_default();
        if held.count >= MAX_SUBSCRIPTIONS_PER_SESSION {
            return Err(TooMany::Subscriptions);
        }
        if held.bytes + uri.len() > MAX_SUBSCRIBED_BYTES_PER_SESSION {
            return Err(TooMany::Bytes);
        }
        held.count += 1;
        held.bytes += uri.len();
        self.by_uri
            .entry(uri.to_owned())
            .or_default()
            .push((session, peer));
        Ok(true)
    }

    /// Ends `session`'s subscription to `uri`: `None` when it had none, else whether no
    /// session is subscribed to `uri` any more (the backend can be unsubscribed then).
    pub(crate) fn unsubscribe(&mut self, uri: &str, session: u64) -> Option<bool> {
        let (removed, last) = {
            let list = self.by_uri.get_mut(uri)?;
            let before = list.len();
            list.retain(|(id, _)| *id != session);
            (list.len() < before, list.iter().all(|(_, p)| p.is_closed()))
        };
        if !removed {
            return None;
        }
        self.release(session, uri.len());
        if last {
            self.drop_uri(uri);
        }
        Some(last)
    }

    /// The live sessions subscribed to `uri`.
    pub(crate) fn subscribers(&mut self, uri: &str) -> Vec<P> {
        let Some(list) = self.by_uri.get(uri) else {
            return Vec::new();
        };
        let live: Vec<P> = list
            .iter()
            .filter(|(_, p)| !p.is_closed())
            .map(|(_, p)| p.clone())
            .collect();
        if live.len() < list.len() {
            self.prune();
        }
        live
    }

    /// URIs with at least one subscriber.
    #[cfg(test)]
    pub(crate) fn uri_count(&self) -> usize {
        self.by_uri.len()
    }

    fn release(&mut self, session: u64, uri_bytes: usize) {
        if let Some(held) = self.per_session.get_mut(&session) {
            held.count = held.count.saturating_sub(1);
            held.bytes = held.bytes.saturating_sub(uri_bytes);
            if held.count == 0 {
                self.per_session.remove(&session);
            }
        }
    }

    fn drop_uri(&mut self, uri: &str) {
        if let Some(list) = self.by_uri.remove(uri) {
            for (id, _) in list {
                self.release(id, uri.len());
            }
        }
    }

    /// Drops the subscriptions of closed sessions.
    fn prune(&mut self) {
        let mut gone = Vec::new();
        self.by_uri.retain(|uri, list| {
            list.retain(|(id, p)| {
                let closed = p.is_closed();
                if closed {
                    gone.push((*id, uri.len()));
                }
                !closed
            });
            !list.is_empty()
        });
        for (id, bytes) in gone {
            self.release(id, bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[derive(Clone, Default)]
    struct Fake(Arc<AtomicBool>);

    impl Subscriber for Fake {
        fn is_closed(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn unsubscribing_unknown_uris_keeps_nothing() {
        let mut subs = Subscriptions::<Fake>::default();
        for i in 0..4000 {
            assert_eq!(
                subs.unsubscribe(&format!("mem://{i}/{}", "x".repeat(100)), 1),
                None
            );
        }
        assert_eq!(subs.uri_count(), 0);
        assert!(subs.per_session.is_empty());
    }

    #[test]
    fn a_session_holds_a_bounded_number() {
        let mut subs = Subscriptions::<Fake>::default();
        let peer = Fake::default();
        for i in 0..MAX_SUBSCRIPTIONS_PER_SESSION {
            assert_eq!(subs.subscribe(&format!("u{i}"), 1, peer.clone()), Ok(true));
        }
        assert_eq!(
            subs.subscribe("one-more", 1, peer.clone()),
            Err(TooMany::Subscriptions)
        );
        // Again to one it holds: nothing new, no error.
        assert_eq!(subs.subscribe("u0", 1, peer.clone()), Ok(false));
        // Another session is not affected.
        assert_eq!(subs.subscribe("one-more", 2, Fake::default()), Ok(true));
        // Releasing one makes room.
        assert_eq!(subs.unsubscribe("u0", 1), Some(true));
        assert_eq!(subs.subscribe("one-more", 1, peer), Ok(true));
    }

    /// The regression: the cap counted subscriptions, so a session could hold 64 URIs of any
    /// length.
    #[test]
    fn a_session_holds_a_bounded_number_of_bytes() {
        let mut subs = Subscriptions::<Fake>::default();
        let peer = Fake::default();
        let long = |i: usize| format!("files://{i}/{}", "x".repeat(8000));
        let mut held = 0;
        let refused = loop {
            match subs.subscribe(&long(held), 1, peer.clone()) {
                Ok(true) => held += 1,
                other => break other,
            }
        };
        assert_eq!(refused, Err(TooMany::Bytes));
        assert!(held * long(0).len() <= MAX_SUBSCRIBED_BYTES_PER_SESSION);
        assert!(held < MAX_SUBSCRIPTIONS_PER_SESSION);
        // A short URI still fits, and releasing a long one gives its bytes back.
        assert_eq!(subs.subscribe("files://short", 1, peer.clone()), Ok(true));
        assert_eq!(subs.unsubscribe(&long(0), 1), Some(true));
        assert_eq!(subs.subscribe(&long(held), 1, peer.clone()), Ok(true));
        // Another session is not affected.
        assert_eq!(subs.subscribe(&long(0), 2, Fake::default()), Ok(true));
    }

    #[test]
    fn the_backend_is_released_with_the_last_subscriber() {
        let mut subs = Subscriptions::<Fake>::default();
        subs.subscribe("u", 1, Fake::default()).unwrap();
        subs.subscribe("u", 2, Fake::default()).unwrap();
        assert_eq!(subs.unsubscribe("u", 3), None, "never subscribed");
        assert_eq!(subs.unsubscribe("u", 1), Some(false));
        assert_eq!(subs.subscribers("u").len(), 1);
        assert_eq!(subs.unsubscribe("u", 2), Some(true));
        assert_eq!(subs.uri_count(), 0);
    }

    #[test]
    fn closed_sessions_are_dropped() {
        let mut subs = Subscriptions::<Fake>::default();
        let gone = Fake::default();
        for i in 0..MAX_SUBSCRIPTIONS_PER_SESSION {
            subs.subscribe(&format!("u{i}"), 1, gone.clone()).unwrap();
        }
        gone.0.store(true, Ordering::Relaxed);
        assert!(subs.subscribers("u0").is_empty());
        assert_eq!(subs.uri_count(), 0);
        assert!(subs.per_session.is_empty());
    }
}
