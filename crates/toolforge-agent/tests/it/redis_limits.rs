//! Rate limits shared through a real `redis-server`: two replicas draw from one bucket per
//! (principal, tool), the refusal says when to retry, and a Redis that goes away leaves each
//! process limiting with its own buckets.

use serde_json::json;
use toolforge_agent::Limiter;
use toolforge_policy::limits::LimitRules;

use crate::redis_sessions::start_redis;

fn rules() -> LimitRules {
    // Three calls per principal and tool, one more every 1000 s: nothing refills during a test.
    LimitRules::from_json(&json!([{"tool": "fs/*", "capacity": 3, "refillPerSecond": 0.001}]))
        .unwrap()
}

#[tokio::test]
async fn replicas_share_one_bucket_per_principal_and_tool() {
    let redis = start_redis().await;
    let a = Limiter::redis(rules(), &redis.url).await.unwrap();
    let b = Limiter::redis(rules(), &redis.url).await.unwrap();
    assert_eq!(a.backend(), "redis");

    assert_eq!(a.take("alice", "fs", "write").await, Ok(()));
    assert_eq!(b.take("alice", "fs", "write").await, Ok(()));
    assert_eq!(a.take("alice", "fs", "write").await, Ok(()));
    // The bucket both replicas drew from is empty: the wait is about one token's refill.
    let wait = b.take("alice", "fs", "write").await.unwrap_err();
    assert!((900_000..=1_000_000).contains(&wait), "{wait}");
    // Another principal, another tool and an unlimited server each have their own.
    assert_eq!(b.take("bob", "fs", "write").await, Ok(()));
    assert_eq!(b.take("alice", "fs", "read").await, Ok(()));
    for _ in 0..10 {
        assert_eq!(a.take("alice", "git", "push").await, Ok(()));
    }

    // Redis goes away: the processes keep limiting with their own buckets.
    drop(redis);
    for _ in 0..3 {
        assert_eq!(a.take("carol", "fs", "write").await, Ok(()));
    }
    assert!(a.take("carol", "fs", "write").await.is_err());
}
