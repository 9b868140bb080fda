//! The JSON side of the reader: a stream of values, the first one (a
//! top-level array or a `List`) streamed element by element through
//! serde's visitors, so memory is bounded by one element, not the file.
//! Apart from the YAML side because the two share only what a document is
//! ([`super::header`], [`super::collect`]).

use std::fmt;
use std::io::Read;

use serde::Deserialize;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Input, Location, ManifestError, Object, collect, header};

/// A JSON stream: the first value through [`Doc`] (a top-level array or a
/// `List`'s items element by element), the values after it one by one.
pub(super) fn parse_json<R: Read, E: From<ManifestError>>(
    file: &str,
    r: &mut Input<R>,
    each: &mut dyn FnMut(Object) -> Result<(), E>,
) -> Result<(), E> {
    let mut ctx = Ctx {
        file,
        each,
        failed: None,
    };
    let json_error = |r: &Input<R>, e: serde_json::Error, document: usize| {
        r.get_ref().problem(file).unwrap_or(ManifestError::Json {
            path: file.to_owned(),
            message: format!("{e} (document {document})"),
        })
    };
    let first = {
        let mut de = serde_json::Deserializer::from_reader(&mut *r);
        let first = Doc {
            ctx: &mut ctx,
            document: 1,
        }
        .deserialize(&mut de);
        match first {
            Ok(first) => Ok((first, de)),
            Err(e) => Err(e),
        }
    };
    let (first, de) = match first {
        Ok(v) => v,
        Err(e) => {
            if let Some(failed) = ctx.failed.take() {
                return Err(failed);
            }
            return Err(json_error(r, e, 1).into());
        }
    };
    let mut rest = de.into_iter::<Value>();
    let mut document = 1;
    let mut next = rest.next();
    match first {
        // A top-level array is a list of objects, when it is all there is.
        Parsed::Array if next.is_some() => {
            let at = Location {
                file: file.to_owned(),
                document: 1,
                item: None,
            };
            return Err(ManifestError::Shape {
                at: Box::new(at),
                problem: "expected a Kubernetes object, found a list".into(),
            }
            .into());
        }
        Parsed::Array | Parsed::Done => {}
        Parsed::Value(v) => {
            let at = Location {
                file: file.to_owned(),
                document: 1,
                item: None,
            };
            collect(v, at, ctx.each)?;
        }
    }
    while let Some(v) = next {
        let v = match v {
            Ok(v) => v,
            Err(e) => {
                drop(rest);
                return Err(json_error(r, e, document + 1).into());
            }
        };
        document += 1;
        let at = Location {
            file: file.to_owned(),
            document,
            item: None,
        };
        collect(v, at, ctx.each)?;
        next = rest.next();
    }
    drop(rest);
    match r.get_ref().problem(file) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Where a streamed JSON value's objects go, and the first error `each`
/// gave (the parser only carries its own).
struct Ctx<'a, 'f, E> {
    file: &'a str,
    each: &'f mut dyn FnMut(Object) -> Result<(), E>,
    failed: Option<E>,
}

impl<E: From<ManifestError>> Ctx<'_, '_, E> {
    /// Collects `v`; an error is kept here and the parser told to stop.
    fn collect<X: serde::de::Error>(&mut self, v: Value, at: Location) -> Result<(), X> {
        collect(v, at, self.each).map_err(|e| {
            self.failed = Some(e);
            X::custom("stopped")
        })
    }

    fn fail<X: serde::de::Error>(&mut self, e: ManifestError) -> X {
        self.failed = Some(e.into());
        X::custom("stopped")
    }
}

/// What the first JSON value was, once its objects were handed on.
enum Parsed {
    /// A top-level array, each element handed on as a document.
    Array,
    /// An object, handed on (a `List`'s items one by one).
    Done,
    /// Anything else, for the caller to refuse.
    Value(Value),
}

/// The first JSON value of a file.
struct Doc<'c, 'a, 'f, E> {
    ctx: &'c mut Ctx<'a, 'f, E>,
    document: usize,
}

