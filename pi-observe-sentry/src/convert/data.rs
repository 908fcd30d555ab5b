//! A span's data (`pi.*` payload fields and the `gen_ai.*` keys Sentry's AI views read), built
//! from borrowed parts and written straight to JSON as a map sorted by key would be.

use std::collections::BTreeMap;

use pi_observe_core::{ObsEvent, Value, names};
use serde_json::{Value as Json, json};

use super::{int, json_value, text};

/// Span data: every exportable payload field as `pi.<key>`, plus the `gen_ai.*` keys Sentry's AI
/// views read. Content-class fields appear only if the subscriber's policy captured them.
pub fn span_data(name: &str, record: &ObsEvent) -> BTreeMap<String, Json> {
    data_entries(name, record).into_iter().map(|e| (format!("{}{}", e.prefix, e.key), e.value.to_json())).collect()
}

/// One entry of a span's data: its key as `prefix` + `key` (no string built for it) and its value,
/// borrowed from the record where it can be.
pub(super) struct DataEntry<'a> {
    prefix: &'static str,
    key: &'a str,
    /// The full key's first eight bytes, big-endian (zeros past its end): most pairs of keys
    /// differ there, so sorting compares two integers instead of calling `memcmp` twice.
    head: u64,
    pub(super) value: DataValue<'a>,
}

impl<'a> DataEntry<'a> {
    pub(super) fn new(prefix: &'static str, key: &'a str, value: DataValue<'a>) -> DataEntry<'a> {
        let mut head = [0u8; 8];
        let from_prefix = prefix.len().min(8);
        head[..from_prefix].copy_from_slice(&prefix.as_bytes()[..from_prefix]);
        let from_key = key.len().min(8 - from_prefix);
        head[from_prefix..from_prefix + from_key].copy_from_slice(&key.as_bytes()[..from_key]);
        DataEntry { prefix, key, head: u64::from_be_bytes(head), value }
    }

    fn fixed(key: &'static str, value: DataValue<'a>) -> DataEntry<'a> {
        DataEntry::new("", key, value)
    }

    /// Orders entries by their full key (prefix then key) as a map keyed by it would: by the
    /// first eight bytes, then by the rest, comparing runs of bytes rather than one byte at a
    /// time (no key is joined to compare it). The zeros that pad a short key's head sort it
    /// before any longer key it begins; where they meet a NUL byte the heads tie and the bytes
    /// decide.
    fn cmp_full_key(&self, other: &DataEntry<'_>) -> std::cmp::Ordering {
        self.head.cmp(&other.head).then_with(|| self.cmp_bytes(other))
    }

    fn cmp_bytes(&self, other: &DataEntry<'_>) -> std::cmp::Ordering {
        // The common case (two payload keys, both `pi.`): the keys alone decide.
        if self.prefix == other.prefix {
            return self.key.cmp(other.key);
        }
        let mut x = [self.prefix.as_bytes(), self.key.as_bytes()];
        let mut y = [other.prefix.as_bytes(), other.key.as_bytes()];
        loop {
            // A used-up prefix hands over to the key.
            if x[0].is_empty() {
                x = [x[1], &[]];
            }
            if y[0].is_empty() {
                y = [y[1], &[]];
            }
            let n = x[0].len().min(y[0].len());
            if n == 0 {
                // One of them has nothing left: the shorter key comes first.
                return x[0].len().cmp(&y[0].len());
            }
            match x[0][..n].cmp(&y[0][..n]) {
                std::cmp::Ordering::Equal => {
                    x[0] = &x[0][n..];
                    y[0] = &y[0][n..];
                }
                unequal => return unequal,
            }
        }
    }
}

pub(super) enum DataValue<'a> {
    Field(&'a Value),
    Str(&'a str),
    Int(i64),
    Bool(bool),
    /// A list of one string (`gen_ai.response.finish_reasons`).
    One(&'a str),
}

impl DataValue<'_> {
    fn to_json(&self) -> Json {
        match self {
            DataValue::Field(value) => json_value(value),
            DataValue::Str(s) => json!(s),
            DataValue::Int(i) => json!(i),
            DataValue::Bool(b) => json!(b),
            DataValue::One(s) => json!([s]),
        }
    }
}

impl serde::Serialize for DataValue<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DataValue::Field(value) => pi_observe_core::ValueJson(value).serialize(s),
            DataValue::Str(text) => s.serialize_str(text),
            DataValue::Int(i) => s.serialize_i64(*i),
            DataValue::Bool(b) => s.serialize_bool(*b),
            DataValue::One(text) => [text].serialize(s),
        }
    }
}

