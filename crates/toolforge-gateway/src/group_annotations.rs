//! The annotations an overlap group is listed with, merged from its members'.

use serde_json::Value;
use toolforge_mcp::ListedTool;

/// The annotations of an overlap group, from its members' (any one of which may run a call):
/// destructive or open-world if any member is, read-only or idempotent only if all are. A hint
/// no member gives stays unset.
pub(crate) fn group_annotations(members: &[Option<ListedTool>]) -> Option<Value> {
    let hints: Vec<Value> = members
        .iter()
        .map(|m| {
            m.as_ref()
                .and_then(ListedTool::annotations)
                .and_then(|a| serde_json::to_value(a).ok())
                .unwrap_or(Value::Null)
        })
        .collect();
    let mut out = serde_json::Map::new();
    for (key, any) in [
        ("destructiveHint", true),
        ("openWorldHint", true),
        ("readOnlyHint", false),
        ("idempotentHint", false),
    ] {
        let given: Vec<Option<bool>> = hints
            .iter()
            .map(|h| h.get(key).and_then(Value::as_bool))
            .collect();
        if given.iter().all(Option::is_none) {
            continue;
        }
        let value = if any {
            given.contains(&Some(true))
        } else {
            given.iter().all(|v| *v == Some(true))
        };
        out.insert(key.to_owned(), Value::Bool(value));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(annotations: Value) -> Option<ListedTool> {
        serde_json::from_value::<rmcp::model::Tool>(json!({
            "name": "t", "inputSchema": {"type": "object"}, "annotations": annotations
        }))
        .ok()
        .map(ListedTool::new)
    }

    #[test]
    fn a_group_is_destructive_if_any_member_is_and_read_only_only_if_all_are() {
        let members = [
            tool(json!({"readOnlyHint": true, "destructiveHint": false})),
            tool(json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true})),
        ];
        let a = group_annotations(&members).unwrap();
        assert_eq!(a["destructiveHint"], true);
        assert_eq!(a["readOnlyHint"], false);
        // Only one member says idempotent: not all are.
        assert_eq!(a["idempotentHint"], false);
        assert!(a.get("openWorldHint").is_none(), "no member gave it: {a}");
        let all_read_only = [
            tool(json!({"readOnlyHint": true})),
            tool(json!({"readOnlyHint": true})),
        ];
        assert_eq!(
            group_annotations(&all_read_only).unwrap()["readOnlyHint"],
            true
        );
        assert!(group_annotations(&[tool(json!({})), None]).is_none());
    }
}
