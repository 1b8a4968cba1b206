//! Session recency in a real `redis-server` on loopback: replicas share it, it is bounded and
//! expires, and a Redis that goes away never fails a request.

use std::process::Stdio;
use std::time::{Duration, Instant};

use toolforge_agent::session::{MAX_HISTORY, SESSION_TTL};
use toolforge_agent::{RedisSessions, SessionStore};
use toolforge_select::ToolId;

pub struct Redis {
    child: std::process::Child,
    pub url: String,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A Redis on a loopback port of its own. `redis-server` cannot announce a port it picked
/// (`--port 0` turns TCP off), so a free port is taken and, should another process bind it
/// first (the server then exits), the start is tried again on another.
pub async fn start_redis() -> Redis {
    for _ in 0..5 {
        let port = free_port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is missing: run scripts/setup (it installs Redis)");
        let mut redis = Redis {
            child,
            url: format!("redis://127.0.0.1:{port}/0"),
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if RedisSessions::connect(&redis.url).await.is_ok() {
                return redis;
            }
            if redis.child.try_wait().ok().flatten().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!("redis-server did not answer on any of 5 ports within 20 s each");
}

#[tokio::test]
async fn replicas_share_bounded_expiring_history() {
    let redis = start_redis().await;
    let a = RedisSessions::connect(&redis.url).await.unwrap();
    let b = RedisSessions::connect(&redis.url).await.unwrap();
    assert_eq!(a.backend(), "redis");

    a.push("s1", ToolId::new("filesystem", "read_file")).await;
    b.push("s1", ToolId::new("github", "read_file")).await;
    assert_eq!(
        b.history("s1").await,
        vec![
            ToolId::new("filesystem", "read_file"),
            ToolId::new("github", "read_file")
        ],
        "a call recorded by one replica is seen by the other, in order"
    );
    assert!(a.history("other").await.is_empty());

    for i in 0..(MAX_HISTORY + 7) {
        a.push("long", ToolId::new("srv", format!("t{i}"))).await;
    }
    let h = b.history("long").await;
    assert_eq!(h.len(), MAX_HISTORY);
    assert_eq!(h[0], ToolId::new("srv", "t7"), "the oldest are dropped");

    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let ttl: i64 = redis::cmd("TTL")
        .arg("toolforge:session:s1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        ttl > 0 && ttl <= SESSION_TTL.as_secs() as i64,
        "idle sessions expire (ttl {ttl})"
    );
}

#[tokio::test]
async fn a_redis_that_goes_away_reads_as_empty_history() {
    let redis = start_redis().await;
    let s = RedisSessions::connect(&redis.url).await.unwrap();
    s.push("s", ToolId::new("srv", "t")).await;
    assert_eq!(s.history("s").await.len(), 1);
    // Dropping it kills the server and waits until it has exited.
    drop(redis);
    let got = tokio::time::timeout(Duration::from_secs(10), s.history("s"))
        .await
        .expect("a dead Redis answers promptly");
    assert!(got.is_empty());
    tokio::time::timeout(
        Duration::from_secs(10),
        s.push("s", ToolId::new("srv", "u")),
    )
    .await
    .expect("recording into a dead Redis does not hang");
}
