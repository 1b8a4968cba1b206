//! Message unions (`ClientRequest`, `ServerResult`, ...) read straight from their JSON text, for
//! `JsonRpcMessage::from_json_slice`.
//!
//! A union's `Deserialize` (see `ts_union!`) reads the whole value into a `serde_json::Value`,
//! then each variant that [`UnionVariant::may_match`] it from that value: every object of the
//! message is built twice, once as a map that hashes each of its keys. From the text, the keys
//! are read first (a [`skeleton`]: the object's keys, and the string values the variants look
//! at), and the first variant that may match is read from the text itself. Whenever that read
//! fails, the union is read the derived way, so the result is the derived one's:
//! - when the first variant that may match reads from the text, it reads from the value too
//!   (the value is the text, less repeated keys; a repeated field fails the read from the text);
//! - otherwise the derived way decides, trying every variant in turn as it always has.
//!
//! [`UnionVariant::may_match`]: super::union_variant::UnionVariant::may_match

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::{JsonObject, JsonRpcRequest};

/// A message part read from its JSON text, with the result `serde_json::from_str` gives.
pub trait FromJsonText: serde::de::DeserializeOwned {
    /// `Self` from `text`.
    fn from_json_text(text: &str) -> serde_json::Result<Self>;

    /// A request carrying `Self`, a union of requests, from the request's whole `text`, whose
    /// `method` (the last, if a string) is `method`: all that a request's variants look at to
    /// tell whether they may match (the keys were read once already, for the message's shape).
    /// A union of results is not read this way: its variants look at more keys.
    fn request_from_json_text(
        text: &str,
        method: Option<&str>,
    ) -> serde_json::Result<JsonRpcRequest<Self>>;
}

/// The keys a request union's variants look at: `method`, when it is a string.
pub(crate) fn method_only(method: Option<&str>) -> Value {
    let mut object = JsonObject::new();
    if let Some(method) = method {
        object.insert("method".to_owned(), Value::String(method.to_owned()));
    }
    Value::Object(object)
}

/// The keys a union's variants look at: the text's object with every value `null` but the
/// strings of `method` and `resultType`. `None` when the text is not an object (or not JSON):
/// then the derived way reads it.
pub(crate) fn skeleton(text: &str) -> Option<Value> {
    let mut reader = serde_json::Deserializer::from_str(text);
    let object = (&mut reader).deserialize_map(SkeletonVisitor).ok()?;
    reader.end().ok()?;
    Some(Value::Object(object))
}

struct SkeletonVisitor;

impl<'de> Visitor<'de> for SkeletonVisitor {
    type Value = JsonObject;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A>(self, mut map: A) -> Result<JsonObject, A::Error>
    where
        A: MapAccess<'de>,
    {
        let mut object = JsonObject::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if key == "method" || key == "resultType" {
                // Only a string counts for the variants; anything else reads as `null`.
                match map.next_value::<Value>()? {
                    text @ Value::String(_) => text,
                    _ => Value::Null,
                }
            } else {
                map.next_value::<IgnoredAny>()?;
                Value::Null
            };
            object.insert(key, value);
        }
        Ok(object)
    }
}
