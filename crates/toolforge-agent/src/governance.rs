//! Governance at the one decision point every surface uses: the Cedar policy
//! (`toolforge_policy::Policies`) and the rate limits, for a principal and a tool, resource or
//! prompt. The gateway's `tools/list`, `tools/call`, search mode, group calls, resources and
//! prompts and the agent's offer and calls all ask [`Governance`].
//!
//! Limits are token buckets per (principal, tool) (`toolforge_policy::limits`): in this process
//! by default, or shared by every replica through Redis (`REDIS_URL`), where one Lua script
//! reads, refills and takes a bucket atomically on the server's clock. A Redis that fails
//! leaves the process's own buckets limiting (a warning, never unlimited).

use std::sync::Arc;

use serde_json::Value;
use toolforge_policy::limits::{BucketKey, LimitRules, MemoryBuckets};
use toolforge_policy::{
    Action, Annotations, Decision, Policies, Principal, Request, Target, ToolRef,
};
use toolforge_select::Tool;

/// A clock in milliseconds (injected in tests).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

/// Reads, refills and takes one token of a bucket (a hash `tokens`, `ts`), on Redis's clock;
/// returns 0 when a call may go, else the milliseconds until one may.
const TAKE_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2]) / 1000
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1])
local ts = tonumber(s[2])
if tokens == nil or ts == nil then tokens = cap; ts = now end
if now > ts then tokens = math.min(cap, tokens + (now - ts) * rate); ts = now end
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.max(1, math.ceil((1 - tokens) / rate)) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(ts))
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / rate) + 1000)
return wait
";

/// Where buckets live.
enum Store {
    Memory,
    Redis(redis::aio::MultiplexedConnection),
}

/// The rate limits: rules and their buckets.
pub struct Limiter {
    rules: LimitRules,
    store: Store,
    /// This process's buckets (the store for `Memory`, the fallback for `Redis`).
    local: MemoryBuckets,
    clock: Clock,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// Buckets in this process, on the system clock.
    #[must_use]
    pub fn memory(rules: LimitRules) -> Self {
        Self::with_clock(rules, system_clock())
    }

    /// Buckets in this process, on `clock` (milliseconds).
    #[must_use]
    pub fn with_clock(rules: LimitRules, clock: Clock) -> Self {
        Self {
            rules,
            store: Store::Memory,
            local: MemoryBuckets::default(),
            clock,
        }
    }

    /// Buckets shared through the Redis at `url`.
    ///
    /// # Errors
    /// The URL is invalid or the server does not answer.
    pub async fn redis(rules: LimitRules, url: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let conn = client.get_multiplexed_async_connection().await?;
        Ok(Self {
            rules,
            store: Store::Redis(conn),
            local: MemoryBuckets::default(),
            clock: system_clock(),
        })
    }

    /// `memory` or `redis`.
    #[must_use]
    pub fn backend(&self) -> &'static str {
        match self.store {
            Store::Memory => "memory",
            Store::Redis(_) => "redis",
        }
    }

    /// Takes one call of `principal` to `server/name`: `Err(retry_after_ms)` when its bucket
    /// is empty. A call no rule names is never limited.
    pub async fn take(&self, principal: &str, server: &str, name: &str) -> Result<(), u64> {
        let Some(key) = self.rules.bucket(principal, server, name) else {
            return Ok(());
        };
        match &self.store {
            Store::Memory => self.local.take(&key, (self.clock)()),
            Store::Redis(conn) => match redis_take(conn.clone(), &key).await {
                Ok(0) => Ok(()),
                Ok(wait) => Err(wait),
                Err(e) => {
                    tracing::warn!(error = %e, "rate limits unavailable in Redis; this process's own buckets limit instead");
                    self.local.take(&key, (self.clock)())
                }
            },
        }
    }
}

async fn redis_take(
    mut conn: redis::aio::MultiplexedConnection,
    key: &BucketKey,
) -> Result<u64, redis::RedisError> {
    redis::cmd("EVAL")
        .arg(TAKE_SCRIPT)
        .arg(1)
        .arg(format!("toolforge:limit:{}", key.key))
        .arg(key.capacity)
        .arg(key.refill_per_second)
        .query_async(&mut conn)
        .await
}

/// Why a call was refused before reaching its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The policy denied it; `policy` names the deciding policies.
    Denied { policy: String, message: String },
    /// The principal's bucket for this tool is empty.
    Limited {
        retry_after_ms: u64,
        message: String,
    },
}

impl Refusal {
    /// The text the caller reads.
    #[must_use]
    pub fn message(&self) -> &str {
        match self {
            Refusal::Denied { message, .. } | Refusal::Limited { message, .. } => message,
        }
    }
}

/// The policy and the limits (either may be absent: then everything is allowed, unlimited).
#[derive(Debug, Default)]
pub struct Governance {
    pub policies: Option<Policies>,
    pub limiter: Option<Limiter>,
}

