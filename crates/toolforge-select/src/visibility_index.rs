//! The search side of visibility, built once per catalog.
//!
//! [`crate::visibility::resolve`] ranks a query with BM25 over the tools that survived every
//! other filter, with term statistics (document count, document frequencies, average length)
//! taken over that set alone. Building a [`crate::rank::Bm25Index`] over those tools per request
//! is most of a request's cost, yet the per-tool part of it (tokens, term frequencies, lengths)
//! never changes for a catalog. [`VisibilityIndex`] holds that part, built once; per request
//! only the statistics over the surviving set are computed, from the postings of the query's
//! terms. Scores are computed with the same operations in the same order as
//! [`crate::rank::Bm25Index`], so rankings are bit-for-bit those of an index built over the
//! surviving tools (the tests compare the two).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::catalog::{Catalog, Tool};
use crate::presentation::SEP;
use crate::rank::{Document, terms};

/// BM25 term-frequency saturation; equal to [`crate::rank`]'s (the tests check the rankings).
const K1: f32 = 1.2;
/// BM25 length normalisation; equal to [`crate::rank`]'s.
const B: f32 = 0.75;

/// Every `(left, right)` split of `name` around an occurrence of `sep`, overlapping ones
/// included (`a___b` splits twice around `__`).
pub(crate) fn splits<'a>(
    name: &'a str,
    sep: &'static str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    (0..name.len())
        .filter(move |&i| name.is_char_boundary(i) && name[i..].starts_with(sep))
        .map(move |i| (&name[..i], &name[i + sep.len()..]))
}

/// Per-catalog BM25 postings for [`crate::visibility::resolve_with_index`]: every tool's index
/// terms (name twice, description, tags, parameter names, as [`crate::rank::Bm25Index`] indexes
/// them) and length. Build it once per catalog (version) and reuse it for every request; it
/// must be built from the catalog it is used with (same tools in the same order).
#[derive(Debug, Clone, Default)]
pub struct VisibilityIndex {
    /// term -> postings (tool index in catalog order, term frequency), tool indexes ascending.
    postings: HashMap<String, Vec<(u32, u32)>>,
    /// Number of index terms of each tool, in catalog order.
    doc_len: Vec<f32>,
    /// Plain tool name -> tools of that name, ascending.
    names: HashMap<String, Vec<u32>>,
    /// Server name -> its tools (a range of catalog indexes; more than one only if the server
    /// name repeats).
    servers: HashMap<String, Vec<(u32, u32)>>,
    /// ASCII-lower-cased tag -> (tool, position of the tag in the tool's tags).
    tags: HashMap<String, Vec<(u32, u32)>>,
}

/// The index terms of a tool, as [`crate::rank::Bm25Index`] counts them.
fn tool_terms(tool: &Tool) -> Vec<String> {
    let doc = Document::from_tool(tool);
    let mut out = terms(&doc.name);
    out.extend(terms(&doc.name));
    out.extend(terms(&doc.description));
    for t in &doc.tags {
        out.extend(terms(t));
    }
    for p in &doc.params {
        out.extend(terms(p));
    }
    out
}

impl VisibilityIndex {
    /// Indexes every tool of the catalog.
    pub fn new(catalog: &Catalog) -> Self {
        let tools: Vec<&Tool> = catalog.tools().collect();
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut doc_len = Vec::with_capacity(tools.len());
        let mut names: HashMap<String, Vec<u32>> = HashMap::new();
        let mut servers: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut tags: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut start = 0u32;
        for server in &catalog.servers {
            let end = start + server.tools.len() as u32;
            servers
                .entry(server.name.clone())
                .or_default()
                .push((start, end));
            start = end;
        }
        for (i, tool) in tools.iter().enumerate() {
            names.entry(tool.name.clone()).or_default().push(i as u32);
            for (pos, tag) in tool.tags.iter().enumerate() {
                tags.entry(tag.to_ascii_lowercase())
                    .or_default()
                    .push((i as u32, pos as u32));
            }
        }
        for (i, tool) in tools.into_iter().enumerate() {
            let mut toks = tool_terms(tool);
            doc_len.push(toks.len() as f32);
            toks.sort_unstable();
            let mut rest = toks.as_slice();
            while let Some(first) = rest.first() {
                let run = rest.iter().take_while(|t| *t == first).count();
                let entry = (i as u32, run as u32);
                match postings.get_mut(first.as_str()) {
                    Some(post) => post.push(entry),
                    None => {
                        postings.insert(first.clone(), vec![entry]);
                    }
                }
                rest = &rest[run..];
            }
        }
        Self {
            postings,
            doc_len,
            names,
            servers,
            tags,
        }
    }

