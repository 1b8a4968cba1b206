//! JSON trees rebuilt at exactly their size, for those kept for a server's lifetime.
//!
//! serde_json grows an object's map as keys arrive (room for three entries of 112 bytes for
//! the first) and its value serializer sizes a struct's map by its declared fields, skipped
//! ones included (nine for an MCP tool, of which a listing often has three). With 10,000 tools,
//! the catalog's definitions held 4 MB of such empty room (`benchmarks/proxy/README.md`).

use serde_json::{Map, Value};

/// `value` with every object and array inside it holding exactly its entries.
pub fn shrink(value: &mut Value) {
    match value {
        Value::Object(map) => shrink_object(map),
        Value::Array(items) => {
            items.iter_mut().for_each(shrink);
            items.shrink_to_fit();
        }
        Value::String(text) => text.shrink_to_fit(),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// [`shrink`] for an object.
pub fn shrink_object(map: &mut Map<String, Value>) {
    // serde_json's `Map` has no `shrink_to_fit`: entries move into a map made to size.
    let entries = std::mem::take(map);
    let mut exact = Map::with_capacity(entries.len());
    for (mut key, mut value) in entries {
        key.shrink_to_fit();
        shrink(&mut value);
        exact.insert(key, value);
    }
    *map = exact;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shrinking_keeps_every_entry_in_order() {
        let mut value = json!({"b": [1, {"y": "two", "x": null}], "a": {"c": true}, "": 1.5});
        let before = value.to_string();
        shrink(&mut value);
        assert_eq!(value.to_string(), before);
    }
}
