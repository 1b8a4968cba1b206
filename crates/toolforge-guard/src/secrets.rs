//! Credentials in text: the formats of the common cloud and API providers, private keys, and
//! long high-entropy tokens. Used on tool arguments (before they reach a backend) and on text
//! results (before they reach a client or model).
//!
//! A finding names the kind of secret and its byte range, never its value, so reporting one
//! does not leak it again.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde_json::Value;

/// One secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFinding {
    /// What it looks like: `aws_access_key_id`, `github_token`, `private_key`, ...
    pub kind: &'static str,
    /// Byte range in the scanned text.
    pub start: usize,
    pub end: usize,
}

/// The known formats, most specific first. Each regex matches the secret itself.
static PATTERNS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    let p = |kind: &'static str, re: &str| (kind, Regex::new(re).expect("valid secret pattern"));
    vec![
        p(
            "private_key",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
        ),
        p(
            "aws_access_key_id",
            r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
        ),
        p(
            "aws_secret_access_key",
            r#"(?i)aws.{0,20}?(?:secret|private).{0,20}?['"]?\s*[:=]\s*['"]?[A-Za-z0-9/+]{40}\b"#,
        ),
        p("gcp_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
        p("gcp_oauth_secret", r"\bGOCSPX-[0-9A-Za-z_\-]{28}"),
        p("azure_storage_key", r"(?i)AccountKey=[A-Za-z0-9+/]{86}=="),
        p(
            "azure_client_secret",
            r"\b[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}",
        ),
        p("azure_sas_token", r"(?i)[?&]sig=[A-Za-z0-9%+/]{40,}={0,2}"),
        p(
            "github_token",
            r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}",
        ),
        p("github_token", r"\bgithub_pat_[A-Za-z0-9_]{22,255}"),
        p("gitlab_token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
        p("slack_token", r"\bxox[abposr]-[0-9A-Za-z\-]{10,}"),
        p(
            "slack_webhook",
            r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}",
        ),
        p("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"),
        p(
            "anthropic_key",
            r"\bsk-ant-(?:api|admin)\d\d-[A-Za-z0-9_\-]{32,}",
        ),
        p(
            "openai_key",
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}T3BlbkFJ[A-Za-z0-9_\-]{16,}",
        ),
        p(
            "openai_key",
            r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}",
        ),
        p("openai_key", r"\bsk-[A-Za-z0-9]{48}\b"),
        p("huggingface_token", r"\bhf_[A-Za-z0-9]{34,}"),
        p("npm_token", r"\bnpm_[A-Za-z0-9]{36}"),
        p(
            "sendgrid_key",
            r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}",
        ),
        p("twilio_key", r"\bSK[0-9a-fA-F]{32}\b"),
        p(
            "jwt",
            r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{20,}",
        ),
        p(
            "credential_in_url",
            r"\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@]{1,64}:[^\s:/@]{6,128}@[A-Za-z0-9.\-]+",
        ),
        p(
            "password_assignment",
            r#"(?i)\b(?:password|passwd|pwd|secret|api[_\-]?key|access[_\-]?token|auth[_\-]?token|client[_\-]?secret)["']?\s*[:=]\s*["']?[^\s"',;\[]{8,}"#,
        ),
    ]
});

/// Every pattern of [`PATTERNS`] in one automaton: one pass over a text tells which patterns
/// occur in it at all, so a text without secrets (most of them) is read once, not once per
/// pattern, and only the patterns that occur are searched for their positions.
static ANY_PATTERN: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(PATTERNS.iter().map(|(_, re)| re.as_str())).expect("valid secret patterns")
});

/// Candidates for the entropy test: long runs of token characters.
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/_\-=]{32,}").expect("valid token pattern"));
/// The shortest text [`TOKEN`] can match (its characters are one byte each).
const TOKEN_MIN_BYTES: usize = 32;

/// Bits per character above which a long token counts as a secret. Hex (at most 4 bits) and
/// English words never reach it; random base64 or base62 of 32+ characters does.
pub const ENTROPY_THRESHOLD: f64 = 4.3;

