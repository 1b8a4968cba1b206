//! LLM-as-judge: the prompt sent to the judge model and the resilient parsing of its verdict.
//!
//! Parsing, in the seed's order: strip `<think>` blocks; JSON from code fences; a `{"pass": …}`
//! object anywhere in the text; then keyword heuristics (`"pass": true` written into prose, or a
//! `Verdict: PASS` line, or an answer that is just `PASS`/`FAIL`). Nothing found is a
//! `ValueError`.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::EvalError;
use crate::reply::{json_objects, strip_think};

/// The judge's instructions.
pub const SYSTEM_PROMPT: &str = "You are an impartial evaluator. You decide whether a response \
meets the given criteria. Judge only against the criteria, not against your own preferences. \
Answer with a single JSON object and nothing else.";

/// The user message for one verdict.
#[must_use]
pub fn prompt(response: &str, criteria: &str) -> String {
    format!(
        "Evaluate whether the RESPONSE meets the CRITERIA.\n\n\
         CRITERIA:\n{criteria}\n\n\
         RESPONSE:\n{response}\n\n\
         Reply with only this JSON object:\n\
         {{\"pass\": true or false, \"reason\": \"one or two sentences explaining the verdict\", \
         \"score\": a number from 0 (worst) to 10 (best)}}"
    )
}

/// A parsed verdict, in the seed's field order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub pass: bool,
    pub reason: String,
    pub score: Option<f64>,
    pub raw_response: String,
}

static PASS_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)["']?\bpass(?:ed)?\b["']?\s*[:=]\s*["']?(true|false|yes|no)\b"#)
        .expect("valid regex")
});
static VERDICT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:verdict|result|decision|answer)\s*[:\-]\s*[*_`]*\s*(pass(?:ed)?|fail(?:ed)?)\b",
    )
    .expect("valid regex")
});
static BARE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^[*_`\s]*(pass(?:ed)?|fail(?:ed)?)[*_`.!\s]*$").expect("valid regex")
});
static REASON_FIELD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)"reason"\s*:\s*"((?:[^"\\]|\\.)*)""#).expect("valid regex"));
static SCORE_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)"?score"?\s*[:=]\s*"?(-?\d+(?:\.\d+)?)"#).expect("valid regex")
});

/// Longest reason taken from prose when the judge wrote no `reason` field.
const MAX_PROSE_REASON: usize = 500;

/// Reads the judge's verdict from its raw answer.
///
/// # Errors
/// [`EvalError::Unparseable`] when no strategy finds a verdict.
pub fn parse(raw: &str) -> Result<Verdict, EvalError> {
    let text = strip_think(raw);
    for object in json_objects(&text) {
        if let Some(verdict) = from_object(&object, raw) {
            return Ok(verdict);
        }
    }
    heuristic(&text, raw).ok_or_else(|| {
        EvalError::Unparseable(format!(
            "the judge's answer holds no verdict (no JSON with \"pass\", no PASS/FAIL): {:?}",
            raw.chars().take(200).collect::<String>()
        ))
    })
}

fn truthy(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => word(s),
        Value::Number(n) => n.as_f64().map(|x| x != 0.0),
        _ => None,
    }
}

fn word(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "pass" | "passed" => Some(true),
        "false" | "no" | "fail" | "failed" => Some(false),
        _ => None,
    }
}

/// Scores outside 0..=10 are not trusted and become `null`.
fn score(v: Option<&Value>) -> Option<f64> {
    let x = match v? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (0.0..=10.0).contains(&x).then_some(x)
}

fn from_object(object: &Map<String, Value>, raw: &str) -> Option<Verdict> {
    let pass = object
        .get("pass")
        .or_else(|| object.get("passed"))
        .and_then(truthy)?;
    let reason = match object.get("reason") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    Some(Verdict {
        pass,
        reason,
        score: score(object.get("score")),
        raw_response: raw.to_owned(),
    })
}

fn heuristic(text: &str, raw: &str) -> Option<Verdict> {
    let pass = PASS_FIELD
        .captures(text)
        .or_else(|| VERDICT_LINE.captures(text))
        .or_else(|| BARE.captures(text))
        .and_then(|c| word(&c[1]))?;
    let reason = REASON_FIELD
        .captures(text)
        .and_then(|c| serde_json::from_str::<String>(&format!("\"{}\"", &c[1])).ok())
        .unwrap_or_else(|| text.chars().take(MAX_PROSE_REASON).collect());
    let score = SCORE_FIELD
        .captures(text)
        .and_then(|c| score(Some(&json!(c[1].to_owned()))));
    Some(Verdict {
        pass,
        reason,
        score,
        raw_response: raw.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str, pass: bool, reason: &str, score: Option<f64>) {
        let v = parse(raw).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
        assert_eq!(
            (v.pass, v.reason.as_str(), v.score),
            (pass, reason, score),
            "{raw:?}"
        );
        assert_eq!(v.raw_response, raw);
    }

    #[test]
    fn parsing_strategies_in_order() {
        check(
            r#"{"pass": true, "reason": "ok", "score": 8}"#,
            true,
            "ok",
            Some(8.0),
        );
        check(
            "<think>maybe {\"pass\": false}</think>\n{\"pass\": true, \"reason\": \"r\"}",
            true,
            "r",
            None,
        );
        check(
            "Here you go:\n```json\n{\"pass\": false, \"reason\": \"no\", \"score\": 2.5}\n```",
            false,
            "no",
            Some(2.5),
        );
        check(
            "I think {\"pass\": \"yes\", \"reason\": \"fine\", \"score\": 42} is right",
            true,
            "fine",
            None,
        );
        check(
            "The answer: \"pass\": true, \"reason\": \"mostly \\\"right\\\"\", score: 7",
            true,
            "mostly \"right\"",
            Some(7.0),
        );
        check(
            "Verdict: **FAIL** because it refused.",
            false,
            "Verdict: **FAIL** because it refused.",
            None,
        );
        check("PASS", true, "PASS", None);
    }

    #[test]
    fn unparseable_is_a_value_error() {
        let e = parse("I cannot decide.").unwrap_err();
        assert!(e.to_string().starts_with("ValueError: "), "{e}");
        assert!(parse("<think>{\"pass\": true}</think>").is_err());
    }

    #[test]
    fn prompt_names_criteria_and_response() {
        let p = prompt("RESP", "CRIT");
        assert!(p.contains("CRITERIA:\nCRIT") && p.contains("RESPONSE:\nRESP"));
    }
}
