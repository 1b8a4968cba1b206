//! The key that seals `requestState`, shared through Redis: generated once by whichever replica
//! comes first, stored with `SET NX` (so two replicas starting together still agree) and read
//! by every replica after, so any replica opens what any other sealed.

use std::time::Duration;

use anyhow::Context as _;

/// Where the shared key lives in Redis.
pub const REDIS_KEY: &str = "toolforge:state-key";

/// How long start-up waits for Redis before going on with a key of its own.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// The key every replica on the Redis at `url` shares, creating it if none is there yet.
///
/// # Errors
/// Redis cannot be reached within [`CONNECT_TIMEOUT`] or refuses the commands.
pub async fn shared_key(url: &str) -> anyhow::Result<String> {
    let fetch = async {
        let client = redis::Client::open(url)?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let _: Option<String> = redis::cmd("SET")
            .arg(REDIS_KEY)
            .arg(fresh_key())
            .arg("NX")
            .query_async(&mut conn)
            .await?;
        redis::cmd("GET")
            .arg(REDIS_KEY)
            .query_async::<Option<String>>(&mut conn)
            .await
    };
    let key = tokio::time::timeout(CONNECT_TIMEOUT, fetch)
        .await
        .with_context(|| format!("Redis did not answer within {CONNECT_TIMEOUT:?}"))??;
    key.with_context(|| format!("Redis holds no {REDIS_KEY} right after setting it"))
}

/// 64 hex digits (two random UUIDs: 244 random bits).
fn fresh_key() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Where spent `requestState` nonces live in Redis (one key each, expiring with the state).
pub const SPENT_PREFIX: &str = "toolforge:spent-state:";

/// The ledger of spent `requestState`s in Redis, shared by every replica: `SET NX EX` per
/// nonce, so exactly one retry of an envelope is taken, whichever replica gets it.
#[derive(Clone)]
pub struct RedisLedger {
    conn: redis::aio::MultiplexedConnection,
}

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisLedger")
    }
}

impl RedisLedger {
    /// Connects to the Redis at `url`.
    ///
    /// # Errors
    /// Redis cannot be reached within [`CONNECT_TIMEOUT`].
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let connect = async {
            let client = redis::Client::open(url)?;
            client.get_multiplexed_async_connection().await
        };
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .with_context(|| format!("Redis did not answer within {CONNECT_TIMEOUT:?}"))??;
        Ok(Self { conn })
    }
}

impl toolforge_gateway::state_ledger::StateLedger for RedisLedger {
    fn spend<'a>(
        &'a self,
        nonce: &'a str,
        ttl: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool, String>> + Send + 'a>>
    {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let set: redis::RedisResult<Option<String>> = redis::cmd("SET")
                .arg(format!("{SPENT_PREFIX}{nonce}"))
                .arg(1)
                .arg("NX")
                .arg("EX")
                .arg(ttl.as_secs().max(1))
                .query_async(&mut conn)
                .await;
            match set {
                Ok(Some(_)) => Ok(true),
                Ok(None) => Ok(false),
                Err(e) => Err(format!("the shared ledger in Redis failed ({e})")),
            }
        })
    }
}
