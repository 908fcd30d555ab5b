//! Typed, classified payload fields.
//!
//! Every field carries a [`Class`]: [`Class::Safe`] fields are always exported,
//! [`Class::Content`] fields only when the subscriber's [`ContentPolicy`](crate::ContentPolicy)
//! captures that [`ContentKind`], [`Class::Secret`] fields never.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

pub use crate::class::{Class, ContentKind};

/// Plain fields kept inside a payload, and fields kept inline in a shared payload's one
/// allocation (most payloads have at most this many).
const INLINE_FIELDS: usize = 3;

type Fields = SmallVec<[Field; INLINE_FIELDS]>;

/// A payload value: a scalar or a homogeneous array.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string. `&'static str` values (names, enums, literals) are kept without copying;
    /// borrowed strings with a shorter life are converted from a `String`.
    Str(Cow<'static, str>),
    /// A signed integer.
    I64(i64),
    /// A float. Non-finite values are written to JSON as strings.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// An array of strings.
    StrArray(Vec<String>),
    /// An array of integers.
    I64Array(Vec<i64>),
    /// An array of floats.
    F64Array(Vec<f64>),
    /// An array of booleans.
    BoolArray(Vec<bool>),
}

impl Value {
    /// The string, when this is a [`Value::Str`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, when this is a [`Value::I64`].
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(v) => Some(*v),
            _ => None,
        }
    }

    /// The number as a float, for [`Value::I64`] and [`Value::F64`].
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::I64(v) => Some(*v as f64),
            Value::F64(v) => Some(*v),
            _ => None,
        }
    }

    /// The boolean, when this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }

    /// Size in bytes of the textual part of the value (strings and string arrays), else 0.
    pub fn text_len(&self) -> usize {
        match self {
            Value::Str(s) => s.len(),
            Value::StrArray(items) => items.iter().map(String::len).sum(),
            _ => 0,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
            f.write_str("[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{item}")?;
            }
            f.write_str("]")
        }
        match self {
            Value::Str(v) => f.write_str(v),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::StrArray(v) => list(f, v),
            Value::I64Array(v) => list(f, v),
            Value::F64Array(v) => list(f, v),
            Value::BoolArray(v) => list(f, v),
        }
    }
}

macro_rules! value_from {
    ($($ty:ty => $variant:ident $(as $cast:ty)?),* $(,)?) => {$(
        impl From<$ty> for Value {
            fn from(v: $ty) -> Self {
                Value::$variant(v $(as $cast)? .into())
            }
        }
    )*};
}

value_from! {
    String => Str, &'static str => Str, Cow<'static, str> => Str,
    i64 => I64, i32 => I64, u32 => I64, i16 => I64, u16 => I64, u8 => I64, i8 => I64,
    f64 => F64, f32 => F64,
    bool => Bool,
    Vec<String> => StrArray, Vec<i64> => I64Array, Vec<f64> => F64Array, Vec<bool> => BoolArray,
}

