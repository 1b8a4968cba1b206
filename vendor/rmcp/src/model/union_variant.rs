//! Which variants of a message union (`ClientRequest`, `ServerResult`, ...) can possibly match a
//! JSON value, so that deserializing a union tries only those.
//!
//! The unions are untagged: a derived `Deserialize` buffers the value and tries every variant in
//! declaration order, and each variant that fails builds an error message on the way. A
//! `tools/call` result is the 16th variant of `ServerResult`, a `tools/call` request the 14th of
//! `ClientRequest`: about thirty failed attempts for one proxied call. The unions'
//! `Deserialize` (see `ts_union!`) still tries the variants in declaration order and returns the
//! first that deserializes, but skips a variant that [`UnionVariant::may_match`] rules out.
//!
//! A variant may be ruled out only where deserializing it is certain to fail, so the result is
//! the derived one's:
//! - a request or notification with a constant method fails unless the object's `method` is that
//!   constant;
//! - a result fails without the fields it requires (`missing field`), or, for a few, without
//!   a field's particular value.
//!
//! Only objects are ruled on: a derived struct also deserializes from an array, by position.

use serde_json::Value;

use super::*;

/// Whether deserializing `Self` from a value can succeed, judged from the value's keys.
pub(crate) trait UnionVariant {
    /// `false` only if deserializing `Self` from `value` is certain to fail.
    fn may_match(value: &Value) -> bool;
}

/// `test` on an object's fields; `true` for any other value (a derived struct also reads an
/// array, by position, so nothing is ruled out there).
fn object_passes(value: &Value, test: impl FnOnce(&JsonObject) -> bool) -> bool {
    match value {
        Value::Object(object) => test(object),
        _ => true,
    }
}

/// Objects up to this many fields are searched by comparing keys, not by hashing the key.
const SMALL_OBJECT: usize = 8;

/// The object's `key`. A message's envelope has three or four fields, and every variant of a
/// union asks it for its `method`: comparing that many short keys costs less than hashing the
/// key (with the map's SipHash) once per variant.
fn field<'a>(object: &'a JsonObject, key: &str) -> Option<&'a Value> {
    if object.len() <= SMALL_OBJECT {
        object.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        object.get(key)
    }
}

/// Whether the object's `key` is the string `wanted`.
fn string_field_is(object: &JsonObject, key: &str, wanted: &str) -> bool {
    field(object, key).and_then(Value::as_str) == Some(wanted)
}

/// `false` when `value` is an object whose `method` is anything but `method`.
fn method_is(value: &Value, method: &str) -> bool {
    object_passes(value, |object| string_field_is(object, "method", method))
}

/// `false` when `value` is an object without one of `keys`.
fn has_all(value: &Value, keys: &[&str]) -> bool {
    object_passes(value, |object| {
        keys.iter().all(|key| field(object, key).is_some())
    })
}

/// `false` when `value` is an object with none of `keys`.
fn has_any(value: &Value, keys: &[&str]) -> bool {
    object_passes(value, |object| {
        keys.iter().any(|key| field(object, key).is_some())
    })
}

impl<M: ConstString, R> UnionVariant for Request<M, R> {
    fn may_match(value: &Value) -> bool {
        method_is(value, M::VALUE)
    }
}

impl<M: ConstString, R> UnionVariant for RequestOptionalParam<M, R> {
    fn may_match(value: &Value) -> bool {
        method_is(value, M::VALUE)
    }
}

impl<M: ConstString> UnionVariant for RequestNoParam<M> {
    fn may_match(value: &Value) -> bool {
        method_is(value, M::VALUE)
    }
}

impl<M: ConstString, R> UnionVariant for Notification<M, R> {
    fn may_match(value: &Value) -> bool {
        method_is(value, M::VALUE)
    }
}

impl<M: ConstString> UnionVariant for NotificationNoParam<M> {
    fn may_match(value: &Value) -> bool {
        method_is(value, M::VALUE)
    }
}

/// Variants tried on any value: they accept any method, or any shape.
macro_rules! always_tried {
    ($($variant:ty),* $(,)?) => {
        $(impl UnionVariant for $variant {
            fn may_match(_: &Value) -> bool {
                true
            }
        })*
    };
}

always_tried!(CustomRequest, CustomNotification, CustomResult, EmptyObject);

/// Results that fail without each of the listed fields (their `missing field` errors).
macro_rules! requires_fields {
    ($($variant:ty => [$($key:literal),+]),* $(,)?) => {
        $(impl UnionVariant for $variant {
            fn may_match(value: &Value) -> bool {
                has_all(value, &[$($key),+])
            }
        })*
    };
}

#[allow(deprecated)]
mod results {
    use super::*;

    requires_fields!(
        DiscoverResult => ["resultType", "supportedVersions", "capabilities"],
        InitializeResult => ["protocolVersion"],
        CompleteResult => ["completion"],
        GetPromptResult => ["messages"],
        ListPromptsResult => ["prompts"],
        ListResourcesResult => ["resources"],
        ListResourceTemplatesResult => ["resourceTemplates"],
        ReadResourceResult => ["contents"],
        SubscriptionsListenResult => ["resultType", "_meta"],
        ListToolsResult => ["tools"],
        ListSkillsResult => ["skills"],
        GetSkillResult => ["skill"],
        ElicitResult => ["action"],
        CreateTaskResult => ["resultType", "taskId"],
        GetTaskResult => ["taskId"],
        TaskAckResult => ["resultType"],
        CreateMessageResult => ["model"],
        ListRootsResult => ["roots"],
    );

    impl UnionVariant for CallToolResult {
        /// It requires one of its known fields (its own error says so).
        fn may_match(value: &Value) -> bool {
            has_any(value, &["content", "structuredContent", "isError"])
        }
    }

    impl UnionVariant for InputRequiredResult {
        /// It requires `resultType` to be `"input_required"`.
        fn may_match(value: &Value) -> bool {
            object_passes(value, |object| {
                string_field_is(object, "resultType", "input_required")
            })
        }
    }
}
