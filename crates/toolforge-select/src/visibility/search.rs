//! The search query: which tools it matches (seed 001's case-insensitive `CONTAINS`), their
//! BM25 order, and the `search_limit` cut (hidden with a reason, never dropped silently).

use std::collections::HashSet;

use super::channels::Channel;
use super::policy::Policy;
use super::verdicts::Reason;
use crate::catalog::Tool;

/// The tools at `allowed` (catalog positions, ascending) a search query matches, as seed 001's
/// Knowledge Graph query does: the query is a case-insensitive substring of the tool's name,
/// description or one of its tags. A query of several words also matches a tool containing any
/// one of its content words (three letters or more, not a stop word), so "logs analysis" finds
/// the log tools instead of nothing.
pub(super) fn search_members(tools: &[&Tool], allowed: &[usize], query: &str) -> Vec<usize> {
    let whole = query.trim().to_lowercase();
    let mut needles = vec![whole.clone()];
    let words: Vec<&str> = whole.split_whitespace().collect();
    if words.len() > 1 {
        for word in words {
            let content = word.chars().count() >= 3 && !crate::rank::terms(word).is_empty();
            if content && !needles.iter().any(|n| n == word) {
                needles.push(word.to_owned());
            }
        }
    }
    let contains = |text: &str| {
        let text = text.to_lowercase();
        needles.iter().any(|n| text.contains(n.as_str()))
    };
    allowed
        .iter()
        .copied()
        .filter(|&i| {
            let tool = tools[i];
            contains(&tool.name)
                || contains(&tool.description)
                || tool.tags.iter().any(|t| contains(t))
        })
        .collect()
}

/// The matching tools best first: by BM25 score over the matches (`ranked`: positions in
/// `members` with positive scores, best first), then the matches sharing no index term with the
/// query, in catalog order. A positive `min_score` keeps only matches scoring above it.
pub(super) fn search_order(
    members: &[usize],
    ranked: &[(usize, f32)],
    min_score: f32,
) -> Vec<usize> {
    let floor = min_score.max(0.0);
    let mut order: Vec<usize> = ranked
        .iter()
        .filter(|&&(_, score)| score > floor)
        .map(|&(p, _)| members[p])
        .collect();
    if floor == 0.0 {
        let scored: HashSet<usize> = order.iter().copied().collect();
        order.extend(members.iter().copied().filter(|i| !scored.contains(i)));
    }
    order
}

/// Hides what a search left out: tools it did not match, and matches beyond the limit. A
/// search that matched nothing hides nothing (the caller marks it unmatched).
pub(super) fn apply_search(
    reasons: &mut [Option<Reason>],
    allowed: &[usize],
    order: &[usize],
    channel: Channel,
    policy: &Policy,
) {
    if order.is_empty() {
        return;
    }
    let limit = policy.search_limit.max(1);
    let mut verdict: Vec<Option<Option<Reason>>> = vec![None; reasons.len()];
    for (rank, &i) in order.iter().enumerate() {
        verdict[i] = Some((rank >= limit).then_some(Reason::BeyondSearchLimit { channel, limit }));
    }
    for &i in allowed {
        reasons[i] = match verdict[i].take() {
            Some(kept_or_beyond) => kept_or_beyond,
            None => Some(Reason::NoSearchMatch { channel }),
        };
    }
}
