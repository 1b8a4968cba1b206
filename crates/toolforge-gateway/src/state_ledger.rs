//! Which sealed `requestState`s have been used: each is good for one retry.
//!
//! A 2026-07-28 client's retry after `input_required` carries the gateway's sealed envelope
//! ([`crate::mrtr`]), and the gateway sends the backend its own state and the client's answers.
//! Sent twice, a backend that keeps its state in the envelope (as the spec lets it) runs the
//! call twice: a payment charged twice. So every envelope carries a nonce, and the first retry
//! spends it; a second one is refused before anything reaches the backend. Spent nonces are
//! kept as long as the envelope could still open ([`crate::mrtr::STATE_TTL`]).
//!
//! The ledger is in this process by default ([`MemoryLedger`], bounded); replicas that share a
//! state key share a ledger too (the binary's Redis ledger), or a retry sent to another replica
//! would be taken again there.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parking_lot::Mutex;

/// Where spent nonces are kept.
pub trait StateLedger: Send + Sync + std::fmt::Debug {
    /// Spends `nonce` for `ttl`: `Ok(true)` the first time, `Ok(false)` when it was spent
    /// already; `Err` (a message) when the ledger cannot say, and the retry is refused.
    fn spend<'a>(&'a self, nonce: &'a str, ttl: Duration) -> BoxFuture<'a, Result<bool, String>>;
}

/// Spent nonces this process keeps at most; past it, retries are refused until some expire
/// (never forgotten early, which would let them be replayed).
pub const MAX_SPENT_IN_MEMORY: usize = 100_000;

/// The ledger of one process.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    spent: Mutex<HashMap<String, Instant>>,
}

impl MemoryLedger {
    fn spend_at(&self, nonce: &str, ttl: Duration, now: Instant) -> Result<bool, String> {
        let mut spent = self.spent.lock();
        if let Some(until) = spent.get(nonce)
            && *until > now
        {
            return Ok(false);
        }
        if spent.len() >= MAX_SPENT_IN_MEMORY {
            spent.retain(|_, until| *until > now);
            if spent.len() >= MAX_SPENT_IN_MEMORY {
                return Err(format!(
                    "{MAX_SPENT_IN_MEMORY} calls awaiting input were resumed in the last {} s; \
                     try again later",
                    ttl.as_secs()
                ));
            }
        }
        spent.insert(nonce.to_owned(), now + ttl);
        Ok(true)
    }
}

impl StateLedger for MemoryLedger {
    fn spend<'a>(&'a self, nonce: &'a str, ttl: Duration) -> BoxFuture<'a, Result<bool, String>> {
        let spent = self.spend_at(nonce, ttl, Instant::now());
        Box::pin(std::future::ready(spent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_spent_once_until_it_expires() {
        let ledger = MemoryLedger::default();
        let now = Instant::now();
        let ttl = Duration::from_secs(600);
        assert_eq!(ledger.spend_at("n1", ttl, now), Ok(true));
        assert_eq!(ledger.spend_at("n1", ttl, now), Ok(false));
        assert_eq!(ledger.spend_at("n2", ttl, now), Ok(true));
        // After its envelope could no longer open, the entry may go.
        assert_eq!(ledger.spend_at("n1", ttl, now + ttl * 2), Ok(true));
    }

    #[test]
    fn a_full_ledger_refuses_rather_than_forgets() {
        let ledger = MemoryLedger::default();
        let now = Instant::now();
        let ttl = Duration::from_secs(600);
        {
            let mut spent = ledger.spent.lock();
            for i in 0..MAX_SPENT_IN_MEMORY {
                spent.insert(format!("n{i}"), now + ttl);
            }
        }
        assert!(ledger.spend_at("new", ttl, now).is_err());
        assert_eq!(
            ledger.spend_at("n0", ttl, now),
            Ok(false),
            "never forgotten"
        );
        // Once they expire there is room again.
        assert_eq!(ledger.spend_at("new", ttl, now + ttl * 2), Ok(true));
    }
}
