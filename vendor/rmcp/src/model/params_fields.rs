//! A request's or notification's `params` written as one map, the message's `_meta` first and
//! then the parameters' own fields, without building a `serde_json::Value` of them first
//! (`WithMeta`'s `Serialize` in `serde_impl.rs`).
//!
//! That is possible when the parameters write themselves as a struct (or are absent) and have no
//! `_meta` field of their own to merge: [`fields_without_meta`] finds out by reading the names
//! of the fields, not their values. The map written is then the one `WithMeta` built through a
//! `Value`: `_meta`, then each field in order.

use std::fmt;

use serde::ser::{self, Impossible, Serialize, SerializeMap, SerializeStruct, Serializer};

const META: &str = "_meta";

/// How many fields `params` writes, when it writes itself as a struct without a `_meta` field,
/// or as nothing (`None`, `()`). `None` otherwise.
pub(crate) fn fields_without_meta<P: Serialize + ?Sized>(params: &P) -> Option<usize> {
    params.serialize(Probe).ok()
}

/// Writes the fields of `params`, which [`fields_without_meta`] accepted, into `map`.
pub(crate) fn write_fields<P, M>(params: &P, map: &mut M) -> Result<(), M::Error>
where
    P: Serialize + ?Sized,
    M: SerializeMap,
{
    params.serialize(FieldsInto { map })
}

/// The parameters are not a plain struct (or carry `_meta`): `WithMeta` goes through a `Value`.
#[derive(Debug)]
struct NotPlain;

impl fmt::Display for NotPlain {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("parameters that are not a struct without `_meta`")
    }
}

impl std::error::Error for NotPlain {}

impl ser::Error for NotPlain {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NotPlain
    }
}

/// The methods of a serializer that takes only structs, `Option`s and `()`: every other value
/// is refused with `$refuse`.
macro_rules! refuse_other_values {
    ($refuse:expr) => {
        fn serialize_bool(self, _: bool) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_i8(self, _: i8) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_i16(self, _: i16) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_i32(self, _: i32) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_i64(self, _: i64) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_u8(self, _: u8) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_u16(self, _: u16) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_u32(self, _: u32) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_u64(self, _: u64) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_f32(self, _: f32) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_f64(self, _: f64) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_char(self, _: char) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_str(self, _: &str) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_bytes(self, _: &[u8]) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_unit_struct(self, _: &'static str) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_unit_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
        ) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, Self::Error> {
            Err($refuse)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Self::Error> {
            Err($refuse)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Self::Error> {
            Err($refuse)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Self::Error> {
            Err($refuse)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Self::Error> {
            Err($refuse)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Self::Error> {
            Err($refuse)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Self::Error> {
            Err($refuse)
        }
    };
}

/// Counts a struct's fields by name, refusing `_meta` and anything but a struct or nothing.
struct Probe;

impl Serializer for Probe {
    type Ok = usize;
    type Error = NotPlain;
    type SerializeSeq = Impossible<usize, NotPlain>;
    type SerializeTuple = Impossible<usize, NotPlain>;
    type SerializeTupleStruct = Impossible<usize, NotPlain>;
    type SerializeTupleVariant = Impossible<usize, NotPlain>;
    type SerializeMap = Impossible<usize, NotPlain>;
    type SerializeStruct = ProbeFields;
    type SerializeStructVariant = Impossible<usize, NotPlain>;

    refuse_other_values!(NotPlain);

    fn serialize_none(self) -> Result<usize, NotPlain> {
        Ok(0)
    }

    fn serialize_unit(self) -> Result<usize, NotPlain> {
        Ok(0)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<usize, NotPlain> {
        value.serialize(self)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<ProbeFields, NotPlain> {
        Ok(ProbeFields(0))
    }
}

struct ProbeFields(usize);

impl SerializeStruct for ProbeFields {
    type Ok = usize;
    type Error = NotPlain;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        _: &T,
    ) -> Result<(), NotPlain> {
        if key == META {
            return Err(NotPlain);
        }
        self.0 += 1;
        Ok(())
    }

    fn end(self) -> Result<usize, NotPlain> {
        Ok(self.0)
    }
}

/// Writes a struct's fields as entries of `map`; nothing for `None` or `()`.
struct FieldsInto<'m, M> {
    map: &'m mut M,
}

fn not_plain<E: ser::Error>() -> E {
    E::custom(NotPlain)
}

impl<'m, M: SerializeMap> Serializer for FieldsInto<'m, M> {
    type Ok = ();
    type Error = M::Error;
    type SerializeSeq = Impossible<(), M::Error>;
    type SerializeTuple = Impossible<(), M::Error>;
    type SerializeTupleStruct = Impossible<(), M::Error>;
    type SerializeTupleVariant = Impossible<(), M::Error>;
    type SerializeMap = Impossible<(), M::Error>;
    type SerializeStruct = StructInto<'m, M>;
    type SerializeStructVariant = Impossible<(), M::Error>;

    refuse_other_values!(not_plain());

    fn serialize_none(self) -> Result<(), M::Error> {
        Ok(())
    }

    fn serialize_unit(self) -> Result<(), M::Error> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), M::Error> {
        value.serialize(self)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<StructInto<'m, M>, M::Error> {
        Ok(StructInto { map: self.map })
    }
}

struct StructInto<'m, M> {
    map: &'m mut M,
}

impl<M: SerializeMap> SerializeStruct for StructInto<'_, M> {
    type Ok = ();
    type Error = M::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        self.map.serialize_entry(key, value)
    }

    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}