    /// What one query over the tools at `indexes` (ascending) of `tools` needs, without the
    /// whole index: every tool's length, and the postings of the query's terms. Tokenises
    /// ASCII text in place (no string per token); other text goes through [`terms`].
    pub(crate) fn for_query(tools: &[&Tool], indexes: &[usize], query: &[String]) -> Self {
        let mut doc_len = vec![0.0f32; tools.len()];
        let mut postings: Vec<Vec<(u32, u32)>> = vec![Vec::new(); query.len()];
        let mut counter = TermCounter {
            query,
            memo: FastMap::default(),
            token: String::new(),
            tf: vec![0; query.len()],
            len: 0,
        };
        for &i in indexes {
            let tool = tools[i];
            counter.len = 0;
            counter.tf.iter_mut().for_each(|n| *n = 0);
            counter.count(&tool.name);
            counter.count(&tool.name);
            counter.count(&tool.description);
            for tag in &tool.tags {
                counter.count(tag);
            }
            for param in tool.input_schema.parameter_names() {
                counter.count(&param);
            }
            doc_len[i] = counter.len as f32;
            for (post, &n) in postings.iter_mut().zip(&counter.tf) {
                if n > 0 {
                    post.push((i as u32, n));
                }
            }
        }
        let postings = query
            .iter()
            .cloned()
            .zip(postings)
            .filter(|(_, post)| !post.is_empty())
            .collect();
        Self {
            postings,
            doc_len,
            ..Self::default()
        }
    }

    /// The tools named `server` and `name` (catalog indexes).
    fn tools_named<'s>(&'s self, server: &str, name: &str) -> impl Iterator<Item = usize> + 's {
        let ranges = self.servers.get(server).map(Vec::as_slice).unwrap_or(&[]);
        self.names
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .filter(move |&&i| ranges.iter().any(|&(s, e)| (s..e).contains(&i)))
            .map(|&i| i as usize)
    }

    /// For every tool, the first of its names (plain, server, `server/tool`, `server__tool`,
    /// group keys in catalog order) that `list` holds: what matching each tool against the
    /// list answers, at the cost of the list rather than of the catalog.
    pub(crate) fn name_hits<'a>(
        &self,
        catalog: &'a Catalog,
        list: &'a [String],
    ) -> Vec<Option<&'a str>> {
        let mut best: Vec<Option<(usize, &'a str)>> = vec![None; self.len()];
        let mut offer = |i: usize, rank: usize, name: &'a str| match best[i] {
            Some((r, _)) if r <= rank => {}
            _ => best[i] = Some((rank, name)),
        };
        for name in list {
            for &i in self
                .names
                .get(name.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                offer(i as usize, 0, name);
            }
            for &(s, e) in self
                .servers
                .get(name.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                for i in s..e {
                    offer(i as usize, 1, name);
                }
            }
            for (s, n) in splits(name, "/") {
                for i in self.tools_named(s, n) {
                    offer(i, 2, name);
                }
            }
            for (s, n) in splits(name, SEP) {
                for i in self.tools_named(s, n) {
                    offer(i, 3, name);
                }
            }
        }
        for (g, (key, members)) in catalog.overlaps.iter().enumerate() {
            if list.iter().any(|n| n == key) {
                for member in members {
                    for i in self.tools_named(&member.server, &member.name) {
                        offer(i, 4 + g, key);
                    }
                }
            }
        }
        best.into_iter().map(|b| b.map(|(_, name)| name)).collect()
    }

    /// For every tool, the position in its tags of the first tag that `list` holds (ASCII
    /// case-insensitively), or `u32::MAX`.
    pub(crate) fn tag_hits(&self, list: &[String]) -> Vec<u32> {
        let mut best = vec![u32::MAX; self.len()];
        for tag in list {
            let lower = tag.to_ascii_lowercase();
            for &(i, pos) in self.tags.get(&lower).map(Vec::as_slice).unwrap_or(&[]) {
                let b = &mut best[i as usize];
                *b = (*b).min(pos);
            }
        }
        best
    }

    /// Number of indexed tools (the catalog's length).
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// True when no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// The top `k` of the tools at `allowed` (catalog indexes, ascending) with a positive BM25
    /// score for `query`, best first, ties in catalog order, as `(position in allowed, score)`:
    /// exactly what `Bm25Index::from_tools(allowed tools).search(query, k)` answers.
    pub(crate) fn search(&self, allowed: &[usize], query: &str, k: usize) -> Vec<(usize, f32)> {
        let mut position = vec![u32::MAX; self.doc_len.len()];
        for (p, &i) in allowed.iter().enumerate() {
            position[i] = p as u32;
        }
        let n = allowed.len() as f32;
        let avg_len = if allowed.is_empty() {
            1.0
        } else {
            (allowed.iter().map(|&i| self.doc_len[i]).sum::<f32>() / allowed.len() as f32).max(1.0)
        };
        let mut scores = vec![0.0f32; allowed.len()];
        for t in query_terms(query) {
            let Some(post) = self.postings.get(&t) else {
                continue;
            };
            let df = post
                .iter()
                .filter(|&&(i, _)| position[i as usize] != u32::MAX)
                .count() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(i, tf) in post {
                let p = position[i as usize];
                if p == u32::MAX {
                    continue;
                }
                let tf = tf as f32;
                let norm = K1 * (1.0 - B + B * self.doc_len[i as usize] / avg_len);
                scores[p as usize] += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut hits: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        hits
    }
}

/// A query's distinct index terms, sorted (the order [`crate::rank::Bm25Index`] adds them in).
pub(crate) fn query_terms(query: &str) -> Vec<String> {
    let mut query_terms = terms(query);
    query_terms.sort();
    query_terms.dedup();
    query_terms
}

/// What a raw token of ASCII text is once [`terms`] has filtered and stemmed it.
#[derive(Clone, Copy)]
enum TermKind {
    /// A stop word: not an index term.
    Stop,
    /// An index term the query does not have.
    Other,
    /// The query's term at this position.
    Query(usize),
}

/// Counts a document's index terms (its length) and the query's terms in it.
struct TermCounter<'q> {
    query: &'q [String],
    /// Raw lower-cased ASCII token -> what it is, computed once with [`terms`].
    memo: FastMap<String, TermKind>,
    /// The token being read.
    token: String,
    /// Occurrences of each query term.
    tf: Vec<u32>,
    /// Index terms counted.
    len: u32,
}