/// Shannon entropy of `s`, in bits per character.
#[must_use]
pub fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[usize::from(b)] += 1;
    }
    #[allow(clippy::cast_precision_loss)]
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum()
}

/// A random-looking token: long, mixed letters and digits, high entropy, and not a path, an
/// identifier in `snake_case` or a URL's path.
fn high_entropy(token: &str) -> bool {
    let t = token.trim_end_matches('=');
    if t.len() < 32 {
        return false;
    }
    let upper = t.bytes().filter(u8::is_ascii_uppercase).count();
    let lower = t.bytes().filter(u8::is_ascii_lowercase).count();
    let digits = t.bytes().filter(u8::is_ascii_digit).count();
    let separators = t
        .bytes()
        .filter(|b| matches!(b, b'/' | b'_' | b'-'))
        .count();
    // Words joined by separators (paths, identifiers) are not random.
    if separators * 8 > t.len() {
        return false;
    }
    upper >= 2
        && lower >= 2
        && digits >= 2
        && entropy(t) >= ENTROPY_THRESHOLD
        && word_share(t) * 2 < t.len()
}

/// Characters of `t` inside word-like runs (`Item`, `Radiant`, `stone`): most of an identifier
/// such as `TFT5_Item_GargoyleStoneplateRadiant`, little of a random token.
fn word_share(t: &str) -> usize {
    WORDS.find_iter(t).map(|m| m.len()).sum()
}

static WORDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Z]?[a-z]{3,}").expect("valid word pattern"));

/// Every secret in `text`, in order, without overlaps (the most specific format wins).
#[must_use]
pub fn scan_text(text: &str) -> Vec<SecretFinding> {
    findings(text, ANY_PATTERN.matches(text).iter())
}

/// The secrets in `text` of the formats `patterns` (indexes into [`PATTERNS`], ascending), and
/// its high-entropy tokens, in order, without overlaps.
fn findings(text: &str, patterns: impl Iterator<Item = usize>) -> Vec<SecretFinding> {
    let mut found: Vec<SecretFinding> = Vec::new();
    let mut add = |kind: &'static str, m: regex::Match<'_>| {
        if !found.iter().any(|f| m.start() < f.end && f.start < m.end()) {
            found.push(SecretFinding {
                kind,
                start: m.start(),
                end: m.end(),
            });
        }
    };
    // In the patterns' order (most specific first).
    for index in patterns {
        let (kind, re) = &PATTERNS[index];
        re.find_iter(text).for_each(|m| add(kind, m));
    }
    // A text shorter than a token cannot hold one: skip the search.
    let tokens = (text.len() >= TOKEN_MIN_BYTES).then(|| TOKEN.find_iter(text));
    for m in tokens.into_iter().flatten() {
        if high_entropy(m.as_str()) {
            add("high_entropy_token", m);
        }
    }
    found.sort_by_key(|f| f.start);
    found
}

/// `text` with each secret replaced by `[REDACTED:<kind>]`, and the findings.
#[must_use]
pub fn redact_text(text: &str) -> (String, Vec<SecretFinding>) {
    let found = scan_text(text);
    if found.is_empty() {
        return (text.to_owned(), found);
    }
    (redacted(text, &found), found)
}

/// `text` with each of `found` (in order, without overlaps) replaced by `[REDACTED:<kind>]`.
fn redacted(text: &str, found: &[SecretFinding]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in found {
        out.push_str(&text[at..f.start]);
        out.push_str("[REDACTED:");
        out.push_str(f.kind);
        out.push(']');
        at = f.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Redacts each secret in `text` in place (as [`redact_text`]); the kinds found. A text
/// without secrets is left as it is, not copied.
pub fn redact_string(text: &mut String) -> Vec<&'static str> {
    let found = scan_text(text);
    if !found.is_empty() {
        *text = redacted(text, &found);
    }
    found.into_iter().map(|f| f.kind).collect()
}

/// The kinds of secret in every string (keys included) of `value`.
#[must_use]
pub fn scan_value(value: &Value) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    walk(value, &mut |s| {
        kinds.extend(scan_text(s).into_iter().map(|f| f.kind))
    });
    kinds
}

