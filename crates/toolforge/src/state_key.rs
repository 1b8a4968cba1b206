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
