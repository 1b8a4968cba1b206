//! The content guards' hooks wherever a backend's text meets the pool's callers
//! (`toolforge_guard::secrets` decides): a call's arguments are scanned before they reach the
//! backend; what comes back before it reaches the caller (and so the client, the model, the
//! agent's answer and the trace): a tool's result, a resource read, a prompt, completions, and
//! a failed request's error message. `redact` replaces each secret with `[REDACTED:<kind>]`;
//! `block` refuses the call (arguments) or withholds the result. An error cannot be withheld,
//! only redacted, whatever the setting.
//!
//! Every text a caller receives is read: text content (adjacent text blocks also as one text,
//! so a token split over two is found and redacted in both), text resources with their URIs,
//! resource links (URI, name, title, description), structured content, and every `_meta`
//! (of the result and of each block). Images, audio and blobs pass untouched.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CompleteResult, ContentBlock, GetPromptResult, JsonObject, MetaObject,
    ReadResourceResult, Resource, ResourceContents,
};
use serde_json::Value;
use toolforge_guard::secrets::{
    redact_adjacent, redact_string, redact_value, scan_adjacent, scan_text, scan_value,
};
use toolforge_guard::{GuardSettings, SecretAction};

use crate::call::CallError;

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

/// One pass over what a backend sent: finding the secrets in it (`redact` false, for `block`)
/// or redacting them in place, gathering the kinds.
struct Pass {
    redact: bool,
    kinds: Vec<&'static str>,
}

impl Pass {
    fn text(&mut self, text: &mut String) {
        if self.redact {
            self.kinds.extend(redact_string(text));
        } else {
            self.kinds
                .extend(scan_text(text).into_iter().map(|f| f.kind));
        }
    }

    fn opt_text(&mut self, text: Option<&mut String>) {
        if let Some(text) = text {
            self.text(text);
        }
    }

    /// Texts a reader sees one after another (adjacent text blocks).
    fn adjacent(&mut self, texts: &mut Vec<&mut String>) {
        if self.redact {
            self.kinds.extend(redact_adjacent(texts));
        } else {
            let shared: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
            self.kinds.extend(scan_adjacent(&shared));
        }
        texts.clear();
    }

    fn value(&mut self, value: &mut Value) {
        if self.redact {
            self.kinds.extend(redact_value(value));
        } else {
            self.kinds.extend(scan_value(value));
        }
    }

    fn meta(&mut self, meta: Option<&mut MetaObject>) {
        let Some(meta) = meta else {
            return;
        };
        // Read in place as a value: moved out and back, never copied.
        let mut value = Value::Object(std::mem::take(&mut meta.0));
        self.value(&mut value);
        if let Value::Object(m) = value {
            meta.0 = m;
        }
    }

    fn resource(&mut self, link: &mut Resource) {
        self.text(&mut link.uri);
        self.text(&mut link.name);
        self.opt_text(link.title.as_mut());
        self.opt_text(link.description.as_mut());
        self.meta(link.meta.as_mut());
    }

    /// A resource's contents; `run` gathers adjacent texts (a blob ends the run).
    fn contents<'a>(&mut self, contents: &'a mut ResourceContents, run: &mut Vec<&'a mut String>) {
        match contents {
            ResourceContents::TextResourceContents {
                uri, text, meta, ..
            } => {
                self.text(uri);
                self.meta(meta.as_mut());
                run.push(text);
            }
            ResourceContents::BlobResourceContents { uri, meta, .. } => {
                self.adjacent(run);
                self.text(uri);
                self.meta(meta.as_mut());
            }
            // A kind of contents this rmcp does not know has no text it could read.
            _ => self.adjacent(run),
        }
    }

    /// One content block; `run` gathers the adjacent text blocks.
    fn block<'a>(&mut self, block: &'a mut ContentBlock, run: &mut Vec<&'a mut String>) {
        match block {
            ContentBlock::Text(text) => {
                self.meta(text.meta.as_mut());
                run.push(&mut text.text);
            }
            ContentBlock::Image(image) => {
                self.adjacent(run);
                self.meta(image.meta.as_mut());
            }
            ContentBlock::Audio(audio) => {
                self.adjacent(run);
                self.meta(audio.meta.as_mut());
            }
            ContentBlock::Resource(embedded) => {
                self.adjacent(run);
                self.meta(embedded.meta.as_mut());
                let mut own = Vec::new();
                self.contents(&mut embedded.resource, &mut own);
                self.adjacent(&mut own);
            }
            ContentBlock::ResourceLink(link) => {
                self.adjacent(run);
                self.resource(link);
            }
            _ => self.adjacent(run),
        }
    }

    fn blocks<'a>(&mut self, blocks: impl Iterator<Item = &'a mut ContentBlock>) {
        let mut run = Vec::new();
        for block in blocks {
            self.block(block, &mut run);
        }
        self.adjacent(&mut run);
    }
}