fn walk(value: &Value, f: &mut impl FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|v| walk(v, f)),
        Value::Object(m) => {
            for (k, v) in m {
                f(k);
                walk(v, f);
            }
        }
        _ => {}
    }
}

/// Redacts every string of `value` in place, object keys included; returns the kinds
/// redacted.
pub fn redact_value(value: &mut Value) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    match value {
        Value::String(s) => kinds.extend(redact_string(s)),
        Value::Array(a) => a.iter_mut().for_each(|v| kinds.extend(redact_value(v))),
        Value::Object(m) => {
            // A key holding a secret is rare: the map is rebuilt only then.
            if m.keys().any(|k| !scan_text(k).is_empty()) {
                let entries = std::mem::take(m);
                for (mut key, v) in entries {
                    kinds.extend(redact_string(&mut key));
                    m.insert(key, v);
                }
            }
            m.values_mut().for_each(|v| kinds.extend(redact_value(v)));
        }
        _ => {}
    }
    kinds
}

/// Where the secrets of adjacent `texts` (text blocks a reader sees one after another) lie in
/// each: those of each text, and those of their concatenation, each cut at the texts'
/// boundaries (so a token split over two blocks is found, and redacted in both). Per text, in
/// order, without overlaps.
fn adjacent_findings(texts: &[&str]) -> Vec<Vec<SecretFinding>> {
    let mut per: Vec<Vec<SecretFinding>> = texts.iter().map(|t| scan_text(t)).collect();
    if texts.len() < 2 {
        return per;
    }
    let joined: String = texts.concat();
    let mut start = 0;
    let bounds: Vec<(usize, usize)> = texts
        .iter()
        .map(|t| {
            let b = (start, start + t.len());
            start += t.len();
            b
        })
        .collect();
    for f in scan_text(&joined) {
        for (i, (from, to)) in bounds.iter().enumerate() {
            let (s, e) = (f.start.max(*from), f.end.min(*to));
            if s < e {
                per[i].push(SecretFinding {
                    kind: f.kind,
                    start: s - from,
                    end: e - from,
                });
            }
        }
    }
    for found in &mut per {
        found.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
        let mut merged: Vec<SecretFinding> = Vec::with_capacity(found.len());
        for f in found.drain(..) {
            match merged.last_mut() {
                Some(last) if f.start < last.end => last.end = last.end.max(f.end),
                _ => merged.push(f),
            }
        }
        *found = merged;
    }
    per
}

/// The kinds of secret in adjacent `texts`, a token split over two of them included.
#[must_use]
pub fn scan_adjacent(texts: &[&str]) -> Vec<&'static str> {
    adjacent_findings(texts)
        .into_iter()
        .flatten()
        .map(|f| f.kind)
        .collect()
}

