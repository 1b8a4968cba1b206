//! What the binary chooses for a pool.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::CatalogCache;
use crate::relay::ElicitationFallback;

/// Options the binary chooses.
#[derive(Debug, Clone, Default)]
pub struct PoolOptions {
    /// A `command` equal to this name runs `self_exe` instead (the bundled config starts the
    /// built-in servers as `toolforge server ...`, which must be this very build).
    pub self_command: Option<(String, PathBuf)>,
    /// What to answer a backend's elicitation when no client can (the CLI).
    pub elicitation_fallback: ElicitationFallback,
    /// Where listed tools are kept between processes (none: only in this pool).
    pub cache: Option<Arc<CatalogCache>>,
    /// Do not start servers whose tools are in the cache (a dry run never contacts a server;
    /// servers missing from the cache are started once to fill it).
    pub cached_only: bool,
    /// Where HTTP requests to backends look for a proxy.
    pub backend_proxy: BackendProxy,
    /// Where upstream OAuth grants are kept (none: in memory, sealed with a key of this
    /// process, lost when it stops).
    pub tokens: Option<Arc<crate::auth::store::TokenStore>>,
    /// Start stdio servers under the kernel's default scheduling policy (`SCHED_OTHER`, Linux)
    /// instead of the one of the thread that starts them, which a child process inherits. The
    /// binary sets it when the gateway runs as `SCHED_BATCH`, which its backends must not take
    /// over unasked (`stdio_scheduling`).
    pub stdio_default_scheduling: bool,
}

/// Where HTTP requests to backends look for a proxy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BackendProxy {
    /// The proxy environment variables, as reqwest reads them (`HTTP_PROXY`, `HTTPS_PROXY`,
    /// `ALL_PROXY` and `NO_PROXY`, in either case).
    #[default]
    Environment,
    /// None: every request goes straight to its backend. reqwest asks its environment matcher
    /// about every request even when no variable names a proxy (about 1,400 instructions per
    /// proxied `tools/call`), so the binary chooses this when none does.
    None,
}
