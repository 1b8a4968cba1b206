//! Lexical ranking of tools: BM25 over a tool's name (split on `_`, `-` and camelCase), its
//! description, its tags and its parameter names.
//!
//! Hybrid ranking ([`fuse`]) adds the query's cosine similarity to each tool's embedding (the
//! caller embeds: this module stays pure). Both score lists are min-max scaled per query and
//! mixed 25 % lexical, 75 % dense: on both development sets dense similarity is the stronger
//! signal, BM25 adds exact names and rare terms, and any weight in 0.2..0.3 gives the same
//! figures (see docs/retrieval.md).
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
    /// What the tool's server is for (its description), when known: a request often names
    /// the kind of server it needs rather than the tool.
    pub server_description: String,
}

impl Document {
    /// The document for a tool: its name, description, tags and top-level parameter names.
    pub fn from_tool(tool: &Tool) -> Self {
        let params = tool.input_schema.parameter_names();
        Self {
            name: tool.name.clone(),
            description: tool.description.clone(),
            tags: tool.tags.clone(),
            params,
            server_description: String::new(),
        }
    }

    fn tokens(&self) -> Vec<String> {
        let mut out = terms(&self.name);
        // The name is the strongest signal: count it twice.
        out.extend(terms(&self.name));
        out.extend(terms(&self.description));
        for t in &self.tags {
            out.extend(terms(t));
        }
        for p in &self.params {
            out.extend(terms(p));
        }
        out.extend(terms(&self.server_description));
        out
    }
}

/// Lower-cased word tokens: splits on anything not alphanumeric and on camelCase boundaries.
/// Keeps every word; [`terms`] is what the index uses.
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

/// English function words (the common NLTK list plus a few request words such as "please"):
/// in one-sentence tool descriptions a single "you" or "the" would otherwise weigh as much as
/// a content word.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "may",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "s",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// A light suffix stemmer: words longer than four characters lose one of `ing`, `ed`, `es`,
/// `s`, so "files", "filed" and "filing" meet. Crude on purpose: it is applied identically to
/// queries and documents, so it only has to be consistent, not linguistically right.
fn stem(word: &str) -> &str {
    if word.chars().count() <= 4 {
        return word;
    }
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(stem) = word.strip_suffix(suffix) {
            return stem;
        }
    }
    word
}

/// The index terms of a text: [`tokenize`], minus English stop words, lightly stemmed.
pub fn terms(text: &str) -> Vec<String> {
    tokenize(text)
        .into_iter()
        .filter(|w| STOPWORDS.binary_search(&w.as_str()).is_err())
        .map(|w| stem(&w).to_owned())
        .collect()
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
        let mut query_terms = terms(query);
        query_terms.sort();
        query_terms.dedup();
        for t in query_terms {
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

/// The text a tool is embedded as: its name in words ("readFile" -> "read file"), a colon and
/// its description. Parameter names are left to BM25: they add noise to a sentence embedding.
pub fn embedding_text(doc: &Document) -> String {
    let name = tokenize(&doc.name).join(" ");
    if doc.description.trim().is_empty() {
        name
    } else {
        format!("{name}: {}", doc.description.trim())
    }
}

/// The servers of the ranked documents, indexed beside them (Tool-to-Agent retrieval): a
/// request that matches what a server is for lifts every tool of that server.
#[derive(Debug, Clone, Copy)]
pub struct Servers<'a> {
    /// BM25 over each server's document (its name and description), in server order.
    pub index: &'a Bm25Index,
    /// The server (index into `index`) of each ranked document.
    pub of_doc: &'a [usize],
    /// Vectors of the servers' [`embedding_text`], in server order.
    pub vectors: Option<&'a [Vec<f32>]>,
}

/// The vectors [`hybrid_scores`] takes: (the documents', the query's then its parts').
pub type Vectors<'a> = (&'a [Vec<f32>], &'a [Vec<f32>]);

/// Share of a document's server's score added to the document's own in [`hybrid_scores`].
/// On LiveMCPBench (70 servers with descriptions) 1.0 lifts recall@1 .146 → .189 and recall@5
/// .463 → .485; 0.5 and 1.5 do worse (docs/retrieval.md). With one server it changes nothing.
pub const SERVER_WEIGHT: f32 = 1.0;

/// Every document's score for `query`: BM25, fused ([`fuse`]) with the query's similarity to
/// each document's vector when `vectors` are given, plus [`SERVER_WEIGHT`] times its server's
/// score computed the same way over the server documents (when `servers` are given); a
/// multi-sentence query also ranks each of its sentences ([`query_parts`]) alone and mixes in
/// the best ([`combine_parts`]).
///
/// `vectors` = (the documents' vectors in index order, the vectors of the query and then of
/// each of its [`query_parts`], in that order); ignored when a count does not match.
pub fn hybrid_scores(
    index: &Bm25Index,
    query: &str,
    vectors: Option<Vectors<'_>>,
    servers: Option<&Servers<'_>>,
) -> Vec<f32> {
    let parts = query_parts(query);
    let dense = vectors.filter(|(docs, q)| docs.len() == index.len() && q.len() == parts.len() + 1);
    let servers = servers.filter(|s| s.of_doc.len() == index.len() && !s.index.is_empty());
    let score = |text: &str, i: usize| {
        let own = match dense {
            Some((docs, q)) => fuse(&index.scores(text), &dense_scores(&q[i], docs)),
            None => index.scores(text),
        };
        let Some(servers) = servers else {
            return own;
        };
        let lexical = servers.index.scores(text);
        let by_server = match (dense, servers.vectors) {
            (Some((_, q)), Some(v)) if v.len() == servers.index.len() => {
                fuse(&lexical, &dense_scores(&q[i], v))
            }
            _ => min_max(&lexical),
        };
        let own = if dense.is_some() { own } else { min_max(&own) };
        own.iter()
            .zip(servers.of_doc)
            .map(|(s, &k)| s + SERVER_WEIGHT * by_server.get(k).copied().unwrap_or(0.0))
            .collect()
    };
    let whole = score(query, 0);
    let parts: Vec<Vec<f32>> = parts
        .iter()
        .enumerate()
        .map(|(i, p)| score(p, i + 1))
        .collect();
    combine_parts(&whole, &parts)
}

/// Scales scores to 0..=1 (min-max); all zeros when every score is equal.
pub fn min_max(scores: &[f32]) -> Vec<f32> {
    let lo = scores.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![0.0; scores.len()];
    }
    scores.iter().map(|x| (x - lo) / (hi - lo)).collect()
}

