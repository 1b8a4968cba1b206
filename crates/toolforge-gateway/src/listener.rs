//! The HTTP listener: hyper under a connection cap, a header-read timeout and an idle timeout,
//! so clients that open connections and never finish (or never send) a request cannot hold
//! file descriptors or crowd out others.
//!
//! - At most `max_connections` are served at once; past that the listener stops accepting
//!   (new connections wait in the kernel's backlog) until one closes.
//! - A connection must deliver a request's complete headers within `header_read_timeout` of
//!   opening, and of its previous response ending (HTTP/1.1 keep-alive): else it is closed.
//! - A connection on which no request has started for `idle_timeout` is shut down gracefully
//!   (a response still being sent finishes first; HTTP/2 gets `GOAWAY`).

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// Connection limits of the HTTP listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Longest wait for a request's complete headers.
    pub header_read_timeout: Duration,
    /// Longest time a connection stays open with no new request.
    pub idle_timeout: Duration,
}

impl ConnectionLimits {
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// When the listener stops: `accept` closes the listening socket (new connections are refused;
/// open ones go on serving), `close` shuts every open connection down gracefully (a response
/// being sent finishes first). Cancelling `close` alone does both.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    pub accept: CancellationToken,
    pub close: CancellationToken,
}

/// Serves `router` on `listener` until `stop` says so, then waits for open connections to
/// finish their responses.
///
/// # Errors
/// None yet: a failed `accept` (out of file descriptors, say) is logged and retried.
pub async fn serve_connections(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    stop: Stop,
) -> std::io::Result<()> {
    let cancel = stop.accept;
    let close = stop.close;
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // Every connection task holds a receiver; the sender sees them all gone at the end.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            () = cancel.cancelled() => break,
            () = close.cancelled() => break,
        };
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    // Out of descriptors, typically: give open connections a moment to close.
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(50)) => {}
                        () = cancel.cancelled() => break,
                        () = close.cancelled() => break,
                    }
                    continue;
                }
            },
            () = cancel.cancelled() => break,
            () = close.cancelled() => break,
        };
        // Replies go out in small writes (headers, then SSE events): without TCP_NODELAY the
        // kernel holds each later write ~40 ms for the client's delayed ACK.
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let close = close.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            serve_connection(tcp, router, limits, close).await;
            drop(permit);
            drop(open);
        });
    }
    drop(open_rx);
    drop(listener);
    open_tx.closed().await;
    Ok(())
}

/// When a connection last started a request (or opened).
struct Activity {
    requests: Mutex<(u64, Instant)>,
}

impl Activity {
    fn touch(&self) {
        let mut r = self.requests.lock();
        r.0 += 1;
        r.1 = Instant::now();
    }

    fn get(&self) -> (u64, Instant) {
        *self.requests.lock()
    }
}

/// How a connection's watcher wants it closed.
enum Close {
    /// No request arrived in time: drop the socket.
    Now,
    /// Idle, or the server stops: finish what is in flight, then close.
    Gracefully,
}

async fn watch_connection(
    activity: &Activity,
    limits: ConnectionLimits,
    cancel: &CancellationToken,
) -> Close {
    let (_, opened) = activity.get();
    let header_deadline = opened + limits.header_read_timeout;
    loop {
        let (count, last) = activity.get();
        let idle_deadline = last + limits.idle_timeout;
        let wake = if count == 0 {
            header_deadline.min(idle_deadline)
        } else {
            idle_deadline
        };
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = cancel.cancelled() => return Close::Gracefully,
        }
        if activity.get().0 != count {
            continue; // a request started meanwhile
        }
        let now = Instant::now();
        if count == 0 && now >= header_deadline {
            return Close::Now;
        }
        if now >= idle_deadline {
            return Close::Gracefully;
        }
    }
}

async fn serve_connection(
    tcp: TcpStream,
    router: axum::Router,
    limits: ConnectionLimits,
    cancel: CancellationToken,
) {
    let activity = Arc::new(Activity {
        requests: Mutex::new((0, Instant::now())),
    });
    let seen = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        seen.touch();
        router.clone().oneshot(req.map(axum::body::Body::new))
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let watcher = watch_connection(&activity, limits, &cancel);
    tokio::pin!(watcher);
    let mut watching = true;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            close = &mut watcher, if watching => {
                watching = false;
                match close {
                    Close::Now => return,
                    Close::Gracefully => conn.as_mut().graceful_shutdown(),
                }
            }
        }
    }
}