/// Runs `pass` over a backend's answer as `settings` say: `Err` (withhold) with the reason
/// (`the result contains a secret (github_token) and was withheld`), or the note of what was
/// redacted in place (`redacted from the result: github_token`). An answer without secrets
/// (most) is read where it is, not copied.
fn guarded(
    settings: GuardSettings,
    what: &str,
    pass: impl FnOnce(&mut Pass),
) -> Result<Option<String>, String> {
    let mut p = Pass {
        redact: match settings.secrets {
            SecretAction::Off => return Ok(None),
            SecretAction::Block => false,
            SecretAction::Redact => true,
        },
        kinds: Vec::new(),
    };
    pass(&mut p);
    let kinds = distinct(p.kinds);
    if kinds.is_empty() {
        return Ok(None);
    }
    if !p.redact {
        return Err(format!(
            "{what} contains a secret ({}) and was withheld",
            kinds.join(", ")
        ));
    }
    Ok(Some(format!("redacted from {what}: {}", kinds.join(", "))))
}

/// What the guard does to a tool's result: `Err` (withhold) with the reason, or the note of
/// what was redacted in place.
pub(crate) fn result(
    settings: GuardSettings,
    result: &mut CallToolResult,
) -> Result<Option<String>, String> {
    guarded(settings, "the result", |p| {
        p.blocks(result.content.iter_mut());
        if let Some(structured) = &mut result.structured_content {
            p.value(structured);
        }
        p.meta(result.meta.as_mut());
    })
}

/// What the guard does to a resource read, as [`result`].
pub(crate) fn resource(
    settings: GuardSettings,
    read: &mut ReadResourceResult,
) -> Result<Option<String>, String> {
    guarded(settings, "the resource", |p| {
        let mut run = Vec::new();
        for contents in &mut read.contents {
            p.contents(contents, &mut run);
        }
        p.adjacent(&mut run);
        p.meta(read.meta.as_mut());
    })
}

/// What the guard does to a prompt, as [`result`]: its description and messages (adjacent
/// text messages as one text).
pub(crate) fn prompt(
    settings: GuardSettings,
    prompt: &mut GetPromptResult,
) -> Result<Option<String>, String> {
    guarded(settings, "the prompt", |p| {
        p.opt_text(prompt.description.as_mut());
        p.blocks(prompt.messages.iter_mut().map(|m| &mut m.content));
        p.meta(prompt.meta.as_mut());
    })
}

/// What the guard does to completions, as [`result`].
pub(crate) fn completion(
    settings: GuardSettings,
    completion: &mut CompleteResult,
) -> Result<Option<String>, String> {
    guarded(settings, "the completions", |p| {
        for value in &mut completion.completion.values {
            p.text(value);
        }
        p.meta(completion.meta.as_mut());
    })
}

/// Redacts the secrets in what a failed request carries from its backend (a JSON-RPC error's
/// message and data, a transport failure's message, a server's last error): redacted whatever
/// the setting but `off`, since an error cannot be withheld. The kinds redacted.
pub(crate) fn error(settings: GuardSettings, error: &mut CallError) -> Vec<&'static str> {
    if settings.secrets == SecretAction::Off {
        return Vec::new();
    }
    let mut kinds = Vec::new();
    match error {
        CallError::Rpc(e) => kinds.extend(rpc_error(e)),
        CallError::Transport { message, .. } => kinds.extend(redact_string(message)),
        CallError::Unavailable {
            last_error: Some(message),
            ..
        } => kinds.extend(redact_string(message)),
        _ => {}
    }
    distinct(kinds)
}

