//! Keyword intent detection: maps a free-text request to intents with confidences.
//!
//! Catalogue (intent: keywords): `read` (read, show, view, list, get, cat, open), `write` (write,
//! edit, create, update, save, modify), `search` (search, find, grep, lookup, query), `git`
//! (commit, branch, diff, merge, git, log), `review` (review, pr, pull, approve, comment),
//! `build` (build, compile, test, run, deploy).
//! Confidence = keywords of that intent present in the text / tokens in the text, capped at 1;
//! results sorted by confidence descending, ties in catalogue order. Deterministic, no I/O.

/// The intent catalogue, in tie-break order.
pub const INTENTS: &[(&str, &[&str])] = &[
    (
        "read",
        &["read", "show", "view", "list", "get", "cat", "open"],
    ),
    (
        "write",
        &["write", "edit", "create", "update", "save", "modify"],
    ),
    ("search", &["search", "find", "grep", "lookup", "query"]),
    ("git", &["commit", "branch", "diff", "merge", "git", "log"]),
    ("review", &["review", "pr", "pull", "approve", "comment"]),
    ("build", &["build", "compile", "test", "run", "deploy"]),
];

/// Lowercase alphanumeric tokens of `text` (splits on everything else).
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Intents found in `text` with confidences in (0, 1], best first.
pub fn detect(text: &str) -> Vec<(&'static str, f64)> {
    let tokens = tokenize(text);
    if tokens.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(&'static str, f64)> = INTENTS
        .iter()
        .filter_map(|(intent, kws)| {
            let hits = tokens.iter().filter(|t| kws.contains(&t.as_str())).count();
            #[allow(clippy::cast_precision_loss)]
            let conf = (hits as f64 / tokens.len() as f64).min(1.0);
            (hits > 0).then_some((*intent, conf))
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_and_orders_intents() {
        let got = detect("Please review the PR and show the diff");
        let names: Vec<_> = got.iter().map(|(i, _)| *i).collect();
        assert_eq!(names, ["review", "read", "git"]);
        assert!((got[0].1 - 2.0 / 8.0).abs() < 1e-9);
        assert!(detect("").is_empty());
        assert!(detect("hello there").is_empty());
    }
}
