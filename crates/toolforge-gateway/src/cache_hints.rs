//! Cache hints of list answers (2026-07-28 `ttlMs` and `cacheScope`): how long a client may
//! reuse a list, and whether it may share it with other users.

use rmcp::model::{
    CacheScope, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListSkillsResult, ListToolsResult,
};

/// How long a client may reuse a list answer without asking again (2026-07-28 `ttlMs`): lists
/// change when a backend's do, and clients on a `subscriptions/listen` stream hear of it.
pub const LIST_TTL_MS: u64 = 30_000;

/// The cache hints of one list answer.
pub(crate) struct CacheHints {
    pub(crate) scope: CacheScope,
}

macro_rules! with_hints {
    ($($t:ty),*) => {$(
        impl Hinted for $t {
            fn hinted(self, scope: CacheScope) -> Self {
                self.with_ttl_ms(LIST_TTL_MS).with_cache_scope(scope)
            }
        }
    )*};
}

/// A list result that carries cache hints.
pub(crate) trait Hinted {
    fn hinted(self, scope: CacheScope) -> Self;
}

with_hints!(
    ListToolsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListPromptsResult,
    ListSkillsResult
);

impl CacheHints {
    /// Shared by every client when nothing narrowed the list, else private to this client.
    pub(crate) fn narrowed(narrowed: bool) -> Self {
        Self {
            scope: if narrowed {
                CacheScope::Private
            } else {
                CacheScope::Public
            },
        }
    }

    pub(crate) fn apply<T: Hinted>(&self, result: T) -> T {
        result.hinted(self.scope)
    }
}
