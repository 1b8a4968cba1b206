//! Rate limits: token buckets per (principal, tool), configured as a list of rules.
//!
//! ```json
//! {"limits": [
//!   {"principal": "*", "tool": "filesystem/write_file", "capacity": 5, "refillPerSecond": 0.1},
//!   {"principal": "ci-bot", "tool": "github/*", "capacity": 100, "refillPerSecond": 10}
//! ]}
//! ```
//!
//! The first rule whose `principal` (a principal's id or `*`) and `tool` (`server/name`,
//! `server/*` or `*`) match a call limits it; each (rule, principal, tool) has its own bucket
//! holding up to `capacity` calls, refilled at `refillPerSecond`. The bucket arithmetic here is
//! pure (the caller passes the clock's reading); the in-process store is [`MemoryBuckets`],
//! and a shared store (Redis) runs the same arithmetic in a script.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::Value;

use crate::error::PolicyError;

/// At most this many buckets are kept in one process; beyond it, buckets that have refilled
/// completely (indistinguishable from new ones) are dropped first, then any.
pub const MAX_BUCKETS: usize = 100_000;

/// One limit rule.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitRule {
    /// A principal's id, or `*` for everyone.
    #[serde(default = "any")]
    pub principal: String,
    /// `server/name`, `server/*` or `*`.
    pub tool: String,
    /// Calls a bucket holds (the burst).
    pub capacity: u32,
    /// Calls added back per second.
    pub refill_per_second: f64,
}

fn any() -> String {
    "*".to_owned()
}

impl LimitRule {
    fn matches(&self, principal: &str, server: &str, name: &str) -> bool {
        let principal_ok = self.principal == "*" || self.principal == principal;
        let tool_ok = match self.tool.split_once('/') {
            None => self.tool == "*",
            Some((s, n)) => s == server && (n == "*" || n == name),
        };
        principal_ok && tool_ok
    }
}

/// The configured rules, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LimitRules {
    rules: Vec<LimitRule>,
}

/// Which bucket a call draws from.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketKey {
    /// `<rule index>|<principal>|<server>/<name>`: unique per (rule, principal, tool).
    pub key: String,
    pub capacity: u32,
    pub refill_per_second: f64,
}

impl LimitRules {
    /// From the JSON array of rules (`"limits"` in `mcp.servers.json`'s `"toolforge"` section,
    /// or a limits file's top level `{"limits": [...]}` or bare array).
    pub fn from_json(value: &Value) -> Result<Self, PolicyError> {
        let list = match value {
            Value::Object(map) => map.get("limits").cloned().unwrap_or(Value::Null),
            other => other.clone(),
        };
        let rules: Vec<LimitRule> = serde_json::from_value(list).map_err(|e| {
            PolicyError::Limits(format!(
                "expected a list of {{\"principal\", \"tool\", \"capacity\", \"refillPerSecond\"}}: {e}"
            ))
        })?;
        for (i, rule) in rules.iter().enumerate() {
            let problem = |what: &str| PolicyError::Limits(format!("rule {}: {what}", i + 1));
            if rule.capacity == 0 {
                return Err(problem("capacity must be at least 1"));
            }
            if !(rule.refill_per_second.is_finite() && rule.refill_per_second > 0.0) {
                return Err(problem("refillPerSecond must be a positive number"));
            }
            let tool_ok = rule.tool == "*"
                || rule
                    .tool
                    .split_once('/')
                    .is_some_and(|(s, n)| !s.is_empty() && !n.is_empty());
            if !tool_ok {
                return Err(problem(
                    "tool must be \"server/name\", \"server/*\" or \"*\"",
                ));
            }
        }
        Ok(Self { rules })
    }

    /// True when no rule is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The bucket of the first rule that matches, or `None` when no rule limits this call.
    #[must_use]
    pub fn bucket(&self, principal: &str, server: &str, name: &str) -> Option<BucketKey> {
        let (index, rule) = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(principal, server, name))?;
        Some(BucketKey {
            key: format!("{index}|{principal}|{server}/{name}"),
            capacity: rule.capacity,
            refill_per_second: rule.refill_per_second,
        })
    }
}

/// One bucket's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    pub updated_ms: u64,
}

/// Takes one call from `bucket` (a full one when `None`) at `now_ms`: the new state, and
/// `Ok(())` or `Err(retry_after_ms)`, the wait until a call fits.
pub fn take(bucket: Option<Bucket>, key: &BucketKey, now_ms: u64) -> (Bucket, Result<(), u64>) {
    let capacity = f64::from(key.capacity);
    let rate_per_ms = key.refill_per_second / 1000.0;
    let mut state = bucket.unwrap_or(Bucket {
        tokens: capacity,
        updated_ms: now_ms,
    });
    let elapsed = now_ms.saturating_sub(state.updated_ms) as f64;
    state.tokens = (state.tokens + elapsed * rate_per_ms).min(capacity);
    state.updated_ms = now_ms.max(state.updated_ms);
    if state.tokens >= 1.0 {
        state.tokens -= 1.0;
        (state, Ok(()))
    } else {
        let wait = ((1.0 - state.tokens) / rate_per_ms).ceil();
        (state, Err(wait.max(1.0) as u64))
    }
}

