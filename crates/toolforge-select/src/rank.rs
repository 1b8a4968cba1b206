//! Lexical ranking of tools: BM25 over a tool's name (split on `_`, `-` and camelCase), its
//! description, its tags and its parameter names.
//!
//! Why BM25 first: it needs no model, no setup and no I/O, it is deterministic, and it is the
//! baseline every other ranker is measured against. Ties keep index order so the same catalog
//! and query always give the same ranking.

use std::collections::HashMap;

use crate::catalog::Tool;

/// BM25 term-frequency saturation.
const K1: f32 = 1.2;
/// BM25 length normalisation.
const B: f32 = 0.75;

/// The text of one rankable document, field by field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Document {
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub params: Vec<String>,
}

impl Document {
    /// The document for a tool: its name, description, tags and top-level parameter names.
    pub fn from_tool(tool: &Tool) -> Self {
        let params = tool
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        Self {
            name: tool.name.clone(),
            description: tool.description.clone(),
            tags: tool.tags.clone(),
            params,
        }
    }

    fn tokens(&self) -> Vec<String> {
        let mut out = tokenize(&self.name);
        // The name is the strongest signal: count it twice.
        out.extend(tokenize(&self.name));
        out.extend(tokenize(&self.description));
        for t in &self.tags {
            out.extend(tokenize(t));
        }
        for p in &self.params {
            out.extend(tokenize(p));
        }
        out
    }
}

/// Lower-cased word tokens: splits on anything not alphanumeric and on camelCase boundaries.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A BM25 index built once over a fixed list of documents.
#[derive(Debug, Clone)]
pub struct Bm25Index {
    /// term -> postings (doc index, term frequency), doc indexes ascending.
    postings: HashMap<String, Vec<(usize, u32)>>,
    doc_len: Vec<f32>,
    avg_len: f32,
}

impl Bm25Index {
    /// Indexes tools (name, description, tags, parameter names).
    pub fn from_tools(tools: &[&Tool]) -> Self {
        let docs: Vec<Document> = tools.iter().map(|t| Document::from_tool(t)).collect();
        Self::new(&docs)
    }

    /// Indexes documents; result indexes refer to positions in `docs`.
    pub fn new(docs: &[Document]) -> Self {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut doc_len = Vec::with_capacity(docs.len());
        for (i, d) in docs.iter().enumerate() {
            let toks = d.tokens();
            doc_len.push(toks.len() as f32);
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in toks {
                *tf.entry(t).or_default() += 1;
            }
            for (t, n) in tf {
                postings.entry(t).or_default().push((i, n));
            }
        }
        let avg_len = if doc_len.is_empty() {
            1.0
        } else {
            (doc_len.iter().sum::<f32>() / doc_len.len() as f32).max(1.0)
        };
        Self {
            postings,
            doc_len,
            avg_len,
        }
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// True when no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// BM25 score of every document for `query` (0 for documents sharing no term).
    pub fn scores(&self, query: &str) -> Vec<f32> {
        let n = self.doc_len.len() as f32;
        let mut scores = vec![0.0f32; self.doc_len.len()];
        let mut terms = tokenize(query);
        terms.sort();
        terms.dedup();
        for t in terms {
            let Some(post) = self.postings.get(&t) else {
                continue;
            };
            let df = post.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(i, tf) in post {
                let tf = tf as f32;
                let norm = K1 * (1.0 - B + B * self.doc_len[i] / self.avg_len);
                scores[i] += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        scores
    }

    /// The top `k` documents with a positive score, best first; ties keep index order.
    pub fn search(&self, query: &str, k: usize) -> Vec<(usize, f32)> {
        let mut hits: Vec<(usize, f32)> = self
            .scores(query)
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, description: &str) -> Document {
        Document {
            name: name.into(),
            description: description.into(),
            ..Document::default()
        }
    }

    #[test]
    fn tokenize_splits_snake_kebab_and_camel_case() {
        assert_eq!(
            tokenize("readFile_fast-path getHTTP"),
            vec!["read", "file", "fast", "path", "get", "http"]
        );
    }

    #[test]
    fn ranks_matching_tool_first_and_skips_non_matches() {
        let idx = Bm25Index::new(&[
            doc("send_email", "Send an email message"),
            doc("read_file", "Read a file from disk"),
            doc("list_dir", "List a directory"),
        ]);
        let hits = idx.search("read the file", 10);
        assert_eq!(hits[0].0, 1);
        assert!(hits.iter().all(|(i, _)| *i != 0));
    }

    #[test]
    fn ties_keep_index_order() {
        let idx = Bm25Index::new(&[doc("a", "same words"), doc("b", "same words")]);
        let hits = idx.search("words", 2);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(hits[0].1, hits[1].1);
    }

    #[test]
    fn empty_index_and_empty_query_give_nothing() {
        assert!(Bm25Index::new(&[]).search("x", 5).is_empty());
        assert!(Bm25Index::new(&[doc("a", "b")]).search("", 5).is_empty());
    }
}
