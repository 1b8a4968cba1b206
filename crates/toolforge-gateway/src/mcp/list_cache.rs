//! `tools/list` answers cached per catalog generation and visibility scope: the serialised tool
//! array of each answer (what `crate::list_splice` puts into rmcp's framing), with what else
//! the answer depends on. Bounded by entries and by bytes; least recently used goes first; a
//! new catalog (a backend's tools changed) or new broker rules empty it.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::body::Bytes;
use parking_lot::Mutex;
use toolforge_select::Catalog;

use crate::visible::RequestChannels;

/// Entries kept at most (one per scope and protocol era that listed recently).
pub const MAX_ENTRIES: usize = 64;
/// Bytes of cached tool arrays kept at most; a larger answer is served but not kept.
pub const MAX_BYTES: usize = 32 << 20;

/// What one `tools/list` answer is, for one scope.
#[derive(Debug)]
pub struct ListEntry {
    /// Answered to a peer before 2026-07-28 (rmcp drops non-object output schemas for them).
    pub legacy: bool,
    /// The request's channels (query, `x-mcp-*` headers, principal): its visibility scope.
    pub channels: RequestChannels,
    /// The tool array as rmcp serialises it.
    pub tools: Bytes,
    /// The name of this answer's placeholder tool (random: `crate::list_splice`).
    pub marker: String,
    /// The tool count.
    pub count: usize,
    /// The broker narrowed the list for the request's intent (the answer is private).
    pub narrowed: bool,
    /// Whether a search query matched (`None` without one).
    pub query_matched: Option<bool>,
}

#[derive(Default)]
struct Inner {
    /// The catalog the entries were built from.
    catalog: Option<Arc<Catalog>>,
    /// Most recently used first.
    entries: VecDeque<Arc<ListEntry>>,
    bytes: usize,
    /// Bumped by [`ListCache::clear`]: an answer computed before a clear is not kept.
    epoch: u64,
}

/// The cache (see the module's doc).
#[derive(Default)]
pub struct ListCache {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for ListCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("ListCache")
            .field("entries", &inner.entries.len())
            .field("bytes", &inner.bytes)
            .finish()
    }
}

