//! The content guards' hooks in the call path (`toolforge_guard::secrets` decides): a call's
//! arguments are scanned before they reach the backend, its result before it reaches the
//! caller. `redact` replaces each secret with `[REDACTED:<kind>]`; `block` refuses the call
//! (arguments) or withholds the result. Only text is scanned in results (text content, text
//! resources, structured content): images, audio and blobs pass untouched.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents};
use serde_json::Value;
use toolforge_guard::secrets::{redact_string, redact_value, scan_text, scan_value};
use toolforge_guard::{GuardSettings, SecretAction};

/// Kinds found, each once, in order of first appearance.
fn distinct(kinds: Vec<&'static str>) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for k in kinds {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// What the guard does to a call's arguments: `Err` (block) with the reason, or the note of
/// what was redacted in place (none: nothing found).
pub(crate) fn arguments(
    settings: GuardSettings,
    args: &mut Option<JsonObject>,
) -> Result<Option<String>, String> {
    let Some(map) = args.as_mut() else {
        return Ok(None);
    };
    match settings.secrets {
        SecretAction::Off => Ok(None),
        SecretAction::Block => {
            let kinds = distinct(scan_value(&Value::Object(map.clone())));
            if kinds.is_empty() {
                Ok(None)
            } else {
                Err(format!(
                    "its arguments contain a secret ({}); remove it, or set \"guards\": {{\"secrets\": \"redact\"}}",
                    kinds.join(", ")
                ))
            }
        }
        SecretAction::Redact => {
            let mut value = Value::Object(std::mem::take(map));
            let kinds = distinct(redact_value(&mut value));
            if let Value::Object(m) = value {
                *map = m;
            }
            Ok((!kinds.is_empty())
                .then(|| format!("redacted from the arguments: {}", kinds.join(", "))))
        }
    }
}

/// The texts of a result's content the guard reads, in order: text content and text
/// resources (never images, audio or blobs).
fn content_texts(result: &mut CallToolResult) -> impl Iterator<Item = &mut String> {
    result.content.iter_mut().filter_map(|block| match block {
        ContentBlock::Text(text) => Some(&mut text.text),
        ContentBlock::Resource(embedded) => match &mut embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => Some(text),
            _ => None,
        },
        _ => None,
    })
}

/// What the guard does to a result: `Err` (withhold) with the reason, or the note of what was
/// redacted in place. The result is read where it is: one without secrets (most) is not
/// copied.
pub(crate) fn result(
    settings: GuardSettings,
    result: &mut CallToolResult,
) -> Result<Option<String>, String> {
    let mut kinds = Vec::new();
    match settings.secrets {
        SecretAction::Off => return Ok(None),
        SecretAction::Block => {
            for text in content_texts(result) {
                kinds.extend(scan_text(text).into_iter().map(|f| f.kind));
            }
            if let Some(structured) = &result.structured_content {
                kinds.extend(scan_value(structured));
            }
        }
        SecretAction::Redact => {
            for text in content_texts(result) {
                kinds.extend(redact_string(text));
            }
            if let Some(structured) = &mut result.structured_content {
                kinds.extend(redact_value(structured));
            }
        }
    }
    let kinds = distinct(kinds);
    if kinds.is_empty() {
        return Ok(None);
    }
    if settings.secrets == SecretAction::Block {
        return Err(format!(
            "its result contains a secret ({}) and was withheld",
            kinds.join(", ")
        ));
    }
    Ok(Some(format!(
        "redacted from the result: {}",
        kinds.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(secrets: SecretAction) -> GuardSettings {
        GuardSettings {
            secrets,
            ..GuardSettings::default()
        }
    }

    fn args(v: Value) -> Option<JsonObject> {
        match v {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    const KEY: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

    #[test]
    fn arguments_are_redacted_blocked_or_left() {
        let mut a = args(json!({"token": KEY, "n": 1}));
        let note = arguments(settings(SecretAction::Redact), &mut a).unwrap();
        assert_eq!(
            note.as_deref(),
            Some("redacted from the arguments: github_token")
        );
        assert_eq!(a.as_ref().unwrap()["token"], "[REDACTED:github_token]");
        let mut a = args(json!({"token": KEY}));
        let e = arguments(settings(SecretAction::Block), &mut a).unwrap_err();
        assert!(e.contains("github_token"), "{e}");
        assert_eq!(
            a.as_ref().unwrap()["token"],
            KEY,
            "blocking changes nothing"
        );
        let mut a = args(json!({"token": KEY}));
        assert_eq!(arguments(settings(SecretAction::Off), &mut a), Ok(None));
        let mut clean = args(json!({"q": "weather in Paris"}));
        assert_eq!(
            arguments(settings(SecretAction::Block), &mut clean),
            Ok(None)
        );
    }

    #[test]
    fn only_text_in_results_is_scanned() {
        let mut r: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": format!("key {KEY}")},
                {"type": "image", "data": "Zx8Qp2Lr7Vt4Kb9Nw3Jc6Hs1Fd5Gm0Ya8Ue2Io7Pq", "mimeType": "image/png"}
            ],
            "structuredContent": {"k": KEY}
        }))
        .unwrap();
        let note = result(settings(SecretAction::Redact), &mut r).unwrap();
        assert_eq!(
            note.as_deref(),
            Some("redacted from the result: github_token")
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], "key [REDACTED:github_token]");
        assert_eq!(
            v["content"][1]["data"],
            "Zx8Qp2Lr7Vt4Kb9Nw3Jc6Hs1Fd5Gm0Ya8Ue2Io7Pq"
        );
        assert_eq!(v["structuredContent"]["k"], "[REDACTED:github_token]");
        let mut r: CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": KEY}]})).unwrap();
        assert!(result(settings(SecretAction::Block), &mut r).is_err());
    }

    #[test]
    fn a_secret_is_found_in_each_place_a_result_holds_text() {
        let resource = json!({"type": "resource", "resource": {"uri": "file:///k", "text": KEY}});
        for (place, body) in [
            ("text", json!({"content": [{"type": "text", "text": KEY}]})),
            ("resource", json!({"content": [resource]})),
            (
                "structured",
                json!({"content": [], "structuredContent": {"a": [KEY]}}),
            ),
        ] {
            let mut r: CallToolResult = serde_json::from_value(body).unwrap();
            assert!(
                result(settings(SecretAction::Block), &mut r).is_err(),
                "{place}"
            );
            let note = result(settings(SecretAction::Redact), &mut r).unwrap();
            assert!(note.is_some(), "{place}");
            assert!(!serde_json::to_string(&r).unwrap().contains(KEY), "{place}");
        }
        // Nothing found: the result is left exactly as it came.
        let body =
            json!({"content": [{"type": "text", "text": "fine"}], "structuredContent": {"n": 1}});
        let mut r: CallToolResult = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(result(settings(SecretAction::Redact), &mut r), Ok(None));
        assert_eq!(serde_json::to_value(&r).unwrap(), body);
    }
}