/// The in-process bucket store (one per process; bounded by [`MAX_BUCKETS`]).
#[derive(Debug, Default)]
pub struct MemoryBuckets {
    buckets: Mutex<HashMap<String, (Bucket, f64, f64)>>,
}

impl MemoryBuckets {
    /// Takes one call from `key`'s bucket at `now_ms`: `Err(retry_after_ms)` when it is empty.
    pub fn take(&self, key: &BucketKey, now_ms: u64) -> Result<(), u64> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = buckets.get(&key.key).map(|(b, _, _)| *b);
        if current.is_none() && buckets.len() >= MAX_BUCKETS {
            buckets.retain(|_, (b, capacity, rate)| {
                let elapsed = now_ms.saturating_sub(b.updated_ms) as f64;
                b.tokens + elapsed * *rate / 1000.0 < *capacity
            });
            if buckets.len() >= MAX_BUCKETS
                && let Some(victim) = buckets.keys().next().cloned()
            {
                buckets.remove(&victim);
            }
        }
        let (state, verdict) = take(current, key, now_ms);
        buckets.insert(
            key.key.clone(),
            (state, f64::from(key.capacity), key.refill_per_second),
        );
        verdict
    }

    /// How many buckets are held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// True when no bucket is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules() -> LimitRules {
        LimitRules::from_json(&json!({"limits": [
            {"principal": "alice", "tool": "fs/*", "capacity": 1, "refillPerSecond": 100},
            {"tool": "fs/write_file", "capacity": 2, "refillPerSecond": 0.5},
        ]}))
        .unwrap()
    }

    #[test]
    fn the_first_matching_rule_picks_the_bucket() {
        let rules = rules();
        let alice = rules.bucket("alice", "fs", "write_file").unwrap();
        assert_eq!(alice.capacity, 1);
        let bob = rules.bucket("bob", "fs", "write_file").unwrap();
        assert_eq!(bob.capacity, 2);
        assert_ne!(alice.key, bob.key);
        assert!(rules.bucket("bob", "fs", "read_file").is_none());
        assert!(rules.bucket("bob", "git", "write_file").is_none());
    }

    #[test]
    fn a_bucket_empties_then_says_when_to_retry_then_refills() {
        let key = rules().bucket("bob", "fs", "write_file").unwrap();
        let store = MemoryBuckets::default();
        assert_eq!(store.take(&key, 1_000), Ok(()));
        assert_eq!(store.take(&key, 1_000), Ok(()));
        // Empty: one token comes back after 1 / 0.5 s.
        assert_eq!(store.take(&key, 1_000), Err(2_000));
        assert_eq!(store.take(&key, 2_000), Err(1_000));
        assert_eq!(store.take(&key, 3_000), Ok(()));
        assert_eq!(store.take(&key, 3_000), Err(2_000));
    }

    #[test]
    fn buckets_are_per_principal() {
        let rules = rules();
        let store = MemoryBuckets::default();
        let carol = rules.bucket("carol", "fs", "write_file").unwrap();
        let dave = rules.bucket("dave", "fs", "write_file").unwrap();
        assert!(store.take(&carol, 0).is_ok());
        assert!(store.take(&carol, 0).is_ok());
        assert!(store.take(&carol, 0).is_err());
        assert!(store.take(&dave, 0).is_ok());
    }

    #[test]
    fn a_clock_going_back_does_not_mint_tokens() {
        let key = rules().bucket("bob", "fs", "write_file").unwrap();
        let (state, _) = take(None, &key, 10_000);
        let (state, _) = take(Some(state), &key, 10_000);
        let (_, verdict) = take(Some(state), &key, 5_000);
        assert!(verdict.is_err());
    }

    #[test]
    fn malformed_rules_are_refused_with_the_reason() {
        for (bad, says) in [
            (
                json!([{"tool": "fs/x", "capacity": 0, "refillPerSecond": 1}]),
                "capacity",
            ),
            (
                json!([{"tool": "fs/x", "capacity": 1, "refillPerSecond": 0}]),
                "refillPerSecond",
            ),
            (
                json!([{"tool": "write_file", "capacity": 1, "refillPerSecond": 1}]),
                "server/name",
            ),
            (
                json!([{"tool": "fs/x", "capacity": 1, "refillPerSecond": 1, "burst": 3}]),
                "burst",
            ),
            (json!({"limits": "x"}), "expected a list"),
        ] {
            let err = LimitRules::from_json(&bad).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }
}
