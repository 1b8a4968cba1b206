//! Every item of `tests/corpus/` is caught. The sources are cited in `tests/corpus/README.md`.

use serde_json::Value;
use toolforge_guard::{scan_text, scan_tool};

fn lines(file: &str) -> Vec<Value> {
    let path = format!("{}/tests/corpus/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_poisoned_tool_is_flagged() {
    let items = lines("tools.jsonl");
    assert!(items.len() >= 20, "the corpus shrank: {}", items.len());
    let mut missed = Vec::new();
    for item in &items {
        let others: Vec<&str> = item["others"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let found = scan_tool(&item["tool"], &others);
        if found.is_empty() {
            missed.push(item["id"].as_str().unwrap().to_owned());
        }
    }
    assert!(missed.is_empty(), "not caught: {missed:?}");
}

#[test]
fn shadowing_items_name_the_shadowed_tool() {
    for item in lines("tools.jsonl") {
        let others: Vec<&str> = item["others"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mentions_other = others.iter().any(|o| {
            item["tool"]["description"]
                .as_str()
                .unwrap_or_default()
                .contains(o)
        });
        if mentions_other {
            let found = scan_tool(&item["tool"], &others);
            assert!(
                found.iter().any(|f| f.kind == "other_tool_name"),
                "{}: {found:?}",
                item["id"]
            );
        }
    }
}

#[test]
fn every_leaked_secret_is_found_with_its_kind() {
    let items = lines("secrets.jsonl");
    assert!(items.len() >= 20, "the corpus shrank: {}", items.len());
    for item in &items {
        let text = item["text"].as_str().unwrap();
        let kinds: Vec<&str> = scan_text(text).iter().map(|f| f.kind).collect();
        assert!(
            kinds.contains(&item["kind"].as_str().unwrap()),
            "{}: found {kinds:?}",
            item["id"]
        );
        // Redaction leaves no secret behind.
        let mut v = Value::String(text.to_owned());
        toolforge_guard::redact_value(&mut v);
        assert!(
            toolforge_guard::scan_value(&v).is_empty(),
            "{}: {v}",
            item["id"]
        );
    }
}
