//! A tool's `inputSchema`, held as its compact JSON text and parsed when read.
//!
//! A schema parsed into serde_json's tree (with `preserve_order`, every object is an `IndexMap`
//! with its own hash table, and every value 72 bytes) takes about fifteen times its text: with
//! 10,000 tools, 16 MB against 1 MB (`benchmarks/proxy/README.md`). The gateway writes a
//! schema far more often (every `tools/list`, every search answer) than it reads one (a group's
//! merged schema, the agent's offer, a call's argument check), and writing the text is a copy.

use std::fmt;
use std::sync::{Arc, LazyLock};

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A tool's input schema: a JSON object, shared. Cloning it clones an `Arc`.
#[derive(Clone)]
pub struct InputSchema(Arc<RawValue>);

/// `{"type":"object"}`, made once.
static EMPTY_OBJECT: LazyLock<InputSchema> =
    LazyLock::new(|| InputSchema::from_text(r#"{"type":"object"}"#.to_owned()));

impl InputSchema {
    /// The schema of a tool that takes no arguments, or whose server gave none.
    #[must_use]
    pub fn empty_object() -> Self {
        EMPTY_OBJECT.clone()
    }

    /// `schema`, written compactly.
    #[must_use]
    pub fn from_object(schema: &Map<String, Value>) -> Self {
        // A `Map` always serialises.
        Self::from_text(serde_json::to_string(schema).unwrap_or_else(|_| "{}".to_owned()))
    }

    /// `value` as an input schema: an object as it is, anything else as
    /// [`InputSchema::empty_object`].
    #[must_use]
    pub fn from_value(value: &Value) -> Self {
        match value {
            Value::Object(schema) => Self::from_object(schema),
            _ => Self::empty_object(),
        }
    }

    /// `text`, which must be a JSON object written by serde_json.
    fn from_text(text: String) -> Self {
        let raw = RawValue::from_string(text).unwrap_or_else(|_| {
            RawValue::from_string(r#"{"type":"object"}"#.to_owned()).expect("a JSON object")
        });
        Self(Arc::from(raw))
    }

    /// The schema's compact JSON text.
    #[must_use]
    pub fn as_json(&self) -> &str {
        self.0.get()
    }

    /// The schema, parsed.
    #[must_use]
    pub fn to_object(&self) -> Map<String, Value> {
        serde_json::from_str(self.0.get()).unwrap_or_default()
    }

    /// The schema, parsed, as a JSON value.
    #[must_use]
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_object())
    }

    /// The names of the top-level `properties`, in schema order (none when `properties` is
    /// missing or not an object).
    #[must_use]
    pub fn parameter_names(&self) -> Vec<String> {
        #[derive(Deserialize)]
        struct Top {
            properties: Option<Keys>,
        }
        serde_json::from_str::<Top>(self.0.get())
            .ok()
            .and_then(|t| t.properties)
            .map(|k| k.0)
            .unwrap_or_default()
    }

    /// Whether `a` and `b` are the same shared text (not merely equal).
    #[must_use]
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

/// An object's keys in order, its values skipped.
struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeysVisitor;
        impl<'de> Visitor<'de> for KeysVisitor {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        deserializer.deserialize_map(KeysVisitor)
    }
}

impl Default for InputSchema {
    fn default() -> Self {
        Self::empty_object()
    }
}

impl PartialEq for InputSchema {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}

impl Serialize for InputSchema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for InputSchema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Object(schema) => Ok(Self::from_object(&schema)),
            other => Err(de::Error::custom(format!(
                "an input schema must be a JSON object, got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_keeps_its_key_order_and_comes_back_equal() {
        let sent = json!({"type": "object", "required": ["b"], "properties": {
            "b": {"type": "string"}, "a": {"type": "integer", "minimum": 1}
        }});
        let schema = InputSchema::from_value(&sent);
        assert_eq!(
            schema.as_json(),
            r#"{"type":"object","required":["b"],"properties":{"b":{"type":"string"},"a":{"type":"integer","minimum":1}}}"#
        );
        assert_eq!(schema.to_value(), sent);
        assert_eq!(schema.parameter_names(), ["b", "a"]);
        assert_eq!(serde_json::to_value(&schema).unwrap(), sent);
        let written = serde_json::to_string(&json!({"inputSchema": schema})).unwrap();
        assert_eq!(
            written,
            format!(r#"{{"inputSchema":{}}}"#, schema.as_json())
        );
    }

    #[test]
    fn anything_but_an_object_is_the_empty_object_schema_or_an_error() {
        assert_eq!(
            InputSchema::from_value(&json!("nope")).as_json(),
            r#"{"type":"object"}"#
        );
        assert!(serde_json::from_value::<InputSchema>(json!([1])).is_err());
        let read: InputSchema = serde_json::from_str(r#"{ "type" : "object" }"#).unwrap();
        assert_eq!(read.as_json(), r#"{"type":"object"}"#, "written compactly");
    }

    #[test]
    fn parameter_names_are_empty_when_properties_are_missing_or_malformed() {
        for schema in [
            json!({}),
            json!({"properties": true}),
            json!({"properties": [1]}),
        ] {
            assert!(
                InputSchema::from_value(&schema)
                    .parameter_names()
                    .is_empty(),
                "{schema}"
            );
        }
    }
}