/// Redacts adjacent `texts` in place (a token split over two of them is redacted in both);
/// the kinds redacted. Texts without secrets are left as they are.
pub fn redact_adjacent(texts: &mut [&mut String]) -> Vec<&'static str> {
    let found = {
        let shared: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
        adjacent_findings(&shared)
    };
    let mut kinds = Vec::new();
    for (text, found) in texts.iter_mut().zip(found) {
        if !found.is_empty() {
            **text = redacted(text, &found);
            kinds.extend(found.iter().map(|f| f.kind));
        }
    }
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_formats_and_redacts_them_without_the_value() {
        let text = "key AKIAIOSFODNN7EXAMPLE and ghp_abcdefghijklmnopqrstuvwxyz0123456789 end";
        let found = scan_text(text);
        let kinds: Vec<_> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, ["aws_access_key_id", "github_token"]);
        let (clean, _) = redact_text(text);
        assert_eq!(
            clean,
            "key [REDACTED:aws_access_key_id] and [REDACTED:github_token] end"
        );
    }

    #[test]
    fn ordinary_text_hashes_and_ids_are_not_secrets() {
        for benign in [
            "commit 3f786850e387550fdab836ed7e6dc881de23001b merged",
            "id 123e4567-e89b-12d3-a456-426614174000",
            "/usr/local/lib/python3.12/site-packages/some_module/sub_module_name.py",
            "the_quick_brown_fox_jumps_over_the_lazy_dog_again_and_again",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "Set the password field to the user's chosen value.",
            "TFT5_Item_GargoyleStoneplateRadiant and TFT14_VarusCyberneticItem_Radiant",
        ] {
            assert!(
                scan_text(benign).is_empty(),
                "{benign}: {:?}",
                scan_text(benign)
            );
        }
    }

    #[test]
    fn a_random_base62_token_is_caught_by_entropy() {
        let token = "Zx8Qp2Lr7Vt4Kb9Nw3Jc6Hs1Fd5Gm0Ya8Ue2Io7Pq";
        assert_eq!(scan_text(token)[0].kind, "high_entropy_token");
    }

    #[test]
    fn the_pattern_set_finds_what_each_pattern_finds_alone() {
        let corpus: Vec<String> = include_str!("../tests/corpus/secrets.jsonl")
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        // Every secret of the corpus in one text: many kinds, where a later (less specific)
        // pattern also matches what an earlier one took.
        let all = corpus.join(" password=");
        let short = ["", "sk-", "AKIA", "hello", "ghp_x"].map(str::to_owned);
        for text in corpus.iter().chain([&all]).chain(&short) {
            assert_eq!(scan_text(text), findings(text, 0..PATTERNS.len()), "{text}");
        }
        let kinds: std::collections::BTreeSet<_> = scan_text(&all).iter().map(|f| f.kind).collect();
        assert!(kinds.len() >= 15, "{kinds:?}");
    }

    #[test]
    fn a_token_split_over_adjacent_texts_is_found_and_redacted_in_each() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let (a, b) = token.split_at(10);
        let (b, c) = b.split_at(20);
        let mut texts = [
            format!("key {a}"),
            b.to_owned(),
            format!("{c}, and AKIAIOSFODNN7EXAMPLE"),
            "plain".to_owned(),
        ];
        assert!(
            texts
                .iter()
                .all(|t| scan_text(t).iter().all(|f| f.kind != "github_token")),
            "no piece is a token on its own"
        );
        let shared: Vec<&str> = texts.iter().map(String::as_str).collect();
        let kinds = scan_adjacent(&shared);
        assert!(kinds.contains(&"github_token"), "{kinds:?}");
        let mut refs: Vec<&mut String> = texts.iter_mut().collect();
        let kinds = redact_adjacent(&mut refs);
        assert!(kinds.contains(&"aws_access_key_id"), "{kinds:?}");
        assert_eq!(
            texts,
            [
                "key [REDACTED:github_token]",
                "[REDACTED:github_token]",
                "[REDACTED:github_token], and [REDACTED:aws_access_key_id]",
                "plain"
            ]
        );
        // One text: as `redact_string`.
        let mut one = [format!("x {token}")];
        let mut refs: Vec<&mut String> = one.iter_mut().collect();
        assert_eq!(redact_adjacent(&mut refs), ["github_token"]);
        assert_eq!(one[0], "x [REDACTED:github_token]");
    }

    #[test]
    fn a_secret_as_an_object_key_is_redacted_too() {
        let mut v = serde_json::json!({"ghp_abcdefghijklmnopqrstuvwxyz0123456789": {"n": 1}});
        let kinds = redact_value(&mut v);
        assert_eq!(kinds, ["github_token"]);
        assert!(scan_value(&v).is_empty(), "{v}");
        assert_eq!(v["[REDACTED:github_token]"]["n"], 1);
    }

    #[test]
    fn json_values_are_redacted_in_place() {
        let mut v =
            serde_json::json!({"a": ["x", {"k": "token xoxb-1234567890-abcdefghij"}], "n": 1});
        let kinds = redact_value(&mut v);
        assert_eq!(kinds, ["slack_token"]);
        assert_eq!(v["a"][1]["k"], "token [REDACTED:slack_token]");
        assert!(scan_value(&v).is_empty());
    }
}