/// Redacts a JSON-RPC error's message and data in place; the kinds redacted.
fn rpc_error(e: &mut McpError) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if !scan_text(&e.message).is_empty() {
        let mut message = e.message.to_string();
        kinds.extend(redact_string(&mut message));
        e.message = message.into();
    }
    if let Some(data) = &mut e.data {
        kinds.extend(redact_value(data));
    }
    kinds
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
    fn resources_prompts_completions_and_errors_are_redacted() {
        let mut read: ReadResourceResult = serde_json::from_value(json!({"contents": [
            {"uri": "file:///env", "text": format!("TOKEN={KEY}")},
            {"uri": "file:///img", "blob": "Zx8Qp2Lr7Vt4Kb9Nw3Jc6Hs1Fd5Gm0Ya8Ue2Io7Pq"}
        ]}))
        .unwrap();
        assert!(resource(settings(SecretAction::Block), &mut read).is_err());
        let note = resource(settings(SecretAction::Redact), &mut read).unwrap();
        assert_eq!(
            note.as_deref(),
            Some("redacted from the resource: github_token")
        );
        let v = serde_json::to_value(&read).unwrap();
        assert_eq!(v["contents"][0]["text"], "TOKEN=[REDACTED:github_token]");
        assert_eq!(
            v["contents"][1]["blob"],
            "Zx8Qp2Lr7Vt4Kb9Nw3Jc6Hs1Fd5Gm0Ya8Ue2Io7Pq"
        );

        let (head, tail) = KEY.split_at(12);
        let mut got: GetPromptResult = serde_json::from_value(json!({
            "description": format!("uses {KEY}"),
            "messages": [
                {"role": "user", "content": {"type": "text", "text": format!("with {head}")}},
                {"role": "user", "content": {"type": "text", "text": tail}}
            ]
        }))
        .unwrap();
        assert!(
            prompt(settings(SecretAction::Redact), &mut got)
                .unwrap()
                .is_some()
        );
        let text = serde_json::to_string(&got).unwrap();
        assert!(
            !text.contains(&KEY[4..12]) && !text.contains(tail),
            "{text}"
        );

        let mut done: CompleteResult =
            serde_json::from_value(json!({"completion": {"values": ["main", KEY]}})).unwrap();
        assert!(
            completion(settings(SecretAction::Redact), &mut done)
                .unwrap()
                .is_some()
        );
        assert_eq!(done.completion.values, ["main", "[REDACTED:github_token]"]);

        let mut failed = CallError::Rpc(McpError::internal_error(
            format!("bad token {KEY}"),
            Some(json!({"token": KEY})),
        ));
        // Redacted even when blocking: an error cannot be withheld.
        assert_eq!(
            error(settings(SecretAction::Block), &mut failed),
            ["github_token"]
        );
        let CallError::Rpc(e) = &failed else {
            unreachable!()
        };
        assert_eq!(e.message, "bad token [REDACTED:github_token]");
        assert_eq!(e.data, Some(json!({"token": "[REDACTED:github_token]"})));
        let mut off = CallError::Rpc(McpError::internal_error(KEY, None));
        assert!(error(settings(SecretAction::Off), &mut off).is_empty());
    }

    #[test]
    fn a_token_split_over_two_text_blocks_is_redacted_in_both() {
        let (head, tail) = KEY.split_at(18);
        let body = json!({"content": [
            {"type": "text", "text": format!("key {head}")},
            {"type": "text", "text": format!("{tail} end")},
            {"type": "text", "text": "unrelated"}
        ]});
        let mut r: CallToolResult = serde_json::from_value(body.clone()).unwrap();
        let e = result(settings(SecretAction::Block), &mut r).unwrap_err();
        assert!(e.contains("github_token"), "{e}");
        let note = result(settings(SecretAction::Redact), &mut r).unwrap();
        assert_eq!(
            note.as_deref(),
            Some("redacted from the result: github_token")
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], "key [REDACTED:github_token]");
        assert_eq!(v["content"][1]["text"], "[REDACTED:github_token] end");
        assert_eq!(v["content"][2]["text"], "unrelated");
    }

    #[test]
    fn secrets_in_resource_links_and_meta_are_redacted() {
        let link = json!({"type": "resource_link", "uri": format!("https://x.example/?token={KEY}"),
            "name": format!("n {KEY}"), "description": format!("d {KEY}"),
            "_meta": {"k": KEY}});
        let image = json!({"type": "image", "data": "aGk=", "mimeType": "image/png",
            "_meta": {"k": KEY}});
        for (place, body) in [
            ("resource_link", json!({"content": [link]})),
            ("block _meta", json!({"content": [image]})),
            (
                "result _meta",
                json!({"content": [], "_meta": {"trace": {"auth": KEY}}}),
            ),
        ] {
            let mut r: CallToolResult = serde_json::from_value(body).unwrap();
            assert!(
                result(settings(SecretAction::Block), &mut r).is_err(),
                "{place}"
            );
            let note = result(settings(SecretAction::Redact), &mut r).unwrap();
            assert!(note.is_some(), "{place}");
            let text = serde_json::to_string(&r).unwrap();
            assert!(!text.contains(&KEY[4..20]), "{place}: {text}");
            assert!(text.contains("aGk=") || place != "block _meta", "{text}");
        }
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