impl From<u64> for Value {
    /// Saturates at `i64::MAX` (token counts and sizes never get there).
    fn from(v: u64) -> Self {
        Value::I64(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<usize> for Value {
    /// Saturates at `i64::MAX`.
    fn from(v: usize) -> Self {
        Value::I64(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<Vec<&str>> for Value {
    fn from(v: Vec<&str>) -> Self {
        Value::StrArray(v.into_iter().map(str::to_owned).collect())
    }
}

/// One payload field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The key, e.g. `model` or `inputTokens` (constants in [`crate::names`]).
    pub key: Cow<'static, str>,
    /// The value.
    pub value: Value,
    /// Its sensitivity.
    pub class: Class,
}

/// An ordered set of classified fields; keys are unique (a later insert replaces the value).
///
/// Cloning is cheap either way. Up to three *plain* fields — a `&'static str` key with a
/// `&'static str`, number or boolean value: the fixed vocabulary of most operations — live inside
/// the payload itself, so building one allocates nothing and a copy is a few words. A payload
/// with more fields, or with an owned key or value (text, arrays), keeps its fields in one
/// shared allocation, copy-on-write, so the start record, the running operation and the end
/// record of one operation hold that allocation once until something changes.
#[derive(Clone, Default)]
pub struct Payload {
    fields: Repr,
}

/// Where a payload's fields are.
// Inline on purpose: the point is that small payloads need no allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Repr {
    /// At most [`INLINE_FIELDS`] fields, never spilled to the heap; plain ones, except when a
    /// policy rewrote a value in place (still correct, only a costlier copy).
    Inline(Fields),
    /// Shared copy-on-write.
    Shared(Arc<Fields>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Inline(Fields::new())
    }
}

impl Field {
    /// True when copying this field copies no heap data (static key, static string or scalar).
    fn is_plain(&self) -> bool {
        matches!(self.key, Cow::Borrowed(_))
            && matches!(self.value, Value::Str(Cow::Borrowed(_)) | Value::I64(_) | Value::F64(_) | Value::Bool(_))
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Payload").field("fields", &self.as_slice()).finish()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Payload {
    /// An empty payload.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a [`Class::Safe`] field.
    #[inline(always)]
    pub fn safe(mut self, key: impl Into<Cow<'static, str>>, value: impl Into<Value>) -> Self {
        self.insert(key, value, Class::Safe);
        self
    }

    /// Adds a [`Class::Content`] field of the given kind.
    #[inline(always)]
    pub fn content(mut self, kind: ContentKind, key: impl Into<Cow<'static, str>>, value: impl Into<Value>) -> Self {
        self.insert(key, value, Class::Content(kind));
        self
    }

    /// Like [`Payload::content`], for content that is costly to build (a whole conversation,
    /// tool schemas): `make` runs only when a subscriber of the current hub captures `kind`.
    /// Otherwise the field is left out — it would have been withheld from every sink anyway.
    pub fn content_with<V: Into<Value>>(
        self,
        kind: ContentKind,
        key: impl Into<Cow<'static, str>>,
        make: impl FnOnce() -> V,
    ) -> Self {
        if crate::Observability::current().captures(kind) { self.content(kind, key, make()) } else { self }
    }

    /// Adds a [`Class::Secret`] field (never exported; useful so the type system knows it exists).
    #[inline(always)]
    pub fn secret(mut self, key: impl Into<Cow<'static, str>>, value: impl Into<Value>) -> Self {
        self.insert(key, value, Class::Secret);
        self
    }

    /// Adds or replaces a field.
    #[inline(always)]
    pub fn insert(&mut self, key: impl Into<Cow<'static, str>>, value: impl Into<Value>, class: Class) {
        self.push_field(Field { key: key.into(), value: value.into(), class });
    }

    /// Adds or replaces a field, keeping the position of an existing key.
    #[inline(always)]
    pub fn push_field(&mut self, field: Field) {
        // The builder's common case, inlined into it: a new plain field with room left inline.
        if let Repr::Inline(fields) = &mut self.fields
            && fields.len() < INLINE_FIELDS
            && field.is_plain()
            && !fields.iter().any(|f| f.key == field.key)
        {
            fields.push(field);
            return;
        }
        self.push_field_slow(field);
    }

    #[inline(never)]
    fn push_field_slow(&mut self, field: Field) {
        if let Repr::Inline(fields) = &mut self.fields {
            let slot = fields.iter().position(|f| f.key == field.key);
            let fits = slot.is_some() || fields.len() < INLINE_FIELDS;
            if fits && field.is_plain() {
                match slot {
                    Some(index) => fields[index] = field,
                    None => fields.push(field),
                }
                return;
            }
            self.fields = Repr::Shared(Arc::new(std::mem::take(fields)));
        }
        let fields = self.fields_mut();
        match fields.iter_mut().find(|f| f.key == field.key) {
            Some(existing) => *existing = field,
            None => fields.push(field),
        }
    }

    /// Merges `other` into `self`; `other`'s values win for keys present in both.
    pub fn merge(&mut self, other: Payload) {
        if self.is_empty() {
            *self = other;
            return;
        }
        for field in other {
            self.push_field(field);
        }
    }

    /// The field with this key.
    pub fn field(&self, key: &str) -> Option<&Field> {
        self.iter().find(|f| f.key == key)
    }

    /// The value with this key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.field(key).map(|f| &f.value)
    }

    /// Removes and returns the field with this key.
    pub fn remove(&mut self, key: &str) -> Option<Field> {
        let index = self.iter().position(|f| f.key == key)?;
        Some(self.fields_mut().remove(index))
    }

    /// Fields in insertion order.
    pub fn iter(&self) -> std::slice::Iter<'_, Field> {
        self.as_slice().iter()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True when there are no fields.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// Keeps only the fields for which `keep` returns true.
    pub fn retain(&mut self, keep: impl FnMut(&Field) -> bool) {
        let mask: Vec<bool> = self.iter().map(keep).collect();
        if mask.contains(&false) {
            let mut kept = mask.into_iter();
            self.fields_mut().retain(|_| kept.next().unwrap_or(true));
        }
    }

    fn as_slice(&self) -> &[Field] {
        match &self.fields {
            Repr::Inline(fields) => fields,
            Repr::Shared(fields) => fields,
        }
    }

    /// The fields for writing: copies them first if they are shared. Callers may change or
    /// remove fields, never add one (that is [`Payload::push_field`]'s job).
    pub(crate) fn fields_mut(&mut self) -> &mut Fields {
        match &mut self.fields {
            Repr::Inline(fields) => fields,
            Repr::Shared(fields) => Arc::make_mut(fields),
        }
    }
}

impl<'a> IntoIterator for &'a Payload {
    type Item = &'a Field;
    type IntoIter = std::slice::Iter<'a, Field>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for Payload {
    type Item = Field;
    type IntoIter = PayloadIntoIter;
    fn into_iter(self) -> Self::IntoIter {
        let fields = match self.fields {
            Repr::Inline(fields) => fields,
            Repr::Shared(fields) => Arc::unwrap_or_clone(fields),
        };
        PayloadIntoIter(fields.into_iter())
    }
}

/// The fields of a [`Payload`], by value, in insertion order.
pub struct PayloadIntoIter(smallvec::IntoIter<[Field; INLINE_FIELDS]>);

impl Iterator for PayloadIntoIter {
    type Item = Field;
    fn next(&mut self) -> Option<Field> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for PayloadIntoIter {}

impl fmt::Debug for PayloadIntoIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PayloadIntoIter").field(&self.0.as_slice()).finish()
    }
}

impl FromIterator<Field> for Payload {
    fn from_iter<I: IntoIterator<Item = Field>>(iter: I) -> Self {
        let mut payload = Payload::new();
        for field in iter {
            payload.push_field(field);
        }
        payload
    }
}

/// Something that yields a payload only when it is needed: a [`Payload`], `()` (empty) or a
/// closure returning a `Payload`. Closures are not called when nobody listens.
pub trait PayloadSource {
    /// Builds the payload.
    fn build(self) -> Payload;
}

impl PayloadSource for Payload {
    fn build(self) -> Payload {
        self
    }
}

impl PayloadSource for () {
    fn build(self) -> Payload {
        Payload::new()
    }
}

impl<F: FnOnce() -> Payload> PayloadSource for F {
    fn build(self) -> Payload {
        self()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_insert_replaces_value_and_keeps_position() {
        let mut p = Payload::new().safe("a", 1).safe("b", "x");
        p.merge(Payload::new().safe("a", 2).content(ContentKind::Prompt, "c", "hi"));
        let keys: Vec<_> = p.iter().map(|f| f.key.as_ref()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(p.get("a"), Some(&Value::I64(2)));
        assert_eq!(p.field("c").unwrap().class, Class::Content(ContentKind::Prompt));
        assert!(p.get("missing").is_none());
    }

    #[test]
    fn clones_share_fields_until_one_of_them_changes() {
        let original = Payload::new().safe("a", 1).content(ContentKind::Prompt, "p", "hi");
        let mut copy = original.clone();
        copy.insert("a", 2, Class::Safe);
        copy.retain(|f| f.class == Class::Safe);
        assert_eq!(original.get("a"), Some(&Value::I64(1)));
        assert_eq!(original.len(), 2);
        assert_eq!(copy.get("a"), Some(&Value::I64(2)));
        assert_eq!(copy.len(), 1);
        let mut calls = 0;
        copy.retain(|_| {
            calls += 1;
            true
        });
        assert_eq!(calls, 1, "retain asks once per field");
        assert_eq!(Payload::new(), Payload::new().safe("x", 1).into_iter().filter(|_| false).collect());
    }

    #[test]
    fn small_plain_payloads_live_inline_and_others_are_shared() {
        let inline = |p: &Payload| matches!(p.fields, Repr::Inline(_));
        let small = Payload::new().safe("a", "x").safe("b", 1).safe("c", true);
        assert!(inline(&small), "three plain fields need no allocation");
        let mut replaced = small.clone();
        replaced.insert("a", "y", Class::Safe);
        assert!(inline(&replaced) && replaced.get("a") == Some(&Value::from("y")));

        let fourth = small.clone().safe("d", 5);
        assert!(!inline(&fourth));
        assert_eq!(fourth.iter().map(|f| f.key.as_ref()).collect::<Vec<_>>(), ["a", "b", "c", "d"]);
        for owned in [
            Payload::new().safe("a", 1).content(ContentKind::Prompt, "text", String::from("owned")),
            Payload::new().safe(String::from("key"), 1),
            Payload::new().safe("list", vec![1i64, 2]),
        ] {
            assert!(!inline(&owned), "{owned:?}");
            let copy = owned.clone();
            let (Repr::Shared(a), Repr::Shared(b)) = (&owned.fields, &copy.fields) else { unreachable!() };
            assert!(Arc::ptr_eq(a, b), "shared payloads share one allocation");
        }
        let mut shrunk = fourth;
        shrunk.retain(|f| f.key != "d");
        assert_eq!(shrunk, small, "equality does not depend on where the fields are");
    }

    #[test]
    fn content_kinds_parse_singular_and_plural_names() {
        for kind in ContentKind::ALL {
            assert_eq!(ContentKind::parse(kind.as_str()), Some(kind));
            assert_eq!(Class::parse(&Class::Content(kind).label()), Some(Class::Content(kind)));
        }
        assert_eq!(ContentKind::parse("prompts"), Some(ContentKind::Prompt));
        assert_eq!(ContentKind::parse("tool_results"), Some(ContentKind::ToolResult));
        assert_eq!(ContentKind::parse("file_contents"), Some(ContentKind::FileContent));
        assert_eq!(ContentKind::parse("headers"), Some(ContentKind::Header));
        assert_eq!(ContentKind::parse("tool_arg"), Some(ContentKind::ToolArgs));
        assert_eq!(ContentKind::parse("shell_outputs"), Some(ContentKind::ShellOutput));
        assert_eq!(ContentKind::parse("error_texts"), Some(ContentKind::ErrorText));
        assert_eq!(ContentKind::parse("secrets"), None);
        assert_eq!(Class::parse("content:nope"), None);
    }

    #[test]
    fn u64_values_saturate_instead_of_wrapping() {
        assert_eq!(Value::from(u64::MAX), Value::I64(i64::MAX));
        assert_eq!(Value::from(7usize), Value::I64(7));
    }
}
