//! Reading structured answers out of free model text: reasoning blocks stripped, JSON found in
//! code fences or anywhere in the prose. Used by `judge` and `generate_variants`.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

static THINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)<think(?:ing)?>.*?</think(?:ing)?>").expect("valid regex"));
static FENCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```").expect("valid regex"));

/// The text without `<think>…</think>` blocks (Qwen, DeepSeek and other reasoning models). A
/// closing tag without its opening one (servers that swallow the first tag) drops everything
/// before it; an unclosed opening tag drops everything after it.
#[must_use]
pub fn strip_think(text: &str) -> String {
    let mut out = THINK.replace_all(text, "").into_owned();
    for close in ["</think>", "</thinking>"] {
        if let Some(pos) = out.rfind(close) {
            out = out[pos + close.len()..].to_owned();
        }
    }
    for open in ["<think>", "<thinking>"] {
        if let Some(pos) = out.find(open) {
            out.truncate(pos);
        }
    }
    out.trim().to_owned()
}

/// JSON objects in `text`, best candidates first: the contents of each code fence, the whole
/// text, then every object that starts at some `{` (balanced, parsed by serde).
#[must_use]
pub fn json_objects(text: &str) -> Vec<Map<String, Value>> {
    let mut found = Vec::new();
    for cap in FENCE.captures_iter(text) {
        if let Some(body) = cap.get(1) {
            found.extend(objects_in(body.as_str()));
        }
    }
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text.trim()) {
        found.push(map);
    }
    found.extend(objects_in(text));
    found
}

/// Every JSON object that begins at a `{` of `text` and parses.
fn objects_in(text: &str) -> Vec<Map<String, Value>> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('{') {
        let mut de = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(map))) = de.next() {
            out.push(map);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_reasoning_blocks() {
        assert_eq!(strip_think("<think>hmm {\"pass\": false}</think> ok"), "ok");
        assert_eq!(strip_think("reasoning...</think>\nanswer"), "answer");
        assert_eq!(strip_think("answer <think>never closed"), "answer");
        assert_eq!(strip_think("<THINK>a</THINK>b"), "b");
        assert_eq!(strip_think("plain"), "plain");
    }

    #[test]
    fn finds_objects_in_fences_and_prose() {
        let objs = json_objects("Sure!\n```json\n{\"pass\": true}\n```\nbye");
        assert_eq!(objs[0]["pass"], true);
        let objs = json_objects("verdict: {\"pass\": false, \"reason\": \"x {y}\"} done");
        assert_eq!(objs[0]["reason"], "x {y}");
        let objs = json_objects("{\"outer\": {\"pass\": true}}");
        assert!(objs.iter().any(|o| o.get("pass").is_some()));
        assert!(json_objects("no json here").is_empty());
    }
}
