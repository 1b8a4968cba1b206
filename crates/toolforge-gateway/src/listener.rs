//! The HTTP listener: hyper under a connection cap, a header-read timeout and an idle timeout,
//! so clients that open connections and never finish (or never send) a request cannot hold
//! file descriptors or crowd out others.
//!
//! - At most `max_connections` are served at once. At the cap, the next connection is accepted
//!   and waits for a place while the connection idle the longest (no request in flight) is
//!   closed gracefully to make one: keep-alive connections held open by slow or idle peers
//!   cannot starve new clients. When every connection has a request in flight, the new one
//!   waits (others wait in the kernel's backlog) until one closes.
//! - A connection must deliver a request's complete headers within `header_read_timeout` of
//!   opening, and of its previous response ending (HTTP/1.1 keep-alive): else it is closed.
//! - A connection on which no request has started for `idle_timeout` is shut down gracefully
//!   (a response still being sent finishes first; HTTP/2 gets `GOAWAY`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
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
    let open = Arc::new(Connections::default());
    // Every connection task holds a receiver; the sender sees them all gone at the end.
    let (open_tx, open_rx) = watch::channel(());
    loop {
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
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // Full: make room by closing the connection idle the longest, then wait.
                open.evict_idlest();
                tokio::select! {
                    permit = slots.clone().acquire_owned() => match permit {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    () = cancel.cancelled() => break,
                    () = close.cancelled() => break,
                }
            }
        };
        // Replies go out in small writes (headers, then SSE events): without TCP_NODELAY the
        // kernel holds each later write ~40 ms for the client's delayed ACK.
        let _ = tcp.set_nodelay(true);
        let peer = tcp.peer_addr().ok();
        let router = router.clone();
        let close = close.clone();
        let alive = open_rx.clone();
        let activity = open.register();
        let open = open.clone();
        tokio::spawn(async move {
            serve_connection(tcp, peer, router, limits, close, &activity).await;
            open.remove(&activity);
            drop(permit);
            drop(alive);
        });
    }
    drop(open_rx);
    drop(listener);
    open_tx.closed().await;
    Ok(())
}

/// When a connection last started or finished a request (or opened), how many it has in
/// flight, and the signal that asks it to close to make room.
struct Activity {
    id: u64,
    requests: Mutex<(u64, Instant)>,
    in_flight: AtomicUsize,
    evict: CancellationToken,
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

/// One request of a connection in flight until its response body has been sent or dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn new(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.requests.lock().1 = Instant::now();
    }
}

/// The open connections, for choosing one to close when the cap is reached.
#[derive(Default)]
struct Connections {
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl Connections {
    fn register(&self) -> Arc<Activity> {
        let activity = Arc::new(Activity {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            requests: Mutex::new((0, Instant::now())),
            in_flight: AtomicUsize::new(0),
            evict: CancellationToken::new(),
        });
        self.open.lock().insert(activity.id, activity.clone());
        activity
    }

    fn remove(&self, activity: &Activity) {
        self.open.lock().remove(&activity.id);
    }

    /// Asks the connection idle the longest (no request in flight, not asked already) to close.
    fn evict_idlest(&self) {
        let open = self.open.lock();
        let idlest = open
            .values()
            .filter(|a| a.in_flight.load(Ordering::Acquire) == 0 && !a.evict.is_cancelled())
            .min_by_key(|a| a.get().1);
        if let Some(activity) = idlest {
            tracing::debug!("at the connection cap: closing the connection idle the longest");
            activity.evict.cancel();
        }
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
            () = activity.evict.cancelled() => return Close::Gracefully,
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
    peer: Option<std::net::SocketAddr>,
    router: axum::Router,
    limits: ConnectionLimits,
    cancel: CancellationToken,
    activity: &Arc<Activity>,
) {
    let seen = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        seen.touch();
        let in_flight = InFlight::new(seen.clone());
        let mut req = req.map(axum::body::Body::new);
        if let Some(peer) = peer {
            // Who is on the other end, for what is decided per peer (session owners).
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
        }
        let response = router.clone().oneshot(req);
        async move {
            let response = response.await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                axum::body::Body::new(HeldBody {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let watcher = watch_connection(activity, limits, &cancel);
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

/// A response body that holds its request in flight until it is sent or dropped.
struct HeldBody {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl http_body::Body for HeldBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
