//! The listener over loopback TCP: connections that never finish their headers, or send
//! nothing, are closed after the header-read timeout; idle keep-alive connections after the
//! idle timeout; the connection cap holds others back without refusing them; `/health`
//! keeps answering throughout.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use toolforge_gateway::{ConnectionLimits, HttpOptions};

use crate::empty_shared;

/// Serves the gateway on a loopback port with `limits`; cancel the token to stop.
async fn serve(limits: ConnectionLimits) -> (std::net::SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let opts = HttpOptions {
        connections: limits,
        cancel: cancel.clone(),
        ..HttpOptions::default()
    };
    let shared = empty_shared().await;
    tokio::spawn(toolforge_gateway::serve(listener, shared, opts));
    (addr, cancel)
}

/// Waits (with a deadline) until the peer closes `conn`.
async fn closed_by_server(conn: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {} // a response (408, say) before the close
        }
    }
}

async fn health(addr: std::net::SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn half_sent_headers_are_cut_off_and_health_keeps_answering() {
    let (addr, cancel) = serve(ConnectionLimits {
        max_connections: 1024,
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(60),
    })
    .await;
    let mut slow = Vec::new();
    for i in 0..100 {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 0 {
            conn.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .await
                .unwrap();
        } // odd ones send nothing at all
        slow.push(conn);
    }
    assert!(
        health(addr).await.starts_with("HTTP/1.1 200"),
        "health answers meanwhile"
    );
    for (i, conn) in slow.iter_mut().enumerate() {
        assert!(
            closed_by_server(conn, Duration::from_secs(10)).await,
            "connection {i} is still open"
        );
    }
    assert!(health(addr).await.starts_with("HTTP/1.1 200"));
    cancel.cancel();
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let (addr, cancel) = serve(ConnectionLimits {
        max_connections: 16,
        header_read_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_millis(300),
    })
    .await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    assert!(closed_by_server(&mut conn, Duration::from_secs(10)).await);
    cancel.cancel();
}

#[tokio::test]
async fn past_the_cap_connections_wait_for_a_place() {
    let (addr, cancel) = serve(ConnectionLimits {
        max_connections: 2,
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(60),
    })
    .await;
    // Two silent connections take both places; a third is served once they are cut off.
    let _a = TcpStream::connect(addr).await.unwrap();
    let _b = TcpStream::connect(addr).await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), health(addr))
        .await
        .expect("health is answered once a place frees up");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    cancel.cancel();
}

/// The regression: the cap was one pool, so peers holding keep-alive connections open between
/// requests starved new clients until the idle timeout (two minutes by default). Now a new
/// connection at the cap closes the connection idle the longest; one with a response in
/// flight is left alone.
#[tokio::test]
async fn at_the_cap_the_idlest_keep_alive_connection_makes_room() {
    let (addr, cancel) = serve(ConnectionLimits {
        max_connections: 3,
        header_read_timeout: Duration::from_secs(3600),
        idle_timeout: Duration::from_secs(3600),
    })
    .await;
    // Three keep-alive connections, each after one answered request.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(conn);
    }
    // Without eviction this waits for the hour-long idle timeout.
    for _ in 0..3 {
        let answered = tokio::time::timeout(Duration::from_secs(30), health(addr))
            .await
            .expect("a new client is served while idle keep-alive connections hold the cap");
        assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    }
    // The first (idlest) connection was closed to make room.
    assert!(closed_by_server(&mut held[0], Duration::from_secs(10)).await);
    cancel.cancel();
}