impl<'de, E: From<ManifestError>> DeserializeSeed<'de> for Doc<'_, '_, '_, E> {
    type Value = Parsed;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, E: From<ManifestError>> Visitor<'de> for Doc<'_, '_, '_, E> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object or a list of them")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let mut i = 0;
        while let Some(v) = seq.next_element::<Value>()? {
            i += 1;
            let at = Location {
                file: self.ctx.file.to_owned(),
                document: i,
                item: None,
            };
            self.ctx.collect(v, at)?;
        }
        Ok(Parsed::Array)
    }

    /// An object; a `List`'s items are handed on as they are read. Which
    /// kind it is may come after its items (kubectl writes `apiVersion`,
    /// `items`, `kind`), so items are streamed unless a kind that is not
    /// a List came first, and a non-List kind after them is refused.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let at = Location {
            file: self.ctx.file.to_owned(),
            document: self.document,
            item: None,
        };
        let mut fields = serde_json::Map::new();
        let mut streamed = false;
        while let Some(key) = map.next_key::<String>()? {
            let list_so_far = fields
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(|k| k.ends_with("List"));
            if key == "items" && !streamed && !fields.contains_key("items") && list_so_far {
                match map.next_value_seed(Items {
                    ctx: &mut *self.ctx,
                    at: at.clone(),
                })? {
                    Some(other) => {
                        fields.insert(key, other);
                    }
                    None => streamed = true,
                }
            } else {
                let v: Value = map.next_value()?;
                fields.insert(key, v);
            }
        }
        if !streamed {
            self.ctx.collect(Value::Object(fields), at)?;
            return Ok(Parsed::Done);
        }
        // Its items were handed on: what collect checks of a List.
        let (_, kind) = header(&fields, &at).map_err(|e| self.ctx.fail(e))?;
        if !kind.ends_with("List") {
            let problem = format!("{kind}: items are only read in a List (a kind ending in List)");
            return Err(self.ctx.fail(ManifestError::Shape {
                at: Box::new(at),
                problem,
            }));
        }
        Ok(Parsed::Done)
    }

    fn visit_bool<X>(self, v: bool) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::Bool(v)))
    }

    fn visit_i64<X>(self, v: i64) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_u64<X>(self, v: u64) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_f64<X>(self, v: f64) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_str<X>(self, v: &str) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::from(v)))
    }

    fn visit_unit<X>(self) -> Result<Parsed, X> {
        Ok(Parsed::Value(Value::Null))
    }
}

/// A JSON `List`'s `items`, each handed on as it is read; `Some` (the
/// value) when it is not an array.
struct Items<'c, 'a, 'f, E> {
    ctx: &'c mut Ctx<'a, 'f, E>,
    at: Location,
}

impl<'de, E: From<ManifestError>> DeserializeSeed<'de> for Items<'_, '_, '_, E> {
    type Value = Option<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, E: From<ManifestError>> Visitor<'de> for Items<'_, '_, '_, E> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of Kubernetes objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        let mut i = 0;
        while let Some(v) = seq.next_element::<Value>()? {
            let at = Location {
                item: Some(i),
                ..self.at.clone()
            };
            self.ctx.collect(v, at)?;
            i += 1;
        }
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<Value>, A::Error> {
        Value::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
    }

    fn visit_bool<X>(self, v: bool) -> Result<Option<Value>, X> {
        Ok(Some(Value::Bool(v)))
    }

    fn visit_i64<X>(self, v: i64) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_u64<X>(self, v: u64) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_f64<X>(self, v: f64) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_str<X>(self, v: &str) -> Result<Option<Value>, X> {
        Ok(Some(Value::from(v)))
    }

    fn visit_unit<X>(self) -> Result<Option<Value>, X> {
        Ok(Some(Value::Null))
    }
}
