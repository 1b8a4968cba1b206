//! Supervision: each server's task connects, lists what the server offers, waits for the
//! connection to end and reconnects with exponential backoff (1 s doubling to 30 s).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::connect::connect;
use crate::lists::refresh_lists;
use crate::options::PoolOptions;
use crate::relay::PoolEvent;
use crate::upstream::{ServerState, Upstream};

const RESTART_BASE: Duration = Duration::from_secs(1);
const RESTART_MAX: Duration = Duration::from_secs(30);

pub(crate) async fn supervise(
    up: Arc<Upstream>,
    options: PoolOptions,
    cancel: CancellationToken,
    events: broadcast::Sender<PoolEvent>,
    first: tokio::sync::oneshot::Sender<()>,
) {
    let mut first = Some(first);
    let mut backoff = RESTART_BASE;
    let name = up.cfg.name.clone();
    let announce = |events: &broadcast::Sender<PoolEvent>| {
        let _ = events.send(PoolEvent::StateChanged {
            server: name.clone(),
        });
    };
    loop {
        let attempt = async {
            let client = connect(&up, &options).await?;
            refresh_lists(&up, client.peer()).await?;
            Ok::<_, String>(client)
        };
        let result = tokio::select! {
            r = tokio::time::timeout(up.cfg.start_timeout, attempt) => r,
            () = cancel.cancelled() => return,
        };
        match result {
            Ok(Ok(client)) => {
                *up.peer.write() = Some(client.peer().clone());
                up.set_state(ServerState::Ready, None);
                announce(&events);
                tracing::info!(server = %name, tools = up.lists.read().tools.len(), "ready");
                if let Some(tx) = first.take() {
                    let _ = tx.send(());
                }
                let started = Instant::now();
                let ct = client.cancellation_token();
                // A 2026-07-28 backend tells its list changes only to listen streams.
                let listen_stop = CancellationToken::new();
                let _stop_listening = listen_stop.clone().drop_guard();
                if crate::listen::is_modern(client.peer()) {
                    let (server, peer, up) = (name.clone(), client.peer().clone(), up.clone());
                    tokio::spawn(async move {
                        let relay = up.relay.clone();
                        crate::listen::keep(server, peer, &up.listening, relay, listen_stop).await;
                    });
                }
                let waiting = client.waiting();
                tokio::pin!(waiting);
                tokio::select! {
                    quit = &mut waiting => {
                        *up.peer.write() = None;
                        let why = match quit {
                            Ok(reason) => format!("connection ended ({reason:?})"),
                            Err(e) => format!("connection task failed: {e}"),
                        };
                        tracing::warn!(server = %name, "{why}; restarting");
                        up.status.write().restarts += 1;
                        up.set_state(ServerState::Restarting, Some(why));
                        announce(&events);
                        if started.elapsed() > RESTART_MAX {
                            backoff = RESTART_BASE;
                        }
                    }
                    () = cancel.cancelled() => {
                        *up.peer.write() = None;
                        ct.cancel();
                        let _ = tokio::time::timeout(Duration::from_secs(7), waiting).await;
                        return;
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %name, "start failed: {e}");
                up.set_state(ServerState::Failed, Some(e));
                announce(&events);
            }
            Err(_) => {
                let e = format!("did not start within {:?}", up.cfg.start_timeout);
                tracing::warn!(server = %name, "{e}");
                up.set_state(ServerState::Failed, Some(e));
                announce(&events);
            }
        }
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = up.wake.notified() => backoff = RESTART_BASE,
            () = cancel.cancelled() => return,
        }
        backoff = (backoff * 2).min(RESTART_MAX);
        if up.state() == ServerState::Failed {
            up.status.write().restarts += 1;
        }
    }
}

/// The first start attempt of each server of a [`crate::Pool::launch`]ed pool, to wait for when a
/// caller needs the catalog before it goes on (the CLI's one-shot commands).
#[must_use = "wait for it, or drop it to go on without waiting"]
pub struct FirstAttempts(Vec<(Arc<Upstream>, tokio::sync::oneshot::Receiver<()>)>);

impl std::fmt::Debug for FirstAttempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FirstAttempts").field(&self.0.len()).finish()
    }
}

impl FirstAttempts {
    pub(crate) fn new(first: Vec<(Arc<Upstream>, tokio::sync::oneshot::Receiver<()>)>) -> Self {
        Self(first)
    }

    /// Returns once each server has made its first attempt (ready, failed, or past its start
    /// timeout).
    pub async fn wait(self) {
        for (up, rx) in self.0 {
            let limit = up.cfg.start_timeout + Duration::from_secs(1);
            if tokio::time::timeout(limit, rx).await.is_err() {
                tracing::warn!(server = %up.cfg.name, "not ready after {limit:?}; still trying in the background");
            }
        }
    }
}
