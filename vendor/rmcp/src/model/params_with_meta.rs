//! A request's or notification's `params` read in one pass: the `_meta` map taken out, every
//! other field handed to the parameters' own `Deserialize` as it is read.
//!
//! The derived form (`WithMeta` in `serde_impl.rs`, `_meta` beside a `#[serde(flatten)]` field)
//! buffers every field first, then gives them to the parameters from the buffer: for a
//! `tools/call`, its arguments were copied twice on the way. The result here is the derived
//! one's: `params` must be a map, `_meta` may be absent or `null` and may appear once, and the
//! parameters never see it.

use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::JsonObject;

const META: &str = "_meta";

/// `params`: the `_meta` map and the parameters `P`.
pub(crate) struct ParamsWithMeta<P> {
    pub(crate) meta: Option<JsonObject>,
    pub(crate) rest: P,
}

impl<'de, P: Deserialize<'de>> Deserialize<'de> for ParamsWithMeta<P> {
    fn deserialize<D>(deserializer: D) -> Result<Self, D::Error>
    where
        D: Deserializer<'de>,
    {
        let mut meta = None;
        let rest = P::deserialize(WithoutMeta {
            inner: deserializer,
            meta: &mut meta,
        })?;
        Ok(Self { meta, rest })
    }
}

/// The map `inner` without its `_meta` entry, which goes to `meta`.
struct WithoutMeta<'m, D> {
    inner: D,
    meta: &'m mut Option<JsonObject>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for WithoutMeta<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V>(self, visitor: V) -> Result<V::Value, D::Error>
    where
        V: Visitor<'de>,
    {
        // A flattened field is read from a map whatever it asks for; so is this.
        self.inner.deserialize_map(MetaVisitor {
            visitor,
            meta: self.meta,
        })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

struct MetaVisitor<'m, V> {
    visitor: V,
    meta: &'m mut Option<JsonObject>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for MetaVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(formatter)
    }

    fn visit_map<A>(self, map: A) -> Result<Self::Value, A::Error>
    where
        A: MapAccess<'de>,
    {
        self.visitor.visit_map(MetaTaken {
            map,
            meta: self.meta,
            seen: false,
        })
    }
}

/// The entries of `map` but `_meta`, which is read into `meta` on the way.
struct MetaTaken<'m, A> {
    map: A,
    meta: &'m mut Option<JsonObject>,
    seen: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for MetaTaken<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error>
    where
        K: DeserializeSeed<'de>,
    {
        loop {
            let Some(key) = self.map.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            if key.text() == META {
                if self.seen {
                    return Err(de::Error::duplicate_field(META));
                }
                self.seen = true;
                *self.meta = self.map.next_value()?;
                continue;
            }
            return key.give(seed).map(Some);
        }
    }

    fn next_value_seed<V>(&mut self, seed: V) -> Result<V::Value, A::Error>
    where
        V: DeserializeSeed<'de>,
    {
        self.map.next_value_seed(seed)
    }
}

/// A key as read: borrowed from the input where it can be.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl<'de> Key<'de> {
    fn text(&self) -> &str {
        match self {
            Key::Borrowed(text) => text,
            Key::Owned(text) => text,
        }
    }

    /// The key given to `seed` as the string it was.
    fn give<K: DeserializeSeed<'de>, E: de::Error>(self, seed: K) -> Result<K::Value, E> {
        match self {
            Key::Borrowed(text) => seed.deserialize(de::value::BorrowedStrDeserializer::new(text)),
            Key::Owned(text) => seed.deserialize(de::value::StringDeserializer::new(text)),
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D>(deserializer: D) -> Result<Self, D::Error>
    where
        D: Deserializer<'de>,
    {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(text))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(text.to_owned()))
            }

            fn visit_string<E: de::Error>(self, text: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(text))
            }
        }

        deserializer.deserialize_str(KeyVisitor)
    }
}
