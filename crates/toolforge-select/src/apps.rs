//! MCP Apps (the `io.modelcontextprotocol/ui` extension): the `ui://` resources a tool's `_meta`
//! links, where a host finds the HTML that renders the tool's results.
//!
//! The keys, in the order they are read: `_meta.ui.resourceUri` (the extension's, stable since
//! 2026-01-26), `_meta["ui/resourceUri"]` (its earlier flat spelling, still sent by servers
//! built on older SDKs) and `_meta["openai/outputTemplate"]` (the OpenAI Apps SDK's).

use serde_json::{Map, Value};

/// The extension's identifier in `capabilities.extensions`.
pub const UI_EXTENSION_ID: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an app's HTML resource.
pub const UI_MIME_TYPE: &str = "text/html;profile=mcp-app";
/// The scheme of app resources.
pub const UI_SCHEME: &str = "ui://";

/// The flat keys of `_meta` that hold a link (besides `ui.resourceUri`).
const FLAT_KEYS: [&str; 2] = ["ui/resourceUri", "openai/outputTemplate"];

/// Whether `uri` names an app resource (`ui://…`, the scheme in any case).
#[must_use]
pub fn is_ui_uri(uri: &str) -> bool {
    uri.get(..UI_SCHEME.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(UI_SCHEME))
}

/// The `ui://` URIs a tool definition's `_meta` links, each once, in key order.
#[must_use]
pub fn links(definition: &Map<String, Value>) -> Vec<&str> {
    let Some(meta) = definition.get("_meta").and_then(Value::as_object) else {
        return Vec::new();
    };
    let nested = meta
        .get("ui")
        .and_then(|ui| ui.get("resourceUri"))
        .and_then(Value::as_str);
    let flat = FLAT_KEYS
        .iter()
        .filter_map(|k| meta.get(*k).and_then(Value::as_str));
    let mut out: Vec<&str> = Vec::new();
    for uri in nested.into_iter().chain(flat) {
        if is_ui_uri(uri) && !out.contains(&uri) {
            out.push(uri);
        }
    }
    out
}

/// Whether a tool definition links an app resource.
#[must_use]
pub fn links_an_app(definition: &Map<String, Value>) -> bool {
    !links(definition).is_empty()
}

/// Rewrites every link of a `_meta` object: each `ui://` URI `rewrite` maps to another is
/// replaced; the rest is left as it is. Whether anything changed.
pub fn rewrite_links(
    meta: &mut Map<String, Value>,
    rewrite: &dyn Fn(&str) -> Option<String>,
) -> bool {
    let mut changed = false;
    let mut apply = |slot: &mut Value| {
        if let Some(new) = slot.as_str().filter(|u| is_ui_uri(u)).and_then(rewrite) {
            *slot = Value::String(new);
            changed = true;
        }
    };
    if let Some(slot) = meta
        .get_mut("ui")
        .and_then(Value::as_object_mut)
        .and_then(|ui| ui.get_mut("resourceUri"))
    {
        apply(slot);
    }
    for key in FLAT_KEYS {
        if let Some(slot) = meta.get_mut(key) {
            apply(slot);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn links_are_read_from_every_key_once() {
        let def = object(json!({"name": "t", "_meta": {
            "ui": {"resourceUri": "ui://w/card.html", "visibility": ["model"]},
            "ui/resourceUri": "ui://w/card.html",
            "openai/outputTemplate": "UI://w/other.html",
            "other": "ui://not-a-link"
        }}));
        assert_eq!(links(&def), ["ui://w/card.html", "UI://w/other.html"]);
        assert!(links_an_app(&def));
        for plain in [
            json!({"name": "t"}),
            json!({"name": "t", "_meta": {"ui": {"resourceUri": "https://x"}}}),
            json!({"name": "t", "_meta": {"ui": {"visibility": ["app"]}}}),
        ] {
            assert!(!links_an_app(&object(plain.clone())), "{plain}");
        }
    }

    #[test]
    fn links_are_rewritten_where_they_are_and_nothing_else_changes() {
        let mut meta = object(json!({
            "ui": {"resourceUri": "ui://w/card.html", "visibility": ["model"]},
            "ui/resourceUri": "ui://w/card.html",
            "openai/outputTemplate": "ui://keep.html",
            "other": "ui://w/card.html"
        }));
        let changed = rewrite_links(&mut meta, &|uri| {
            (uri == "ui://w/card.html").then(|| "ui://b/w/card.html".to_owned())
        });
        assert!(changed);
        assert_eq!(
            Value::Object(meta),
            json!({
                "ui": {"resourceUri": "ui://b/w/card.html", "visibility": ["model"]},
                "ui/resourceUri": "ui://b/w/card.html",
                "openai/outputTemplate": "ui://keep.html",
                "other": "ui://w/card.html"
            })
        );
    }
}