impl TermCounter<'_> {
    fn add(&mut self, kind: TermKind) {
        match kind {
            TermKind::Stop => {}
            TermKind::Other => self.len += 1,
            TermKind::Query(q) => {
                self.len += 1;
                self.tf[q] += 1;
            }
        }
    }

    fn classify(&self, term: &str) -> TermKind {
        match self.query.iter().position(|q| q == term) {
            Some(q) => TermKind::Query(q),
            None => TermKind::Other,
        }
    }

    /// Counts one raw ASCII token (`tokenize` lower-cases it first).
    fn token(&mut self, raw: &str) {
        let token = if raw.bytes().any(|b| b.is_ascii_uppercase()) {
            self.token.clear();
            self.token
                .extend(raw.chars().map(|c| c.to_ascii_lowercase()));
            self.token.as_str()
        } else {
            raw
        };
        let kind = match self.memo.get(token) {
            Some(&kind) => kind,
            None => {
                // A lower-cased ASCII alphanumeric token is its own only token, so `terms` of it
                // is exactly what `terms` makes of it inside a longer text.
                let kind = match terms(token).first() {
                    None => TermKind::Stop,
                    Some(term) => match self.query.iter().position(|q| q == term) {
                        Some(q) => TermKind::Query(q),
                        None => TermKind::Other,
                    },
                };
                self.memo.insert(token.to_owned(), kind);
                kind
            }
        };
        self.add(kind);
    }

    /// Counts the index terms of one text, as [`terms`] makes them.
    fn count(&mut self, text: &str) {
        if !text.is_ascii() {
            for term in terms(text) {
                let kind = self.classify(&term);
                self.add(kind);
            }
            return;
        }
        // `crate::rank::tokenize` restricted to ASCII: alphanumeric runs, split where a capital
        // follows a lower-case letter or digit, lower-cased.
        let bytes = text.as_bytes();
        let mut start = None;
        let mut prev_lower = false;
        for (i, &c) in bytes.iter().enumerate() {
            if c.is_ascii_alphanumeric() {
                match start {
                    Some(s) if c.is_ascii_uppercase() && prev_lower => {
                        self.token(&text[s..i]);
                        start = Some(i);
                    }
                    Some(_) => {}
                    None => start = Some(i),
                }
                prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            } else {
                prev_lower = false;
                if let Some(s) = start.take() {
                    self.token(&text[s..i]);
                }
            }
        }
        if let Some(s) = start {
            self.token(&text[s..]);
        }
    }
}

/// A small multiplicative hasher (the Fx hash of rustc) for the short-lived per-request maps
/// of names, tags and tokens: several times cheaper than SipHash on short strings. Their keys
/// are bounded (at most [`crate::visibility::MAX_NAMES`] names per list, a catalog's own
/// tokens), so the lost flooding resistance costs little; a collision only costs time.
#[derive(Clone, Copy, Default)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with [`FxHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
/// A `HashSet` with [`FxHasher`].
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;