impl ListCache {
    /// The entry for this scope and era over `catalog`, if one is kept. Entries of another
    /// catalog are dropped first.
    pub fn get(
        &self,
        catalog: &Arc<Catalog>,
        legacy: bool,
        channels: &RequestChannels,
    ) -> Option<Arc<ListEntry>> {
        let mut inner = self.inner.lock();
        if !inner
            .catalog
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, catalog))
        {
            inner.catalog = Some(catalog.clone());
            inner.entries.clear();
            inner.bytes = 0;
            return None;
        }
        let at = inner
            .entries
            .iter()
            .position(|e| e.legacy == legacy && e.channels == *channels)?;
        let entry = inner.entries.remove(at)?;
        inner.entries.push_front(entry.clone());
        Some(entry)
    }

    /// The epoch to pass to [`ListCache::insert`] for an answer computed from now on.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.inner.lock().epoch
    }

    /// Keeps `entry`, built from `catalog` in `epoch` ([`ListCache::epoch`] read before it was
    /// computed), unless the cache has moved on to another catalog or was cleared since (the
    /// broker's rules changed while it was computed), or the entry alone is over the byte
    /// bound; evicts the least recently used past either bound.
    pub fn insert(&self, catalog: &Arc<Catalog>, epoch: u64, entry: Arc<ListEntry>) {
        let size = entry.tools.len();
        if size > MAX_BYTES {
            return;
        }
        let mut inner = self.inner.lock();
        if inner.epoch != epoch {
            return;
        }
        match &inner.catalog {
            Some(c) if Arc::ptr_eq(c, catalog) => {}
            Some(_) => return,
            None => inner.catalog = Some(catalog.clone()),
        }
        if let Some(at) = inner
            .entries
            .iter()
            .position(|e| e.legacy == entry.legacy && e.channels == entry.channels)
            && let Some(old) = inner.entries.remove(at)
        {
            inner.bytes -= old.tools.len();
        }
        while inner.entries.len() >= MAX_ENTRIES || inner.bytes + size > MAX_BYTES {
            let Some(old) = inner.entries.pop_back() else {
                break;
            };
            inner.bytes -= old.tools.len();
        }
        inner.bytes += size;
        inner.entries.push_front(entry);
    }

    /// The entry whose placeholder is named `marker`.
    pub fn find(&self, marker: &str) -> Option<Arc<ListEntry>> {
        let inner = self.inner.lock();
        inner.entries.iter().find(|e| e.marker == marker).cloned()
    }

    /// Forgets every entry (the broker's rules changed).
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.entries.clear();
        inner.bytes = 0;
        inner.epoch += 1;
    }

    /// Entries kept, and their bytes.
    #[must_use]
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.entries.len(), inner.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Arc<Catalog> {
        Arc::new(Catalog::new(vec![], vec![]).unwrap())
    }

    fn channels(q: &str) -> RequestChannels {
        RequestChannels {
            query: vec![("q".into(), q.into())],
            ..RequestChannels::default()
        }
    }

    fn entry(q: &str, size: usize) -> Arc<ListEntry> {
        Arc::new(ListEntry {
            legacy: false,
            channels: channels(q),
            tools: Bytes::from(vec![b' '; size]),
            marker: format!("m{q}"),
            count: 0,
            narrowed: false,
            query_matched: None,
        })
    }

    #[test]
    fn two_scopes_never_share_an_entry() {
        let cache = ListCache::default();
        let c = catalog();
        assert!(cache.get(&c, false, &channels("a")).is_none());
        cache.insert(&c, 0, entry("a", 10));
        assert!(cache.get(&c, false, &channels("b")).is_none());
        assert!(
            cache.get(&c, true, &channels("a")).is_none(),
            "another era is another entry"
        );
        let mut other_principal = channels("a");
        other_principal.principal = toolforge_policy::Principal::new("alice");
        assert!(cache.get(&c, false, &other_principal).is_none());
        assert_eq!(
            cache.get(&c, false, &channels("a")).unwrap().channels,
            channels("a")
        );
        assert_eq!(cache.find("ma").unwrap().channels, channels("a"));
        assert!(cache.find("mb").is_none());
    }

    #[test]
    fn a_new_catalog_empties_the_cache() {
        let cache = ListCache::default();
        let (old, new) = (catalog(), catalog());
        cache.get(&old, false, &channels("a"));
        cache.insert(&old, 0, entry("a", 10));
        assert!(cache.get(&old, false, &channels("a")).is_some());
        assert!(cache.get(&new, false, &channels("a")).is_none());
        assert_eq!(cache.usage(), (0, 0));
        // An answer built from the old catalog is not kept once the cache moved on.
        cache.insert(&old, 0, entry("a", 10));
        assert_eq!(cache.usage(), (0, 0));
    }

    #[test]
    fn the_entry_cap_holds_and_the_least_recently_used_goes() {
        let cache = ListCache::default();
        let c = catalog();
        cache.get(&c, false, &channels("x"));
        for i in 0..MAX_ENTRIES * 3 {
            cache.insert(&c, 0, entry(&i.to_string(), 1));
            // The first stays in use, so it is never the one evicted.
            assert!(cache.get(&c, false, &channels("0")).is_some());
            assert!(cache.usage().0 <= MAX_ENTRIES);
        }
        assert_eq!(cache.usage(), (MAX_ENTRIES, MAX_ENTRIES));
        assert!(cache.get(&c, false, &channels("1")).is_none());
    }

    #[test]
    fn the_byte_cap_holds() {
        let cache = ListCache::default();
        let c = catalog();
        let third = MAX_BYTES / 3;
        for i in 0..10 {
            cache.insert(&c, 0, entry(&i.to_string(), third));
            assert!(cache.usage().1 <= MAX_BYTES);
        }
        assert_eq!(cache.usage(), (3, 3 * third));
        cache.insert(&c, 0, entry("big", MAX_BYTES + 1));
        assert!(cache.get(&c, false, &channels("big")).is_none());
        assert!(cache.usage().1 <= MAX_BYTES);
    }

    #[test]
    fn an_answer_computed_across_a_clear_is_not_kept() {
        let cache = ListCache::default();
        let c = catalog();
        let epoch = cache.epoch();
        // The broker's rules change while the answer is computed under the old ones.
        cache.clear();
        cache.insert(&c, epoch, entry("a", 10));
        assert!(cache.get(&c, false, &channels("a")).is_none());
        assert_eq!(cache.usage(), (0, 0));
        cache.insert(&c, cache.epoch(), entry("a", 10));
        assert!(cache.get(&c, false, &channels("a")).is_some());
    }
}
