//! Grammatical variants of a constraint: the dimensions, the generation prompt, and reading the
//! model's answer.
//!
//! The baseline is the imperative form and is always returned under `imperative`. Each
//! requested dimension asks for its non-baseline values, labelled as below, so the output can go
//! straight into `analyze_variants` with the default `baseline_label`.

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::EvalError;
use crate::reply::{json_objects, strip_think};

/// The dimensions, each with the labels it asks for and what each label means.
pub const DIMENSIONS: &[(&str, &[(&str, &str)])] = &[
    (
        "mood",
        &[
            ("interrogative", "phrased as a question or request"),
            (
                "declarative",
                "phrased as a plain statement of what is done",
            ),
        ],
    ),
    (
        "voice",
        &[("passive", "passive voice (\"X should be done\")")],
    ),
    (
        "person",
        &[
            ("first_person", "first person (\"I/We ...\")"),
            ("third_person", "third person (\"The developer ...\")"),
        ],
    ),
    (
        "tense",
        &[
            ("past", "past tense"),
            ("future", "future tense (\"You will ...\")"),
            ("perfect", "perfect aspect (\"... has been done\")"),
        ],
    ),
    (
        "frame",
        &[
            (
                "presuppositional",
                "presupposes the rule already holds (\"Since X is always done ...\")",
            ),
            (
                "descriptive",
                "describes the practice as a norm (\"The practice here is ...\")",
            ),
        ],
    ),
];

/// The default `dimensions`.
pub const DEFAULT_DIMENSIONS: &[&str] = &["mood", "voice", "person", "frame"];

/// The labels the requested dimensions ask for, in order.
///
/// # Errors
/// [`EvalError::InvalidArgument`] for an unknown or empty list of dimensions.
pub fn labels(dimensions: &[String]) -> Result<Vec<(&'static str, &'static str)>, EvalError> {
    if dimensions.is_empty() {
        return Err(EvalError::InvalidArgument(
            "dimensions must name at least one of mood, voice, person, tense, frame".into(),
        ));
    }
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for d in dimensions {
        let Some((_, labels)) = DIMENSIONS.iter().find(|(name, _)| *name == d.trim()) else {
            return Err(EvalError::InvalidArgument(format!(
                "unknown dimension {d:?}; available: mood, voice, person, tense, frame"
            )));
        };
        for l in *labels {
            if !out.iter().any(|(seen, _)| seen == &l.0) {
                out.push(*l);
            }
        }
    }
    Ok(out)
}

/// The system and user messages asking for `labels`.
#[must_use]
pub fn prompt(baseline: &str, labels: &[(&str, &str)]) -> (String, String) {
    let system = "You rewrite instructions in different grammatical forms. Every rewrite keeps \
                  the exact meaning and requirement of the original; only the grammar changes. \
                  Answer with a single JSON object and nothing else."
        .to_owned();
    let mut user = format!(
        "Original (imperative) constraint:\n{baseline}\n\nWrite one rewrite for each label:\n"
    );
    for (label, meaning) in labels {
        user.push_str(&format!("- {label}: {meaning}\n"));
    }
    user.push_str("\nReply with only a JSON object mapping each label to its rewrite, e.g. {");
    let example: Vec<String> = labels
        .iter()
        .map(|(l, _)| format!("\"{l}\": \"...\""))
        .collect();
    user.push_str(&example.join(", "));
    user.push('}');
    (system, user)
}

/// The variants from the model's answer: `imperative` (the baseline) first, then the requested
/// labels in order, then any extra labels the model added.
///
/// # Errors
/// [`EvalError::Unparseable`] when the answer holds no JSON object with a text rewrite.
pub fn parse(
    raw: &str,
    baseline: &str,
    labels: &[(&str, &str)],
) -> Result<IndexMap<String, String>, EvalError> {
    let text = strip_think(raw);
    let object = json_objects(&text)
        .into_iter()
        .map(|o| {
            // Some models nest the answer: {"variants": {...}}.
            match o.get("variants") {
                Some(Value::Object(inner)) => inner.clone(),
                _ => o,
            }
        })
        .find(|o| {
            o.iter()
                .any(|(k, v)| k != "imperative" && v.as_str().is_some_and(|s| !s.trim().is_empty()))
        })
        .ok_or_else(|| {
            EvalError::Unparseable(format!(
                "the model's answer holds no JSON object of rewrites: {:?}",
                raw.chars().take(200).collect::<String>()
            ))
        })?;
    let mut out = IndexMap::new();
    out.insert("imperative".to_owned(), baseline.to_owned());
    let text_of = |k: &str| {
        object
            .get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    for (label, _) in labels {
        if let Some(t) = text_of(label) {
            out.insert((*label).to_owned(), t);
        }
    }
    for k in object.keys() {
        if !out.contains_key(k)
            && let Some(t) = text_of(k)
        {
            out.insert(k.clone(), t);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_dimensions() {
        let l = labels(&["voice".into(), "mood".into()]).unwrap();
        let names: Vec<&str> = l.iter().map(|x| x.0).collect();
        assert_eq!(names, ["passive", "interrogative", "declarative"]);
        assert!(labels(&[]).is_err());
        let e = labels(&["aspect".into()]).unwrap_err();
        assert!(e.to_string().starts_with("ValueError: unknown dimension"));
    }

    #[test]
    fn parse_keeps_baseline_first_and_label_order() {
        let l = labels(&["mood".into(), "voice".into()]).unwrap();
        let raw = "<think>x</think>```json\n{\"passive\": \"A bug is filed.\", \"interrogative\": \"Could you file a bug?\", \"imperative\": \"ignored\", \"extra\": \"E\", \"n\": 3}\n```";
        let v = parse(raw, "File a bug", &l).unwrap();
        let keys: Vec<&str> = v.keys().map(String::as_str).collect();
        assert_eq!(keys, ["imperative", "interrogative", "passive", "extra"]);
        assert_eq!(v["imperative"], "File a bug");
        assert!(parse("no json", "b", &l).is_err());
        assert!(parse("{\"imperative\": \"only\"}", "b", &l).is_err());
    }

    #[test]
    fn prompt_lists_every_label() {
        let l = labels(&["tense".into()]).unwrap();
        let (_, user) = prompt("Do X", &l);
        for (label, _) in &l {
            assert!(user.contains(label));
        }
    }
}