/// Hybrid score of every document: BM25 scores fused with the query's cosine similarity to
/// each document's embedding (both slices in index order, same length).
pub fn fuse(lexical: &[f32], dense: &[f32]) -> Vec<f32> {
    let l = min_max(lexical);
    let d = min_max(dense);
    l.iter()
        .zip(&d)
        .map(|(l, d)| LEXICAL_WEIGHT * l + (1.0 - LEXICAL_WEIGHT) * d)
        .collect()
}

/// Share of the lexical score in [`fuse`].
const LEXICAL_WEIGHT: f32 = 0.25;

/// Document indexes ordered best first; ties keep index order.
pub fn ranking(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

/// Dot product in eight independent lanes (so the compiler can vectorise it); for
/// L2-normalised embeddings this is their cosine similarity. 0 when lengths differ.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The query's similarity to every tool: [`dot`] of L2-normalised vectors, in index order.
pub fn dense_scores(query: &[f32], tools: &[Vec<f32>]) -> Vec<f32> {
    tools.iter().map(|t| dot(query, t)).collect()
}

/// The `k` best document indexes, best first; ties keep index order. Same as the first `k` of
/// [`ranking`] without sorting the whole list.
pub fn top_k(scores: &[f32], k: usize) -> Vec<usize> {
    let better = |a: &usize, b: &usize| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..scores.len()).collect();
    if k == 0 {
        return Vec::new();
    }
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, better);
        order.truncate(k);
    }
    order.sort_by(better);
    order
}

/// The sentences of a multi-sentence query that carry a request of their own (three words or
/// more); empty for a one-sentence query. A task like "find the papers. Then summarise the
/// trends." needs a tool per sentence, and each sentence ranks its tool better alone.
pub fn query_parts(query: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let bytes: Vec<(usize, char)> = query.char_indices().collect();
    for (pos, &(i, c)) in bytes.iter().enumerate() {
        let next_is_space = bytes.get(pos + 1).is_none_or(|&(_, n)| n.is_whitespace());
        if matches!(c, '.' | '?' | '!' | ';' | '。' | '？' | '！') && next_is_space {
            let end = i + c.len_utf8();
            parts.push(query[start..end].trim());
            start = end;
        }
    }
    parts.push(query[start..].trim());
    parts.retain(|p| p.split_whitespace().count() >= 3);
    if parts.len() < 2 { Vec::new() } else { parts }
}

