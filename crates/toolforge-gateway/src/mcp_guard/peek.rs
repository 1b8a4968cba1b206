//! The guard's fast path: a JSON-RPC message checked from a shallow parse that borrows from the
//! body (`RawValue`s for the envelope's fields, no `Value` tree), so that a valid message is not
//! parsed twice in full (rmcp parses it into its own type next).
//!
//! [`peek`] vouches only for what it can tell is valid exactly as the full check would find it;
//! it answers `None` for everything else (an invalid message, a duplicate field, an id or a
//! method spelled with escapes), and the guard then runs the full check, which words the error.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// What the guard goes on with once a message is found valid.
#[derive(Debug)]
pub(crate) struct Peeked {
    /// The message is a request (it has a `method` and an `id`).
    pub(crate) is_request: bool,
    /// Its method, when it has one.
    pub(crate) method: Option<String>,
    /// Its id as compact JSON (`null` without one): the key of a request in flight.
    pub(crate) id_key: String,
}

impl Peeked {
    /// The id as a `Value`, for an error answer.
    pub(crate) fn id_value(&self) -> Value {
        serde_json::from_str(&self.id_key).unwrap_or(Value::Null)
    }
}

/// The envelope's fields, each kept as the body's own text. A field present with `null` is
/// kept too (`Option<&RawValue>` alone would read it as absent).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The text of a JSON string literal without escapes (`None` for anything else).
fn plain_string(raw: &RawValue) -> Option<&str> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// Whether `raw` is an integer literal that fits an `i64` or a `u64` and that the full check
/// would read as such (up to 18 digits, not `-0`).
fn plain_integer(raw: &RawValue) -> bool {
    let text = raw.get();
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && text != "-0"
}

/// `bytes` checked as the guard's full check would, for a valid message; `None` when the full
/// check has to decide.
pub(crate) fn peek(bytes: &[u8], modern: bool) -> Option<Peeked> {
    let envelope: Envelope<'_> = serde_json::from_slice(bytes).ok()?;
    if envelope.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return None;
    }
    if let Some(id) = envelope.id
        && plain_string(id).is_none()
        && !plain_integer(id)
    {
        return None;
    }
    let method = match envelope.method {
        Some(raw) => Some(plain_string(raw)?),
        None => None,
    };
    match method {
        Some(method) => {
            if let Some(params) = envelope.params
                && !params.get().starts_with('{')
            {
                return None;
            }
            if envelope.id.is_some() && !params_valid(method, envelope.params, modern) {
                return None;
            }
        }
        // A response: an id and exactly one of `result` and `error`.
        None if envelope.id.is_some()
            && (envelope.result.is_some() != envelope.error.is_some()) => {}
        None => return None,
    }
    Some(Peeked {
        is_request: method.is_some() && envelope.id.is_some(),
        method: method.map(str::to_owned),
        id_key: envelope
            .id
            .map_or_else(|| "null".to_owned(), |id| id.get().to_owned()),
    })
}

/// Whether the parameters of a request the gateway routes have their MCP shape (the same types
/// as the full check, read from the body's text).
fn params_valid(method: &str, params: Option<&RawValue>, modern: bool) -> bool {
    use rmcp::model::{
        GetPromptRequestParams, ReadResourceRequestParams, SubscribeRequestParams,
        UnsubscribeRequestParams,
    };
    fn parses<'a, T: Deserialize<'a>>(params: Option<&'a RawValue>) -> bool {
        serde_json::from_str::<T>(params.map_or("{}", RawValue::get)).is_ok()
    }
    match method {
        "tools/call" => parses::<CallShape<'_>>(params),
        "resources/read" => parses::<ReadResourceRequestParams>(params),
        "resources/subscribe" | "resources/unsubscribe" if modern => true,
        "resources/subscribe" => parses::<SubscribeRequestParams>(params),
        "resources/unsubscribe" => parses::<UnsubscribeRequestParams>(params),
        "prompts/get" => parses::<GetPromptRequestParams>(params),
        _ => true,
    }
}

/// `tools/call` parameters checked as rmcp's `CallToolRequestParams` reads them, field by field
/// with the same types, but for the arguments, which are only read through, not kept: the call's
/// arguments can be large, and rmcp builds its own map of them next. What this accepts, rmcp's
/// type accepts (it may refuse more, a repeated field say; the full check then decides).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // read only to check them
struct CallShape<'a> {
    #[serde(rename = "_meta", default)]
    meta: Option<rmcp::model::RequestMetaObject>,
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    arguments: Option<AnyObject>,
    input_responses: Option<rmcp::model::InputResponses>,
    request_state: Option<String>,
}

/// A JSON object of any values, as a `serde_json::Map` accepts one (numbers in range), kept as
/// nothing.
struct AnyObject;

impl<'de> Deserialize<'de> for AnyObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(AnyJson).map(|()| AnyObject)
    }
}

/// Any JSON value, read in full as `serde_json::Value` reads one, and dropped.
#[derive(Clone, Copy)]
struct AnyJson;

impl<'de> serde::de::DeserializeSeed<'de> for AnyJson {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for AnyJson {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(AnyKey)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// An object's key, as a `serde_json::Map` reads one (a string), dropped.
struct AnyKey;

impl<'de> serde::de::DeserializeSeed<'de> for AnyKey {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(AnyJson)
    }
}