/// How policies see a catalog tool.
#[must_use]
pub fn tool_ref(tool: &Tool) -> ToolRef<'_> {
    ToolRef {
        server: &tool.server,
        name: &tool.name,
        tags: &tool.tags,
        annotations: Annotations::from_mcp(&tool.definition),
    }
}

impl Governance {
    /// True when neither a policy nor limits are configured.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.policies.is_none() && self.limiter.is_none()
    }

    /// True when a policy is configured.
    #[must_use]
    pub fn has_policy(&self) -> bool {
        self.policies.is_some()
    }

    /// The policy's decision (allow when no policy is configured).
    #[must_use]
    pub fn decide(
        &self,
        principal: &Principal,
        action: Action,
        target: Target<'_>,
        arguments: Option<&Value>,
    ) -> Decision {
        match &self.policies {
            None => Decision::allow(),
            Some(policies) => {
                let decision = policies.decide(&Request {
                    principal: principal.as_str(),
                    action,
                    target,
                    arguments,
                });
                for error in &decision.errors {
                    tracing::debug!(%error, "a policy could not be evaluated and was skipped");
                }
                decision
            }
        }
    }

    /// Whether `principal` may do `action` (list, search) on `tool`.
    #[must_use]
    pub fn permits_tool(&self, principal: &Principal, action: Action, tool: &Tool) -> bool {
        self.policies.is_none()
            || self
                .decide(principal, action, Target::Tool(tool_ref(tool)), None)
                .allowed
    }

    /// Admits one call of `tool` with `arguments`: the policy's decision (`call`, the
    /// arguments in the context), then the principal's bucket. `Ok` carries the policy's
    /// decision (for the trace); a refused call must not reach the server.
    pub async fn admit_call(
        &self,
        principal: &Principal,
        tool: &Tool,
        arguments: &Value,
    ) -> Result<Decision, Refusal> {
        let decision = self.decide(
            principal,
            Action::Call,
            Target::Tool(tool_ref(tool)),
            Some(arguments),
        );
        if !decision.allowed {
            return Err(Refusal::Denied {
                policy: decision.deciding(),
                message: decision.denial(Action::Call, &format!("{}/{}", tool.server, tool.name)),
            });
        }
        if let Some(limiter) = &self.limiter
            && let Err(retry_after_ms) = limiter
                .take(principal.as_str(), &tool.server, &tool.name)
                .await
        {
            return Err(Refusal::Limited {
                retry_after_ms,
                message: format!(
                    "rate limit reached for {}/{} (principal {principal}); retry after {retry_after_ms} ms (retryAfterMs: {retry_after_ms})",
                    tool.server, tool.name
                ),
            });
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use serde_json::json;

    use super::*;

    fn tool(server: &str, name: &str, read_only: bool) -> Tool {
        let definition = json!({"name": name, "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": read_only, "destructiveHint": !read_only}});
        Tool::from_mcp(server, definition.as_object().unwrap().clone(), &[]).unwrap()
    }

    #[tokio::test]
    async fn a_denied_call_names_its_policy_and_takes_no_token() {
        let policies = Policies::parse(
            r#"@id("all") permit(principal, action, resource);
               @id("no-writes") forbid(principal, action == Action::"call", resource is Tool) when { resource.annotations.destructive };"#,
        )
        .unwrap();
        let now = Arc::new(AtomicU64::new(0));
        let clock = now.clone();
        let rules =
            LimitRules::from_json(&json!([{"tool": "*", "capacity": 1, "refillPerSecond": 1}]))
                .unwrap();
        let g = Governance {
            policies: Some(policies),
            limiter: Some(Limiter::with_clock(
                rules,
                Arc::new(move || clock.load(Ordering::SeqCst)),
            )),
        };
        let alice = Principal::new("alice");
        let write = tool("fs", "write", false);
        let read = tool("fs", "read", true);
        match g.admit_call(&alice, &write, &json!({})).await {
            Err(Refusal::Denied { policy, message }) => {
                assert_eq!(policy, "no-writes");
                assert!(message.contains("\"no-writes\""), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // The denied call took no token: the read still has its one.
        assert!(g.admit_call(&alice, &read, &json!({})).await.is_ok());
        match g.admit_call(&alice, &read, &json!({})).await {
            Err(Refusal::Limited {
                retry_after_ms,
                message,
            }) => {
                assert_eq!(retry_after_ms, 1000);
                assert!(message.contains("retryAfterMs"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // Another principal has its own bucket; time refills alice's.
        assert!(
            g.admit_call(&Principal::new("bob"), &read, &json!({}))
                .await
                .is_ok()
        );
        now.store(1000, Ordering::SeqCst);
        assert!(g.admit_call(&alice, &read, &json!({})).await.is_ok());
    }

    #[tokio::test]
    async fn without_policy_or_limits_everything_is_admitted() {
        let g = Governance::default();
        assert!(g.is_open());
        let t = tool("fs", "write", false);
        assert!(g.permits_tool(&Principal::anonymous(), Action::List, &t));
        assert!(
            g.admit_call(&Principal::anonymous(), &t, &json!({}))
                .await
                .is_ok()
        );
    }
}