/// The entries of [`span_data`] in the order it inserts them (a later entry with the same key
/// replaces an earlier one).
pub(super) fn data_entries<'a>(name: &str, record: &'a ObsEvent) -> Vec<DataEntry<'a>> {
    let mut data: Vec<DataEntry<'a>> =
        record.exportable_fields().map(|f| DataEntry::new("pi.", &f.key, DataValue::Field(&f.value))).collect();
    let operation = match name {
        names::AGENT_PROMPT => Some("invoke_agent"),
        names::PROVIDER_REQUEST => Some("chat"),
        names::AGENT_TOOL_CALL => Some("execute_tool"),
        _ => None,
    };
    if let Some(operation) = operation {
        data.push(DataEntry::fixed("gen_ai.operation.name", DataValue::Str(operation)));
        data.push(DataEntry::fixed("gen_ai.agent.name", DataValue::Str("pi")));
    }
    let mut put = |key: &'static str, value: Option<DataValue<'a>>| {
        if let Some(value) = value {
            data.push(DataEntry::fixed(key, value));
        }
    };
    put("gen_ai.system", text(record, names::PROVIDER).map(DataValue::Str));
    put("gen_ai.request.model", text(record, names::MODEL).map(DataValue::Str));
    put("gen_ai.response.model", text(record, names::RESPONSE_MODEL).map(DataValue::Str));
    put("gen_ai.tool.name", text(record, names::TOOL_NAME).map(DataValue::Str));
    put("gen_ai.tool.call.id", text(record, names::TOOL_CALL_ID).map(DataValue::Str));
    put("gen_ai.conversation.id", text(record, names::SESSION_ID).map(DataValue::Str));
    if name == names::PROVIDER_REQUEST {
        let input = int(record, names::INPUT_TOKENS).map(|i| {
            i + int(record, names::CACHE_READ_TOKENS).unwrap_or(0) + int(record, names::CACHE_WRITE_TOKENS).unwrap_or(0)
        });
        let output = int(record, names::OUTPUT_TOKENS);
        put("gen_ai.usage.input_tokens", input.map(DataValue::Int));
        put("gen_ai.usage.input_tokens.cached", int(record, names::CACHE_READ_TOKENS).map(DataValue::Int));
        put("gen_ai.usage.output_tokens", output.map(DataValue::Int));
        put("gen_ai.usage.total_tokens", input.zip(output).map(|(i, o)| DataValue::Int(i + o)));
        put("gen_ai.response.finish_reasons", text(record, names::STOP_REASON).map(DataValue::One));
    }
    data
}

/// Data entries as the map [`span_data`] would make of them, written straight: sorted by key,
/// the last of equal keys kept.
pub(super) struct DataOut<'a>(pub(super) Vec<DataEntry<'a>>);

impl serde::Serialize for DataOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut order: Vec<&DataEntry<'_>> = self.0.iter().collect();
        // Stable: of equal keys, the one inserted last stays last.
        order.sort_by(|a, b| a.cmp_full_key(b));
        let mut map = s.serialize_map(None)?;
        for (i, entry) in order.iter().enumerate() {
            if order.get(i + 1).is_some_and(|next| next.cmp_full_key(entry).is_eq()) {
                continue;
            }
            map.serialize_entry(&KeyOut(entry), &entry.value)?;
        }
        map.end()
    }
}

/// A data key written as its prefix and name.
struct KeyOut<'a>(&'a DataEntry<'a>);

impl serde::Serialize for KeyOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (prefix, key) = (self.0.prefix, self.0.key);
        if prefix.is_empty() {
            return s.serialize_str(key);
        }
        // Joined on the stack (the formatting machinery cost more than the key).
        let mut joined = [0u8; 96];
        let len = prefix.len() + key.len();
        if len <= joined.len() {
            joined[..prefix.len()].copy_from_slice(prefix.as_bytes());
            joined[prefix.len()..len].copy_from_slice(key.as_bytes());
            // Two strings end to end are UTF-8 still.
            if let Ok(joined) = std::str::from_utf8(&joined[..len]) {
                return s.serialize_str(joined);
            }
        }
        s.collect_str(&format_args!("{prefix}{key}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_keys_order_as_the_joined_strings_do() {
        let keys = [
            ("pi.", "a"),
            ("", "pi.a"),
            ("", "pi."),
            ("pi.", ""),
            ("", "gen_ai.system"),
            ("pi.", "model"),
            ("", "pi.modelId"),
            ("pi.", "m"),
            ("", "z"),
            ("", ""),
            ("pi.", "a.b"),
            ("pi.", "costCacheRead"),
            ("pi.", "costCacheWrite"),
            ("", "pi.costCacheRead"),
            ("", "gen_ai.usage.input_tokens"),
            ("", "gen_ai.usage.input_tokens.cached"),
            ("pi.", "a\0"),
            ("pi.", "a\0b"),
            ("", "pi.a\0"),
            ("pi.", "é"),
        ];
        for (p1, k1) in keys {
            for (p2, k2) in keys {
                let (a, b) = (DataEntry::new(p1, k1, DataValue::Int(0)), DataEntry::new(p2, k2, DataValue::Int(0)));
                assert_eq!(a.cmp_full_key(&b), format!("{p1}{k1}").cmp(&format!("{p2}{k2}")), "{p1}{k1} vs {p2}{k2}");
            }
        }
    }
}