/// Scores of a multi-sentence query: the mean of the whole query's score and the best score any
/// one sentence ([`query_parts`]) gives, per document. `whole` alone when there are no parts.
pub fn combine_parts(whole: &[f32], parts: &[Vec<f32>]) -> Vec<f32> {
    if parts.is_empty() {
        return whole.to_vec();
    }
    whole
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let best = parts.iter().map(|p| p[i]).fold(f32::NEG_INFINITY, f32::max);
            0.5 * w + 0.5 * best
        })
        .collect()
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
        let idx = Bm25Index::new(&[doc("one", "same words"), doc("two", "same words")]);
        let hits = idx.search("words", 2);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(hits[0].1, hits[1].1);
    }

    #[test]
    fn stopword_list_is_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn terms_drop_stopwords_and_stem() {
        assert_eq!(
            terms("Can you list the files and directories, filing them?"),
            vec!["list", "fil", "directori", "fil"]
        );
    }

    #[test]
    fn stopwords_do_not_outweigh_content_words() {
        // A short description full of function words must not beat the tool whose
        // description carries the query's content word.
        let idx = Bm25Index::new(&[
            doc("helper", "Can you do it for me"),
            doc("papers", "Finds peer-reviewed research papers"),
        ]);
        let hits = idx.search("Can you find any papers for me?", 2);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 1);
    }

    #[test]
    fn embedding_text_spells_the_name_in_words() {
        assert_eq!(
            embedding_text(&doc("ResearchHelper", " Finds papers. ")),
            "research helper: Finds papers."
        );
        assert_eq!(embedding_text(&doc("read_file", "")), "read file");
    }

    #[test]
    fn fusion_table() {
        // (lexical, dense, expected order)
        let cases: &[(&[f32], &[f32], &[usize])] = &[
            // dense decides when lexical is flat (no term matched)
            (&[0.0, 0.0, 0.0], &[0.1, 0.9, 0.5], &[1, 2, 0]),
            // lexical decides when dense is flat
            (&[1.0, 3.0, 2.0], &[0.4, 0.4, 0.4], &[1, 2, 0]),
            // a tool good on both beats one that tops only the lexical side
            (&[9.0, 6.0, 0.0], &[0.2, 0.8, 0.1], &[1, 0, 2]),
            // dense carries more weight than lexical: dense top beats lexical top
            (&[5.0, 0.0, 2.0], &[0.0, 1.0, 0.5], &[1, 2, 0]),
            // all equal: index order
            (&[1.0, 1.0], &[0.3, 0.3], &[0, 1]),
        ];
        for (lex, dense, want) in cases {
            let got = ranking(&fuse(lex, dense));
            assert_eq!(&got, want, "lexical {lex:?} dense {dense:?}");
        }
    }

    #[test]
    fn min_max_scales_and_handles_flat_input() {
        assert_eq!(min_max(&[2.0, 4.0, 3.0]), vec![0.0, 1.0, 0.5]);
        assert_eq!(min_max(&[7.0, 7.0]), vec![0.0, 0.0]);
        assert!(min_max(&[]).is_empty());
    }

    #[test]
    fn top_k_matches_full_ranking() {
        let scores = [0.5, 0.9, 0.5, 0.1, 0.9, 0.7, 0.5];
        let full = ranking(&scores);
        for k in 0..=scores.len() + 1 {
            assert_eq!(top_k(&scores, k), full[..k.min(scores.len())], "k={k}");
        }
    }

    #[test]
    fn dot_handles_lanes_and_tail() {
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let b = vec![2.0f32; 19];
        assert_eq!(dot(&a, &b), 2.0 * (0..19).sum::<i32>() as f32);
        assert_eq!(dot(&a, &b[..3]), 0.0);
        assert_eq!(
            dense_scores(&[1.0, 0.0], &[vec![0.5, 0.5], vec![0.0, 1.0]]),
            vec![0.5, 0.0]
        );
    }

    #[test]
    fn query_parts_table() {
        let cases: &[(&str, &[&str])] = &[
            ("read the file", &[]),
            (
                "Find papers on MCP. Then summarise the trends!",
                &["Find papers on MCP.", "Then summarise the trends!"],
            ),
            // short fragments do not count as requests; version numbers do not split
            ("Hi. Find papers on MCP. Thanks!", &[]),
            (
                "Install v1.2 of the tool; then run its tests now",
                &["Install v1.2 of the tool;", "then run its tests now"],
            ),
            ("查找北京的天气？ 然后 预订 明天 的 机票", &[]),
        ];
        for (query, want) in cases {
            assert_eq!(query_parts(query), *want, "{query}");
        }
    }

    #[test]
    fn combine_parts_lifts_a_tool_one_sentence_wants() {
        let whole = [0.9, 0.2, 0.1];
        // sentence 2 asks for tool 1 alone
        let parts = vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]];
        let combined = combine_parts(&whole, &parts);
        assert_eq!(ranking(&combined), vec![0, 1, 2]);
        assert!(combined[1] > combined[2] + 0.4);
        assert_eq!(combine_parts(&whole, &[]), whole.to_vec());
    }

    #[test]
    fn empty_index_and_empty_query_give_nothing() {
        assert!(Bm25Index::new(&[]).search("x", 5).is_empty());
        assert!(Bm25Index::new(&[doc("a", "b")]).search("", 5).is_empty());
    }
}
